"""Optimisation passes over the IL, each a function from statements to statements.

    propagate   variables declared once and never assigned, with a constant or another such
                variable as value, are replaced by that value (then expressions are refolded)
    bound       integer ranges of loop variables and of what is computed from them decide
                comparisons, turn division and remainder of non-negative values by powers
                of two into shifts and masks, and take a sum's multiples of the divisor out
                of its quotient and remainder
    prune       statements with a constant condition keep only the branch that runs
    sweep       declarations and assignments of variables nothing depends on are dropped

The compiler runs them in turn to a fixed point (fcl.steps.OPTIMIZE). Every expression in the IL
is pure, so dropping an unused computation never changes what a program does.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from fcl.il import ir
from fcl.il.prove import Bounds, decide, loop_fact, with_facts
from fcl.il.ranges import (
    FACTS,
    INT_MAX,
    Interval,
    Ranges,
    forget,
    interval,
    memoized,
    note,
    refine,
    remember,
)
from fcl.il.simplify import linear, mk_bin, mk_select, mk_un, rebuild
from fcl.il.traverse import assigned, expr_fields, map_bodies, map_exprs, names, stmt_exprs

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
    docstring, fcl.il.ranges and fcl.il.prove)."""
    changed = assigned(stmts)

    def visit(stmts: list[ir.Stmt], ranges: Ranges, limits: Bounds, host: bool
              ) -> list[ir.Stmt]:
        out = []
        for s in stmts:
            with memoized():
                remember(ranges)
                changes: dict[str, Any] = {name: _ranged(getattr(s, name), ranges, limits)
                                           for name in expr_fields(s)
                                           if isinstance(getattr(s, name), ir.Expr)}
            new = replace(s, **changes) if changes else s
            note(new, ranges, changed, lambda e: interval(e, ranges))
            if isinstance(new, ir.Declare) and new.var.type == ir.INT \
                    and new.var.name not in changed:
                limits[new.var.name] = ("=", new.init)
            if isinstance(new, ir.If):
                # Each branch knows its condition's outcome: `if i >= 1 then index a (i - 1)`
                # needs no check that i - 1 >= 0; nor `if i < n then .. else index b (i - n)`
                # that i - n >= 0 (a linear fact, while nothing it mentions changes).
                def branch(body: list[ir.Stmt], holds: bool, cond: ir.Expr) -> list[ir.Stmt]:
                    steady = assigned(body)
                    facts = with_facts(limits, cond, holds, ranges,
                                       lambda fact: not names(fact) & steady)
                    return visit(body, refine(cond, holds, ranges, changed), facts, host)
                new = replace(new, then=branch(new.then, True, new.cond),
                              else_=branch(new.else_, False, new.cond))
            elif isinstance(new, ir.Fail) and host:
                # The host stops at a failed check, so what follows may assume it passed, until
                # a variable it mentions changes (a failing work-item goes on: not in kernels).
                ranges.update(refine(new.cond, False, ranges, set()))
                ranges[FACTS] = (1, 1)  # facts to forget when their variables change
            elif ir.children(new):
                new = visit_loop(new, ranges, limits, host)
            if ranges.get(FACTS) and assigned([new]):
                _forget(ranges, assigned([new]))
            out.append(new)
        return out

    def visit_loop(s: ir.Stmt, ranges: Ranges, limits: Bounds, host: bool) -> ir.Stmt:
        inner = dict(limits)
        if isinstance(s, (ir.SeqFor, ir.ParFor, ir.Distribute)) and \
                not names(s.bound) & assigned(s.body):
            inner[s.var.name] = ("<", s.bound)
            if s.var.name not in assigned(s.body):
                inner = loop_fact(inner, s.var, s.bound, ranges)
        parallel = isinstance(s, (ir.ParFor, ir.Distribute))
        return map_bodies(s, lambda body: visit(body, dict(ranges), inner,
                                                host and not parallel))

    return visit(stmts, {}, {}, True)


def _forget(ranges: Ranges, changed: set[str]) -> None:
    """Drop what a passed check told of variables that have changed since."""
    for key in [k for k in ranges if k != FACTS and not k.isidentifier()]:
        fact_about = ir.keyed(key)  # None: an expression no one holds, so no use to keep
        if fact_about is None or names(fact_about) & changed:
            del ranges[key]
    for name in changed & ranges.keys():
        del ranges[name]


