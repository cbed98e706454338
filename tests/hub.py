"""A real JupyterHub for tests: its proxy, or the test skipped (failed on CI)."""
import os

import pytest

from tools import loadtest


def hub_proxy() -> str:
    """configurable-http-proxy's command, or the test is skipped (failed on CI)."""
    proxy = loadtest.proxy_command()
    if proxy is None:
        reason = "no configurable-http-proxy (`make test-setup` installs it into build/proxy)"
        if os.environ.get("FCL_E2E") == "required":
            pytest.fail(f"{reason}, and FCL_E2E=required (CI must run the hub tests)")
        pytest.skip(reason)
    return proxy
