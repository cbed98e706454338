"""Optimisation passes over the IL, each a function from statements to statements.

    propagate   variables declared once and never assigned, with a constant or another such
                variable as value, are replaced by that value (then expressions are refolded)
    bound       integer ranges of loop variables and of what is computed from them decide
                comparisons, and turn division and remainder of non-negative values by powers
                of two into shifts and masks
    prune       statements with a constant condition keep only the branch that runs
    sweep       declarations and assignments of variables nothing depends on are dropped

`optimize` runs them to a fixed point. Every expression in the IL is pure, so dropping an
unused computation never changes what a program does.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fcl.il import ir
from fcl.il.ranges import Interval, Ranges, interval, note
from fcl.il.simplify import mk_bin, mk_select, mk_un, rebuild
from fcl.il.traverse import assigned, expr_fields, map_bodies, map_exprs, stmt_exprs

PASSES = (("propagate", lambda s: propagate(s)), ("bound", lambda s: bound(s)),
          ("prune", lambda s: prune(s)), ("sweep", lambda s: sweep(s)))


def optimize(stmts: list[ir.Stmt], rounds: int = 4,
             check: Callable[[str, list[ir.Stmt]], None] | None = None) -> list[ir.Stmt]:
    """The passes in turn until nothing changes; `check(pass name, statements)` after each."""
    if check is not None:
        check("lower", stmts)
    for _ in range(rounds):
        before = ir.show_stmts(stmts)
        for name, run in PASSES:
            stmts = run(stmts)
            if check is not None:
                check(name, stmts)
        if ir.show_stmts(stmts) == before:
            break
    return stmts


# ---- the passes --------------------------------------------------------------------------------

def propagate(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    changed = assigned(stmts)
    substitute: dict[str, ir.Expr] = {}
    for s in ir.walk(stmts):
        if isinstance(s, ir.Declare) and s.var.name not in changed:
            init = rebuild(s.init, substitute)
            if isinstance(init, ir.Const) or (isinstance(init, ir.Var)
                                              and init.name not in changed):
                substitute[s.var.name] = init
    if not substitute:
        return stmts
    rewritten = map_exprs(stmts, lambda e: rebuild(e, substitute))
    return _drop(rewritten, set(substitute), assignments=False)


def bound(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """Rewrite expressions with what the ranges of integer variables tell (see the module
    docstring and fcl.il.ranges)."""
    changed = assigned(stmts)
    ranges: Ranges = {}

    def visit(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out = []
        for s in stmts:
            changes: dict[str, Any] = {name: _ranged(getattr(s, name), ranges)
                                       for name in expr_fields(s)
                                       if isinstance(getattr(s, name), ir.Expr)}
            new = replace(s, **changes) if changes else s
            note(new, ranges, changed, lambda e: interval(e, ranges))
            out.append(map_bodies(new, visit))
        return out

    return visit(stmts)


def _ranged(e: ir.Expr, ranges: Ranges) -> ir.Expr:
    """e with the rewrites its operands' ranges allow, bottom-up."""
    if isinstance(e, ir.Index):
        return ir.Index(e.array, _ranged(e.index, ranges))
    if isinstance(e, ir.Un):
        return mk_un(e.op, _ranged(e.arg, ranges), e.type)
    if isinstance(e, ir.Select):
        return mk_select(_ranged(e.cond, ranges), _ranged(e.then, ranges),
                         _ranged(e.else_, ranges), e.type)
    if isinstance(e, ir.Var):
        known = ranges.get(e.name)
        return ir.Const(known[0], ir.INT) if known and known[0] == known[1] else e
    if not isinstance(e, ir.Bin):
        return e
    left, right = _ranged(e.left, ranges), _ranged(e.right, ranges)
    a, b = interval(left, ranges), interval(right, ranges)
    if a is not None and b is not None:
        if e.op in ir.COMPARISONS:
            decided = _decide(e.op, a, b)
            if decided is not None:
                return ir.Const(decided, ir.BOOL)
        if e.op in ("min", "max") and (a[1] <= b[0] or b[1] <= a[0]):
            return left if (a[1] <= b[0]) == (e.op == "min") else right
    divisor = int(right.value) if isinstance(right, ir.Const) and e.type == ir.INT else 0
    if e.op in ("/", "%") and a is not None and a[0] >= 0 \
            and divisor > 1 and divisor & (divisor - 1) == 0:
        if e.op == "/":
            return mk_bin(">>", left, ir.Const(divisor.bit_length() - 1, ir.INT), ir.INT)
        return mk_bin("&", left, ir.Const(divisor - 1, ir.INT), ir.INT)
    return mk_bin(e.op, left, right, e.type)


def _decide(op: str, a: Interval, b: Interval) -> bool | None:
    if op in ("<", ">="):
        known = True if a[1] < b[0] else False if a[0] >= b[1] else None
        return known if known is None or op == "<" else not known
    if op in (">", "<="):
        known = True if a[0] > b[1] else False if a[1] <= b[0] else None
        return known if known is None or op == ">" else not known
    if a[1] < b[0] or b[1] < a[0]:  # == and != of disjoint ranges
        return op == "!="
    return None


def prune(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        s = map_bodies(s, prune)
        if isinstance(s, ir.If) and isinstance(s.cond, ir.Const):
            out += s.then if s.cond.value else s.else_
        elif not _does_nothing(s):
            out.append(s)
    return out


def _does_nothing(s: ir.Stmt) -> bool:
    """A check that cannot fail, a loop that never runs, an assignment of a variable to itself."""
    if isinstance(s, ir.Fail):
        return isinstance(s.cond, ir.Const) and not s.cond.value
    if isinstance(s, (ir.SeqFor, ir.ParFor, ir.Distribute)):
        return isinstance(s.bound, ir.Const) and s.bound.value <= 0
    return isinstance(s, ir.Assign) and isinstance(s.value, ir.Var) and s.value.name == s.var.name


def sweep(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """Drop declarations and assignments of variables no other statement needs."""
    defining: dict[str, list[ir.Expr]] = {}
    live: dict[str, ir.Var] = {}
    for s in ir.walk(stmts):
        if isinstance(s, (ir.Declare, ir.Assign)) and not isinstance(s.var.type, ir.ArrayType):
            defining.setdefault(s.var.name, []).append(s.init if isinstance(s, ir.Declare)
                                                       else s.value)
        else:
            for e in stmt_exprs(s):
                ir.expr_vars(e, live)
            if isinstance(s, (ir.Declare, ir.Assign)):
                live[s.var.name] = s.var
            if isinstance(s, ir.ReadCSV):
                live[s.length.name] = s.length
    frontier = list(live)
    while frontier:
        name = frontier.pop()
        for e in defining.get(name, []):
            found: dict[str, ir.Var] = {}
            ir.expr_vars(e, found)
            for v in found.keys() - live.keys():
                live[v] = found[v]
                frontier.append(v)
    return _drop(stmts, set(defining) - live.keys(), assignments=True)


def _drop(stmts: list[ir.Stmt], names: set[str], assignments: bool) -> list[ir.Stmt]:
    """The statements without the declarations (and `assignments`, assignments) of `names`,
    at any depth."""
    out = []
    for s in stmts:
        if isinstance(s, (ir.Declare, ir.Assign)) and s.var.name in names \
                and (assignments or isinstance(s, ir.Declare)):
            continue
        out.append(map_bodies(s, lambda body: _drop(body, names, assignments)))
    return out
