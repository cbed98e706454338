"""Print shaped kernels as readable OpenCL C, with a table from generated lines to FCL spans.

A printer only: every decision (work-group shape, local memory, size_t indices, check codes)
was recorded on the kernel by `shape`. Only the C spelling of int arithmetic is chosen here, so
that it wraps around as FCL's does (see WRAPPING).

With `trace=True` every global and local memory access, every barrier and every branch taken
(the then- or else-side of an `if`, an iteration of a loop's body) also records (site, index)
in a per-work-item log, for one chosen work-group: the access analysis (fcl.analysis) reads it
back. The traced source is a separate program; the normal one is untouched.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fcl.codegen.blocking import RegisterBlocked, blocked_lines
from fcl.codegen.kernel import (
    LOCAL_IDS,
    FailFlag,
    Kernel,
    Special,
    StridedFor,
    WideInt,
    stops_group,
)
from fcl.codegen.widen import is_ring, kernel_ranges, plain
from fcl.errors import Span
from fcl.il import ir
from fcl.il.dispatch import StmtVisitor
from fcl.il.loaded import LoadedValues
from fcl.il.ranges import INT_MAX, INT_MIN, Ranges, interval, memoized, remember
from fcl.il.traverse import map_exprs, stmt_exprs, sub_exprs

C_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.FLOAT: "float", ir.BOOL: "int"}
# Bools are stored in memory as one byte; kernel arguments cannot be bool at all.
MEMORY_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.FLOAT: "float", ir.BOOL: "uchar"}
SPECIALS = {"local_id": "get_local_id(0)", "local_size": "get_local_size(0)",
            "local_x": "get_local_id(0)", "local_y": "get_local_id(1)",
            "group_id": "get_group_id(0)", "num_groups": "get_num_groups(0)",
            "global_id": "get_global_id(0)", "global_size": "get_global_size(0)"}
FAIL_FLAG = "fcl_fail"
# A work-group's record starts with two stop flags, for even and odd rounds, and the failed
# check's code.
FAIL_SLOTS = 3
ABORT_FLAG = "fcl_abort"
TRACE_PARAMS = "__global int* fcl_trace, __global int* fcl_trace_count, int fcl_trace_group, " \
    "int fcl_trace_cap"
# No fused multiply-adds: `a * b + c` rounds twice, as in the interpreter (and numpy), so both
# back ends give the same doubles and floats to the last bit.
NO_FMA = "#pragma OPENCL FP_CONTRACT OFF\n"
FP64 = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + NO_FMA
# A kernel's failure record: word 0 says whether any check failed; then, for each work-group,
# whether it failed in an even or odd round (see KernelPrinter.group_stop), the failed check's
# code and its values.
# Each of the last two kinds of slot holds a (work-item, value) pair kept by atomic minimum: a
# work-group's record ends up holding all the values of its lowest-numbered failing work-item,
# whatever order they ran in, and the host reports the lowest failing work-group's
# (docs/language.md, "Run-time checks").
FAIL_REPORTER = """\
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
void fcl_report(__global ulong* record, int slot, int item, int value) {
    atom_min(&record[slot], ((ulong)(uint)item << 32) | (uint)value);
}
"""


def fail_slots(kernel: Kernel) -> int:
    """The words of one work-group's failure record (see FAIL_REPORTER)."""
    return FAIL_SLOTS + max(len(check.values) for check in kernel.fails)


TRACE_RECORDER = """\
void fcl_record(__global int* log, int* count, int on, int cap, int site, int index) {
    if (on && *count < cap) { log[2 * *count] = site; log[2 * *count + 1] = index; }
    *count += on;
}
"""


