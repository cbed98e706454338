"""A work-group's loop whose steps each change a moving band of a local array, in place and over
that band only.

A block-level `power` kept as a loop alternates two local arrays through pointers:

    cur = A; next = B
    for k < K: { parfor e < N: next[e] = P(e, k) ? g(e, k) : cur[e]; swap cur and next }

NW's block kernel (bench/nw.fcl) is one: step k changes the 16 cells of one anti-diagonal of a
17 x 17 block and copies the other 273, each after a division and a remainder. Where it is
proven, step k runs over its changed elements only, `parfor t < count(k)` at `e = start(k) +
stride * t`, and stores into A; B is no longer allocated. local.py does the same for a loop
unrolled (each step's elements are then known when compiling).

The proof is by evaluation for every k, K and N being known when compiling: the elements step
k changes are `stride` apart (the same stride in every step), and one line in k, or the least
or the greatest of two, gives their first and their count; at those elements the step reads
`cur` only at its own element or at elements it does not change, and never `next`; its checks
cannot fail at the other elements; and nothing after the loop reads `next`. Work-items then
never read what another one writes in the same step, on a GPU as on a CPU.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from fcl.il import ir
from fcl.il.numeric import evaluate, with_declarations
from fcl.il.traverse import map_bodies
from fcl.memory.copies import first_statement_using, mentions
from fcl.memory.local import changed_value, reads_unchanged
from fcl.memory.masked import mask, step_kernel


def wavefront_updates(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """The statements, nested ones included, with each such loop's steps in place, and the
    local arrays that left unused not allocated."""
    stmts = [map_bodies(s, wavefront_updates) for s in stmts]
    p = 0
    while p + 2 < len(stmts):
        stmts = _update(stmts, p) or stmts
        p += 1
    return stmts


def _update(stmts: list[ir.Stmt], p: int) -> list[ir.Stmt] | None:
    first, second, loop = stmts[p:p + 3]
    if not (_names_array(first) and _names_array(second) and isinstance(loop, ir.SeqFor)
            and isinstance(loop.bound, ir.Const) and len(loop.body) == 4):
        return None
    assert isinstance(first, ir.Declare) and isinstance(second, ir.Declare)
    cur, nxt = first.var, second.var
    allocs = {s.var.name: s for s in stmts[:p] if isinstance(s, ir.Alloc) and s.level == "block"}
    a, b = allocs.get(first.init.name), allocs.get(second.init.name)  # type: ignore[attr-defined]
    step_stmt, *swap = loop.body
    found = step_kernel(step_stmt, "block")
    if a is None or b is None or a is b or found is None or not _swaps(swap, cur, nxt):
        return None
    step, prefix, store = found
    # The arrays are named only through the two pointers: which one holds which step's
    # elements changes with the swaps, and no longer would.
    if any(mentions(t, x.var.name) for x in (a, b) for t in ir.walk([loop, *stmts[p + 3:]])):
        return None
    if store.array.name != nxt.name or not isinstance(step.bound, ir.Const) \
            or a.var.type != b.var.type or not all(
                isinstance(x.size, ir.Const) and x.size.value == step.bound.value for x in (a, b)) \
            or first_statement_using(stmts[p + 3:], nxt.name) is not None:
        return None
    waves = _waves(loop, step, prefix, store, cur.name, nxt.name)
    if waves is None:
        return None
    start, count, stride, may_fail = waves
    # A check that fails at no element in no step, by the evaluation, is left out.
    prefix = [s for s in prefix if not isinstance(s, ir.Fail) or id(s) in may_fail]
    e = ir.Var(step.var.name, ir.INT)
    t = ir.Var(f"{e.name}_wave", ir.INT)
    write = replace(store, array=cur, value=changed_value(store.value, cur.name, e.name))
    over = replace(step, var=t, bound=count,
                   body=[ir.Declare(e, _plus(start, t, stride), span=step.span),
                         *prefix, write])
    kept = [s for s in stmts[:p] if s is not b]
    if any(mentions(t_, b.var.name) for t_ in ir.walk(kept)):
        kept = stmts[:p]  # B is used before the loop: it stays allocated
    return [*kept, first, replace(loop, body=[over]), *stmts[p + 3:]]


def _names_array(s: ir.Stmt) -> bool:
    return isinstance(s, ir.Declare) and isinstance(s.var.type, ir.ArrayType) \
        and isinstance(s.init, ir.Var)


def _swaps(swap: list[ir.Stmt], cur: ir.Var, nxt: ir.Var) -> bool:
    """Whether the statements are `tmp = cur; cur = next; next = tmp`."""
    held, back, forth = swap
    return isinstance(held, ir.Declare) and _is(held.init, cur) \
        and isinstance(back, ir.Assign) and back.var.name == cur.name and _is(back.value, nxt) \
        and isinstance(forth, ir.Assign) and forth.var.name == nxt.name \
        and _is(forth.value, held.var)


def _is(e: ir.Expr, var: ir.Var) -> bool:
    return isinstance(e, ir.Var) and e.name == var.name


def _waves(loop: ir.SeqFor, step: ir.ParFor, prefix: list[ir.Stmt], store: ir.Store,
           cur: str, nxt: str) -> tuple[ir.Expr, ir.Expr, int, set[int]] | None:
    """(start(k), count(k), stride, the checks that fail somewhere, by id) of the elements
    each step changes, start and count as expressions in the loop's variable, where the
    module docstring's conditions hold; else None."""
    n, e = int(step.bound.value), step.var.name  # type: ignore[attr-defined]
    where = mask(store.value, cur, e)
    starts: dict[int, int] = {}
    counts: dict[int, int] = {}
    strides: set[int] = set()
    may_fail: set[int] = set()
    for k in range(int(loop.bound.value)):  # type: ignore[attr-defined]
        env = with_declarations(prefix, {e: np.arange(n, dtype=np.int64), loop.var.name: k})
        changed = _everywhere(evaluate(where, env), n, bool)
        if changed is None or not _safe(prefix, store, cur, nxt, e, env, changed, may_fail):
            return None
        at = np.flatnonzero(changed)
        counts[k] = len(at)
        if len(at):
            starts[k] = int(at[0])
        if len(at) > 1:
            steps = set(np.diff(at).tolist())
            if len(steps) != 1:
                return None
            strides |= steps
    if len(strides) > 1 or not starts:
        return None
    start, count = _piecewise(starts, loop.var), _piecewise(counts, loop.var)
    if start is None or count is None:
        return None
    return start, count, strides.pop() if strides else 1, may_fail


