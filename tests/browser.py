"""JupyterLab driven by a real browser, for the end-to-end tests: the system Chromium through
Playwright for Python (never a browser of Playwright's own), and a JupyterLab server on a free port
with a kernelspec for this interpreter, on a copy of notebooks/. Without Chromium or Playwright a
test is skipped, except where FCL_E2E=required (set by .ci/run): there it fails."""
import os
import shutil

import pytest

from tools.lab import running_lab

REQUIRED = os.environ.get("FCL_E2E") == "required"


BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-dev-shm-usage"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def missing(reason: str):
    if REQUIRED:
        pytest.fail(f"{reason}, and FCL_E2E=required (CI must run the browser test)")
    pytest.skip(reason)


def browser_tools():
    """(the system Chromium, Playwright's `expect` and `sync_playwright`), or the test is
    skipped (failed under FCL_E2E=required) saying which is missing."""
    chromium = find_chromium()
    if chromium is None:
        missing("no Chromium on PATH (Debian: apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        missing("Playwright for Python is not installed")
    return chromium, expect, sync_playwright


def kernel_dialog(page) -> bool:
    """Accept a "Select Kernel" dialog if one is open (its choice is the notebook's FCL)."""
    dialog = page.locator(".jp-Dialog")
    if dialog.count() and "Select Kernel" in dialog.first.inner_text():
        assert "FCL" in dialog.first.locator("select").first.inner_text()
        dialog.first.locator(".jp-mod-accept").click()
        return True
    return False


@pytest.fixture
def lab(tmp_path):
    """(base URL, token) of a JupyterLab server on a copy of notebooks/."""
    with running_lab(tmp_path, pytest.fail) as started:
        yield started
