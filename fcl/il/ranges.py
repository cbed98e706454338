"""Integer ranges: bounds on what int expressions can evaluate to.

One analysis, shared by the optimisation passes (passes.bound decides comparisons and turns
divisions into shifts) and the back end (shape.widen keeps indices that provably fit in size_t).
A loop variable lies in [start, bound); a variable declared once and never assigned lies in the
range of its initial value. Names are unique, so one table serves all scopes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from fcl.il import ir
from fcl.intmath import INT_MAX, INT_MIN

Interval = tuple[int, int]
Ranges = dict[str, Interval]
FACTS = "#facts"  # present in a table that also holds ranges of expressions (see refine)


# ---- memos --------------------------------------------------------------------------------------
# interval() of an expression recurses through all of it, and the optimisation passes ask for the
# interval of every node of an expression, bottom-up: on a chain nested n deep, n^2 steps (and the
# prover's remainders, n^3). Inside `memoized`, the answers for tables given to `remember` are
# kept per expression object: such a table must not change while its answers are kept, except
# through `forget`, which drops what was kept about an expression it says more of.

_memos: ContextVar[dict[int, tuple[object, dict]] | None] = ContextVar("fcl_memos", default=None)


@contextmanager
def memoized() -> Iterator[None]:
    token = _memos.set({})
    try:
        yield
    finally:
        _memos.reset(token)


def remember(*tables: object) -> None:
    """Keep answers about these range tables in the current memo (interval's, and the prover's
    remainders, which also hold the bounds they were found under)."""
    memos = _memos.get()
    if memos is not None:
        for table in tables:
            memos.setdefault(id(table), (table, {}))  # the table is held: its id stays its own


def memo_of(table: object, e: ir.Expr) -> dict | None:
    """The answers kept about e under a table (keyed by the caller), or None if none are kept."""
    memos = _memos.get()
    if memos is None:
        return None
    entry = memos.get(id(table))
    if entry is None or entry[0] is not table:
        return None
    return entry[1].setdefault(e, {})


def forget(e: ir.Expr, table: object) -> None:
    """Drop what was kept about e under a table that now says more of it."""
    memos = _memos.get()
    entry = memos.get(id(table)) if memos is not None else None
    if entry is not None and entry[0] is table:
        entry[1].pop(e, None)


def interval(e: ir.Expr, ranges: Ranges) -> Interval | None:
    """Bounds on an int expression's value (None: unknown); none where C arithmetic could wrap."""
    memo = memo_of(ranges, e) if isinstance(e, ir.Bin) else None
    if memo is None:
        return _interval(e, ranges)
    if "interval" not in memo:
        memo["interval"] = _interval(e, ranges)
    return memo["interval"]


def _interval(e: ir.Expr, ranges: Ranges) -> Interval | None:
    if not isinstance(e, (ir.Const, ir.Var, ir.Index, ir.Bin, ir.Un, ir.Select)):
        # A later stage's expression (a work-item id): what the table says of its key.
        return ranges.get(e.key_il())
    if isinstance(e, ir.Const):
        return (int(e.value), int(e.value)) if e.type == ir.INT else None
    if isinstance(e, ir.Var):
        return ranges.get(e.name)
    if isinstance(e, ir.Un) and e.op == "clz":
        return (0, 32)
    if isinstance(e, ir.Select):
        a, b = interval(e.then, ranges), interval(e.else_, ranges)
        return (min(a[0], b[0]), max(a[1], b[1])) if a and b else None
    if not isinstance(e, ir.Bin) or e.type != ir.INT:
        return None
    found = _bin_interval(e, ranges)
    if FACTS in ranges:
        fact = ranges.get(ir.expr_key(e))
        if fact is not None:
            return fact if found is None else (max(fact[0], found[0]), min(fact[1], found[1]))
    return found


def _bin_interval(e: ir.Bin, ranges: Ranges) -> Interval | None:
    a, b = interval(e.left, ranges), interval(e.right, ranges)
    if e.op == "&" and ((a and a[0] >= 0) or (b and b[0] >= 0)):
        return (0, min(x[1] for x in (a, b) if x and x[0] >= 0))
    if e.op in ("min", "max") and (a is None) != (b is None):
        # One side known bounds it on one side: min(x, 64) <= 64 whatever x is.
        known = a or b
        assert known is not None
        return (INT_MIN, known[1]) if e.op == "min" else (known[0], INT_MAX)
    if a is None or b is None:
        return None
    if e.op in ("+", "-", "*"):
        corners = [{"+": x + y, "-": x - y, "*": x * y}[e.op] for x in a for y in b]
        found = (min(corners), max(corners))
    elif e.op in ("min", "max"):
        pick = min if e.op == "min" else max
        found = (pick(a[0], b[0]), pick(a[1], b[1]))
    elif e.op == "/" and b[0] > 0:  # monotone in each operand: the extremes are at corners
        corners = [_trunc_div(x, y) for x in a for y in b]
        found = (min(corners), max(corners))
    elif e.op == "%" and b[0] > 0 and a[0] >= 0:
        found = (0, min(a[1], b[1] - 1))
    elif e.op == ">>" and a[0] >= 0 and b[0] >= 0 and b[1] < 32:
        found = (a[0] >> b[1], a[1] >> b[0])
    elif e.op in ("|", "^") and a[0] >= 0 and b[0] >= 0:
        # No bit above the highest of either operand's: below the next power of two.
        found = (0, (1 << max(a[1], b[1]).bit_length()) - 1)
    else:
        return None
    return found if found[0] >= INT_MIN and found[1] <= INT_MAX else None


