"""JupyterLab driven by a real browser, for the end-to-end tests: the system Chromium through
Playwright for Python (never a browser of Playwright's own), and a JupyterLab server on a free port
with a kernelspec for this interpreter, on a copy of notebooks/. Without Chromium or Playwright a
test is skipped, except where FCL_E2E=required (set by .ci/run): there it fails."""
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """(base URL, token) of a JupyterLab server on a copy of notebooks/."""
    root = tmp_path / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    spec = tmp_path / "jupyter-path" / "kernels" / "fcl"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "fcl_kernel", "-f", "{connection_file}"],
        "display_name": "FCL", "language": "fcl", "interrupt_mode": "signal"}))
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_PATH=str(tmp_path / "jupyter-path"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"))
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # No "would you like to get news?" pop-up over the notebook, and no network calls for it.
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    # Every cell in the page, rendered, rather than only those near the viewport.
    tracker = tmp_path / "lab-settings" / "@jupyterlab" / "notebook-extension"
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    # The server writes to it until the fixture's teardown, which closes it.
    log = open(tmp_path / "lab.log", "w")  # noqa: SIM115
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         "--ServerApp.port_retries=0"] + (["--allow-root"] if os.geteuid() == 0 else []),
        env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    log.flush()
                    pytest.fail("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text())
                time.sleep(0.3)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