def _ranged(e: ir.Expr, ranges: Ranges, limits: Bounds) -> ir.Expr:
    """e with the rewrites its operands' ranges allow, bottom-up."""
    def again(part: ir.Expr) -> ir.Expr:
        return _ranged(part, ranges, limits)
    if isinstance(e, ir.Index):
        return ir.Index(e.array, again(e.index))
    if isinstance(e, ir.Un):
        return mk_un(e.op, again(e.arg), e.type)
    if isinstance(e, ir.Select):
        cond = again(e.cond)
        return mk_select(cond, _ranged_where(e.then, cond, True, ranges, limits),
                         _ranged_where(e.else_, cond, False, ranges, limits), e.type)
    if isinstance(e, ir.Bin) and e.op in ("&&", "||"):
        # The right operand is only evaluated when the left one has decided nothing yet.
        left = again(e.left)
        return mk_bin(e.op, left, _ranged_where(e.right, left, e.op == "&&", ranges, limits),
                      e.type)
    if isinstance(e, ir.Var):
        known = ranges.get(e.name)
        return ir.Const(known[0], ir.INT) if known and known[0] == known[1] else e
    if not isinstance(e, ir.Bin):
        return e
    left, right = again(e.left), again(e.right)
    a, b = interval(left, ranges), interval(right, ranges)
    if e.op in ("%", "/") and (a is None or a[0] < 0) \
            and decide(">=", left, ir.Const(0, ir.INT), ranges, limits, only_true=True):
        # C's remainder and quotient take the dividend's sign: say it is never negative.
        a = (0, a[1] if a is not None else INT_MAX)
        ranges[ir.expr_key(left)], ranges[FACTS] = a, (1, 1)
        forget(left, ranges)
    if e.op in ir.COMPARISONS and ir.type_of(left) == ir.INT:
        decided = _decide(e.op, a, b) if a is not None and b is not None else None
        if decided is None:
            decided = decide(e.op, left, right, ranges, limits)
        if decided is not None:
            return ir.Const(decided, ir.BOOL)
    if a is not None and b is not None and e.op in ("min", "max") \
            and (a[1] <= b[0] or b[1] <= a[0]):
        return left if (a[1] <= b[0]) == (e.op == "min") else right
    divisor = int(right.value) if isinstance(right, ir.Const) and e.type == ir.INT else 0
    if e.op in ("/", "%", ">>", "&") and divisor > 0:
        split = _without_multiples(e.op, left, divisor, ranges, a)
        if split is not None:
            return split
    if e.op in ("/", "%") and a is not None and a[0] >= 0 \
            and divisor > 1 and divisor & (divisor - 1) == 0:
        if e.op == "/":
            return mk_bin(">>", left, ir.Const(divisor.bit_length() - 1, ir.INT), ir.INT)
        return mk_bin("&", left, ir.Const(divisor - 1, ir.INT), ir.INT)
    return mk_bin(e.op, left, right, e.type)


def _ranged_where(e: ir.Expr, cond: ir.Expr, holds: bool, ranges: Ranges, limits: Bounds
                  ) -> ir.Expr:
    """_ranged of e where `cond` is known to have the value `holds`."""
    inner_ranges = refine(cond, holds, ranges, set())
    inner_limits = with_facts(limits, cond, holds, ranges)
    remember(inner_ranges)
    return _ranged(e, inner_ranges, inner_limits)


def _without_multiples(op: str, left: ir.Expr, amount: int, ranges: Ranges,
                       known: Interval | None) -> ir.Expr | None:
    """`(m * d + r) / d` as m and `(m * d + r) % d` as r, where r lies in [0, d); likewise
    `>> k` and `& (2^k - 1)` for d = 2^k. Index arithmetic splits a work-group's number into
    tile coordinates this way (`(row * 256 + col) >> 8`); the C compiler cannot, not knowing
    r's range. None where that does not apply."""
    if op in ("/", "%"):
        d = amount
    elif op == ">>":
        d = 1 << amount if amount < 31 else 0
    else:
        d = amount + 1 if amount & (amount + 1) == 0 else 0
    if d < 2:
        return None
    terms, const = linear(left)
    multiples = {key: (atom, coef // d) for key, (atom, coef) in terms.items() if coef % d == 0}
    if not multiples and const < d:
        # Nothing to take out; but a value known to lie in [0, d) has no quotient and is its
        # own remainder (`i >> 8` and `i & 255` of an i < 256). Only for shifts and masks:
        # dropping a `%` also let the sums around it grow into one (the nested-expression
        # programs of bench/compile_speed.py compiled 40% slower). `known` is left's interval.
        if op in ("/", "%") or known is None or known[0] < 0 or known[1] >= d:
            return None
        return left if op in ("%", "&") else ir.Const(0, ir.INT)
    rest: ir.Expr = ir.Const(const % d, ir.INT)
    for key, (atom, coef) in terms.items():
        if key not in multiples:
            rest = mk_bin("+", rest, mk_bin("*", atom, ir.Const(coef, ir.INT), ir.INT), ir.INT)
    low = interval(rest, ranges)
    if low is None or low[0] < 0 or low[1] >= d:
        return None
    # & keeps low bits, which wrapping never changes; the others need the exact sum, and C's
    # / and % round towards zero, which is downwards only for a sum that is not negative.
    whole = interval(left, ranges)
    if op != "&" and (whole is None or (op != ">>" and whole[0] < 0)):
        return None
    if op in ("%", "&"):
        return rest
    quotient: ir.Expr = ir.Const(const // d, ir.INT)
    for atom, coef in multiples.values():
        quotient = mk_bin("+", quotient, mk_bin("*", atom, ir.Const(coef, ir.INT), ir.INT),
                          ir.INT)
    return quotient


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
            if isinstance(s, ir.Input):
                live.update((v.name, v) for v in ir.input_sets(s))
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
