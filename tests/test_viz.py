"""fcl.viz: memory diagrams of traced accesses (SVG and text), and Graphviz graphs of programs
and kernels.

The transposes are those of test_analysis.py: a warp of the naive one reads a column (32
sectors of 32 bytes in 32 lines of 128 bytes), the tiled one reads a row of a tile (4 sectors
of 1 line) and then reads its tile in local memory transposed (all 32 lanes in one bank).
"""
from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fcl import pipeline
from fcl.analysis.trace import KernelTrace, trace_program
from fcl.errors import FCLError, Source
from fcl.session import Session
from fcl.viz.graphs import (
    LEVEL_COLOURS,
    READ_COLOUR,
    WRITE_COLOUR,
    kernel_graph,
    render,
    structure_graph,
)
from fcl.viz.memory import memory_diagram
from sample_programs import (  # the programs whose costs are tested there
    NAIVE,
    REDUCE,
    REDUCE_DEFS,
    SHIFTED,
    TILED,
    TILED_DEFS,
)

SVG = "{http://www.w3.org/2000/svg}"
SEQFOR = Path(__file__).parent / "programs" / "seqfor.fcl"


class Program:
    """A cell compiled (with its IL kept) and, when asked, traced in work-group 0."""

    def __init__(self, cell: str | None, defs: str | None = None, file: Path | None = None):
        session = Session.new(prelude=True)
        if file is not None:
            session.add_file(Source(str(file), file.read_text()))
            root = pipeline.main_root(session)
        else:
            if defs:
                session.add_cell(Source("defs.fcl", defs))
            _, root = session.add_cell(Source("cell.fcl", cell))
        self.il = pipeline.lower(session, root)
        self.compiled = pipeline.compile_program(session, root)
        self._trace = None

    @property
    def trace(self):
        if self._trace is None:
            self._trace = trace_program(self.compiled)
        return self._trace

    def kernel(self, number: int) -> KernelTrace:
        return self.trace.kernels[number]

    def array(self, number: int, kind: str, space: str) -> str:
        """The array of kernel `number`'s only site of this kind and space."""
        name = self.kernel(number).kernel.name
        (array,) = {s.array for s in self.trace.sites
                    if s.kernel == name and s.kind == kind and s.space == space}
        return array

    def diagram(self, number: int, **kwargs):
        return memory_diagram(self.kernel(number), self.trace.sites, **kwargs)


@pytest.fixture(scope="module")
def naive():
    return Program(NAIVE)


@pytest.fixture(scope="module")
def tiled():
    return Program(TILED, TILED_DEFS)


