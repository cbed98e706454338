"""Symbolic bounds: deciding comparisons that intervals alone cannot, so that run-time checks
which cannot fail are not emitted.

An index into an array whose length is only known at run time (`generate (len / 2) ...`, a
CSV file's length) has no useful interval, but the loop around it bounds it by an expression:
inside `for i < min(len / 2, len - len / 2)`, `i + len / 2 < len` holds whatever `len` is. Both
sides become linear forms over atoms (variables and other sub-expressions), and atoms are
replaced by their bounds, symbolic ones first so that they can cancel: a loop variable by its
loop's limit minus one (each side of a `min` in turn), a variable defined once by its value,
`x / c` and `x >> k` by `x / c` in rational arithmetic (for x >= 0, c > 0), then any atom by its
interval (`x % c` by [0, c - 1] where x >= 0 can be shown), or by the range of an int.

Conditions also tell linear facts, kept with the bounds (with_facts): in the else branch of
`if t < a`, `t - a >= 0`, so `index xs (t - a)` needs no check; inside `for i < n`,
`n - i - 1 >= 0`, so `n - 1 >= 0` there; where `x % m == 0` with x, m >= 1, `x - m >= 0`. A
comparison adds one fact at a time to the difference it bounds, which cancels what they share.
`min` and `max` are decided side by side: `min(n - 1, max(0, i)) >= 0` when both sides are.
"""
from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

from fcl.il import ir
from fcl.il.ranges import INT_MAX, INT_MIN, Ranges, interval, memo_of

# What is known of a variable: ("<", limit) for a loop variable, ("=", value) for one defined
# once and never assigned.
Bounds = dict[str, tuple[str, ir.Expr]]
# Coefficients and constants: ints, and exact fractions only where a division brings them (Python's
# ints are many times faster than Fractions, and the two mix exactly).
Number = int | Fraction
DEPTH = 4  # symbolic substitutions tried one inside another
# A linear fact `e >= 0` is kept in the bounds by its key (ir.expr_key) after this prefix, which no
# variable's name has; e's exact value is the one C computes (it cannot wrap around).
FACT = ">=0 "
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


class Form:
    """sum(coefficient * atom) + constant, atoms by their keys (ir.expr_key)."""

    def __init__(self, terms: dict[str, Number] | None = None, constant: Number = 0,
                 atoms: dict[str, ir.Expr] | None = None):
        self.terms = {k: c for k, c in (terms or {}).items() if c != 0}
        self.constant = constant
        self.atoms = atoms or {}

    def plus(self, other: Form, scale: Number = 1) -> Form:
        terms = dict(self.terms)
        for key, c in other.terms.items():
            terms[key] = terms.get(key, 0) + scale * c
        return Form(terms, self.constant + scale * other.constant, {**self.atoms, **other.atoms})

    def without(self, key: str) -> Form:
        return Form({k: c for k, c in self.terms.items() if k != key}, self.constant, self.atoms)


def linear(e: ir.Expr) -> Form:
    """e as a sum of atoms times coefficients (kept on e: a Form is never changed)."""
    if isinstance(e, ir.Const) and e.type == ir.INT:
        return Form(constant=int(e.value))
    if isinstance(e, ir.Bin) and e.type == ir.INT:
        memo = ir.structural_memo(e)
        if "linear" not in memo:
            memo["linear"] = _linear_bin(e)
        return memo["linear"]
    key = ir.expr_key(e)
    return Form({key: 1}, atoms={key: e})


def _linear_bin(e: ir.Bin) -> Form:
    if e.op in ("+", "-"):
        return linear(e.left).plus(linear(e.right), 1 if e.op == "+" else -1)
    if e.op == "*" and isinstance(e.right, ir.Const):
        return Form().plus(linear(e.left), int(e.right.value))
    if e.op == "*" and isinstance(e.left, ir.Const):
        return Form().plus(linear(e.right), int(e.left.value))
    key = ir.expr_key(e)
    return Form({key: 1}, atoms={key: e})