@dataclass(frozen=True)
class Site:
    """A traced place in a kernel: a load, a store, a barrier or a branch taken."""

    id: int
    kernel: str
    kind: str          # "load", "store", "barrier" or "branch"
    array: str | None  # the buffer or local array (aliases resolved)
    space: str | None  # "global" or "local"
    elem: str | None   # the element type (ir.INT, ir.DOUBLE, ir.BOOL)
    index: str | None  # the index expression as OpenCL C
    span: Span | None
    index_expr: ir.Expr | None = field(default=None, compare=False)  # ... and as IL
    branch: str | None = None  # a branch's side: "then" or "else" of an if, or "loop" (body)
    condition: ir.Expr | None = field(default=None, compare=False)  # ... and what decides it
    atomic: bool = False  # a store combining with the element atomically (a histogram's)
    level: str | None = None  # a barrier's: "block", or "warp" (the end of a warp's exchange)
    # The operations on doubles and on floats of the code this branch runs (kind "ops": the
    # kernel's code outside every branch, which each work-item runs once), for the roofline.
    flops: int = 0
    float_flops: int = 0
    # A global access's: the global arrays whose loaded values it needs (its index, a store's
    # value, the branches it runs under), fcl.il.loaded.
    needs: frozenset[str] = frozenset()
    index_loaded: bool = False  # its index is computed from a loaded value

    @property
    def is_memory(self) -> bool:
        return self.kind in ("load", "store")


def operations(e: ir.Expr) -> dict[str, int]:
    """The arithmetic operations on doubles and on floats in e, by type (comparisons and
    conversions not counted)."""
    counts = dict.fromkeys(ir.FLOATING, 0)
    pending = [e]
    while pending:
        x = pending.pop()
        if isinstance(x, (ir.Bin, ir.Un)) and x.type in counts and x.op not in ir.CONVERSIONS:
            counts[x.type] += 1
        pending += sub_exprs(x)
    return counts


def c_expr(e: ir.Expr, on_index: Callable[[ir.Index, str], str] | None = None,
           subscript: bool = False, ranges: Ranges | None = None) -> str:
    """C text of `e`; `on_index` may rewrite each array read (given its plain text).
    `subscript`: e is only used as an array index; `ranges` bound variables (see WRAPPING)."""
    return _CExpr(on_index or (lambda _, text: text), ranges or {}).text(e, not subscript)


# ---- int arithmetic ------------------------------------------------------------------------------
# FCL's int + - * and negation wrap around (docs/language.md). In C a signed overflow is undefined,
# and compilers rely on it: `x + 1 > x` becomes 1, and even a stored `x + INT_MIN` may become
# `x | INT_MIN`. Such arithmetic is computed in uint, which wraps, unless the ranges of its
# operands show that it cannot overflow. Not in array subscripts: an index whose arithmetic
# overflows is out of bounds in all but contrived cases, and there plain int arithmetic leaves
# the C compiler free to widen and step indices (see widen).
WRAPPING = frozenset(("+", "-", "*"))
# Int operations whose result's bits depend only on their operands' bits (and choices between
# values): the operands of a subscript's arithmetic are subscript arithmetic too.
TRANSPARENT = WRAPPING | {"&", "|", "^", "<<"}
# Int operations C leaves undefined for some operands, as functions defined for all: INT_MIN / -1
# overflows (a trap on x86); OpenCL's abs(INT_MIN) is 2^31 as a uint, but PoCL takes the result
# to be non-negative. The kernels' source starts with those it calls.
INT_FUNCTIONS = {
    "fcl_div": "int fcl_div(int a, int b) { return b == -1 ? (int)(-(uint)a) : a / b; }",
    "fcl_mod": "int fcl_mod(int a, int b) { return b == -1 ? 0 : a % b; }",
    "fcl_abs": "int fcl_abs(int a) { return a < 0 ? (int)(-(uint)a) : a; }",
    # convert_int_sat, with NaN to 0 as the standard says and PoCL 3.0 does not (INT_MIN).
    "fcl_d2i": "int fcl_d2i(double x) { return isnan(x) ? 0 : convert_int_sat(x); }",
    "fcl_f2i": "int fcl_f2i(float x) { return isnan(x) ? 0 : convert_int_sat(x); }",
}
# Atomic minimum and maximum of doubles and floats, which OpenCL 1.2 lacks: compare-and-swap on
# the bits until the element holds the smaller (larger) of the two. A NaN is never stored, as
# fmin and fmax keep the other operand. Doubles need 64-bit atomics (an extension), floats the
# 32-bit ones of OpenCL 1.1.
_FLOAT_ATOMIC = """\
void fcl_atomic_{name}_{elem}{suffix}(volatile {space} {elem}* p, {elem} v) {{
    union {{ {elem} d; {bits} u; }} seen, next;
    seen.u = {add}((volatile {space} {bits}*)p, 0);  /* an atomic read */
    next.d = v;
    while ({better}) {{
        {bits} found = {cmpxchg}((volatile {space} {bits}*)p, seen.u, next.u);
        if (found == seen.u) break;
        seen.u = found;
    }}
}}"""
_ATOMIC_KINDS = {  # element: (its bits, atomic add, atomic compare-and-swap, what it needs)
    "double": ("ulong", "atom_add", "atom_cmpxchg",
               "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n"),
    "float": ("uint", "atomic_add", "atomic_cmpxchg", ""),
}
ATOMIC_FUNCTIONS = {
    f"fcl_atomic_{name}_{elem}{suffix}":
        needs + _FLOAT_ATOMIC.format(name=name, elem=elem, bits=bits, add=add, cmpxchg=cmpxchg,
                                     better=better, suffix=suffix, space=space)
    for elem, (bits, add, cmpxchg, needs) in _ATOMIC_KINDS.items()
    for name, better in (("min", "v < seen.d || (isnan(seen.d) && !isnan(v))"),
                         ("max", "v > seen.d || (isnan(seen.d) && !isnan(v))"))
    for suffix, space in (("", "__global"), ("_local", "__local"))}


