"""Loops of serial work-groups shaped for a CPU's vector units (serial kernels: see kernelize).

In a serial kernel one work-item runs each block-level loop (a SerialFor) as a plain loop, and
the OpenCL compiler vectorizes only innermost loops. Two steps rearrange such loops, without
changing what any iteration computes or the order of its operations:

    interchange  a work-item's reduction (`acc = 0; for k: acc = acc + f(k)`, a dot product of
                 a tiled matrix product) runs with the reduction's loop outside the loop over
                 work-items: `for k: for j: acc[j] = acc[j] + f(j, k)`, one accumulator per
                 work-item in private memory, so that the inner loop runs along a row
    split        a loop over a tile's work-items that uses their index as (row, column), `j >>
                 k` and `j & (2^k - 1)`, becomes two nested loops, the column innermost: its
                 elements are then consecutive, with no shift or mask to undo

The iterations of a block-level loop are independent (a program where one reads what another
writes in the same loop has a data race), and the interpreter runs them in lockstep, statement
by statement: running every iteration's reduction before any iteration's later statements is
the interpreter's order. On the bench's 512 x 512 matrix product (tiles of 16 x 16) the two
together made the kernel 5.2 times faster on both PoCLs (156 to 30 ms; bench/README.md).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from fcl.codegen.kernel import Kernel, SerialFor, group_body, item_split, split_widths
from fcl.il import ir
from fcl.il.numeric import evaluate
from fcl.il.traverse import (
    array_reads,
    declared,
    expr_reads,
    map_bodies,
    map_children,
    map_exprs,
    map_stmt_exprs,
    names,
)

MAX_ACCUMULATORS = 4096  # private elements per reduction interchanged (16 KiB of ints)


def interchange(kernel: Kernel) -> Kernel:
    """The serial kernel with each work-item reduction interchanged (see the module docstring);
    other kernels as they are."""
    if not kernel.serial or kernel.group_var is None:
        return kernel
    body, rewrap = group_body(kernel)
    private: list[tuple[ir.Var, int]] = []
    body = _interchanged(body, private)
    if not private:
        return kernel
    return replace(kernel, body=rewrap(body), private=[*kernel.private, *private])


def _interchanged(stmts: list[ir.Stmt], private: list[tuple[ir.Var, int]]) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        found = _reduction(s) if isinstance(s, SerialFor) else None
        if found is None:
            out.append(map_bodies(s, lambda body: _interchanged(body, private)))
        else:
            assert isinstance(s, SerialFor)
            out += _interchange(s, *found, private)
    return out


def _interchange(s: SerialFor, prefix: list[ir.Declare], acc: ir.Var, init: ir.Expr,
                 loop: ir.SeqFor, suffix: list[ir.Stmt], private: list[tuple[ir.Var, int]]
                 ) -> list[ir.Stmt]:
    """The loops of one reduction interchanged; its accumulators added to `private`."""
    assert isinstance(acc.type, str)  # a scalar, as _reduction found
    each = ir.Var(f"{acc.name}_each", ir.ArrayType(acc.type))
    own = ir.Index(each, s.var)

    def accumulator(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.name == acc.name:
            return own
        return map_children(e, accumulator)
    *work, step = loop.body
    assert isinstance(step, ir.Assign) and isinstance(s.bound, ir.Const)  # as _reduction found
    private.append((each, int(s.bound.value)))
    first = SerialFor(s.var, s.bound, [*_needed(prefix, [init]),
                                       ir.Store(each, s.var, init, span=s.span)], span=s.span)
    last = SerialFor(s.var, s.bound, [*prefix, *map_exprs(suffix, accumulator)], span=s.span)
    return [
        *renamed([first], "_init"),
        ir.SeqFor(loop.var, loop.bound, [
            SerialFor(s.var, s.bound, [*prefix, *map_exprs(work, accumulator),
                                       ir.Store(each, s.var, accumulator(step.value),
                                                span=step.span)], span=s.span)],
                  span=loop.span),
        *renamed([last], "_out"),
    ]


def renamed(stmts: list[ir.Stmt], suffix: str) -> list[ir.Stmt]:
    """The statements with every variable they declare (loop variables included) renamed with
    `suffix`: the copies of a loop that interchange makes each declare their own names."""
    fresh = {t.var.name: ir.Var(t.var.name + suffix, t.var.type) for t in ir.walk(stmts)
             if isinstance(t, (ir.Declare, ir.SeqFor))}

    def sub(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var):
            return fresh.get(e.name, e)
        return map_children(e, sub)

    def block(body: list[ir.Stmt]) -> list[ir.Stmt]:
        out = []
        for t in body:
            t = map_stmt_exprs(t, sub)
            if isinstance(t, (ir.Declare, ir.Assign, ir.SeqFor)) and t.var.name in fresh:
                t = replace(t, var=fresh[t.var.name])
            out.append(map_bodies(t, block))
        return out
    return block(stmts)


Reduction = tuple[list[ir.Declare], ir.Var, ir.Expr, ir.SeqFor, list[ir.Stmt]]


def _reduction(s: SerialFor) -> Reduction | None:
    """(prefix, accumulator, its initial value, the reduction's loop, suffix) when the loop's
    body is: declarations of ints, the accumulator's declaration (and assignments) of a value,
    a SeqFor whose last statement assigns it, after scalars of the step's own, then statements
    that neither assign it nor write what the reduction reads; else None."""
    if not isinstance(s.bound, ir.Const) or not 1 < s.bound.value <= MAX_ACCUMULATORS:
        return None
    body = s.body
    at = next((i for i, t in enumerate(body) if isinstance(t, ir.SeqFor)), None)
    if at is None or at == 0:
        return None
    loop = body[at]
    assert isinstance(loop, ir.SeqFor)
    # The reduction's step: scalars of its own, then the accumulator assigned once, last.
    if not loop.body:
        return None
    *work, last = loop.body
    if not isinstance(last, ir.Assign):
        return None
    acc = last.var
    own = {t.var.name for t in work if isinstance(t, ir.Declare)}
    if not all(isinstance(t, (ir.Declare, ir.Assign)) and t.var.name in own
               and not isinstance(t.var.type, ir.ArrayType) for t in work):
        return None
    if isinstance(acc.type, ir.ArrayType):
        return None
    init: ir.Expr | None = None
    prefix: list[ir.Declare] = []
    for t in body[:at]:
        if isinstance(t, (ir.Declare, ir.Assign)) and t.var.name == acc.name:
            init = t.init if isinstance(t, ir.Declare) else t.value
            if acc.name in names(init):
                return None
        elif isinstance(t, ir.Declare) and t.var.type == ir.INT and init is None:
            prefix.append(t)
        else:
            return None
    if init is None or names(init) & {loop.var.name}:
        return None
    # The reduction's steps must be as many for every work-item: its loop runs outside theirs.
    if names(loop.bound) & {s.var.name, acc.name, *(d.var.name for d in prefix)}:
        return None
    # The prefix is recomputed in each of the three loops: what it reads must not change.
    written = _written(body)
    suffix = body[at + 1:]
    read = {r.array.name for r in array_reads([*prefix, *loop.body])}
    if any(isinstance(t, ir.Assign) and t.var.name == acc.name for t in ir.walk(suffix)) \
            or read & written \
            or any(isinstance(t, ir.Assign) and t.var.name in {d.var.name for d in prefix}
                   for t in ir.walk(suffix)) \
            or not all(isinstance(t, (ir.Declare, ir.Assign, ir.Store, ir.If, ir.SeqFor))
                       for t in ir.walk(suffix)):
        return None
    return prefix, acc, init, loop, suffix


def _needed(prefix: list[ir.Declare], uses: list[ir.Expr]) -> list[ir.Stmt]:
    """The declarations of the prefix that `uses` need, directly or through others."""
    wanted = set().union(*(names(e) for e in uses))
    kept: list[ir.Stmt] = []
    for t in reversed(prefix):
        if t.var.name in wanted:
            kept.insert(0, t)
            wanted |= names(t.init)
    return kept


def _written(stmts: list[ir.Stmt]) -> set[str]:
    return {t.array.name for t in ir.walk(stmts) if isinstance(t, ir.Store)}


def split(kernel: Kernel) -> Kernel:
    """The serial kernel with its loops over tiles' (row, column) split in two (see the module
    docstring); other kernels as they are."""
    if not kernel.serial or kernel.group_var is None:
        return kernel
    body, rewrap = group_body(kernel)
    return replace(kernel, body=rewrap(_split(body)))


def _split(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        new = map_bodies(s, _split)
        if isinstance(new, SerialFor):
            width = _row_width(new)
            if width is not None:
                new = _nested(new, width)
        out.append(new)
    return out


def _row_width(s: SerialFor) -> int | None:
    """The row width when the loop's variable is used as (row, column) of one width, `j >> k`
    and `j & (2^k - 1)`, at least once; else None."""
    if not isinstance(s.bound, ir.Const):
        return None
    widths = split_widths(s.body, {s.var.name})
    if len(widths) != 1:
        return None
    (width,) = widths
    count = int(s.bound.value)
    return width if 1 < width < count and count % width == 0 else None


def _nested(s: SerialFor, width: int) -> ir.Stmt:
    assert isinstance(s.bound, ir.Const)
    row, column = ir.Var(f"{s.var.name}_row", ir.INT), ir.Var(f"{s.var.name}_col", ir.INT)
    whole = ir.Bin("+", ir.Bin("*", row, ir.Const(width, ir.INT), ir.INT), column, ir.INT)

    def rewrite(e: ir.Expr) -> ir.Expr:
        split = item_split(e, {s.var.name})
        if split is not None and split[1] == width:
            return row if split[0] == ">>" else column
        if isinstance(e, ir.Var) and e.name == s.var.name:
            return whole
        return map_children(e, rewrite)

    def block(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        return [map_bodies(map_stmt_exprs(t, rewrite), block) for t in stmts]
    rows = int(s.bound.value) // width
    hoisted, body = _row_invariant(block(s.body), row, column, rows, width)
    inner = SerialFor(column, ir.Const(width, ir.INT), body, span=s.span)
    return SerialFor(row, ir.Const(rows, ir.INT), [*hoisted, inner], span=s.span)


def _row_invariant(body: list[ir.Stmt], row: ir.Var, column: ir.Var, rows: int,
                   width: int) -> tuple[list[ir.Stmt], list[ir.Stmt]]:
    """The leading declarations of a row's loop that are the same for all its columns (and
    need none of the others), moved before it (a scan step's total, read once per row, so that
    the loop over the row vectorizes), and the rest. A declaration reading an array the loop
    stores to moves only where no store of the row can reach the element it reads, as
    evaluation over every (row, column) shows."""
    env = {row.name: np.arange(rows, dtype=np.int64)[:, None],
           column.name: np.arange(width, dtype=np.int64)[None, :]}
    for t in ir.walk(body):  # the loop's own values, as far as plain arithmetic gives them
        if isinstance(t, ir.Declare) and (value := evaluate(t.init, env)) is not None:
            env[t.var.name] = value
    stores = [t for t in ir.walk(body) if isinstance(t, ir.Store)]
    inside = declared(body)
    hoisted: list[ir.Stmt] = []
    kept: list[ir.Stmt] = []
    leading = next((k for k, t in enumerate(body) if not isinstance(t, ir.Declare)), len(body))
    for t in body[:leading]:
        assert isinstance(t, ir.Declare)
        moves = column.name not in names(t.init) and not names(t.init) & inside \
            and all(_unreachable(read, stores, env, rows, width) for read in expr_reads(t.init))
        (hoisted if moves else kept).append(t)
    return hoisted, kept + body[leading:]


def _unreachable(read: ir.Index, stores: list[ir.Store], env: dict, rows: int,
                 width: int) -> bool:
    """Whether no store of a row's loop writes the element `read` reads in that row."""
    mine = [t for t in stores if t.array.name == read.array.name]
    if not mine:
        return True
    at = evaluate(read.index, env)
    if at is None:
        return False
    at = np.broadcast_to(np.asarray(at, np.int64), (rows, width))[:, :1]
    for store in mine:
        written = evaluate(store.index, env)
        if written is None:
            return False
        written = np.broadcast_to(np.asarray(written, np.int64), (rows, width))
        if np.any(written == at):
            return False
    return True