def decide(op: str, left: ir.Expr, right: ir.Expr, ranges: Ranges, bounds: Bounds,
           only_true: bool = False) -> bool | None:
    """The outcome of `left op right` if it is always the same, else None; with `only_true`,
    True if it always holds, else None (half the work, where no other answer helps)."""
    if op not in ("<", "<=", ">", ">="):
        return None
    if op in (">", ">="):  # a > b is b < a
        left, right, op = right, left, "<" if op == ">" else "<="
    sides = _by_sides(op, left, right, ranges, bounds)
    if sides is not None:
        return sides
    difference = linear(left).plus(linear(right), -1)  # left - right
    # +, - and * wrap around modulo 2^32 in C, so the exact values of both sides must fit in an
    # int: then C computes them, whatever their parts did on the way. When left < right, that
    # is left >= INT_MIN and right <= INT_MAX; when left >= right, the other way round.
    most = _with_facts(difference, ranges, bounds)
    if most is not None and (most < 0 if op == "<" else most <= 0) \
            and _fits(left, INT_MIN, ranges, bounds) and _fits(right, INT_MAX, ranges, bounds):
        return True
    if only_true:
        return None
    least = _with_facts(Form().plus(difference, -1), ranges, bounds)
    if least is not None and (-least >= 0 if op == "<" else -least > 0) \
            and _fits(right, INT_MIN, ranges, bounds) and _fits(left, INT_MAX, ranges, bounds):
        return False
    return None


def _by_sides(op: str, left: ir.Expr, right: ir.Expr, ranges: Ranges, bounds: Bounds
              ) -> bool | None:
    """`left op right` (op < or <=) decided through a `min` or `max` on either side: `min(a, b)
    < r` holds when either of `a < r` and `b < r` does, fails when both fail; `max` the other way
    round, and the same on the right. None when neither side is one, or nothing is decided."""
    for e, on_left in ((left, True), (right, False)):
        if isinstance(e, ir.Bin) and e.op in ("min", "max"):
            outcomes = [decide(op, part, right, ranges, bounds) if on_left
                        else decide(op, left, part, ranges, bounds) for part in (e.left, e.right)]
            either = (e.op == "min") == on_left  # a < min(x, y) needs both: a < x and a < y
            if any(o is either for o in outcomes):
                return either
            if all(o is (not either) for o in outcomes):
                return not either
            return None
    return None


def _with_facts(form: Form, ranges: Ranges, bounds: Bounds) -> Number | None:
    """An upper bound on the form's value: the least of its own and of it plus each known fact
    (a fact f >= 0 makes form <= form + f, where their atoms may cancel)."""
    found = [_largest(form, ranges, bounds, DEPTH)]
    found += [_largest(form.plus(linear(fact)), ranges, bounds, DEPTH)
              for key, (_, fact) in bounds.items() if key.startswith(FACT)]
    known = [f for f in found if f is not None]
    return min(known) if known else None


def with_facts(bounds: Bounds, cond: ir.Expr, holds: bool, ranges: Ranges,
               keep: Callable[[ir.Expr], bool] = lambda fact: True) -> Bounds:
    """The bounds and the linear facts that `cond` having the value `holds` tells (those that
    `keep` accepts: the caller drops facts about variables that may change while they hold)."""
    found = dict(bounds)
    for fact in _facts(cond, holds, ranges, bounds):
        if keep(fact):
            found[FACT + ir.expr_key(fact)] = (">=", fact)
    return found


def loop_fact(bounds: Bounds, var: ir.Var, limit: ir.Expr, ranges: Ranges) -> Bounds:
    """The bounds inside `for var < limit`: `limit - var - 1 >= 0` besides var's own bound."""
    if not _exact(limit, ranges):
        return bounds
    return {**bounds, FACT + f"{var.name} < {ir.expr_key(limit)}": (
        ">=", _minus(limit, ir.Bin("+", var, ir.Const(1, ir.INT), ir.INT)))}