def _transparent(e: ir.Expr) -> bool:
    if isinstance(e, ir.Bin):
        return e.type == ir.INT and e.op in TRANSPARENT
    return isinstance(e, (ir.Un, ir.Select)) and e.type == ir.INT and \
        (isinstance(e, ir.Select) or e.op == "neg")


def index_variables(body: list[ir.Stmt]) -> set[str]:
    """The int variables of a kernel used only in array subscripts (see WRAPPING): their
    definitions need not wrap."""
    found: set[str] = set()  # those used elsewhere

    def visit(e: ir.Expr, wrap: bool) -> None:
        if isinstance(e, ir.Var):
            if wrap and e.type == ir.INT:
                found.add(e.name)
        elif isinstance(e, ir.Index):
            visit(e.index, False)
        elif isinstance(e, WideInt):
            visit(e.wide, False)  # computed in size_t, which wraps
        else:
            for part in sub_exprs(e):
                visit(part, wrap or not _transparent(e))

    # Last statement first: a variable's uses come after its definition, so a chain of n lets
    # settles in one pass rather than n.
    stmts = list(ir.walk(body))[::-1]
    while True:
        known = len(found)
        for s in stmts:
            if isinstance(s, (ir.Declare, ir.Assign)):
                visit(s.init if isinstance(s, ir.Declare) else s.value, s.var.name in found)
            elif isinstance(s, ir.Store):
                visit(s.index, False)
                visit(s.value, True)
            else:
                for e in stmt_exprs(s):
                    visit(e, True)
        if len(found) == known:
            break
    return {s.var.name for s in ir.walk(body) if isinstance(s, (ir.Declare, ir.Assign))
            and s.var.type == ir.INT and s.var.name not in found}


