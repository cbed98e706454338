"""The order of a kernel's work-groups over a 2-D grid of tiles: which coordinate varies fastest.

The iterations of a grid-level `distribute` are independent, so they may run in any order.
When every use of the iteration b splits it into a row and a column, `b / c` and `b % c`
(`b >> k` and `b & (2^k - 1)` for c = 2^k), as a loop over the tiles of a matrix does, the
work-group b may as well take the tile with the coordinates the other way round: row b % r and
column b / r, for r rows (b / c < r). Work-groups with neighbouring numbers run at the same time
or one after the other, so the order is chosen for the memory they read: for each read of
global memory, how far apart neighbouring work-groups read (the index's coefficient of the
coordinate that varies fastest, in elements) is summed, and the order with the smaller sum is
taken, the program's own on a tie. Only reads count: a write need not wait for memory. The
original FCL's transpose builds its output tile by tile, reading down a column of input tiles:
45 ms on PoCL (2 cores), 37 ms along rows of tiles in the same run, as reference.cl reads.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fcl.codegen.kernel import Kernel, LocalArray, Special, group_body, inline_ints
from fcl.il import ir
from fcl.il.simplify import linear, mk_bin
from fcl.il.traverse import (
    array_reads,
    map_children,
    map_exprs,
    names,
    single_definitions,
    stmt_exprs,
    sub_exprs,
)

ROW, COLUMN = "row", "column"


def group_order(kernel: Kernel) -> Kernel:
    """The kernel with its group body's tile coordinates swapped where that makes neighbouring
    work-groups read nearer memory; else unchanged (and a serial kernel, whose one work-item
    runs a group, always)."""
    if kernel.group_var is None or kernel.serial:
        return kernel
    body, rewrap = group_body(kernel)
    swapped = _swapped(kernel, body)
    if swapped is None:
        return kernel
    return replace(kernel, body=rewrap(map_exprs(body, swapped)),
                   locals=[LocalArray(a.var, swapped(a.size), a.per_item, a.span)
                           for a in kernel.locals])


def _swapped(kernel: Kernel, body: list[ir.Stmt]) -> Callable[[ir.Expr], ir.Expr] | None:
    """A rewrite of the group body's expressions swapping its tile coordinates, if that makes
    neighbouring work-groups read nearer memory."""
    group, count = kernel.group_var, kernel.group_bound
    if group is None or not isinstance(count, ir.Const):
        return None
    splits = _splits(body, group.name)
    if splits is None or {kind for kind, _ in splits.values()} != {ROW, COLUMN}:
        return None
    widths = {c for _, c in splits.values()}
    width = widths.pop()
    if widths or not 1 < width < count.value or count.value % width:
        return None
    distances = _distances(kernel, body, splits)
    if distances is None or distances[ROW] >= distances[COLUMN]:
        return None
    rows = int(count.value) // width
    swapped = {key: _divided(group, rows, "%" if kind == ROW else "/")
               for key, (kind, _) in splits.items()}

    def swap(e: ir.Expr) -> ir.Expr:
        if ir.expr_key(e) in swapped:
            return swapped[ir.expr_key(e)]
        return map_children(e, swap) if isinstance(e, (ir.Bin, ir.Un, ir.Select, ir.Index)) \
            else e
    return swap


def _split(e: ir.Expr, group: str) -> tuple[str, int] | None:
    """(ROW, c) for `b / c` or `b >> k` (c = 2^k), (COLUMN, c) for `b % c` or `b & (c - 1)`,
    where b is the group's iteration."""
    if not (isinstance(e, ir.Bin) and isinstance(e.left, ir.Var) and e.left.name == group
            and isinstance(e.right, ir.Const)):
        return None
    amount = int(e.right.value)
    if e.op in ("/", "%") and amount > 1:
        return (ROW if e.op == "/" else COLUMN), amount
    if e.op == ">>" and 0 < amount < 31:
        return ROW, 1 << amount
    if e.op == "&" and amount > 0 and amount & (amount + 1) == 0:
        return COLUMN, amount + 1
    return None


def _splits(body: list[ir.Stmt], group: str) -> dict[str, tuple[str, int]] | None:
    """Each split of the iteration the body uses, by its key; None if the body uses the
    iteration (or the work-group's id) otherwise."""
    found: dict[str, tuple[str, int]] = {}

    def visit(e: ir.Expr) -> bool:
        split = _split(e, group)
        if split is not None:
            found[ir.expr_key(e)] = split
            return True
        if (isinstance(e, ir.Var) and e.name == group) or \
                (isinstance(e, Special) and e.name == "group_id"):
            return False
        return all(visit(part) for part in sub_exprs(e))
    if all(visit(e) for s in ir.walk(body) for e in stmt_exprs(s, targets=True)):
        return found
    return None


def _distances(kernel: Kernel, body: list[ir.Stmt], splits: dict[str, tuple[str, int]]
               ) -> dict[str, int] | None:
    """For each coordinate, the sum over reads of global memory of the index's coefficient of
    it; None if some such index is no sum of the coordinates times constants (and more)."""
    on_chip = {a.var.name for a in kernel.locals} | {v.name for v, _ in kernel.private}
    for s in ir.walk(body):  # pointers into local or private memory
        if isinstance(s, ir.Declare) and isinstance(s.init, ir.Var) and s.init.name in on_chip:
            on_chip.add(s.var.name)
    definitions = single_definitions(body)
    group = kernel.group_var
    assert group is not None
    distances = {ROW: 0, COLUMN: 0}
    for read in array_reads(body):
        if read.array.name in on_chip:
            continue
        terms, _ = linear(inline_ints(read.index, definitions))
        for key, (atom, coefficient) in terms.items():
            if key in splits:
                distances[splits[key][0]] += abs(coefficient)
            elif group.name in names(atom):
                return None
    return distances


def _divided(group: ir.Var, by: int, op: str) -> ir.Expr:
    """group / by or group % by, as a shift or a mask when `by` is a power of two (the group's
    number is never negative)."""
    if by & (by - 1) == 0:
        if op == "/":
            return mk_bin(">>", group, ir.Const(by.bit_length() - 1, ir.INT), ir.INT)
        return mk_bin("&", group, ir.Const(by - 1, ir.INT), ir.INT)
    return mk_bin(op, group, ir.Const(by, ir.INT), ir.INT)
