"""The back end's representation of a program: host statements that launch kernels.

Plain data, written by `kernelize` (which cuts kernels out of the IL), completed by `shape`
(which records every decision about work-groups, memory and index arithmetic on the kernel and
in its statements) and printed by `emit`. The runtime (`host`) runs a `Compiled` program.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fcl.errors import Span
from fcl.il import ir
from fcl.il.traverse import map_bodies, map_children, stmt_exprs, sub_exprs

MAX_GROUPS = 65536  # a grid loop with more iterations than this is virtualized: groups loop


@dataclass(frozen=True, eq=False)
class Special(ir.Expr):
    """A work-item builtin: local_id, local_x, local_y, local_size, group_id, num_groups,
    global_id, global_size."""

    name: str
    type: str = ir.INT

    def show_il(self) -> str:
        return f"<{self.name}>"

    def key_il(self) -> str:
        return f"<{self.name}>"  # the variable inline_ints makes of it: the same key


LOCAL_IDS = frozenset(("local_id", "local_x", "local_y"))


@dataclass(frozen=True, eq=False)
class WideInt(ir.Expr):
    """`expr`, an int expression over local ids, computed in size_t as `wide` says (where
    definitions of int variables are expanded); cast back to int when `truncate`, kept in
    size_t as an array subscript that provably fits. See shape.widen for why."""

    expr: ir.Expr
    wide: ir.Expr
    truncate: bool
    type: str = ir.INT

    def show_il(self) -> str:
        return ir.show_expr(self.expr)

    def key_il(self) -> str:
        return ir.expr_key(self.expr)  # the int it computes


@dataclass(eq=False)
class StridedFor(ir.Stmt):
    """for (var = start; var < bound; var += step) body; with `once`, the launch gives each
    iteration a work-item of its own, and it is printed as var = start; if (var < bound) body."""

    var: ir.Var
    start: ir.Expr
    bound: ir.Expr
    step: ir.Expr
    body: list[ir.Stmt]
    once: bool = False

    def show_il(self, indent: int) -> str:
        head = f"for ({self.var.name} = {ir.show_expr(self.start)}; {self.var.name} < " \
               f"{ir.show_expr(self.bound)}; {self.var.name} += {ir.show_expr(self.step)})"
        return ir.show_block(head + (" once" if self.once else ""), self.body, indent)


@dataclass(eq=False)
class SerialFor(ir.SeqFor):
    """A block-level parallel loop in a serial kernel: the work-group's only work-item runs its
    iterations in order, and no barrier follows (see kernelize)."""


@dataclass(eq=False)
class FailFlag(ir.Stmt):
    """Inside a kernel: when `cond` holds, record failure `code` (1 + the position of its check
    in Kernel.fails) and the values its message names, for the host to report after the
    launch. `item` is the failing work-item's index (its parallel loop's, not get_local_id):
    where several fail in a work-group's round, the lowest one's values are kept."""

    cond: ir.Expr
    code: int
    values: list[ir.Expr] = field(default_factory=list)
    item: ir.Expr = field(default_factory=lambda: ir.Const(0, ir.INT))

    def show_il(self, indent: int) -> str:
        values = "".join(f", {ir.show_expr(v)}" for v in self.values)
        return f"{'  ' * indent}fail{self.code}If({ir.show_expr(self.cond)}, item " \
               f"{ir.show_expr(self.item)}{values});"


@dataclass(eq=False)
class LocalArray:
    """An array in local memory: `per_item` means one slice of `size` elements per work-item."""

    var: ir.Var
    size: ir.Expr  # in elements, an expression over host values
    per_item: bool
    span: Span | None


@dataclass(frozen=True, eq=False)
class Kernel:
    """A kernel, never changed once made: each step of the back end (fcl.steps) that
    decides something about it makes a new one (dataclasses.replace)."""

    name: str
    body: list[ir.Stmt]
    params: list[ir.Var] = field(default_factory=list)  # host values, by value or __global
    # Compile-time ints passed as arguments after the params (see strides.py).
    constants: list[tuple[ir.Var, int]] = field(default_factory=list)
    locals: list[LocalArray] = field(default_factory=list)
    # Local arrays grouped into slots that share memory (per-work-item slices stay apart).
    slots: list[list[LocalArray]] = field(default_factory=list)
    private: list[tuple[ir.Var, int]] = field(default_factory=list)  # arrays in registers
    fails: list[ir.Fail] = field(default_factory=list)  # the checks, by FailFlag code - 1
    span: Span | None = None
    # For one-group-per-iteration kernels: local sizes may depend on the iteration; the host
    # sizes local memory for the largest.
    group_var: ir.Var | None = None
    group_bound: ir.Expr | None = None
    # A `while` may never end: such kernels watch a flag the host sets on an interrupt.
    abortable: bool = False
    # Work-items along dimension 0 of a 2-D work-group (None: 1-D), see shape.tiles.
    width: int | None = None
    block_size: int | None = None  # the work-group size, when known at compile time
    # Launched with work-groups of one work-item that runs the group's iterations in order (for
    # CPU devices, see kernelize).
    serial: bool = False
    # How its warps' code runs, and why (fcl.codegen.warps): comments at the kernel's start.
    notes: tuple[str, ...] = ()


@dataclass(eq=False)
class Launch(ir.Stmt):
    kernel: Kernel
    groups: ir.Expr  # number of work-groups (an expression over host values)

    def show_il(self, indent: int) -> str:
        return f"{'  ' * indent}launch {self.kernel.name}<<<{ir.show_expr(self.groups)}>>>;"


@dataclass
class Compiled:
    il: list[ir.Stmt]        # the host program before kernels were cut out
    host: list[ir.Stmt]      # ... and after: host statements with Launches
    kernels: list[Kernel]
    source: str              # the OpenCL C of the kernels
    line_table: list[tuple[int, Span]]  # (OpenCL line, the FCL span it came from)
    block_size: int | None = None  # the work-group size the kernels were shaped for, if any
    target: str = "gpu"  # the device kind the kernels were shaped for (see fcl.backend)
    portable: bool = False  # reshaped for the device it runs on
    reshaped: Compiled | None = field(default=None, repr=False)  # ... for the other kind, once
    home: str | None = None  # the source of the program's root (see kernelize's kernel names)
    plan_memory: bool = True  # whether the memory steps ran (fcl.memory)
    share_blocks: bool = True  # ... and the one giving arrays shared blocks
    layout: str = "auto"  # arrays of records' layout (fcl.memory.layouts)
    labels: dict[str, str] = field(default_factory=dict)  # array -> FCL name (array_labels)
    # The IL reshaped for a CPU device where it is not `il` (irregular rows not flattened).
    cpu_il: list[ir.Stmt] | None = field(default=None, repr=False)


def array_labels(stmts: list[ir.Stmt]) -> dict[str, str]:
    """The FCL name of each array (and entry point's argument) that the program `stmts` binds
    to a name (ir.Alloc.label, ir.Input.label), by its name in the kernels; an argument
    array's length is `length xs`, and memory the planner gave several arrays `(xs / ys)`."""
    found = {}
    for s in ir.walk(stmts):
        if isinstance(s, (ir.Alloc, ir.Input)) and s.label:
            # Memory that holds several of the program's arrays in turn: `(xs / ys)`.
            found[s.var.name] = f"({s.label})" if ir.LABEL_SEPARATOR in s.label else s.label
            if isinstance(s, ir.Input) and s.length is not None:
                found[s.length.name] = f"length {s.label}"
    return found


def nearest_span(line_table: list[tuple[int, Span]], cl_line: int | None) -> Span | None:
    """The FCL span of an OpenCL line, or of the nearest line above it that has one."""
    if cl_line is None:
        return None
    spans = dict(line_table)
    for line in range(cl_line, 0, -1):
        if line in spans:
            return spans[line]
    return None


def stops_group(kernel: Kernel) -> bool:
    """Whether a failed check stops its work-group after the round it failed in (a kernel with
    barriers, where a work-item cannot leave early) rather than return at once (emit)."""
    return bool(kernel.fails) and not kernel.serial and any(
        isinstance(s, ir.Barrier) or (isinstance(s, ir.While) and s.level == "block")
        for s in ir.walk(kernel.body))


def group_body(kernel: Kernel) -> tuple[list[ir.Stmt], Callable[[list[ir.Stmt]], list[ir.Stmt]]]:
    """What one work-group runs for one iteration of a work-group kernel's group loop, and a
    function putting a new such body back in the loop (see kernelize: a declaration of the
    group's iteration, or a loop over iterations)."""
    first = kernel.body[0]
    if isinstance(first, StridedFor):
        return first.body, lambda body: [map_bodies(first, lambda _: body)]
    return kernel.body[1:], lambda body: [first, *body]


def own_index(kernel: Kernel) -> ir.Expr:
    """The work-item's index in its work-group (in a 2-D work-group, row * width + column)."""
    if kernel.width:
        x, y = Special("local_x"), Special("local_y")
        return ir.Bin("+", ir.Bin("*", y, ir.Const(kernel.width, ir.INT), ir.INT), x, ir.INT)
    return Special("local_id")


# ---- work-item ids as variables ----------------------------------------------------------------
# The IL's sums and ranges are over variables; to reason about an index the ids become
# variables named <local_id>, <local_x>, ... and back.

def inline_ints(e: ir.Expr, definitions: dict[str, ir.Expr]) -> ir.Expr:
    """e with int variables replaced by their definitions, and work-item ids as variables."""
    if isinstance(e, ir.Var) and e.type == ir.INT and e.name in definitions:
        return inline_ints(definitions[e.name], definitions)
    if isinstance(e, Special):
        return ir.Var(f"<{e.name}>", ir.INT)
    if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
        return map_children(e, lambda part: inline_ints(part, definitions))
    return e


def work_item_ids(e: ir.Expr) -> ir.Expr:
    """The inverse of inline_ints's renaming of work-item ids."""
    if isinstance(e, ir.Var) and e.name.startswith("<"):
        return Special(e.name.strip("<>"))
    if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
        return map_children(e, work_item_ids)
    return e


# ---- a work-item's index used as (row, column) --------------------------------------------------

def item_split(e: ir.Expr, items: set[str]) -> tuple[str, int] | None:
    """(">>", 2^k) for `i >> k`, ("&", 2^k) for `i & (2^k - 1)`, where i is one of `items`: the
    row and the column of an index in rows 2^k wide."""
    if not (isinstance(e, ir.Bin) and e.op in (">>", "&") and isinstance(e.left, ir.Var)
            and e.left.name in items and isinstance(e.right, ir.Const)):
        return None
    k = int(e.right.value)
    if e.op == ">>":
        return (">>", 1 << k) if 0 < k < 31 else None
    return ("&", k + 1) if k > 0 and k & (k + 1) == 0 else None


def split_widths(stmts: list[ir.Stmt], items: set[str]) -> set[int]:
    """The row widths the statements split any of `items` by (see item_split)."""
    widths: set[int] = set()

    def visit(e: ir.Expr) -> None:
        split = item_split(e, items)
        if split is not None:
            widths.add(split[1])
        for part in sub_exprs(e):
            visit(part)
    for s in ir.walk(stmts):
        for e in stmt_exprs(s):
            visit(e)
    return widths