def _facts(cond: ir.Expr, holds: bool, ranges: Ranges, bounds: Bounds) -> list[ir.Expr]:
    """Int expressions that are >= 0 when `cond` is `holds` (the forms of fcl.il.ranges.refine)."""
    if isinstance(cond, ir.Un) and cond.op == "not":
        return _facts(cond.arg, not holds, ranges, bounds)
    if isinstance(cond, ir.Select) and isinstance(cond.else_, ir.Const) \
            and bool(cond.else_.value) != holds:  # `c ? t : false` holding: c and t hold
        return _facts(cond.cond, True, ranges, bounds) + _facts(cond.then, holds, ranges, bounds)
    if isinstance(cond, ir.Select) and isinstance(cond.then, ir.Const) \
            and bool(cond.then.value) != holds:  # `c ? true : e` failing: neither holds
        return _facts(cond.cond, False, ranges, bounds) + \
            _facts(cond.else_, holds, ranges, bounds)
    if not isinstance(cond, ir.Bin):
        return []
    if (cond.op == "&&" and holds) or (cond.op == "||" and not holds):
        return _facts(cond.left, holds, ranges, bounds) + _facts(cond.right, holds, ranges, bounds)
    if cond.op not in _NEGATED or ir.type_of(cond.left) != ir.INT:
        return []
    op = cond.op if holds else _NEGATED[cond.op]
    left, right = cond.left, cond.right
    if op == "==" and isinstance(right, ir.Const) and right.value == 0 \
            and isinstance(left, ir.Bin) and _modulus(left) is not None:
        # x a multiple of m, both at least 1: x >= m.
        x, m = left.left, _modulus(left)
        assert m is not None
        one = ir.Const(1, ir.INT)
        if _exact(x, ranges) and _exact(m, ranges) and decide(">=", x, one, ranges, bounds) \
                and decide(">=", m, one, ranges, bounds):
            return [_minus(x, m)]
    if not (_exact(left, ranges) and _exact(right, ranges)):
        return []
    if op in (">", ">="):  # a > b is b < a
        left, right, op = right, left, "<" if op == ">" else "<="
    if op == "<":
        return [_minus(right, ir.Bin("+", left, ir.Const(1, ir.INT), ir.INT))]
    if op == "<=":
        return [_minus(right, left)]
    return [_minus(left, right), _minus(right, left)] if op == "==" else []


def _modulus(e: ir.Bin) -> ir.Expr | None:
    """m where e is `x % m`, or `x & (m - 1)` for m a power of two (as passes.bound writes
    `x % m` where x >= 0)."""
    if e.op == "%":
        return e.right
    if e.op == "&" and isinstance(e.right, ir.Const):
        mask = int(e.right.value)
        if mask > 0 and mask & (mask + 1) == 0:
            return ir.Const(mask + 1, ir.INT)
    return None