@dataclass
class _CExpr:
    on_index: Callable[[ir.Index, str], str]
    ranges: Ranges

    def text(self, e: ir.Expr, wrap: bool) -> str:
        """`wrap`: int arithmetic must wrap around (not a subscript, see WRAPPING)."""
        if wrap and self._may_overflow(e):
            return f"((int){self._unsigned(e)})"
        return self._plain(e, wrap)

    def _may_overflow(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Bin) and e.op in WRAPPING and e.type == ir.INT:
            return interval(e, self.ranges) is None
        return isinstance(e, ir.Un) and e.op == "neg" and e.type == ir.INT and \
            self._may_be_int_min(e.arg)

    def _unsigned(self, e: ir.Expr) -> str:
        """e in uint: wrapping arithmetic over its operands' bits."""
        if isinstance(e, ir.Bin) and e.op in WRAPPING and e.type == ir.INT:
            return f"({self._unsigned(e.left)} {e.op} {self._unsigned(e.right)})"
        if isinstance(e, ir.Un) and e.op == "neg" and e.type == ir.INT:
            return f"(-{self._unsigned(e.arg)})"
        if isinstance(e, ir.Const):
            return f"{int(e.value) % 2**32}u"
        return f"(uint){self._plain(e, True)}"

    def _plain(self, e: ir.Expr, wrap: bool) -> str:
        def sub(part: ir.Expr) -> str:
            return self.text(part, wrap or not _transparent(e))

        if isinstance(e, ir.Const):
            if e.type == ir.BOOL:
                return "1" if e.value else "0"
            if e.type in ir.FLOATING:
                text = repr(float(e.value)) if e.type == ir.DOUBLE else ir.float_text(e.value)
                if text in ("inf", "-inf", "nan"):
                    return {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}[text]
                text = text if any(c in text for c in ".e") else text + ".0"
                return text if e.type == ir.DOUBLE else text + "f"
            value = int(e.value)
            if value == INT_MIN:
                return "(-2147483647 - 1)"
            return str(value) if value >= 0 else f"({value})"
        if isinstance(e, ir.Var):
            return e.name
        if isinstance(e, Special):
            return f"((int){SPECIALS[e.name]})"
        if isinstance(e, ir.Index):
            return self.on_index(e, f"{e.array.name}[{self.text(e.index, False)}]")
        if isinstance(e, WideInt):
            wide = self._wide(e.wide)
            return f"((int){wide})" if e.truncate else wide
        if isinstance(e, ir.Bin):
            left, right = sub(e.left), sub(e.right)
            if e.op in ("min", "max"):
                fn = ("f" + e.op) if e.type in ir.FLOATING else e.op
                return f"{fn}({left}, {right})"
            if e.op in ("/", "%") and e.type == ir.INT and self._may_trap(e):
                return f"fcl_{'div' if e.op == '/' else 'mod'}({left}, {right})"
            return f"({left} {e.op} {right})"
        if isinstance(e, ir.Un):
            arg = sub(e.arg)
            if e.op == "abs" and e.type == ir.INT and self._may_be_int_min(e.arg):
                return f"fcl_abs({arg})"
            return {
                "neg": f"(-{arg})", "not": f"(!{arg})",
                "abs": f"fabs({arg})" if e.type in ir.FLOATING else f"((int)abs({arg}))",
                "sign": f"(({arg} > 0) - ({arg} < 0))", "clz": f"clz({arg})",
                "i2d": f"((double){arg})", "d2i": f"fcl_d2i({arg})", "b2i": f"((int){arg})",
                "i2f": f"((float){arg})", "f2i": f"fcl_f2i({arg})", "d2f": f"((float){arg})",
                "f2d": f"((double){arg})",
                "sqrt": f"sqrt({arg})",
            }[e.op]
        if isinstance(e, ir.Select):
            return f"({sub(e.cond)} ? {sub(e.then)} : {sub(e.else_)})"
        raise TypeError(e)

    def _bounds(self, e: ir.Expr) -> tuple[int, int]:
        return interval(e, self.ranges) or (INT_MIN, INT_MAX)

    def _may_be_int_min(self, e: ir.Expr) -> bool:
        return self._bounds(e)[0] == INT_MIN

    def _may_trap(self, e: ir.Bin) -> bool:
        """Whether an int division might be INT_MIN / -1."""
        low, high = self._bounds(e.right)
        return low <= -1 <= high and self._may_be_int_min(e.left)

    def _wide(self, e: ir.Expr) -> str:
        """The size_t part of a WideInt: local ids as size_t, ring operations over them."""
        if isinstance(e, Special) and e.name in LOCAL_IDS:
            return SPECIALS[e.name]
        if isinstance(e, ir.Bin) and is_ring(e):
            return f"({self._wide(e.left)} {e.op} {self._wide(e.right)})"
        return self.text(e, False)


