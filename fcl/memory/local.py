"""A work-group's step that changes some elements of a local array writes them in place.

A block-level loop (`power<block>`, unrolled) alternates two local arrays: step k reads one
and writes every element of the other, `out[e] = P(e) ? inp[e] : g(e)`. Sklansky's scan is
such a loop, each step keeping half of the elements and adding a total to the others. Where it
is proven, the step stores into `inp` instead, only where P fails, and the next steps take
`inp` for `out`: half the work of each step, and one local array instead of two.

The proof is by evaluation, the step's length being known when compiling: every read of `inp`
is at the work-item's own element (an index equal to e for every e, however it is written),
or at an element the step does not change (Sklansky's total, `inp[row * w + h - 1]`); the step
does not read `out`; the two arrays are alike; and nothing reads `inp`'s old elements after
the step. The work-items then never read an element another one writes, on a GPU as on a CPU.
As masked.py does for global memory, between kernels.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from fcl.il import ir
from fcl.il.numeric import evaluate, with_declarations
from fcl.il.traverse import expr_reads, map_bodies, map_children, map_stmt_exprs, stmt_exprs
from fcl.memory.copies import first_statement_using, mentions, paths, rebuild_stmt
from fcl.memory.masked import mask, overwrites, own_element, step_kernel


def local_updates(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """The statements, nested ones included, with each such step writing in place, and the
    local arrays that left unused not allocated."""
    stmts = [map_bodies(s, local_updates) for s in stmts]
    freed: set[str] = set()
    p = 0
    while p < len(stmts):
        updated = _update(stmts, p, freed)
        if updated is not None:
            stmts = updated
        p += 1
    return [s for s in stmts if not (isinstance(s, ir.Alloc) and s.var.name in freed
                                     and _unused(s.var.name, stmts, s))]


def _update(stmts: list[ir.Stmt], p: int, freed: set[str]) -> list[ir.Stmt] | None:
    found = _step(stmts[p])
    if found is None:
        return None
    step, prefix, store = found
    n, e = int(step.bound.value), step.var.name  # type: ignore[attr-defined]
    env = with_declarations(prefix, {e: np.arange(n, dtype=np.int64)})
    step = _own_indices(step, env)
    *prefix, store = step.body  # type: ignore[assignment]
    own = {leaf.array.name for leaf, _ in paths(store.value) if own_element(leaf, e)}
    local = {s.var.name: s for s in stmts[:p]
             if isinstance(s, ir.Alloc) and s.level == "block"}
    own.discard(store.array.name)
    if len(own) != 1 or store.array.name not in local:
        return None
    inp_name = next(iter(own))
    if inp_name not in local:
        return None
    inp, out = local[inp_name], local[store.array.name]
    if inp.var.type != out.var.type or not (isinstance(inp.size, ir.Const)
                                           and isinstance(out.size, ir.Const)
                                           and inp.size.value == out.size.value == n):
        return None
    changed = evaluate(mask(store.value, inp_name, e), env)
    if changed is None or not np.any(changed):
        return None
    changed = np.broadcast_to(np.asarray(changed, bool), (n,))
    if not reads_unchanged(prefix, store, inp_name, out.var.name, e, env, changed):
        return None
    following = first_statement_using(stmts[p + 1:], inp_name)
    if following is not None and not _overwrites(following, inp_name, n):
        return None
    freed.add(out.var.name)
    write = replace(store, array=inp.var, value=changed_value(store.value, inp_name, e))
    rest = [rebuild_stmt(s, {out.var.name: inp.var, inp_name: out.var}) for s in stmts[p + 1:]]
    over = _over_changed(step, prefix, write, np.flatnonzero(changed))
    if over is None:  # the changed elements are no grid: the step keeps its mask
        over = replace(step, body=[*prefix, ir.If(mask(store.value, inp_name, e), [write], [],
                                                  span=store.span)])
    return stmts[:p] + [over] + rest


def _over_changed(step: ir.ParFor, prefix: list[ir.Stmt], write: ir.Store,
                  changed: np.ndarray) -> ir.ParFor | None:
    """The step run over its changed elements only, where they are a grid: rows of `width`
    consecutive elements `stride` apart (one row: a range). Each index the step computes that
    is affine in (row, column) there is written as such, so that a loop over a row's elements
    (a CPU's) sees what stays the same along it. None where they are no grid."""
    grid = _grid(changed)
    if grid is None:
        return None
    offset, rows, width, stride = grid
    m = ir.Var(f"{step.var.name}_changed", ir.INT)
    row, column = _row_column(m, rows, width)
    e = ir.Var(step.var.name, ir.INT)
    env = with_declarations(prefix, {e.name: changed.astype(np.int64)})

    def affine(x: ir.Expr) -> ir.Expr:
        x = map_children(x, affine)
        if not isinstance(x, ir.Index):
            return x
        value = evaluate(x.index, env)
        if value is None:
            return x
        found = _fit(np.broadcast_to(np.asarray(value, np.int64), changed.shape), rows, width)
        if found is None:
            return x
        base, by_row, by_column = found
        return replace(x, index=_sum(ir.Const(base, ir.INT), _times(row, by_row),
                                     _times(column, by_column)))
    where = _sum(ir.Const(offset, ir.INT), _times(row, stride), _times(column, 1))
    stored = map_stmt_exprs(write, affine)
    assert isinstance(stored, ir.Store)
    body = [ir.Declare(e, where, span=step.span),
            *[map_stmt_exprs(s, affine) for s in prefix], replace(stored, index=e)]
    return replace(step, var=m, bound=ir.Const(len(changed), ir.INT), body=body)


def _grid(at: np.ndarray) -> tuple[int, int, int, int] | None:
    """(offset, rows, width, stride) of sorted indices that are rows of `width` consecutive
    ones, each `stride` after the one before."""
    starts = at[np.r_[True, np.diff(at) != 1]]
    rows = len(starts)
    width = len(at) // rows
    if width * rows != len(at):
        return None
    stride = int(starts[1] - starts[0]) if rows > 1 else width
    expected = starts[0] + np.arange(rows)[:, None] * stride + np.arange(width)[None, :]
    if not np.array_equal(expected.ravel(), at):
        return None
    return int(starts[0]), rows, width, stride


def _fit(values: np.ndarray, rows: int, width: int) -> tuple[int, int, int] | None:
    """(base, by_row, by_column) with values[r * width + c] = base + r by_row + c by_column."""
    grid = values.reshape(rows, width)
    base = int(grid[0, 0])
    by_row = int(grid[1, 0] - base) if rows > 1 else 0
    by_column = int(grid[0, 1] - base) if width > 1 else 0
    expected = base + np.arange(rows)[:, None] * by_row + np.arange(width)[None, :] * by_column
    return (base, by_row, by_column) if np.array_equal(expected, grid) else None


def _row_column(m: ir.Var, rows: int, width: int) -> tuple[ir.Expr | None, ir.Expr | None]:
    """m's row and column in rows of `width` (None: always 0): shifts and masks for a power of
    two, which a serial kernel's loop is split by (fcl.codegen.serial)."""
    if width == 1 or rows == 1:
        return (m, None) if width == 1 else (None, m)
    if width & (width - 1) == 0:
        shift = width.bit_length() - 1
        return (ir.Bin(">>", m, ir.Const(shift, ir.INT), ir.INT),
                ir.Bin("&", m, ir.Const(width - 1, ir.INT), ir.INT))
    return (ir.Bin("/", m, ir.Const(width, ir.INT), ir.INT),
            ir.Bin("%", m, ir.Const(width, ir.INT), ir.INT))


def _times(x: ir.Expr | None, k: int) -> ir.Expr | None:
    if x is None or k == 0:
        return None
    return x if k == 1 else ir.Bin("*", x, ir.Const(k, ir.INT), ir.INT)


def _sum(*parts: ir.Expr | None) -> ir.Expr:
    terms = [t for t in parts if t is not None
             and not (isinstance(t, ir.Const) and t.value == 0)]
    if not terms:
        return ir.Const(0, ir.INT)
    total = terms[0]
    for t in terms[1:]:
        total = ir.Bin("+", total, t, ir.INT)
    return total


def _step(s: ir.Stmt) -> tuple[ir.ParFor, list[ir.Stmt], ir.Store] | None:
    """(step, its declarations, its store `out[e] = v`) if s is a work-group's step over a
    length known when compiling, with no check (it may come to run on its changed elements
    only)."""
    found = step_kernel(s, "block")
    if found is None or not isinstance(found[0].bound, ir.Const) \
            or not all(isinstance(t, ir.Declare) for t in found[1]):
        return None
    return found


def _own_indices(step: ir.ParFor, env: dict) -> ir.ParFor:
    """The step with each index equal to e for every e written as e."""
    e = ir.Var(step.var.name, ir.INT)

    def simpler(x: ir.Expr) -> ir.Expr:
        x = map_children(x, simpler)
        if isinstance(x, ir.Index) and not isinstance(x.index, ir.Var):
            value = evaluate(x.index, env)
            if value is not None and np.array_equal(np.broadcast_to(value, env[e.name].shape),
                                                    env[e.name]):
                return replace(x, index=e)
        return x
    return replace(step, body=[map_stmt_exprs(s, simpler) for s in step.body])


def changed_value(value: ir.Expr, inp: str, e: str) -> ir.Expr:
    """value where it changes the element: its choices of inp's own element left out."""
    if not isinstance(value, ir.Select):
        return value

    def kept(x: ir.Expr) -> bool:
        return own_element(x, e) and x.array.name == inp
    if kept(value.then):
        return changed_value(value.else_, inp, e)
    if kept(value.else_):
        return changed_value(value.then, inp, e)
    return replace(value, then=changed_value(value.then, inp, e),
                   else_=changed_value(value.else_, inp, e))


def reads_unchanged(prefix: list[ir.Stmt], store: ir.Store, inp: str, out: str, e: str,
                    env: dict, changed: np.ndarray, only_changed: bool = False) -> bool:
    """Whether the step reads inp only at its own element or at elements it does not change,
    and never reads out; with `only_changed`, as the changed elements read (a step that runs
    over those only)."""
    for x in [y for t in prefix for y in stmt_exprs(t)] + [store.value]:
        for read in expr_reads(x):
            if read.array.name == out:
                return False
            if read.array.name != inp or own_element(read, e):
                continue
            at = evaluate(read.index, env)
            if at is None:
                return False
            at = np.broadcast_to(np.asarray(at, np.int64), changed.shape)
            if only_changed:
                at = at[changed]
            if np.any((at < 0) | (at >= len(changed))) or np.any(changed[at]):
                return False
    return True


def _overwrites(s: ir.Stmt, array: str, n: int) -> bool:
    """Whether s is a step writing every element of `array` (n of them) before it reads any."""
    found = _step(s)
    return found is not None and isinstance(found[0].bound, ir.Const) \
        and found[0].bound.value == n and overwrites(s, array, "block")


def _unused(name: str, stmts: list[ir.Stmt], alloc: ir.Stmt) -> bool:
    return not any(mentions(t, name) for other in stmts if other is not alloc
                   for t in ir.walk([other]))
