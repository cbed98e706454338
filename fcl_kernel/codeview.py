"""FCL next to the OpenCL it became: each FCL line and its OpenCL lines share a colour."""
from __future__ import annotations

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers.c_cpp import CLexer

from fcl.errors import Span
from fcl.highlight import FCLLexer

# Inline colours, so the view looks the same in every front end and in exported HTML.
_FORMATTER = HtmlFormatter(nowrap=True, noclasses=True)
_LEXERS = {"fcl": FCLLexer(), "opencl": CLexer()}

SCROLL = "overflow:auto;max-width:100%;max-height:40em"
PALETTE = ["#fde2e4", "#e2ece9", "#dfe7fd", "#fff1c1", "#e8dff5", "#d6f5e3", "#fce1c8",
           "#d7ecf7", "#f5d6eb", "#e6f2c2"]


def side_by_side(fcl_source: str, opencl_source: str, line_table: list[tuple[int, Span]]) -> str:
    """HTML with the cell's FCL on the left and the generated OpenCL on the right."""
    fcl_lines = fcl_source.split("\n")
    colour_of: dict[int, str] = {}
    opencl_colour: dict[int, str] = {}
    cell_name = _cell_source_name(line_table, fcl_source)
    for cl_line, span in line_table:
        if span.source.name == cell_name:
            colour = colour_of.setdefault(span.line, PALETTE[len(colour_of) % len(PALETTE)])
            opencl_colour[cl_line] = colour
    left = "".join(_row(n, text, colour_of.get(n), "fcl") for n, text in enumerate(fcl_lines, 1))
    right = "".join(_row(n, text, opencl_colour.get(n), "opencl")
                    for n, text in enumerate(opencl_source.split("\n"), 1))
    # text-align: JupyterLab right-aligns table cells in rendered HTML, which scrambles code.
    style = ("font-family:monospace;font-size:85%;white-space:pre;vertical-align:top;"
             "text-align:left;padding:0 1em")
    head = "style='text-align:left;padding:0 1em'"
    # Long lines and long kernels scroll inside the view rather than being clipped by the
    # output area.
    return (f"<div class='fcl-codeview-scroll' style='{SCROLL}'>"
            f"<table class='fcl-codeview'><tr><th {head}>FCL</th><th {head}>OpenCL</th></tr>"
            f"<tr><td style='{style}'>{left}</td><td style='{style}'>{right}</td></tr></table>"
            "</div>")


def _cell_source_name(line_table: list[tuple[int, Span]], text: str) -> str | None:
    """The name of the cell's own source among the spans (others come from the prelude)."""
    for _, span in line_table:
        if span.source.text == text:
            return span.source.name
    return None


def _row(number: int, text: str, colour: str | None, language: str) -> str:
    background = f"background:{colour};" if colour else ""
    code = highlight(text, _LEXERS[language], _FORMATTER).rstrip("\n") if text.strip() else " "
    return (f"<div style='{background}'><span style='color:#999'>{number:>3} </span>"
            f"{code}</div>")