class KernelPrinter(StmtVisitor):
    def __init__(self, line_offset: int, trace: bool = False):
        self.lines: list[str] = []
        self.table: list[tuple[int, Span]] = []
        self.line_offset = line_offset
        self.spaces: dict[str, str] = {}
        self.trace = trace
        self.sites: list[Site] = []
        self.labels: dict[str, str] = {}       # array parameters -> the program's names
        self.region: int | None = None         # the site whose code is being printed ...
        self.flops: dict[int, int] = {}        # ... and each site's operations on doubles
        self.float_flops: dict[int, int] = {}  # ... and on floats
        self.roots: dict[str, str] = {}        # array aliases -> the memory they point into
        self.per_item: dict[str, str] = {}     # per-work-item local slices -> their size
        self.ranges: Ranges = {}               # bounds on the kernel's int variables
        self.indices: set[str] = set()         # its int variables only used as indices
        self.loaded = LoadedValues([], set())  # when tracing: what each value was loaded from
        self.control: frozenset[str] = frozenset()  # ... and the branches around the code

    def expr(self, e: ir.Expr, subscript: bool = False) -> str:
        if self.trace and self.region is not None:
            counts = operations(e)
            self.flops[self.region] = self.flops.get(self.region, 0) + counts[ir.DOUBLE]
            self.float_flops[self.region] = self.float_flops.get(self.region, 0) + \
                counts[ir.FLOAT]
        return c_expr(e, self._traced_load if self.trace else None, subscript, self.ranges)

    def _record(self, kind: str, array: ir.Var | None, index: ir.Expr | None,
                span: Span | None, atomic: bool = False, level: str | None = None,
                value: ir.Expr | None = None) -> str:
        """A call logging one access (or barrier) as a new site."""
        name = self.roots.get(array.name, array.name) if array is not None else None
        space = {"__global": "global", "__local": "local"}.get(self.spaces.get(name, "")) \
            if name else None
        index_needs = self.loaded.expr(index) if index is not None else frozenset()
        needs = self.control | index_needs
        if value is not None:
            needs |= self.loaded.expr(value)
        index = plain(index) if index is not None else None  # as the program computes it
        index_text = c_expr(index, subscript=True) if index is not None else None
        site = Site(len(self.sites), self.kernel_name, kind, name, space,
                    ir.elem_of(array) if array is not None else None, index_text, span, index,
                    atomic=atomic, level=level, needs=needs, index_loaded=bool(index_needs))
        self.sites.append(site)
        logged = index_text or "0"
        if name in self.per_item:  # a slice of a pool: log the position in the pool
            logged = f"get_local_id(0) * ({self.per_item[name]}) + {logged}"
        return f"fcl_record(fcl_log, &fcl_logged, fcl_tracing, fcl_trace_cap, {site.id}, {logged})"

    def _record_branch(self, branch: str, condition: ir.Expr, span: Span | None,
                       indent: int) -> None:
        """When tracing, a line logging that a work-item took this side of a branch."""
        if not self.trace:
            return
        site = Site(len(self.sites), self.kernel_name, "branch", None, None, None, None, span,
                    branch=branch, condition=plain(condition))
        self.sites.append(site)
        self.region = site.id  # until the branch's block ends (see `branch_block`)
        self.line(f"fcl_record(fcl_log, &fcl_logged, fcl_tracing, fcl_trace_cap, {site.id}, 0);",
                  indent, None)

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
        with memoized():
            self._kernel(k)

    def _kernel(self, k: Kernel) -> None:
        self.kernel_name, self.span, self.serial = k.name, k.span, k.serial
        if self.trace:  # the kernel's code outside its branches: never logged, run once
            self.region = len(self.sites)
            self.sites.append(Site(self.region, k.name, "ops", None, None, None, None, k.span))
        # A failed check stops its work-group after the round it failed in. Without barriers,
        # its work-item simply returns: every other work-item of the group runs on its own.
        self.group_stop = stops_group(k)
        self.ranges = kernel_ranges(replace(k, body=map_exprs(k.body, plain)))
        remember(self.ranges)  # the C of each operation asks for its operands' bounds
        self.indices = index_variables(k.body)
        params = []
        for p in k.params:
            if isinstance(p.type, ir.ArrayType):
                self.spaces[p.name] = "__global"
                # A kernel never reads a buffer it writes (under any name): `restrict` lets the
                # compiler reorder and vectorize accesses. Not for local memory, which work-items
                # share through barriers.
                named = f" /* {self.labels[p.name]} */" if p.name in self.labels else ""
                params.append(f"__global {MEMORY_TYPES[p.type.elem]}* restrict {p.name}{named}")
            else:
                params.append(f"{C_TYPES[p.type]} {p.name}")
        params += [f"int {var.name}" for var, _ in k.constants]
        for n, _ in enumerate(k.slots):
            # Typed by the widest element: NVIDIA places a `__local uchar*` argument without
            # the alignment an int or double needs, and such accesses fault.
            params.append(f"__local ulong* local_slot{n}")
        for local in k.locals:
            self.spaces[local.var.name] = "__local"
            if local.per_item:
                elem = MEMORY_TYPES[ir.elem_of(local.var)]
                params.append(f"__local {elem}* {local.var.name}_pool")
        if k.fails:
            params.append(f"__global ulong* {FAIL_FLAG}")
        if k.abortable:
            params.append(f"__global volatile int* {ABORT_FLAG}")
        if self.trace:
            params.append(TRACE_PARAMS)
        self.line(f"__kernel void {k.name}({', '.join(params)}) {{", 0, k.span)
        for note in k.notes:
            self.line(f"/* {note} */", 1, None)
        if self.trace:
            # The work-item's linear id: tiled kernels run in 2-D work-groups.
            self.line("const int fcl_lane = get_local_id(1) * get_local_size(0) + get_local_id(0);",
                      1, None)
            self.line("int fcl_logged = 0;", 1, None)
            self.line("const int fcl_tracing = get_group_id(0) == fcl_trace_group;", 1, None)
            self.line("__global int* fcl_log = fcl_trace + fcl_lane * 2 * fcl_trace_cap;", 1, None)
        if k.abortable:
            self.line("__local int fcl_stop;", 1, None)
        if self.group_stop:  # elsewhere a failed check returns
            self.line("int fcl_failed = 0;  /* a work-item reports its first failure only */", 1,
                      None)
        if k.fails:
            self.line(f"__global ulong* fcl_group_record = {FAIL_FLAG} + 1 + (get_group_id(1) * "
                      f"get_num_groups(0) + get_group_id(0)) * {fail_slots(k)};", 1, None)
        if self.group_stop:
            self.line("int fcl_round = 0;", 1, None)
        for n, slot in enumerate(k.slots):
            for local in slot:
                elem = MEMORY_TYPES[ir.elem_of(local.var)]
                self.line(f"__local {elem}* {local.var.name} = (__local {elem}*)local_slot{n};", 1,
                          local.span)
        for local in k.locals:
            if local.per_item:
                elem = MEMORY_TYPES[ir.elem_of(local.var)]
                size = self.expr(local.size)
                self.per_item[local.var.name] = size
                self.line(f"__local {elem}* {local.var.name} = {local.var.name}_pool + "
                          f"get_local_id(0) * ({size});", 1, local.span)
        for var, length in k.private:
            self.spaces[var.name] = ""
            self.line(f"{MEMORY_TYPES[ir.elem_of(var)]} {var.name}[{length}];", 1, None)
        if self.trace:
            self.loaded = LoadedValues(k.body, {name for name, space in self.spaces.items()
                                                if space == "__global"})
            self.control = frozenset()
        self.block(k.body, 1)
        if self.trace:
            self.line("if (fcl_tracing) fcl_trace_count[fcl_lane] = fcl_logged;", 1, None)
        self.line("}", 0, None)

    def block(self, stmts: list[ir.Stmt], indent: int) -> None:
        for s in stmts:
            self.stmt(s, indent)

    def branch_block(self, branch: str, condition: ir.Expr, span: Span | None,
                     stmts: list[ir.Stmt], indent: int) -> None:
        """A branch's code, logged as taken (when tracing), its operations counted to it."""
        outer, outer_control = self.region, self.control
        self._record_branch(branch, condition, span, indent)
        if self.trace:
            self.control = outer_control | self.loaded.expr(condition)
        self.block(stmts, indent)
        self.region, self.control = outer, outer_control

    def stmt(self, s: ir.Stmt, indent: int) -> None:
        if s.span is not None:
            self.span = s.span  # loads are attributed to the statement they are part of
        self.visit(s, indent)

    def visit_Declare(self, s: ir.Declare, indent: int) -> None:
        if isinstance(s.var.type, ir.ArrayType):
            if isinstance(s.init, ir.Var):
                self.roots[s.var.name] = self.roots.get(s.init.name, s.init.name)
            space = self.spaces.get(s.init.name, "") if isinstance(s.init, ir.Var) else ""
            self.spaces[s.var.name] = space
            prefix = f"{space} " if space else ""
            self.line(f"{prefix}{MEMORY_TYPES[s.var.type.elem]}* {s.var.name} = "
                      f"{self.expr(s.init)};", indent, s.span)
        else:
            init = self.expr(s.init, s.var.name in self.indices)
            self.line(f"{C_TYPES[s.var.type]} {s.var.name} = {init};", indent, s.span)

    def visit_Assign(self, s: ir.Assign, indent: int) -> None:
        self.line(f"{s.var.name} = {self.expr(s.value, s.var.name in self.indices)};",
                  indent, s.span)

    def visit_Store(self, s: ir.Store, indent: int) -> None:
        value = self.expr(s.value)
        if ir.elem_of(s.array) == ir.BOOL:
            value = f"(uchar){value}"
        if s.combine is not None:  # OpenCL 1.1's atomics on ints, ours on doubles and floats
            local = "_local" if self.spaces.get(s.array.name) == "__local" else ""
            elem = ir.elem_of(s.array)
            function = f"fcl_atomic_{s.combine}_{elem}{local}" if elem in ir.FLOATING \
                else f"atomic_{s.combine}"
            self.line(f"{function}(&{s.array.name}[{self.expr(s.index, True)}], {value});",
                      indent, s.span)
        else:
            self.line(f"{s.array.name}[{self.expr(s.index, True)}] = {value};", indent, s.span)
        name = self.roots.get(s.array.name, s.array.name)
        if self.trace and self.spaces.get(name) in ("__global", "__local"):
            self.line(self._record("store", s.array, s.index, s.span, s.combine is not None,
                                   value=s.value) + ";", indent, None)

    def visit_StridedFor(self, s: StridedFor, indent: int) -> None:
        v = s.var.name
        if s.once:
            self.line(f"int {v} = {self.expr(s.start)};", indent, s.span)
            self.line(f"if ({v} < {self.expr(s.bound)}) {{", indent, s.span)
        else:
            self.line(f"for (int {v} = {self.expr(s.start)}; {v} < {self.expr(s.bound)}; "
                      f"{v} += {self.expr(s.step)}) {{", indent, s.span)
        self.branch_block("then" if s.once else "loop", ir.Bin("<", s.var, s.bound, ir.BOOL),
                          s.span, s.body, indent + 1)
        self.line("}", indent, None)

    def visit_RegisterBlocked(self, s: RegisterBlocked, indent: int) -> None:
        if self.trace:  # the cost model counts the program's loads: the nest as it was
            return self.block(s.body, indent)
        lines = blocked_lines(s, self.expr)
        for n, (depth, text) in enumerate(lines):
            self.line(text, indent + depth, s.span if n == 0 else None)

    def visit_SeqFor(self, s: ir.SeqFor, indent: int) -> None:
        v = s.var.name
        self.line(f"for (int {v} = 0; {v} < {self.expr(s.bound)}; {v}++) {{", indent, s.span)
        self.branch_block("loop", ir.Bin("<", s.var, s.bound, ir.BOOL), s.span, s.body,
                          indent + 1)
        self.line("}", indent, None)

    def visit_While(self, s: ir.While, indent: int) -> None:
        self.line("while (1) {", indent, s.span)
        self.block(s.test, indent + 1)
        if s.level == "block" and not self.serial:
            # The whole group must agree to stop, or some would wait at a barrier forever.
            self.line("barrier(CLK_LOCAL_MEM_FENCE);", indent + 1, None)
            self.line(f"if (get_local_id(0) == 0) fcl_stop = *{ABORT_FLAG};", indent + 1, None)
            self.line("barrier(CLK_LOCAL_MEM_FENCE);", indent + 1, None)
            self.line(f"if (fcl_stop || !{self.expr(s.cond)}) break;", indent + 1, s.span)
        else:
            self.line(f"if (*{ABORT_FLAG} || !{self.expr(s.cond)}) break;", indent + 1, s.span)
        self.branch_block("loop", s.cond, s.span, s.body, indent + 1)
        self.line("}", indent, None)

    def visit_If(self, s: ir.If, indent: int) -> None:
        self.line(f"if ({self.expr(s.cond)}) {{", indent, s.span)
        self.branch_block("then", s.cond, s.span, s.then, indent + 1)
        if s.else_:
            self.line("} else {", indent, None)
            self.branch_block("else", s.cond, s.span, s.else_, indent + 1)
        self.line("}", indent, None)

    def visit_Barrier(self, s: ir.Barrier, indent: int) -> None:
        if self.trace:
            self.line(self._record("barrier", None, None, s.span, level=s.level) + ";", indent,
                      None)
        self.line("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);", indent, s.span)
        if self.group_stop:
            # The group stops, all of it, once its round has failed. A round's failures mark
            # the flag of its parity: one failing in the next round, while a slower work-item
            # has yet to look, marks the other (and no read races with it).
            self.line("if (fcl_group_record[fcl_round & 1] == 0) return;", indent, None)
            self.line("fcl_round++;", indent, None)

    def visit_FailFlag(self, s: FailFlag, indent: int) -> None:
        if self.group_stop:
            self.line(f"if (!fcl_failed && ({self.expr(s.cond)})) {{", indent, s.span)
            self.line("fcl_failed = 1;", indent + 1, None)
        else:
            self.line(f"if ({self.expr(s.cond)}) {{", indent, s.span)
        self.line(f"atom_min(&{FAIL_FLAG}[0], 0);", indent + 1, None)
        item = self.expr(s.item)
        for slot, reported in enumerate([ir.Const(s.code, ir.INT), *s.values]):
            self.line(f"fcl_report(fcl_group_record, {FAIL_SLOTS - 1 + slot}, {item}, "
                      f"{self.expr(reported)});", indent + 1, None)
        if self.group_stop:
            self.line("atom_min(&fcl_group_record[fcl_round & 1], 0);", indent + 1, None)
        else:
            self.line("return;", indent + 1, None)
        self.line("}", indent, None)

    def visit_Alloc(self, s: ir.Alloc, indent: int) -> None:
        # The memory itself is a kernel argument, sized by the host before the launch.
        self.line(f"/* {s.var.name}: {self.expr(s.size)} x {MEMORY_TYPES[ir.elem_of(s.var)]} "
                  f"in local memory */", indent, s.span)


