"""End to end: JupyterLab on localhost, a course notebook run in headless Chromium.

What a student does after `make lab`: open a notebook, Run > Run All Cells, read the outputs. The
server runs on a free port with a random token, on a copy of notebooks/ (JupyterLab saves what
it runs), with a kernelspec for this interpreter; the browser is the system Chromium driven by
Playwright for Python (Debian's `chromium` package, which `make test` installs through apt;
Playwright never downloads a browser of its own).

Without Chromium or Playwright the test is skipped, except where FCL_E2E=required (set by .ci/run),
which makes a missing browser a failure: on CI this test must run.
"""
import json
import os
import re
import time
from pathlib import Path

import pytest

from browser import BROWSER_ARGS, browser_tools, kernel_dialog, lab as lab

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent
# The notebook to run: coalescing, with memory diagrams drawn by `%%memory` (inline SVG) and
# its explorer widget.
NOTEBOOK = os.environ.get("FCL_E2E_NOTEBOOK", "03-coalescing.ipynb")
DIAGRAMS = [".jp-RenderedMarkdown img[src*='.svg']", ".jp-RenderedSVG img", ".jp-RenderedSVG svg",
            ".jp-OutputArea-output svg.fcl-diagram"]
MEMORY_DIAGRAMS = ".jp-OutputArea-output svg.fcl-diagram"


def test_a_course_notebook_runs_in_jupyterlab(lab, tmp_path):
    chromium, expect, sync_playwright = browser_tools()
    base, token = lab

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            expect(notebook.locator(".jp-Cell").first).to_be_visible(timeout=90_000)
            # Wait until the FCL kernel has started and is idle (the status bar says "FCL | Idle";
            # the toolbar's indicator says idle even before there is a kernel, and Run All
            # without a kernel opens a "Select Kernel" dialog, which we would accept).
            status = notebook.locator(".jp-Notebook-ExecutionIndicator")
            kernel_status = page.locator(".jp-StatusBar-TextItem", has_text="FCL |")
            deadline = time.time() + 90
            while kernel_dialog(page) or "Idle" not in " ".join(kernel_status.all_text_contents()):
                assert time.time() < deadline, "the FCL kernel did not start"
                time.sleep(0.3)

            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            kernel_dialog(page)

            # Done when every code cell shows its execution count (cells whose source is hidden,
            # the solutions, show no prompt), none is queued or running, and the kernel is idle.
            cells = json.loads((ROOT / "notebooks" / NOTEBOOK).read_text())["cells"]
            code = [c for c in cells if c["cell_type"] == "code"]
            hidden = [c for c in code if c["metadata"].get("jupyter", {}).get("source_hidden")]
            solutions = [c for c in code if "solution" in c["metadata"].get("tags", [])]
            assert notebook.locator(".jp-CodeCell").count() == len(code) > 10
            # Errors (and anything on stderr) render with the stderr mime type; Run All stops at
            # one.
            errors = notebook.locator(".jp-OutputArea-output[data-mime-type="
                                      "'application/vnd.jupyter.stderr']")
            deadline = time.time() + 90
            while time.time() < deadline and errors.count() == 0:
                prompts = notebook.locator(".jp-CodeCell .jp-InputPrompt").all_text_contents()
                done = [t for t in prompts if re.fullmatch(r"\s*\[\d+\]:\s*", t)]
                if (len(done) == len(code) - len(hidden) and not any("*" in t for t in prompts)
                        and status.get_attribute("data-status") == "idle"):
                    break
                time.sleep(0.5)
            page.screenshot(path=str(tmp_path / "lab.png"), full_page=False)
            assert errors.count() == 0, errors.all_text_contents()
            assert len(done) == len(code) - len(hidden), f"not every cell ran: {prompts}"

            # Results arrived: generated OpenCL, measured times, and every solution checked ✓.
            outputs = notebook.locator(".jp-OutputArea-output").all_text_contents()
            assert any("__kernel void" in text for text in outputs)
            assert any("per run: median" in text for text in outputs)
            expect(notebook.locator(".fcl-expect-ok")).to_have_count(len(solutions))
            assert solutions
            # Code stays left-aligned in the FCL/OpenCL view (JupyterLab right-aligns table cells).
            views = notebook.locator(".fcl-codeview td")
            assert views.count() > 0
            assert views.first.evaluate("e => getComputedStyle(e).textAlign") in ("left", "start")

            # The memory diagrams (SVG: the notebook's own figure, and any drawn by a magic) are
            # on screen: scroll to each, check it was drawn and has a real size.
            diagrams = notebook.locator(", ".join(DIAGRAMS))
            assert notebook.locator(MEMORY_DIAGRAMS).count() > 0
            for k in range(diagrams.count()):
                diagram = diagrams.nth(k)
                diagram.scroll_into_view_if_needed()
                expect(diagram).to_be_visible()
                box = diagram.bounding_box()
                assert box and box["width"] > 100 and box["height"] > 50, box
                if diagram.evaluate("e => e.tagName") == "IMG":
                    assert diagram.evaluate("e => e.complete && e.naturalWidth > 0")

            # The explorer's warp slider redraws its diagram (the kernel answers the widget).
            explorer = notebook.locator(".widget-vbox", has=page.locator("svg.fcl-diagram")).first
            explorer.scroll_into_view_if_needed()
            expect(explorer.locator("svg.fcl-diagram")).to_contain_text("warp 0 outlined")
            slider = explorer.locator(".widget-slider", has_text="warp").locator(".noUi-handle")
            slider.focus()
            page.keyboard.press("ArrowRight")
            expect(explorer.locator("svg.fcl-diagram")).to_contain_text("warp 1 outlined")
        finally:
            browser.close()
