"""Print kernels as readable OpenCL C, with a table from generated lines to FCL spans.

With `trace=True` every global and local memory access and every barrier also records
(site, index) in a per-work-item log, for one chosen work-group: the access analysis
(fcl.analysis) reads it back. The traced source is a separate program; the normal one is
untouched.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from fcl.errors import Span
from fcl.il import ir
from fcl.il.passes import Interval, interval
from fcl.opencl.kernelize import MAX_GROUPS, Kernel, Special, StridedFor, _inline_ints

C_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.BOOL: "int"}
# Bools are stored in memory as one byte; kernel arguments cannot be bool at all.
MEMORY_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.BOOL: "uchar"}
SPECIALS = {"local_id": "get_local_id(0)", "local_size": "get_local_size(0)",
            "local_x": "get_local_id(0)", "local_y": "get_local_id(1)",
            "group_id": "get_group_id(0)", "num_groups": "get_num_groups(0)",
            "global_id": "get_global_id(0)", "global_size": "get_global_size(0)"}
FAIL_FLAG = "fcl_fail"
ABORT_FLAG = "fcl_abort"
TRACE_PARAMS = "__global int* fcl_trace, __global int* fcl_trace_count, int fcl_trace_group, " \
    "int fcl_trace_cap"
TRACE_RECORDER = """\
void fcl_record(__global int* log, int* count, int on, int cap, int site, int index) {
    if (on && *count < cap) { log[2 * *count] = site; log[2 * *count + 1] = index; }
    *count += on;
}
"""


@dataclass(frozen=True)
class Site:
    """A traced place in a kernel: a load, a store or a barrier."""

    id: int
    kernel: str
    kind: str          # "load", "store" or "barrier"
    array: str | None  # the buffer or local array (aliases resolved)
    space: str | None  # "global" or "local"
    elem: str | None   # the element type (ir.INT, ir.DOUBLE, ir.BOOL)
    index: str | None  # the index expression as OpenCL C
    span: Span | None
    index_expr: ir.Expr | None = field(default=None, compare=False)  # ... and as IL


# Integer operations whose result's low 32 bits depend only on their operands' low 32 bits.
RING_OPS = frozenset(("+", "-", "*", "&", "|", "^"))
LOCAL_IDS = frozenset(("local_id", "local_x", "local_y"))


def _ring(e: ir.Expr) -> bool:
    if not isinstance(e, ir.Bin) or e.type != ir.INT:
        return False
    return e.op in RING_OPS or e.op == "<<" and isinstance(e.right, ir.Const) and \
        0 <= e.right.value < 32


def _uses_local_id(e: ir.Expr, defs: dict[str, ir.Expr]) -> bool:
    if isinstance(e, Special):
        return e.name in LOCAL_IDS
    if isinstance(e, ir.Var):
        return e.name in defs
    return _ring(e) and (_uses_local_id(e.left, defs) or _uses_local_id(e.right, defs))


def c_expr(e: ir.Expr, on_index: Callable[[ir.Index, str], str] | None = None,
           wide: dict[str, ir.Expr] | None = None,
           ranges: dict[str, Interval] | None = None) -> str:
    """C text of `e`; `on_index` may rewrite each array read (given its plain text). With
    `wide`, arithmetic over local ids is done in size_t, through the int variables it maps to
    their definitions (see `_wide`); with `ranges` too (see `_ranges`), array indices that
    provably fit stay in size_t (see `_subscript`)."""
    if on_index is not None:
        return _c_expr(e, on_index, wide, ranges)
    return _c_expr(e, lambda _, text: text, wide, ranges)


def _c_expr(e: ir.Expr, on_index, wide: dict[str, ir.Expr] | None,
            ranges: dict[str, Interval] | None) -> str:
    def sub(part: ir.Expr) -> str:
        return _c_expr(part, on_index, wide, ranges)

    if isinstance(e, ir.Const):
        if e.type == ir.BOOL:
            return "1" if e.value else "0"
        if e.type == ir.DOUBLE:
            text = repr(float(e.value))
            if text in ("inf", "-inf", "nan"):
                return {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}[text]
            return text if any(c in text for c in ".e") else text + ".0"
        value = int(e.value)
        return "(-2147483647 - 1)" if value == -2**31 else str(value) if value >= 0 else f"({value})"
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, Special):
        return f"((int){SPECIALS[e.name]})"
    if isinstance(e, ir.Index):
        return on_index(e, f"{e.array.name}[{_subscript(e.index, on_index, wide, ranges)}]")
    if wide is not None and _ring(e) and _uses_local_id(e, wide):
        return f"((int){_wide(e, on_index, wide, ranges)})"
    if isinstance(e, ir.Bin):
        left, right = sub(e.left), sub(e.right)
        if e.op in ("min", "max"):
            fn = ("f" + e.op) if e.type == ir.DOUBLE else e.op
            return f"{fn}({left}, {right})"
        return f"({left} {e.op} {right})"
    if isinstance(e, ir.Un):
        arg = sub(e.arg)
        return {
            "neg": f"(-{arg})", "not": f"(!{arg})",
            "abs": f"fabs({arg})" if e.type == ir.DOUBLE else f"((int)abs({arg}))",
            "sign": f"(({arg} > 0) - ({arg} < 0))", "clz": f"clz({arg})",
            "i2d": f"((double){arg})", "d2i": f"((int){arg})", "b2i": f"((int){arg})",
            "sqrt": f"sqrt({arg})",
        }[e.op]
    if isinstance(e, ir.Select):
        return f"({sub(e.cond)} ? {sub(e.then)} : {sub(e.else_)})"
    raise TypeError(e)


def _wide(e: ir.Expr, on_index, defs: dict[str, ir.Expr],
          ranges: dict[str, Interval] | None) -> str:
    """Integer arithmetic over local ids done in size_t, for the caller to truncate once (an
    index that provably fits is not truncated at all, see `_subscript`).

    `(int)get_local_id(0)` is the same value in every barrier interval of a kernel, so the C
    compiler computes it once; PoCL then keeps it per work-item in memory across barriers and
    reloads it, which hides that accesses are consecutive in the work-item loops it builds (a
    tiled transpose ran 1.3 times slower). The ids themselves it recomputes in each interval.
    Truncating each whole index expression instead gives the same int (these operations keep
    the low 32 bits), from values that differ between intervals. Int variables defined by
    such arithmetic are expanded, so that a whole index (`row * 2048 + col`) is one expression
    over the ids: split into truncated parts, the transpose ran 10-15% slower.
    """
    if isinstance(e, Special) and e.name in LOCAL_IDS:
        return SPECIALS[e.name]
    if _ring(e):
        return f"({_wide(e.left, on_index, defs, ranges)} {e.op} " \
            f"{_wide(e.right, on_index, defs, ranges)})"
    if isinstance(e, ir.Var) and e.name in defs:
        return _wide(defs[e.name], on_index, defs, ranges)
    return _c_expr(e, on_index, defs, ranges)


def _subscript(index: ir.Expr, on_index, wide: dict[str, ir.Expr] | None,
               ranges: dict[str, Interval] | None) -> str:
    """An array index. Arithmetic over local ids that provably neither wraps nor goes negative
    (its int range is known) is left in size_t rather than truncated: an address computed from
    `(int)(base + get_local_id(0))` sign-extends a truncation, so the C compiler cannot tell
    that neighbouring work-items access neighbouring elements, and PoCL's loops over work-items
    stay scalar (the tiled transpose took about 1.3 times as long as with size_t indices).
    Where the int value lies in [0, 2^31) the size_t value is the same number: ring operations
    agree modulo 2^64, and the range check means no int operation wrapped."""
    if wide is not None and ranges is not None and _ring(index) and _uses_local_id(index, wide):
        found = interval(_inline_ints(index, {}), ranges)
        if found is not None and found[0] >= 0:
            return _wide(index, on_index, wide, ranges)
    return _c_expr(index, on_index, wide, ranges)


def _ranges(k: Kernel) -> dict[str, Interval]:
    """Bounds on a kernel's work-item ids (named `<local_x>` etc., as `_inline_ints` names them)
    and on the int variables computed from them, for `_subscript`. As in passes.bound: a loop
    variable lies in [start, bound); a variable declared once and never assigned, in the range
    of its initial value. Names are unique within a kernel."""
    ranges: dict[str, Interval] = {"<group_id>": (0, MAX_GROUPS - 1)}  # see Kernelizer
    if isinstance(k.group_bound, ir.Const) and k.group_bound.value >= 1:
        ranges["<group_id>"] = (0, min(int(k.group_bound.value), MAX_GROUPS) - 1)
    if k.block_size:
        ranges["<local_id>"] = (0, k.block_size - 1)
        ranges["<global_id>"] = (0, MAX_GROUPS * k.block_size - 1)
        if k.width:
            ranges["<local_x>"] = (0, k.width - 1)
            ranges["<local_y>"] = (0, k.block_size // k.width - 1)

    def bounds(e: ir.Expr) -> Interval | None:
        return interval(_inline_ints(e, {}), ranges)

    assigned = {s.var.name for s in ir.walk(k.body) if isinstance(s, ir.Assign)}
    for s in ir.walk(k.body):
        if isinstance(s, ir.Declare) and s.var.type == ir.INT and s.var.name not in assigned:
            found = bounds(s.init)
        elif isinstance(s, (ir.SeqFor, StridedFor)):
            start = bounds(s.start) if isinstance(s, StridedFor) else (0, 0)
            limit = bounds(s.bound)
            found = (start[0], limit[1] - 1) if start and limit and 0 <= start[0] < limit[1] \
                else None
        else:
            continue
        if found is not None:
            ranges[s.var.name] = found
    return ranges


def _wide_definitions(body: list[ir.Stmt]) -> dict[str, ir.Expr]:
    """Int variables defined once by arithmetic over local ids, from values that never change
    (no assigned variable, no memory), so that their definition may stand for them."""
    assigned = {s.var.name for s in ir.walk(body) if isinstance(s, ir.Assign)}

    def fixed(e: ir.Expr) -> bool:
        if isinstance(e, ir.Index):
            return False
        if isinstance(e, ir.Var):
            return e.name not in assigned
        return all(fixed(part) for part in vars(e).values() if isinstance(part, ir.Expr))

    defs: dict[str, ir.Expr] = {}
    for s in ir.walk(body):
        if isinstance(s, ir.Declare) and s.var.type == ir.INT and s.var.name not in assigned \
                and _ring(s.init) and _uses_local_id(s.init, defs) and fixed(s.init):
            defs[s.var.name] = s.init
    return defs


class KernelPrinter:
    def __init__(self, line_offset: int, trace: bool = False):
        self.lines: list[str] = []
        self.table: list[tuple[int, Span]] = []
        self.line_offset = line_offset
        self.spaces: dict[str, str] = {}
        self.trace = trace
        self.sites: list[Site] = []
        self.roots: dict[str, str] = {}        # array aliases -> the memory they point into
        self.per_item: dict[str, str] = {}     # per-work-item local slices -> their size
        self.loops = 0                         # depth of loops without barriers
        self.wide: dict[str, ir.Expr] = {}     # int variables that `_wide` expands
        self.ranges: dict[str, Interval] = {}  # bounds on ids and int variables (`_ranges`)

    def expr(self, e: ir.Expr) -> str:
        # Not inside a loop of one work-item: there the id's reload is hoisted out of the loop,
        # and int arithmetic (which cannot wrap) lets the compiler step the loop's indices.
        return c_expr(e, self._traced_load if self.trace else None,
                      None if self.loops else self.wide, self.ranges)

    def subscript(self, index: ir.Expr) -> str:
        return _subscript(index, self._traced_load if self.trace else lambda _, text: text,
                          None if self.loops else self.wide, self.ranges)

    def _record(self, kind: str, array: ir.Var | None, index: ir.Expr | None,
                span: Span | None) -> str:
        """A call logging one access (or barrier) as a new site."""
        name = self.roots.get(array.name, array.name) if array is not None else None
        space = {"__global": "global", "__local": "local"}.get(self.spaces.get(name, "")) \
            if name else None
        index_text = c_expr(index) if index is not None else None
        site = Site(len(self.sites), self.kernel_name, kind, name, space,
                    array.type.elem if array is not None else None, index_text, span, index)
        self.sites.append(site)
        logged = index_text or "0"
        if name in self.per_item:  # a slice of a pool: log the position in the pool
            logged = f"get_local_id(0) * ({self.per_item[name]}) + {logged}"
        return f"fcl_record(fcl_log, &fcl_logged, fcl_tracing, fcl_trace_cap, {site.id}, {logged})"

    def _traced_load(self, e: ir.Index, text: str) -> str:
        name = self.roots.get(e.array.name, e.array.name)
        if self.spaces.get(name) not in ("__global", "__local"):
            return text  # private memory is registers: not part of the memory analysis
        return f"({self._record('load', e.array, e.index, self.span)}, {text})"

    def line(self, text: str, indent: int, span: Span | None) -> None:
        self.lines.append("    " * indent + text)
        if span is not None:
            self.table.append((self.line_offset + len(self.lines), span))

    def kernel(self, k: Kernel) -> None:
        self.kernel_name, self.span = k.name, k.span
        params = []
        for p in k.params:
            if isinstance(p.type, ir.ArrayType):
                self.spaces[p.name] = "__global"
                # A kernel never reads a buffer it writes (under any name): `restrict` lets the
                # compiler reorder and vectorize accesses. Not for local memory, which work-items
                # share through barriers.
                params.append(f"__global {MEMORY_TYPES[p.type.elem]}* restrict {p.name}")
            else:
                params.append(f"{C_TYPES[p.type]} {p.name}")
        for n, _ in enumerate(k.slots):
            # Typed by the widest element: NVIDIA places a `__local uchar*` argument without
            # the alignment an int or double needs, and such accesses fault.
            params.append(f"__local ulong* local_slot{n}")
        for local in k.locals:
            self.spaces[local.var.name] = "__local"
            if local.per_item:
                params.append(f"__local {MEMORY_TYPES[local.var.type.elem]}* {local.var.name}_pool")
        if k.fails:
            params.append(f"__global int* {FAIL_FLAG}")
        if k.abortable:
            params.append(f"__global volatile int* {ABORT_FLAG}")
        if self.trace:
            params.append(TRACE_PARAMS)
        self.line(f"__kernel void {k.name}({', '.join(params)}) {{", 0, k.span)
        if self.trace:
            # The work-item's linear id: tiled kernels run in 2-D work-groups.
            self.line("const int fcl_lane = get_local_id(1) * get_local_size(0) + get_local_id(0);",
                      1, None)
            self.line("int fcl_logged = 0;", 1, None)
            self.line("const int fcl_tracing = get_group_id(0) == fcl_trace_group;", 1, None)
            self.line("__global int* fcl_log = fcl_trace + fcl_lane * 2 * fcl_trace_cap;", 1, None)
        if k.abortable:
            self.line("__local int fcl_stop;", 1, None)
        for n, slot in enumerate(k.slots):
            for local in slot:
                elem = MEMORY_TYPES[local.var.type.elem]
                self.line(f"__local {elem}* {local.var.name} = (__local {elem}*)local_slot{n};", 1,
                          local.span)
        for local in k.locals:
            if local.per_item:
                elem = MEMORY_TYPES[local.var.type.elem]
                size = self.expr(local.size)
                self.per_item[local.var.name] = size
                self.line(f"__local {elem}* {local.var.name} = {local.var.name}_pool + "
                          f"get_local_id(0) * ({size});", 1, local.span)
        for var, size in k.private:
            self.spaces[var.name] = ""
            self.line(f"{MEMORY_TYPES[var.type.elem]} {var.name}[{size}];", 1, None)
        self.fails = k.fails
        self.wide = _wide_definitions(k.body)
        self.ranges = _ranges(k)
        self.block(k.body, 1)
        if self.trace:
            self.line("if (fcl_tracing) fcl_trace_count[fcl_lane] = fcl_logged;", 1, None)
        self.line("}", 0, None)

    def block(self, stmts: list[ir.Stmt], indent: int) -> None:
        for s in stmts:
            self.stmt(s, indent)

    def loop_body(self, body: list[ir.Stmt], indent: int) -> None:
        """A loop's body: inside one work-item if it has no barrier."""
        private = not any(isinstance(s, ir.Barrier) for s in ir.walk(body))
        self.loops += private
        self.block(body, indent)
        self.loops -= private

    def stmt(self, s: ir.Stmt, indent: int) -> None:
        span = s.span
        if span is not None:
            self.span = span  # loads are attributed to the statement they are part of
        if isinstance(s, ir.Declare):
            if isinstance(s.var.type, ir.ArrayType):
                if isinstance(s.init, ir.Var):
                    self.roots[s.var.name] = self.roots.get(s.init.name, s.init.name)
                space = self.spaces.get(s.init.name, "") if isinstance(s.init, ir.Var) else ""
                self.spaces[s.var.name] = space
                prefix = f"{space} " if space else ""
                self.line(f"{prefix}{MEMORY_TYPES[s.var.type.elem]}* {s.var.name} = "
                          f"{self.expr(s.init)};", indent, span)
            else:
                self.line(f"{C_TYPES[s.var.type]} {s.var.name} = {self.expr(s.init)};", indent, span)
        elif isinstance(s, ir.Assign):
            self.line(f"{s.var.name} = {self.expr(s.value)};", indent, span)
        elif isinstance(s, ir.Store):
            value = self.expr(s.value)
            if s.array.type.elem == ir.BOOL:
                value = f"(uchar){value}"
            self.line(f"{s.array.name}[{self.subscript(s.index)}] = {value};", indent, span)
            name = self.roots.get(s.array.name, s.array.name)
            if self.trace and self.spaces.get(name) in ("__global", "__local"):
                self.line(self._record("store", s.array, s.index, span) + ";", indent, None)
        elif isinstance(s, StridedFor):
            v = s.var.name
            self.line(f"for (int {v} = {self.expr(s.start)}; {v} < {self.expr(s.bound)}; "
                      f"{v} += {self.expr(s.step)}) {{", indent, span)
            self.loop_body(s.body, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.SeqFor):
            v = s.var.name
            self.line(f"for (int {v} = 0; {v} < {self.expr(s.bound)}; {v}++) {{", indent, span)
            self.loop_body(s.body, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.While):
            self.line("while (1) {", indent, span)
            private = s.level != "block" and \
                not any(isinstance(t, ir.Barrier) for t in ir.walk(s.test + s.body))
            self.loops += private
            self.block(s.test, indent + 1)
            if s.level == "block":
                # The whole group must agree to stop, or some would wait at a barrier forever.
                self.line("barrier(CLK_LOCAL_MEM_FENCE);", indent + 1, None)
                self.line(f"if (get_local_id(0) == 0) fcl_stop = *{ABORT_FLAG};", indent + 1, None)
                self.line("barrier(CLK_LOCAL_MEM_FENCE);", indent + 1, None)
                self.line(f"if (fcl_stop || !{self.expr(s.cond)}) break;", indent + 1, span)
            else:
                self.line(f"if (*{ABORT_FLAG} || !{self.expr(s.cond)}) break;", indent + 1, span)
            self.block(s.body, indent + 1)
            self.loops -= private
            self.line("}", indent, None)
        elif isinstance(s, ir.If):
            self.line(f"if ({self.expr(s.cond)}) {{", indent, span)
            self.block(s.then, indent + 1)
            if s.else_:
                self.line("} else {", indent, None)
                self.block(s.else_, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.Barrier):
            if self.trace:
                self.line(self._record("barrier", None, None, span) + ";", indent, None)
            self.line("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);", indent, span)
        elif isinstance(s, ir.Fail):
            code = self.fails.index(s) + 1
            self.line(f"if ({self.expr(s.cond)}) atomic_cmpxchg({FAIL_FLAG}, 0, {code});", indent,
                      span)
        elif isinstance(s, ir.Alloc):
            # The memory itself is a kernel argument, sized by the host before the launch.
            self.line(f"/* {s.var.name}: {self.expr(s.size)} x {MEMORY_TYPES[s.var.type.elem]} "
                      f"in local memory */", indent, span)
        else:
            raise TypeError(s)


def opencl_source(kernels: list[Kernel]) -> tuple[str, list[tuple[int, Span]]]:
    """The OpenCL C of all kernels, and (line number, FCL span) pairs for its lines."""
    printer = KernelPrinter(0)
    for k in kernels:
        printer.kernel(k)
        printer.line("", 0, None)
    text = "\n".join(printer.lines)
    if "double" not in text:
        return text, printer.table
    header = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n\n"
    return header + text, [(line + 2, span) for line, span in printer.table]


def traced_source(kernels: list[Kernel]) -> tuple[str, list[Site]]:
    """The kernels instrumented to log their memory accesses (see the module docstring)."""
    printer = KernelPrinter(0, trace=True)
    for k in kernels:
        printer.spaces, printer.roots, printer.per_item = {}, {}, {}
        printer.kernel(k)
        printer.line("", 0, None)
    text = TRACE_RECORDER + "\n" + "\n".join(printer.lines)
    if "double" in text:
        text = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n\n" + text
    return text, printer.sites