def _minus(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Bin("-", a, b, ir.INT)


def _exact(e: ir.Expr, ranges: Ranges) -> bool:
    """Whether C computes e's exact value: an atom (a variable, or an expression the linear forms
    do not look into), or one whose range shows that nothing wraps around."""
    form = linear(e)
    return (not form.constant and list(form.terms.values()) == [1]) or \
        interval(e, ranges) is not None


def _fits(e: ir.Expr, limit: int, ranges: Ranges, bounds: Bounds) -> bool:
    """Whether e's exact value is at most INT_MAX (limit INT_MAX) or at least INT_MIN; a lone
    variable or other atom holds an int by definition."""
    form = linear(e)
    if (not form.constant and list(form.terms.values()) == [1]) or interval(e, ranges):
        return True
    if limit == INT_MAX:
        most = _largest(form, ranges, bounds, DEPTH)
        return most is not None and most <= INT_MAX
    least = _largest(Form().plus(form, -1), ranges, bounds, DEPTH)
    return least is not None and -least >= INT_MIN


def _largest(form: Form, ranges: Ranges, bounds: Bounds, depth: int) -> Number | None:
    """An upper bound on the form's value, or None."""
    if depth > 0:
        for key, c in form.terms.items():
            atom = form.atoms[key]
            options = _symbolic(atom, c > 0, ranges, bounds)
            if options:
                plain = interval(atom, ranges)  # the atom's own range may be the better bound
                if plain is not None:
                    options.append(Form(constant=plain[1] if c > 0 else plain[0]))
                # Of the constant bounds only the tightest can give the least result: one try.
                constants = [o.constant for o in options if not o.terms]
                if len(constants) > 1:
                    options = [o for o in options if o.terms]
                    options.append(Form(constant=min(constants) if c > 0 else max(constants)))
                tried = [_largest(form.without(key).plus(option, c), ranges, bounds, depth - 1)
                         for option in options]
                known = [f for f in tried if f is not None]
                return min(known) if known else None
    total = form.constant
    for key, c in form.terms.items():
        # Whatever else is known, an atom holds an int.
        found = interval(form.atoms[key], ranges) or ranges.get(key) or \
            _remainder(form.atoms[key], ranges, bounds, depth) or (INT_MIN, INT_MAX)
        total += c * (found[1] if c > 0 else found[0])
    return total


def _remainder(atom: ir.Expr, ranges: Ranges, bounds: Bounds, depth: int
               ) -> tuple[int, int] | None:
    """The range of `x % c`: C's remainder has the dividend's sign."""
    if not (isinstance(atom, ir.Bin) and atom.op == "%" and isinstance(atom.right, ir.Const)
            and int(atom.right.value) > 0):
        return None
    # A chain of remainders asks this of each one below it, from every level (fcl.il.ranges).
    memo = memo_of(ranges, atom)
    kept = memo.get(("remainder", id(bounds), depth)) if memo is not None else None
    if kept is not None and kept[0] is bounds:
        return kept[1]
    c = int(atom.right.value)
    least = _largest(Form().plus(linear(atom.left), -1), ranges, bounds, depth)
    found = (0, c - 1) if least is not None and least <= 0 else (1 - c, c - 1)
    if memo is not None:
        memo["remainder", id(bounds), depth] = (bounds, found)  # the bounds held: ids stay
    return found


def _divisor(atom: ir.Expr) -> int:
    """c where atom is x / c or x >> k (c = 2^k), c > 0; else 0."""
    if isinstance(atom, ir.Bin) and isinstance(atom.right, ir.Const):
        amount = int(atom.right.value)
        if atom.op == "/" and amount > 0:
            return amount
        if atom.op == ">>" and 0 <= amount < 31:
            return 1 << amount
    return 0


def _symbolic(atom: ir.Expr, upper: bool, ranges: Ranges, bounds: Bounds) -> list[Form]:
    """Linear bounds on an atom (upper or lower), each enough on its own."""
    if isinstance(atom, ir.Var) and atom.name in bounds:
        # Only expressions that cannot wrap around: their exact value is the one C computes.
        relation, limit = bounds[atom.name]
        if relation == "=":
            return [linear(limit)] if interval(limit, ranges) is not None else []
        if not upper:
            return []
        sides = [limit.left, limit.right] if isinstance(limit, ir.Bin) and limit.op == "min" \
            else [limit]
        return [linear(side).plus(Form(constant=-1)) for side in sides
                if interval(side, ranges) is not None]
    divisor = _divisor(atom)
    if divisor and isinstance(atom, ir.Bin):
        dividend = interval(atom.left, ranges)
        if dividend is None or dividend[0] < 0:
            return []
        c = Fraction(divisor)
        exact = Form().plus(linear(atom.left), 1 / c)  # x / c rounds down from this...
        return [exact if upper else exact.plus(Form(constant=-(c - 1) / c))]  # ...by < 1
    return []
