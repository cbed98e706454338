"""Graphs of a program (Graphviz): its structure by level, and the IL of each kernel.

The structure graph is drawn from the IL before kernels are cut out of it, where every loop
still has its level: each parallel loop, `seqfor` and `while` is a box coloured by the level
that runs it, nested as in the program; grid-level loops on the host are the kernels (bold
boxes, named as in the OpenCL); arrays that are materialised (`force`, and the memory a
kernel fills) are cylinders, with dashed edges from the code that writes them and to the
code that reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import graphviz

from fcl.analysis.symbolic import show
from fcl.codegen.kernel import FailFlag, Kernel, StridedFor
from fcl.il import ir
from fcl.il.dispatch import StmtVisitor

LEVEL_COLOURS = {"host": "#ffffff", "grid": "#fff2cc", "block": "#dae8fc", "thread": "#d5e8d4"}
MEMORY = {"grid": "global memory", "block": "local memory", "thread": "private memory"}
READ_COLOUR, WRITE_COLOUR = "#1f5fbf", "#c0550a"
MAX_LABEL = 48


@dataclass
class Drawing:
    dot: str
    svg: str | None   # None when Graphviz's `dot` program is missing
    note: str = ""


def render(graph: graphviz.Digraph) -> Drawing:
    try:
        return Drawing(graph.source, graph.pipe(format="svg").decode())
    except graphviz.ExecutableNotFound:
        return Drawing(graph.source, None, "Graphviz's `dot` program is not installed (`make "
                       "setup` installs it where it can), so here is the graph as DOT text.")


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[:MAX_LABEL - 1] + "…"


def _line(s: ir.Stmt | Kernel) -> str:
    return f" (line {s.span.line})" if s.span else ""


class _Builder(StmtVisitor):
    def __init__(self, kernel_names: list[str], detail: bool):
        self.graph = graphviz.Digraph(graph_attr={"compound": "true", "rankdir": "TB",
                                                  "fontname": "Helvetica", "fontsize": "11"},
                                      node_attr={"fontname": "Helvetica", "fontsize": "10",
                                                 "shape": "box", "style": "rounded,filled",
                                                 "fillcolor": "#ffffff"},
                                      edge_attr={"fontname": "Helvetica", "fontsize": "9"})
        self.kernel_names = iter(kernel_names)
        self.detail = detail          # IL mode: every statement, not only the structure
        self.count = 0
        self.arrays: dict[str, str] = {}   # array name -> its node
        self.flows: list[tuple[str, str, str]] = []

    def node(self, graph, label: str, **attrs) -> str:
        self.count += 1
        name = f"n{self.count}"
        graph.node(name, label, **attrs)
        return name

    def stmts(self, graph, stmts: list[ir.Stmt], level: str, host: bool) -> list[str]:
        """Nodes for `stmts` in `graph`; returns an anchor node per drawn statement, in order."""
        anchors = []
        for s in stmts:
            anchor = self.stmt(graph, s, level, host)
            if anchor is not None:
                anchors.append(anchor)
        for first, second in pairwise(anchors):  # keep program order top to bottom
            graph.edge(first, second, style="invis")
        return anchors

    def cluster(self, graph, label: str, level: str, body: list[list[ir.Stmt]], inner: str,
                host: bool, bold: bool = False, dashed: bool = False) -> str | None:
        self.count += 1
        with graph.subgraph(name=f"cluster_{self.count}") as sub:
            style = ",".join(["filled", "rounded"] + (["dashed"] if dashed else []))
            sub.attr(label=label, style=style, fillcolor=LEVEL_COLOURS[level],
                     penwidth="2.5" if bold else "1", labeljust="l")
            anchors = []
            for part in body:
                anchors += self.stmts(sub, part, inner, host)
            if not anchors:
                anchors.append(self.node(sub, "…", shape="plaintext", style=""))
        return anchors[0]

    def stmt(self, graph, s: ir.Stmt, level: str, host: bool) -> str | None:
        """The node or cluster drawn for s (None: nothing to draw)."""
        return self.visit(s, graph, level, host)

    def visit_ParFor(self, s: ir.ParFor | ir.Distribute, graph, level: str, host: bool):
        inner = {"grid": "block", "block": "thread"}.get(s.level, "thread") \
            if isinstance(s, ir.Distribute) else s.level
        what = "distribute" if isinstance(s, ir.Distribute) else "parallel for"
        label = f"{what} {s.var.name} < {_short(show(s.bound))} ({s.level}){_line(s)}"
        kernel = host and s.level == "grid"
        if kernel:
            label = f"{next(self.kernel_names, 'kernel')}: {label}"
        return self.cluster(graph, label, s.level, [s.body], inner, False, bold=kernel)

    visit_Distribute = visit_ParFor

    def visit_StridedFor(self, s: StridedFor, graph, level: str, host: bool):
        label = f"for {s.var.name} = {_short(show(s.start))}; < {_short(show(s.bound))}; " \
                f"+= {_short(show(s.step))}{_line(s)}"
        return self.cluster(graph, label, level, [s.body], level, host)

    def visit_SeqFor(self, s: ir.SeqFor, graph, level: str, host: bool):
        return self.cluster(graph, f"seqfor {s.var.name} < {_short(show(s.bound))}{_line(s)}",
                            level, [s.body], level, host, dashed=True)

    def visit_While(self, s: ir.While, graph, level: str, host: bool):
        at = s.level or level
        return self.cluster(graph, f"while ({at}){_line(s)}", at if at in LEVEL_COLOURS
                            else level, [s.test, s.body], at, host, dashed=True)

    def visit_If(self, s: ir.If, graph, level: str, host: bool):
        if not self.detail and not any(self._structural(t) for t in ir.walk(s.then + s.else_)):
            return self._leaf_flows(graph, s, level)
        return self.cluster(graph, f"if {_short(show(s.cond))}", level, [s.then, s.else_],
                            level, host, dashed=True)

    def visit_Benchmark(self, s: ir.Benchmark, graph, level: str, host: bool):
        return self.cluster(graph, f"benchmark × {show(s.count)}", "host", [s.body], "host",
                            True)

    def visit_Alloc(self, s: ir.Alloc, graph, level: str, host: bool):
        name = self.node(graph, f"{s.var.name}: {_short(show(s.size))} × "
                         f"{ir.elem_of(s.var)}\nmaterialised in {MEMORY[s.level]}{_line(s)}",
                         shape="cylinder", style="filled,bold",
                         fillcolor=LEVEL_COLOURS[s.level])
        self.arrays[s.var.name] = name
        return name

    def visit_Barrier(self, s: ir.Barrier, graph, level: str, host: bool):
        return self.node(graph, f"barrier ({s.level})", shape="hexagon",
                         fillcolor="#eeeeee", style="filled")

    def visit_Input(self, s: ir.Input, graph, level: str, host: bool):
        if s.length is None:  # a scalar argument: no array to draw
            return None
        source = (f'readIntCSV "{s.source}"' if isinstance(s.source, str)
                  else f"argument {s.source}")
        name = self.node(graph, f"{s.var.name} ← {source}", shape="cylinder",
                         style="filled,bold")
        self.arrays[s.var.name] = name
        return name

    def visit_Chunk(self, s: ir.Chunk, graph, level: str, host: bool):
        if s.length is None:  # the chunk's count or first element: no array to draw
            return None
        if s.what == "collected":
            source = "the chunks collected on the host"
        else:
            src = s.stream.sources[int(s.source)]
            where = f'"{src.where}"' if isinstance(src.where, str) else f"argument {src.where}"
            source = f"a chunk of {where}" + (" (its rows' starts)" if src.role == "starts"
                                               else "")
        name = self.node(graph, f"{s.var.name} ← {source}", shape="cylinder",
                         style="filled,bold")
        self.arrays[s.var.name] = name
        return name

    def visit_Print(self, s: ir.Print, graph, level: str, host: bool):
        return self._leaf_flows(graph, s, level, f"print {show(s.count)} of {s.array.name}")

    def visit_Collect(self, s: ir.Collect, graph, level: str, host: bool):
        return self._leaf_flows(graph, s, level,
                                f"{show(s.count)} of {s.array.name} → host (collect)")

    def visit_Store(self, s: ir.Stmt, graph, level: str, host: bool):
        return self._leaf_flows(graph, s, level)

    visit_Declare = visit_Assign = visit_Result = visit_Fail = visit_FailFlag = visit_Store

    def visit_other(self, s: ir.Stmt, graph, level: str, host: bool):
        return None  # e.g. a launch: the structure graph draws kernels where they are cut out

    @staticmethod
    def _structural(s: ir.Stmt) -> bool:
        return isinstance(s, (ir.ParFor, ir.Distribute, ir.SeqFor, ir.While, ir.Alloc, ir.Barrier,
                              StridedFor))

    def _leaf_flows(self, graph, s: ir.Stmt, level: str, label: str | None = None) -> str | None:
        """Stores (and, in IL mode, every statement) as nodes, with their array traffic."""
        reads = sorted({e.array.name for e in _indexes(s)})
        writes = [s.array.name] if isinstance(s, ir.Store) else []
        if label is None:
            if not self.detail and not writes:
                return None
            label = _stmt_label(s)
        name = self.node(graph, label, fillcolor=LEVEL_COLOURS.get(level, "#ffffff"))
        self.flows += [(array, name, "reads") for array in reads]
        self.flows += [(name, array, "writes") for array in writes]
        return name

    def finish(self) -> graphviz.Digraph:
        for source, target, kind in self.flows:
            if kind == "reads" and source in self.arrays:
                self.graph.edge(self.arrays[source], target, color=READ_COLOUR, style="dashed",
                                constraint="false", label="read")
            elif kind == "writes" and target in self.arrays:
                self.graph.edge(source, self.arrays[target], color=WRITE_COLOUR, style="dashed",
                                constraint="false", label="write")
        return self.graph


def _indexes(s: ir.Stmt):
    exprs = [getattr(s, f) for f in ("index", "value", "init", "cond") if
             isinstance(getattr(s, f, None), ir.Expr)]
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Index):
            yield e
        # A WideInt's expression, not how it is computed (its definitions expanded).
        stack += [getattr(e, f) for f in ("array", "index", "left", "right", "arg", "cond", "then",
                                          "else_", "expr")
                  if isinstance(getattr(e, f, None), ir.Expr)]


def _stmt_label(s: ir.Stmt) -> str:
    if isinstance(s, ir.Store):
        return _short(f"{s.array.name}[{show(s.index)}] = {show(s.value)}")
    if isinstance(s, ir.Declare):
        return _short(f"{s.var.name} = {show(s.init)}")
    if isinstance(s, ir.Assign):
        return _short(f"{s.var.name} := {show(s.value)}")
    if isinstance(s, ir.If):
        return _short(f"if {show(s.cond)} …")
    return "fail" if isinstance(s, FailFlag) else type(s).__name__.lower()


def structure_graph(il: list[ir.Stmt], kernels: list[Kernel]) -> graphviz.Digraph:
    """The program's structure (see the module docstring), from its IL before kernelization."""
    builder = _Builder([k.name for k in kernels], detail=False)
    builder.stmts(builder.graph, il, "host", True)
    return builder.finish()


def kernel_graph(kernel: Kernel) -> graphviz.Digraph:
    """Every statement of one kernel's IL, nested as in its code."""
    builder = _Builder([], detail=True)
    builder.cluster(builder.graph, f"{kernel.name}{_line(kernel)}", "grid", [kernel.body],
                    "block", False, bold=True)
    for param in kernel.params:
        if isinstance(param.type, ir.ArrayType) and param.name not in builder.arrays:
            builder.arrays[param.name] = builder.node(
                builder.graph, f"{param.name}\nglobal memory", shape="cylinder",
                fillcolor=LEVEL_COLOURS["grid"])
    return builder.finish()