def opencl_source(kernels: list[Kernel], labels: dict[str, str] | None = None
                  ) -> tuple[str, list[tuple[int, Span]]]:
    """The OpenCL C of all kernels, and (line number, FCL span) pairs for its lines; an array
    parameter the program names (`labels`, fcl.codegen.kernel.array_labels) says so."""
    printer = KernelPrinter(0)
    printer.labels = labels or {}
    for k in kernels:
        printer.kernel(k)
        printer.line("", 0, None)
    text = "\n".join(printer.lines)
    header = _header(text, kernels)
    shift = header.count("\n")
    return header + text, [(line + shift, span) for line, span in printer.table]


def _header(text: str, kernels: list[Kernel]) -> str:
    """What the kernels' source needs before them: doubles, int functions, the failure
    reporter."""
    functions = "".join(f"{code}\n" for name, code in {**INT_FUNCTIONS, **ATOMIC_FUNCTIONS}.items()
                        if f"{name}(" in text)
    doubles = FP64 if "double" in text + functions else ""  # fcl_d2i takes a double
    floats = NO_FMA if not doubles and "float" in text else ""
    return doubles + floats + (functions + "\n" if functions else "") + \
        (FAIL_REPORTER + "\n" if any(k.fails for k in kernels) else "")


def traced_source(kernels: list[Kernel]) -> tuple[str, list[Site]]:
    """The kernels instrumented to log their memory accesses and branches (see the module
    docstring)."""
    printer = KernelPrinter(0, trace=True)
    for k in kernels:
        printer.spaces, printer.roots, printer.per_item = {}, {}, {}
        printer.kernel(k)
        printer.line("", 0, None)
    text = TRACE_RECORDER + "\n" + "\n".join(printer.lines)
    return _header(text, kernels) + text, [
        replace(s, flops=printer.flops.get(s.id, 0), float_flops=printer.float_flops.get(s.id, 0))
        for s in printer.sites]
