"""Checks taken out of a sequential loop's iterations (the `stops` step).

A work-item's loop over a row (a fold of `reduceRows`, not flattened) checks in every iteration
what no iteration changes (the row's index into its offsets) and an index that grows by one
with the loop's variable (the element's position in the values). A check of the first kind
fails in the first iteration if it fails at all; one of the second kind first fails at an
iteration computed before the loop: where the index first leaves its array. So the loop runs up
to that iteration with neither check, the first kind made once before it (when it runs at all),
and, when it stops short, the stopping iteration's statements up to the check that fails are
made after it; before it in a lockstep loop (ir.SeqFor: a row's elements, whose checks the
interpreter makes for every element before the next check). The program stops at its first
failure, with the values it names, as the interpreter does: the statements moved are
declarations and checks, nothing the loop changes is read by them, and the checks before a
moved one are moved too. Inside the loop, the index then needs no clamp: the check's
condition is false there.
"""
from __future__ import annotations

from dataclasses import replace

from fcl.il import ir
from fcl.il.lower import out_of_bounds
from fcl.il.simplify import difference, mk_bin, rebuild
from fcl.il.traverse import assigned, expr_reads, map_bodies, map_children, map_exprs, names

I, B = ir.INT, ir.BOOL  # noqa: E741  # the code below reads as types


def stops(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """The statements, nested ones included, with such loops' checks taken out."""
    out: list[ir.Stmt] = []
    for s in stmts:
        s = map_bodies(s, stops)
        out += _stopped(s) if isinstance(s, ir.SeqFor) and not s.lanes else [s]
    return out


def _stopped(loop: ir.SeqFor) -> list[ir.Stmt]:
    body = loop.body
    if any(isinstance(t, (ir.ParFor, ir.Distribute, ir.While)) for t in ir.walk(body)):
        return [loop]
    k = loop.var
    changing = assigned(body) | {k.name} | {t.var.name for t in ir.walk(body)
                                            if isinstance(t, ir.Declare)}
    written = {t.array.name for t in ir.walk(body) if isinstance(t, ir.Store)}

    def invariant(e: ir.Expr) -> bool:
        return not names(e) & changing and not {r.array.name for r in expr_reads(e)} & written

    if not invariant(loop.bound):  # C tests the bound again before each iteration
        return [loop]

    values: dict[str, ir.Expr] = {}  # the body's declarations before the check, expanded
    hoisted: list[ir.Fail] = []
    stepping: ir.Fail | None = None
    index: tuple[ir.Expr, ir.Expr] | None = None  # the stepping index at k = 0, its length
    upto = 0  # the statements of an iteration up to the stepping check
    for at, s in enumerate(body):
        if isinstance(s, ir.Declare):
            values[s.var.name] = rebuild(s.init, values)
            continue
        if not isinstance(s, ir.Fail):
            break
        if all(isinstance(t, ir.Declare) or t in hoisted for t in body[:at]) \
                and invariant(s.cond) and all(invariant(v) for v in s.values):
            hoisted.append(s)
            continue
        index = _stepping(s, k, values, invariant)
        if index is not None:
            stepping, upto = s, at + 1
        break
    if not hoisted and stepping is None:
        return [loop]
    kept = [s for s in body if s not in hoisted and s is not stepping]
    before: list[ir.Stmt] = []
    if hoisted:
        before.append(ir.If(mk_bin(">", loop.bound, ir.Const(0, I), B), list(hoisted), [],
                            span=hoisted[0].span))
    if stepping is None or index is None:
        return [*before, replace(loop, body=kept)]
    first, bound = index
    stop = ir.Var(f"{k.name}_stop", I)
    before.append(ir.Declare(stop, ir.Select(out_of_bounds(first, bound), ir.Const(0, I),
                                             mk_bin("-", bound, first, I), I),
                             span=stepping.span))
    # Below `stop`, the check's condition is false: the clamps it guards go.
    outside = ir.expr_key(stepping.cond)
    inside = map_exprs(kept, lambda e: rebuild(_known(e, outside), {}))
    run = replace(loop, bound=mk_bin("min", loop.bound, stop, I), body=inside)
    # The iteration that stops short, to its failing check, its names its own.
    made = [s for s in body[:upto] if s not in hoisted]
    renamed: dict[str, ir.Expr] = {t.var.name: ir.Var(f"{t.var.name}_stop", t.var.type)
                                   for t in made if isinstance(t, ir.Declare)}
    renamed[k.name] = stop
    last: list[ir.Stmt] = []
    for t in made:
        if isinstance(t, ir.Declare):
            var = renamed[t.var.name]
            assert isinstance(var, ir.Var)
            last.append(ir.Declare(var, rebuild(t.init, renamed), span=t.span))
        else:
            last += map_exprs([t], lambda e: rebuild(e, renamed))
    stopping = ir.If(mk_bin("<", stop, loop.bound, B), last, [], span=stepping.span)
    if loop.lockstep:  # the check fails before any later one of an earlier iteration
        return [*before, stopping, run]
    return [*before, run, stopping]


def _bounds(check: ir.Fail) -> tuple[ir.Expr, ir.Expr] | None:
    """(where, length) of a check `where < 0 || where >= length` (an index's)."""
    cond = check.cond
    if not (isinstance(cond, ir.Bin) and cond.op == "||" and isinstance(cond.left, ir.Bin)
            and isinstance(cond.right, ir.Bin) and cond.left.op == "<"
            and cond.right.op == ">=" and isinstance(cond.left.right, ir.Const)
            and cond.left.right.value == 0
            and ir.expr_key(cond.left.left) == ir.expr_key(cond.right.left)):
        return None
    return cond.left.left, cond.right.right


def _stepping(check: ir.Fail, k: ir.Var, values: dict[str, ir.Expr], invariant
              ) -> tuple[ir.Expr, ir.Expr] | None:
    """(the index at k = 0, the length) when the check is of an index that grows by one with
    k, in an array whose length no iteration changes, the index otherwise made of what no
    iteration changes (`values` expanding the body's declarations); else None."""
    found = _bounds(check)
    if found is None:
        return None
    where, bound = (rebuild(v, values) for v in found)
    first = rebuild(where, {k.name: ir.Const(0, I)})
    if not invariant(bound) or not invariant(first) or difference(
            rebuild(where, {k.name: mk_bin("+", k, ir.Const(1, I), I)}), where) != 1:
        return None
    return first, bound


def _known(e: ir.Expr, outside: str) -> ir.Expr:
    """e with the condition `outside` (by its key) false."""
    if ir.expr_key(e) == outside:
        return ir.Const(False, B)
    return map_children(e, lambda part: _known(part, outside))
