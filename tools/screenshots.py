"""Retake the README's pictures: `python -m tools.screenshots` rewrites docs/jupyterlab*.png.

Like tests/test_e2e_lab.py: JupyterLab on a free port with a random token, on a temporary copy of
notebooks/ (JupyterLab saves what it runs), with a kernelspec for this interpreter, driven in
headless Chromium (the system one, Debian's `chromium`) by Playwright. Each picture opens one
course notebook, runs only the cells it needs (finding them by how their source starts, so that
edits elsewhere in the notebook do not move it), and photographs the output it is about.

    python -m tools.screenshots [--only jupyterlab-memory.png] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Locator, Page, expect, sync_playwright

from tools.lab import running_lab

ROOT = Path(__file__).resolve().parent.parent
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run",
                "--disable-dev-shm-usage", "--hide-scrollbars"]


@dataclass
class Picture:
    file: str
    notebook: str
    run: list[str]              # the code cells to run, in order, by the start of their source
    viewport: tuple[int, int]
    # Arranges the page once the cells ran; returns the element to photograph, or None for the
    # whole window.
    frame: Callable[[Page, Locator], Locator | None]


def frame_codeview(page: Page, notebook: Locator) -> None:
    """The FCL cell, its value, then `%%opencl` of it with the whole kernel: the window's foot
    a little below the kernel's last line."""
    view = notebook.locator(".fcl-codeview").first
    expect(view).to_be_visible()
    view.evaluate("e => e.scrollIntoView({block: 'end'})")
    notebook.locator(".jp-WindowedPanel-outer").evaluate("e => e.scrollBy(0, 24)")


def frame_explorer(page: Page, notebook: Locator) -> Locator:
    """The `%%memory --explore` cell with warp 1 chosen on the explorer's slider."""
    explorer = notebook.locator(".widget-vbox", has=page.locator("svg.fcl-diagram")).first
    explorer.scroll_into_view_if_needed()
    expect(explorer.locator("svg.fcl-diagram")).to_contain_text("warp 0 outlined")
    explorer.locator(".widget-slider", has_text="warp").locator(".noUi-handle").focus()
    page.keyboard.press("ArrowRight")
    expect(explorer.locator("svg.fcl-diagram")).to_contain_text("warp 1 outlined")
    cell = explorer.locator("xpath=ancestor::div[contains(@class, 'jp-CodeCell')]")
    # Select the next cell, so that the active cell's bar and toolbar stay out of the picture.
    cell.locator("xpath=following-sibling::div[contains(@class, 'jp-Cell')][1]").click()
    diagram = explorer.locator("svg.fcl-diagram").first.bounding_box()
    frame = cell.bounding_box()
    if not (diagram and frame) or diagram["x"] + diagram["width"] > frame["x"] + frame["width"]:
        sys.exit("the memory diagram is wider than its cell: widen jupyterlab-memory.png's window")
    return cell


PICTURES = [
    Picture("jupyterlab.png", "02-machine-model.ipynb",
            ["fun revLocal b =", "%%opencl\nfun revLocal b ="], (1300, 820), frame_codeview),
    Picture("jupyterlab-memory.png", "03-coalescing.ipynb",
            ["val rows = 64", "%%memory --explore --pitch 64\ndo<grid> {\n  xs <- forcePull<grid> "
             "(iota (rows * cols));\n  forcePull<grid> (transpose rows cols xs)"],
            (1100, 1200), frame_explorer),
]


@contextmanager
def jupyterlab(tmp: Path) -> Iterator[str]:
    """The URL (with its token, `{}` for the notebook) of a JupyterLab server on a copy of
    notebooks/, as on Binder: nbgrader (a test dependency here) and the Jupyter Notebook it
    brings add menus and buttons a student there does not see."""
    with running_lab(tmp, sys.exit, ("@jupyter/nbgrader", "@jupyter-notebook/lab-extension")) \
            as (base, token):
        yield f"{base}/lab/tree/{{}}?reset&token={token}"


def wait_for_kernel(page: Page) -> None:
    """Until the status bar says "FCL | Idle", accepting a "Select Kernel" dialog (its choice is
    the notebook's FCL)."""
    status = page.locator(".jp-StatusBar-TextItem", has_text="FCL |")
    deadline = time.time() + 90
    while "Idle" not in " ".join(status.all_text_contents()):
        dialog = page.locator(".jp-Dialog")
        if dialog.count() and "Select Kernel" in dialog.first.inner_text():
            dialog.first.locator(".jp-mod-accept").click()
        if time.time() > deadline:
            sys.exit("the FCL kernel did not start")
        time.sleep(0.3)


def run_cells(notebook: Locator, path: Path, starts: list[str]) -> None:
    """Run the code cells whose source starts with each of `starts`, one after another."""
    sources = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    for start in starts:
        found = [k for k, source in enumerate(sources) if source.startswith(start)]
        if len(found) != 1:
            sys.exit(f"{path.name}: {len(found)} cells start with {start!r}, not one")
        cell = notebook.locator(".jp-Cell").nth(found[0])
        prompt = cell.locator(".jp-InputPrompt")
        prompt.click()
        # Run and select the next cell: the active cell's toolbar and bar stay out of the picture.
        prompt.page.keyboard.press("Shift+Enter")
        expect(prompt).to_have_text(re.compile(r"\s*\[\d+\]:\s*"), timeout=120_000)
        errors = cell.locator(".jp-OutputArea-output[data-mime-type="
                              "'application/vnd.jupyter.stderr']")
        if errors.count():
            sys.exit(f"{path.name}: the cell {start!r} failed:\n{errors.first.inner_text()}")


def take(page: Page, url: str, picture: Picture, out: Path) -> None:
    page.set_viewport_size({"width": picture.viewport[0], "height": picture.viewport[1]})
    page.goto(url.format(picture.notebook))
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(notebook.locator(".jp-Cell").first).to_be_visible(timeout=90_000)
    # The file browser closed, as it opens in a new workspace: the notebook gets the width.
    page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current").click()
    wait_for_kernel(page)
    run_cells(notebook, ROOT / "notebooks" / picture.notebook, picture.run)
    target = picture.frame(page, notebook)
    page.mouse.move(0, picture.viewport[1] - 1)  # no hover effects where the mouse last was
    path = out / picture.file
    # Fonts and widgets settle after the output arrives.
    page.wait_for_timeout(500)
    (target or page).screenshot(path=str(path), animations="disabled")
    print(f"{path}: {path.stat().st_size // 1024} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=[p.file for p in PICTURES], action="append",
                        help="take only this picture (repeatable)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")
    args = parser.parse_args()
    chromium = next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                    "google-chrome"))), None)
    if chromium is None:
        sys.exit("no Chromium on PATH (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp, jupyterlab(Path(tmp)) as url, \
            sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS, headless=True)
        try:
            for picture in PICTURES:
                if args.only is None or picture.file in args.only:
                    page = browser.new_page()
                    page.set_default_timeout(60_000)
                    take(page, url, picture, args.out)
                    page.close()
        finally:
            browser.close()


if __name__ == "__main__":
    main()
