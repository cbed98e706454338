"""FCL next to the OpenCL it became: each FCL line and its OpenCL lines share a colour."""
from __future__ import annotations

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers.c_cpp import CLexer

from fcl.errors import Span
from fcl.highlight import TEXT_COLOUR, FCLLexer, ThemedStyle

# Inline colours from the theme's variables, so the view reads the same in every front end, in
# exported HTML, and in light and dark themes.
_FORMATTER = HtmlFormatter(nowrap=True, noclasses=True, style=ThemedStyle)
_LEXERS = {"fcl": FCLLexer(), "opencl": CLexer()}

SCROLL = "overflow:auto;max-width:100%;max-height:40em"
# The colours that pair lines (Tableau 10): a bar at the left of each paired line, and a tint of
# the colour over the theme's own background. The tint is faint enough that the theme's text and
# token colours keep WCAG's contrast 4.5 over it, in light and dark themes alike.
PALETTE = ["225,87,89", "78,121,167", "89,161,79", "242,142,43", "176,122,161", "118,183,178",
           "237,201,72", "255,157,167", "156,117,95", "186,176,172"]
TINT = 0.08
# Over a dark background the same tint all but vanishes (a contrast of 1.05 with the page, where
# the light theme's is 1.05-1.1, which the eye sees far better there): dark themes get a
# stronger one. A style rule, since inline colours cannot ask the theme; where the front end
# drops the rule (an untrusted notebook), the light tint remains.
DARK_TINT = 0.15
BAND_STYLE = ("<style>body[data-jp-theme-light='false'] .fcl-codeview-scroll, "
              "body.vscode-dark .fcl-codeview-scroll "
              f"{{ --fcl-band-tint: {DARK_TINT}; }}</style>")


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
    # JupyterLab stripes and hover-highlights table rows; the lines' own tints are the colours.
    row = "style='background:transparent'"
    # Long lines and long kernels scroll inside the view rather than being clipped by the
    # output area.
    return (f"{BAND_STYLE}<div class='fcl-codeview-scroll' style='{SCROLL};color:{TEXT_COLOUR}'>"
            f"<table class='fcl-codeview'><tr {row}><th {head}>FCL</th><th {head}>OpenCL</th></tr>"
            f"<tr {row}><td style='{style}'>{left}</td><td style='{style}'>{right}</td></tr>"
            "</table></div>")


def _cell_source_name(line_table: list[tuple[int, Span]], text: str) -> str | None:
    """The name of the cell's own source among the spans (others come from the prelude)."""
    for _, span in line_table:
        if span.source.text == text:
            return span.source.name
    return None


def _row(number: int, text: str, colour: str | None, language: str) -> str:
    pairing = (f"background:rgba({colour},var(--fcl-band-tint,{TINT}));"
               f"box-shadow:inset 3px 0 rgb({colour});" if colour else "")
    band = " class='fcl-band'" if colour else ""
    code = highlight(text, _LEXERS[language], _FORMATTER).rstrip("\n") if text.strip() else " "
    return f"<div{band} style='{pairing}padding-left:6px'>{number:>3} {code}</div>"