def svg_root(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def outlines(svg: str, unit: str) -> list[ET.Element]:
    """The rectangles outlining the "sector"s or "line"s of memory the warp's access touches."""
    return [r for r in svg_root(svg).iter(f"{SVG}rect") if r.get("class") == f"fcl-{unit}"]


def grid_lines(text: str) -> list[str]:
    """The text fallback's grid rows, without their element labels."""
    return [m.group(1) for m in re.finditer(r"^ +\d+ ([#o.]+)$", text, re.M)]


# ---- memory diagrams ------------------------------------------------------------------------

def test_diagram_has_svg_and_text_panels_for_every_access(naive):
    d = naive.diagram(1)
    name = naive.compiled.kernels[1].name
    heading = f"{name}: work-group 0 of 16, 256 work-items, warp 0 outlined"
    root = svg_root(d.svg)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert heading in texts and d.text.splitlines()[0] == heading
    # one panel per site: the load of xs and the store of the result, with their lines
    reads = [t for t in texts if t and t.startswith("reads global")]
    writes = [t for t in texts if t and t.startswith("writes global")]
    assert len(reads) == len(writes) == 1
    assert reads[0] in d.text and writes[0] in d.text
    assert "(line 3)" in reads[0]
    assert d.text.rstrip().endswith("# the warp's first access, o other work-items, . untouched")


def test_every_line_of_a_diagrams_text_fits_its_width(naive, tiled):
    """No caption or legend line is cut off at the diagram's right edge (a 12 px monospace
    character is 7.2 px wide; the heading is 14 px)."""
    for explanation in (naive, tiled):
        for kernel in (0, 1):
            root = svg_root(explanation.diagram(kernel).svg)
            width = float(root.get("width"))
            for text in root.iter(f"{SVG}text"):
                size = float(text.get("font-size", "12"))
                if text.text and text.get("text-anchor") != "middle":
                    right = float(text.get("x")) + len(text.text) * 0.6 * size
                    assert right <= width, (text.text, right, width)


def test_naive_read_touches_32_sectors_tiled_four(naive, tiled):
    naive_read = naive.diagram(1, array=naive.array(1, "load", "global"))
    tiled_read = tiled.diagram(1, array=tiled.array(1, "load", "global"))
    # warp 0 of the naive transpose reads a column: 32 elements 256 bytes apart, each in a
    # sector and a line of its own; the panel draws the first 8 and the last 3 of its rows
    assert len(outlines(naive_read.svg, "sector")) == len(outlines(naive_read.svg, "line")) == 11
    assert "⋯ 21 touched rows not drawn ⋯" in naive_read.svg
    assert "32 work-items touch 32 sectors of 32 bytes (ideal 4) in 32 lines of 128 bytes" in \
        naive_read.text
    # the tiled one reads 32 consecutive ints of a tile row starting at 0: 4 sectors of 8 ints
    # side by side, framed by their line of 32, drawn heavier
    sectors, (line,) = outlines(tiled_read.svg, "sector"), outlines(tiled_read.svg, "line")
    assert "32 work-items touch 4 sectors of 32 bytes (ideal 4) in 1 line of 128 bytes" in \
        tiled_read.text
    cell = (float(sectors[1].get("x")) - float(sectors[0].get("x"))) / 8
    assert [float(r.get("x")) - float(sectors[0].get("x")) for r in sectors] == \
        [0, 8 * cell, 16 * cell, 24 * cell]
    assert float(line.get("width")) - 32 * cell > float(sectors[0].get("width")) - 8 * cell > 0
    assert float(line.get("stroke-width")) > float(sectors[0].get("stroke-width"))
    assert sectors[0].get("stroke-dasharray") and not line.get("stroke-dasharray")


def test_shifted_read_touches_five_sectors_in_two_lines():
    program = Program(SHIFTED)
    d = program.diagram(1, array=program.array(1, "load", "global"))
    # warp 0 reads xs[1 .. 32]: elements 0 .. 39 in 5 sectors of 8, 0 .. 63 in 2 lines of 32
    assert "32 work-items touch 5 sectors of 32 bytes (ideal 4) in 2 lines of 128 bytes" in d.text
    assert (len(outlines(d.svg, "sector")), len(outlines(d.svg, "line"))) == (5, 2)


def test_branches_are_not_drawn():
    program = Program(REDUCE, REDUCE_DEFS)
    d = program.diagram(1)
    # The reduction's 9 `if`s are traced too, but only its loads and stores get a panel:
    # 2 global loads and 1 global store; the store while loading, then 2 loads and a store in
    # each of the 8 halving steps, and the final load: 17 local loads and 9 local stores.
    name = program.kernel(1).kernel.name
    memory = [s for s in program.trace.sites if s.kernel == name and s.is_memory]
    assert len(memory) == 2 + 1 + 17 + 9
    titles = [line for line in d.text.splitlines() if line.startswith(("reads ", "writes "))]
    assert len(titles) == len(memory)
    assert "if" not in " ".join(d.text.splitlines()[1:]).split()


def test_text_grid_of_naive_read(naive):
    d = naive.diagram(1, array=naive.array(1, "load", "global"))
    # The group's work-items i = 64 a + b (a < 4, b < 64) read 64 b + a: drawn 64 wide (the
    # access's row stride), row b has columns 0..3 touched, warp 0 (b < 32, a = 0) in column 0.
    # Warp 0 touches 32 rows: the first 8 and the last 3 are drawn, with a note between.
    lines = grid_lines(d.text)
    assert lines == ["#ooo" + "." * 60] * 11
    assert re.search(r"^ +448 #ooo.*\n +⋯ 21 touched rows not drawn ⋯\n +1856 #ooo", d.text, re.M)


def test_text_grid_of_tiled_accesses(tiled):
    read = tiled.diagram(1, array=tiled.array(1, "load", "global"))
    # tile 0 is the top-left 32 x 32 of the 64-wide matrix; warp 0 reads its first row
    lines = grid_lines(read.text)
    assert lines[0] == "#" * 32 + "." * 32
    assert lines[1:] == ["o" * 32 + "." * 32] * 11  # 12 rows of the tile's 32 drawn
    local = tiled.diagram(1, array=tiled.array(1, "load", "local"))
    # local memory drawn as rows of 32 banks: the tile stored row by row, then read column by
    # column, warp 0 down column (bank) 0
    store_lines, load_lines = grid_lines(local.text)[:12], grid_lines(local.text)[12:]
    assert store_lines == ["#" * 32] + ["o" * 32] * 11
    assert load_lines == ["#" + "o" * 31] * 11  # warp 0's first 8 and last 3 rows


def test_local_panel_marks_a_32_way_conflict(tiled):
    d = tiled.diagram(1, array=tiled.array(1, "load", "local"))
    assert "warp 0's first access: 32 work-items, no bank conflict" in d.text  # the store
    assert "warp 0's first access: 32 work-items, 32-way bank conflict (1 bank hit by several " \
           "words)" in d.text  # the load
    root = svg_root(d.svg)
    marks = [t for t in root.iter(f"{SVG}text") if t.text and t.text.endswith("×")]
    assert [(t.text, t.get("fill")) for t in marks] == [("32×", "#d00000")]
    # the 32 words warp 0 reads (all of bank 0) are outlined in red: the 11 of them drawn
    red = [r for r in root.iter(f"{SVG}rect")
           if r.get("stroke") == "#d00000" and not r.get("stroke-dasharray")]
    assert len(red) == 11
    assert len({r.get("x") for r in red}) == 1  # one column: one bank
    assert outlines(d.svg, "sector") == outlines(d.svg, "line") == []  # no global memory


def test_other_warp_and_pitch(naive):
    array = naive.array(1, "load", "global")
    # warp 1 (i = 32 .. 63) reads 64 i: rows 32 .. 63 of the 64-wide drawing
    d = naive.diagram(1, array=array, warp=1)
    assert "warp 1 outlined" in d.text.splitlines()[0]
    assert re.search(r"^ +2048 #ooo\.{60}$", d.text, re.M)
    assert len(outlines(d.svg, "sector")) == 11  # in the 11 of its 32 rows drawn
    # 32 wide, element 64 b + a lies in row 2 b, the odd rows untouched
    d = naive.diagram(1, array=array, pitch=32)
    lines = grid_lines(d.text)
    assert lines and lines[0] == "#ooo" + "." * 28 and all(len(line) == 32 for line in lines)
    assert "⋯" in d.text


def test_diagram_errors(naive):
    with pytest.raises(FCLError) as error:
        naive.diagram(1, warp=8)
    assert error.value.message == "warp 8 does not exist: a work-group of 256 work-items has " \
                                  "warps 0 to 7"
    with pytest.raises(FCLError, match="warp -1 does not exist"):
        naive.diagram(1, warp=-1)
    with pytest.raises(FCLError) as error:
        naive.diagram(1, array="nope")
    name = naive.compiled.kernels[1].name
    accessed = sorted({naive.array(1, "load", "global"), naive.array(1, "store", "global")})
    assert error.value.message == f"kernel {name} does not access array nope in work-group 0; " \
                                  f"it accesses: {', '.join(accessed)}"
    for pitch in (0, 129):
        with pytest.raises(FCLError, match=f"the pitch must be between 1 and 128, not {pitch}"):
            naive.diagram(1, pitch=pitch)


# ---- graphs ---------------------------------------------------------------------------------

ATTRS = r'(?:\w+=(?:"(?:[^"\\]|\\.)*"|[^\s"\]]+)\s*)*'


def attributes(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip('"')
            for m in re.finditer(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s"\]]+)', text)}


def clusters(dot: str) -> list[dict[str, str]]:
    return [attributes(m.group(1))
            for m in re.finditer(rf"subgraph cluster_\d+ {{\s*({ATTRS})\n", dot)]


def nodes(dot: str) -> dict[str, dict[str, str]]:
    return {m.group(1): attributes(m.group(2))
            for m in re.finditer(rf"^\t*(n\d+) \[({ATTRS})\]$", dot, re.M)}


def edges(dot: str) -> list[tuple[str, str, dict[str, str]]]:
    return [(m.group(1), m.group(2), attributes(m.group(3)))
            for m in re.finditer(rf"^\t*(n\d+) -> (n\d+) \[({ATTRS})\]$", dot, re.M)]


def test_structure_graph_of_tiled_transpose(tiled):
    dot = structure_graph(tiled.il, tiled.compiled.kernels).source
    found = clusters(dot)
    # the kernels: bold clusters on the grid's colour, named as in the OpenCL
    kernels = [c for c in found if c["penwidth"] == "2.5"]
    names = [k.name for k in tiled.compiled.kernels]
    assert [c["label"].split(":")[0] for c in kernels] == names
    assert all(f"__kernel void {name}(" in tiled.compiled.source for name in names)
    assert all(c["fillcolor"] == LEVEL_COLOURS["grid"] and "(grid)" in c["label"]
               for c in kernels)
    # the tile's block-level loops (copy in, copy out): the block's colour
    block = [c for c in found if "(block)" in c["label"]]
    assert len(block) == 2
    assert all(c["fillcolor"] == LEVEL_COLOURS["block"] and c["penwidth"] == "1" for c in block)
    # materialised arrays are cylinders: xs and the result in global memory, the tile in local
    cylinders = {a["label"].split(":")[0]: a for a in nodes(dot).values()
                 if a.get("shape") == "cylinder"}
    tile = tiled.array(1, "store", "local")
    xs, result = tiled.array(1, "load", "global"), tiled.array(1, "store", "global")
    assert set(cylinders) == {xs, result, tile}
    assert cylinders[xs]["label"].startswith(f"{xs}: 4096 × int\nmaterialised in global memory")
    assert cylinders[xs]["fillcolor"] == LEVEL_COLOURS["grid"]
    assert cylinders[tile]["label"].startswith(f"{tile}: 1024 × int\nmaterialised in local memory")
    assert cylinders[tile]["fillcolor"] == LEVEL_COLOURS["block"]
    # dashed edges: read from xs, write to the tile, read from the tile, write the result
    by_name = {a["label"].split(":")[0]: n for n, a in nodes(dot).items()
               if a.get("shape") == "cylinder"}
    flows = [(src, dst, a["label"], a["color"]) for src, dst, a in edges(dot)
             if a.get("style") == "dashed"]
    reads = {src for src, _, label, colour in flows if label == "read" and colour == READ_COLOUR}
    writes = {dst for _, dst, label, colour in flows if label == "write" and colour == WRITE_COLOUR}
    assert reads == {by_name[xs], by_name[tile]}
    assert writes == {by_name[xs], by_name[tile], by_name[result]}  # iota fills xs


def test_structure_graph_colours_thread_level_loops():
    program = Program(None, file=SEQFOR)
    dot = structure_graph(program.il, program.compiled.kernels).source
    found = clusters(dot)
    assert [c["label"].split(":")[0] for c in found if c["penwidth"] == "2.5"] == \
        [k.name for k in program.compiled.kernels]
    # seqfor runs in a work-item: dashed clusters on the thread's colour, and the array it
    # builds a cylinder in private memory
    seqfors = [c for c in found if c["label"].startswith("seqfor")]
    assert seqfors and all(c["fillcolor"] == LEVEL_COLOURS["thread"] and "dashed" in c["style"]
                           for c in seqfors)
    private = [a for a in nodes(dot).values() if a.get("shape") == "cylinder"
               and "materialised in private memory" in a["label"]]
    assert private and all(a["fillcolor"] == LEVEL_COLOURS["thread"] for a in private)
    # the distribute over work-items of a block
    assert any(c["fillcolor"] == LEVEL_COLOURS["block"] and "(block)" in c["label"]
               for c in found)


def test_kernel_graph_of_tiled_transpose(tiled):
    kernel = tiled.compiled.kernels[1]
    dot = kernel_graph(kernel).source
    found = clusters(dot)
    assert found[0]["label"].startswith(kernel.name) and found[0]["penwidth"] == "2.5"
    # both block-level loops: for i = item; < 1024; += 256
    loops = [c for c in found if c["label"].startswith("for ")]
    assert len(loops) == 2 and all("< 1024; += 256" in c["label"] for c in loops)
    shapes = [a.get("shape") for a in nodes(dot).values()]
    assert shapes.count("hexagon") == 1  # the barrier between writing and reading the tile
    # the kernel's array parameters in global memory, its tile in local memory
    cylinders = {a["label"].split("\n")[0].split(":")[0]: a["label"]
                 for a in nodes(dot).values() if a.get("shape") == "cylinder"}
    xs, result = tiled.array(1, "load", "global"), tiled.array(1, "store", "global")
    tile = tiled.array(1, "store", "local")
    assert cylinders[xs] == f"{xs}\nglobal memory"
    assert cylinders[result] == f"{result}\nglobal memory"
    assert "materialised in local memory" in cylinders[tile]


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_gives_svg(tiled):
    graph = structure_graph(tiled.il, tiled.compiled.kernels)
    drawing = render(graph)
    assert drawing.dot == graph.source and drawing.note == ""
    root = svg_root(drawing.svg[drawing.svg.index("<svg"):])
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    for kernel in tiled.compiled.kernels:
        assert kernel.name in texts


def test_render_without_dot_gives_the_dot_text(tiled, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no `dot` to run
    graph = kernel_graph(tiled.compiled.kernels[1])
    drawing = render(graph)
    assert drawing.svg is None
    assert drawing.dot == graph.source and drawing.dot.startswith("digraph {")
    assert "`dot` program is not installed" in drawing.note and "DOT text" in drawing.note


def test_a_diagram_of_several_panels_stays_short(tiled):
    """Each panel draws at most 12 rows (issue 17: one %%memory cell of notebook 4 was three
    screens tall): the tiled transpose's four panels (global load, local store and load, global
    store) fit in about a screen and a half."""
    d = tiled.diagram(1)
    assert len([t for t in d.text.splitlines() if t.startswith(("reads ", "writes "))]) == 4
    assert int(svg_root(d.svg).get("height")) < 1500


def test_a_note_of_rows_left_out_is_clear_of_the_frames(naive):
    d = naive.diagram(1, array=naive.array(1, "load", "global"))
    root = svg_root(d.svg)
    [note] = [t for t in root.iter(f"{SVG}text") if t.text and "touched rows not drawn" in t.text]
    baseline = float(note.get("y"))
    top = baseline - 10  # the glyphs of a 10-pixel font lie above the baseline
    for frame in outlines(d.svg, "line") + outlines(d.svg, "sector"):
        y, height = float(frame.get("y")), float(frame.get("height"))
        assert y + height + 0.5 <= top or y >= baseline + 3, (y, height, baseline)
