"""FCL highlighting in JupyterLab's editor: the extension in labextension/, in headless Chromium.

A notebook whose saved metadata still names Haskell's mode (as notebooks saved before the extension
do; the course's now name `fcl`) is opened
on the FCL kernel; the kernel's language_info switches its cells to the extension's FCL language,
and the CodeMirror token classes of a cell are read from the page. Same server and browser as
test_e2e_lab.py; the extension is the one `make setup` builds and links into the venv.
"""
import json
import sys
import time
from pathlib import Path

import nbformat
import pytest

# `lab as lab` re-exports the fixture, which pytest finds by name in this module.
from browser import BROWSER_ARGS, browser_tools, kernel_dialog, lab as lab

ROOT = Path(__file__).resolve().parent.parent
LABEXTENSION = ROOT / "labextension"
INSTALLED = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "fcl-jupyterlab"

CELL = """\
%%costs --pitch 64
(* a (* nested *) comment *)
fun bump xs = forcePull<block> (map (fn x => x + 1) xs) -- one more
val name = "text"
val grid = 2"""
# Each token in a CodeMirror editor: its text, classes and colour.
TOKENS = """e => Array.from(e.querySelectorAll('.cm-line span'))
    .map(s => [s.textContent, s.className.split(/\\s+/), getComputedStyle(s).color])"""
# Line by line, the text of the tokens with a class (a cursor's bracket marks can split tokens).
TEXT_OF_CLASS = """([e, cls]) => Array.from(e.querySelectorAll('.cm-line'))
    .map(line => Array.from(line.querySelectorAll('span.' + cls))
        .map(s => s.textContent).join(''))"""


def test_names_ts_is_generated_from_the_compiler():
    sys.path.insert(0, str(LABEXTENSION))
    try:
        import generate_names
    finally:
        sys.path.remove(str(LABEXTENSION))
    written = generate_names.NAMES_TS.read_text()
    assert written == generate_names.names_ts(), \
        "labextension/src/names.ts is stale: run .venv/bin/python labextension/generate_names.py"
    # The words the issue found uncoloured or coloured as Haskell's: all from the compiler.
    for word in ("val", "fun", "sig", "fn", "generate", "forcePull", "zipWith", "foldl"):
        assert f'"{word}"' in written


@pytest.mark.e2e
def test_fcl_cells_are_highlighted_as_fcl(lab, tmp_path):
    chromium, expect, sync_playwright = browser_tools()
    if not (INSTALLED / "package.json").exists():
        pytest.fail(f"the FCL JupyterLab extension is not installed at {INSTALLED}: run make setup")
    base, token = lab
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(CELL)], metadata={
        "kernelspec": {"name": "fcl", "display_name": "FCL", "language": "fcl"},
        "language_info": {"name": "fcl", "codemirror_mode": "haskell"}})
    nbformat.write(notebook, tmp_path / "notebooks" / "highlight.ipynb")
    source = CELL.split("\n", 1)[1]  # an .fcl file has no magics
    (tmp_path / "notebooks" / "bump.fcl").write_text(source)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=BROWSER_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/highlight.ipynb?token={token}")
            panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
            editor = panel.locator(".jp-CodeCell .cm-content").first
            expect(editor).to_be_visible(timeout=90_000)
            kernel_status = page.locator(".jp-StatusBar-TextItem", has_text="FCL |")
            deadline = time.time() + 90
            while kernel_dialog(page) or "Idle" not in " ".join(kernel_status.all_text_contents()):
                assert time.time() < deadline, "the FCL kernel did not start"
                time.sleep(0.3)
            # The kernel's language_info replaced the notebook's Haskell: FCL's tokens appear.
            expect(editor.locator(".fcl-level").first).to_be_visible(timeout=30_000)
            tokens = editor.evaluate(TOKENS)
            page.screenshot(path=str(tmp_path / "highlight.png"))

            # A .fcl file opens in the file editor with the same language.
            page.goto(f"{base}/lab/tree/bump.fcl?token={token}")
            file_editor = page.locator(".jp-FileEditor:not(.lm-mod-hidden) .cm-content")
            expect(file_editor.locator(".fcl-level").first).to_be_visible(timeout=90_000)
            file_classes = {cls: page.evaluate(TEXT_OF_CLASS, [file_editor.element_handle(), cls])
                            for cls in ("tok-keyword", "tok-comment", "fcl-level")}
        finally:
            browser.close()

    def token(text):
        found = [(classes, color) for t, classes, color in tokens if t == text]
        assert found, f"no token {text!r} in {json.dumps(tokens)}"
        return found[0]

    def classes(text):
        return token(text)[0]

    assert "tok-keyword" in classes("fun")
    assert "tok-keyword" in classes("fn")
    assert "tok-keyword" in classes("val")
    assert "tok-comment" in classes("(* a (* nested *) comment *)")
    assert "tok-comment" in classes("-- one more")
    assert "fcl-level" in classes("<block>")
    assert "tok-string" in classes('"text"')
    assert "tok-number" in classes("1") and "tok-number" in classes("2")
    assert "tok-operator" in classes("+")
    # The magic line is one token: its `--pitch` is not a comment.
    assert "tok-meta" in classes("%%costs --pitch 64")
    assert not any("tok-comment" in c for t, c, _ in tokens if "pitch" in t)
    # Outside a level list `grid` is an ordinary name, as in the compiler.
    assert "fcl-level" not in classes("grid")
    # Builtins and prelude names take the theme's builtin colour; other names do not.
    assert token("forcePull")[1] == token("map")[1] != token("xs")[1]
    # Each kind of token has a colour of its own.
    assert len({token(t)[1] for t in ("fun", "<block>", "(* a (* nested *) comment *)",
                                      '"text"', "xs")}) == 5
    # The file editor has the same language.
    assert file_classes == {"tok-keyword": ["", "funfn", "val", "val"],
                            "tok-comment": ["(* a (* nested *) comment *)", "-- one more", "", ""],
                            "fcl-level": ["", "<block>", "", ""]}
