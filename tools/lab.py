"""A JupyterLab server for tools and tests that drive the course in a browser: on a free port with
a random token, on a copy of notebooks/ (JupyterLab saves what it runs), with this interpreter's
FCL kernelspec and its own settings, configuration and runtime folders under a scratch folder."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from fcl_kernel.install import write_kernel_spec

ROOT = Path(__file__).resolve().parent.parent
START_WITHIN_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_lab(tmp: Path, fail: Callable[[str], NoReturn],
                disabled_extensions: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(base URL, token) of a JupyterLab server on a copy of notebooks/ in `tmp`, stopped when
    the block ends; `fail(message)` if it does not start (its log in the message)."""
    root = tmp / "notebooks"
    shutil.copytree(ROOT / "notebooks", root)
    write_kernel_spec(tmp / "jupyter-path")
    settings = tmp / "lab-settings" / "@jupyterlab"
    # No news pop-up over the notebook (and no network calls for it); every cell rendered, not
    # only those near the viewport.
    for extension, name, values in [
            ("apputils-extension", "notification", {"fetchNews": "false",
                                                    "checkForUpdates": False}),
            ("notebook-extension", "tracker", {"windowingMode": "none"})]:
        (settings / extension).mkdir(parents=True)
        (settings / extension / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    if disabled_extensions:
        labconfig = tmp / "jupyter-config" / "labconfig"
        labconfig.mkdir(parents=True)
        (labconfig / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": dict.fromkeys(disabled_extensions, True)}))
    port, token = free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_PATH=str(tmp / "jupyter-path"),
               JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp / "jupyter-runtime"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp / "lab-settings"))
    with open(tmp / "lab.log", "w") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
             f"--port={port}", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0"]
            + (["--allow-root"] if os.geteuid() == 0 else []),
            env=env, stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + START_WITHIN_S
            while True:
                try:
                    with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                        break
                except OSError:
                    if server.poll() is not None or time.time() > deadline:
                        log.flush()
                        fail("JupyterLab did not start:\n" + (tmp / "lab.log").read_text())
                    time.sleep(0.3)
            yield base, token
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
