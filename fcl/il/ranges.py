"""Integer ranges: bounds on what int expressions can evaluate to.

One analysis, shared by the optimisation passes (passes.bound decides comparisons and turns
divisions into shifts) and the back end (shape.widen keeps indices that provably fit in size_t).
A loop variable lies in [start, bound); a variable declared once and never assigned lies in the
range of its initial value. Names are unique, so one table serves all scopes.
"""
from __future__ import annotations

from collections.abc import Callable

from fcl.il import ir

Interval = tuple[int, int]
Ranges = dict[str, Interval]
INT_MIN, INT_MAX = -2**31, 2**31 - 1


def interval(e: ir.Expr, ranges: Ranges) -> Interval | None:
    """Bounds on an int expression's value (None: unknown); none where C arithmetic could wrap."""
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
    a, b = interval(e.left, ranges), interval(e.right, ranges)
    if e.op == "&" and ((a and a[0] >= 0) or (b and b[0] >= 0)):
        return (0, min(x[1] for x in (a, b) if x and x[0] >= 0))
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
    else:
        return None
    return found if found[0] >= INT_MIN and found[1] <= INT_MAX else None


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
    if not (hasattr(s, "var") and hasattr(s, "bound") and hasattr(s, "body")):
        return
    start = bounds(s.start) if hasattr(s, "start") else (0, 0)
    if start is None or start[0] < 0:
        return
    limit = bounds(s.bound)
    # An unknown limit is still at most INT_MAX; a loop that never runs binds nothing.
    ranges[s.var.name] = (start[0], max(limit[1] - 1, start[0]) if limit else INT_MAX)