# A comparison's operator once its sides are swapped, and once it is negated.
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def refine(cond: ir.Expr, holds: bool, ranges: Ranges, assigned: set[str]) -> Ranges:
    """The ranges, narrowed by what `cond` having the value `holds` tells of its variables
    (those never assigned after their definition)."""
    narrowed = dict(ranges)
    _narrow(cond, holds, narrowed, assigned)
    return narrowed


def _narrow(cond: ir.Expr, holds: bool, ranges: Ranges, assigned: set[str]) -> None:
    if isinstance(cond, ir.Un) and cond.op == "not":
        _narrow(cond.arg, not holds, ranges, assigned)
        return
    if isinstance(cond, ir.Select) and isinstance(cond.else_, ir.Const) \
            and bool(cond.else_.value) != holds:
        # `c ? t : false` holding (an && of C's ternary form): c holds and t holds; likewise
        # `c ? t : true` failing.
        _narrow(cond.cond, True, ranges, assigned)
        _narrow(cond.then, holds, ranges, assigned)
        return
    if isinstance(cond, ir.Select) and isinstance(cond.then, ir.Const) \
            and bool(cond.then.value) != holds:
        # `c ? true : e` failing (an ||): c fails and e fails; `c ? false : e` holding.
        _narrow(cond.cond, False, ranges, assigned)
        _narrow(cond.else_, holds, ranges, assigned)
        return
    if not isinstance(cond, ir.Bin):
        return
    if (cond.op == "&&" and holds) or (cond.op == "||" and not holds):
        _narrow(cond.left, holds, ranges, assigned)
        _narrow(cond.right, holds, ranges, assigned)
        return
    if cond.op not in _NEGATED:
        return
    outcome = cond.op if holds else _NEGATED[cond.op]
    if outcome == "==":
        _multiple(cond, ranges, assigned)
    for side, other, op in ((cond.left, cond.right, outcome),
                            (cond.right, cond.left, _MIRRORED[outcome])):
        if ir.type_of(side) != ir.INT or isinstance(side, ir.Const) or _names(side) & assigned:
            continue
        bound = interval(other, ranges)
        if bound is None:
            continue
        # A variable's range, or a fact about a whole expression (`i % 33 < 32`), by its key.
        key = ir.expr_key(side)
        if not isinstance(side, ir.Var):
            ranges[FACTS] = (1, 1)
        low, high = ranges.get(key, interval(side, ranges) or (INT_MIN, INT_MAX))
        if op == ">=" or op == "==":
            low = max(low, bound[0])
        if op == ">":
            low = max(low, bound[0] + 1)
        if op == "<=" or op == "==":
            high = min(high, bound[1])
        if op == "<":
            high = min(high, bound[1] - 1)
        if op == "!=" and bound[0] == bound[1]:
            low, high = low + (low == bound[0]), high - (high == bound[0])
        if low <= high:
            ranges[key] = (low, high)


def _multiple(cond: ir.Bin, ranges: Ranges, assigned: set[str]) -> None:
    """`x % m == 0` or `x & (m - 1) == 0` (m a power of two) holding, for a variable x and a
    constant m > 0: x's range shrinks to the multiples of m in it. Harris's interleaved step,
    `if i % (2 * s) == 0 then .. index a (i + s)` for i < n, reads below n - s then."""
    test, zero = (cond.left, cond.right) if isinstance(cond.right, ir.Const) else \
        (cond.right, cond.left)
    if not (isinstance(zero, ir.Const) and zero.value == 0 and isinstance(test, ir.Bin)
            and isinstance(test.left, ir.Var) and test.left.name not in assigned
            and isinstance(test.right, ir.Const)):
        return
    amount = int(test.right.value)
    if test.op == "%" and amount > 0:
        m = amount
    elif test.op == "&" and amount >= 0 and amount & (amount + 1) == 0:
        m = amount + 1
    else:
        return
    low, high = ranges.get(test.left.name, interval(test.left, ranges) or (INT_MIN, INT_MAX))
    low, high = -(-low // m) * m, high // m * m
    if low <= high:
        ranges[test.left.name] = (low, high)


def _names(e: ir.Expr) -> set[str]:
    found: dict[str, ir.Var] = {}
    ir.expr_vars(e, found)
    return set(found)


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // y
    return q if x >= 0 else -q


def note(s: ir.Stmt, ranges: Ranges, assigned: set[str],
         bounds: Callable[[ir.Expr], Interval | None]) -> None:
    """Record in `ranges` what statement s tells about the variable it defines, if anything:
    a single int definition, or a counted loop (a statement with a variable, a bound, a body
    and optionally a start, 0 if not given; its step is positive). `bounds` gives an
    expression's interval under `ranges`."""
    if isinstance(s, ir.Declare):
        if s.var.type == ir.INT and s.var.name not in assigned:
            found = bounds(s.init)
            if found is not None:
                ranges[s.var.name] = found
        return
    if isinstance(s, ir.Input):  # an array's length, set once (names are unique)
        if s.length is not None:
            ranges[s.length.name] = (0, INT_MAX)
        return
    if not (hasattr(s, "var") and hasattr(s, "bound") and hasattr(s, "body")):
        return
    start = bounds(s.start) if hasattr(s, "start") else (0, 0)
    if start is None or start[0] < 0:
        return
    limit = bounds(s.bound)
    # An unknown limit is still at most INT_MAX; a loop that never runs binds nothing.
    ranges[s.var.name] = (start[0], max(limit[1] - 1, start[0]) if limit else INT_MAX)