def _everywhere(value, n: int, dtype) -> np.ndarray | None:
    if value is None:
        return None
    return np.broadcast_to(np.asarray(value, dtype), (n,))


def _safe(prefix: list[ir.Stmt], store: ir.Store, cur: str, nxt: str, e: str, env: dict,
          changed: np.ndarray, may_fail: set[int]) -> bool:
    """Whether, at the changed elements, the step reads cur only at its own element or at
    unchanged ones and never reads nxt, and its checks fail nowhere else (those that fail
    somewhere are added to may_fail, by id)."""
    n = len(changed)
    for s in prefix:
        if isinstance(s, ir.Fail):
            fails = _everywhere(evaluate(s.cond, env), n, bool)
            if fails is None or np.any(fails & ~changed):
                return False
            if np.any(fails):
                may_fail.add(id(s))
        elif not isinstance(s, ir.Declare):
            return False
    return reads_unchanged(prefix, store, cur, nxt, e, env, changed, only_changed=True)


def _piecewise(values: dict[int, int], k: ir.Var) -> ir.Expr | None:
    """An expression in k equal to values[k] at every k given: a line through the first two
    points, or the least or the greatest of it and the line through the last two."""
    ks = sorted(values)
    if len(ks) == 1:
        return ir.Const(values[ks[0]], ir.INT)
    lines = [_line(values, ks[0], ks[1]), _line(values, ks[-2], ks[-1])]
    candidates: list[tuple] = [(lines[0],)]
    if lines[0] != lines[1]:
        candidates += [("min", *lines), ("max", *lines)]
    for candidate in candidates:
        if any(line is None for line in candidate[-2:]):
            continue
        if all(_value(candidate, x) == values[x] for x in ks):
            return _expr(candidate, k)
    return None


def _line(values: dict[int, int], x0: int, x1: int) -> tuple[int, int] | None:
    """(slope, intercept) of the line through (x0, values[x0]) and (x1, values[x1]), when
    whole numbers."""
    rise, run = values[x1] - values[x0], x1 - x0
    if rise % run:
        return None
    slope = rise // run
    return slope, values[x0] - slope * x0


def _value(candidate: tuple, x: int) -> int:
    if len(candidate) == 1:
        slope, intercept = candidate[0]
        return slope * x + intercept
    op, *lines = candidate
    found = [slope * x + intercept for slope, intercept in lines]
    return min(found) if op == "min" else max(found)


def _expr(candidate: tuple, k: ir.Var) -> ir.Expr:
    def line(slope: int, intercept: int) -> ir.Expr:
        return _plus(ir.Const(intercept, ir.INT), k, slope)
    if len(candidate) == 1:
        return line(*candidate[0])
    op, first, second = candidate
    return ir.Bin(op, line(*first), line(*second), ir.INT)


def _plus(base: ir.Expr, var: ir.Var, times: int) -> ir.Expr:
    """base + var * times, without the parts that are zero or one."""
    if times == 0:
        return base
    size = abs(times)
    term = var if size == 1 else ir.Bin("*", var, ir.Const(size, ir.INT), ir.INT)
    if isinstance(base, ir.Const) and base.value == 0 and times > 0:
        return term
    return ir.Bin("+" if times > 0 else "-", base, term, ir.INT)
