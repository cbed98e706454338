"""Smart constructors for IL expressions with sound constant folding.

Folding follows FCL's 32-bit integer semantics exactly (docs/language.md: wrap-around, truncating
division, INT_MIN / -1 = INT_MIN, shift amounts modulo 32), as the back ends compute at run time;
only identities that hold for every value are used (no `(a/b)*c` rewrites, which the original
got wrong).
"""
from __future__ import annotations

import math

import numpy as np

from fcl.il import ir
from fcl.intmath import INT_MIN, d2i


def wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def is_atomic(e: ir.Expr) -> bool:
    """Cheap to repeat: constants and variables."""
    return isinstance(e, (ir.Const, ir.Var))


def _fold_int(op: str, a: int, b: int):
    if op in ("/", "%"):
        if b == 0:
            return None  # a run-time error, reported where it happens
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # INT_MIN / -1 wraps
        return wrap32(q) if op == "/" else wrap32(a - q * b)
    if op in ("<<", ">>"):
        b &= 31
        return wrap32(a << b) if op == "<<" else a >> b
    value = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b,
             "min": min(a, b), "max": max(a, b)}.get(op)
    return None if value is None else wrap32(value)


def _compare(op: str, a, b) -> bool:
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def mk_bin(op: str, left: ir.Expr, right: ir.Expr, t: str) -> ir.Expr:
    if t == ir.INT and op in ("+", "-"):
        return _linear_sum(left, right, 1 if op == "+" else -1)
    return _mk_bin(op, left, right, t)


def _mk_bin(op: str, left: ir.Expr, right: ir.Expr, t: str) -> ir.Expr:
    if isinstance(left, ir.Const) and isinstance(right, ir.Const):
        a, b = left.value, right.value
        if op in ir.COMPARISONS:
            return ir.Const(_compare(op, a, b), ir.BOOL)
        if op in ("&&", "||"):
            return ir.Const(bool(a and b) if op == "&&" else bool(a or b), ir.BOOL)
        if t == ir.INT:
            folded = _fold_int(op, int(a), int(b))
            if folded is not None:
                return ir.Const(folded, ir.INT)
        elif t == ir.DOUBLE and op in ("+", "-", "*", "min", "max"):
            # min and max as OpenCL's fmin and fmax: a NaN operand gives the other one.
            value = {"+": a + b, "-": a - b, "*": a * b, "min": float(np.fmin(a, b)),
                     "max": float(np.fmax(a, b))}[op]
            return ir.Const(float(value), ir.DOUBLE)
        elif t == ir.FLOAT and op in ("+", "-", "*", "min", "max"):
            x, y = np.float32(a), np.float32(b)  # each operation rounded to a float
            with np.errstate(over="ignore"):
                value = {"+": x + y, "-": x - y, "*": x * y, "min": np.fmin(x, y),
                         "max": np.fmax(x, y)}[op]
            return ir.Const(float(value), ir.FLOAT)
    if t == ir.INT:
        if op in ("+", "-", "|", "^", "<<", ">>") and _is_const(right, 0):
            return left
        if op in ("+", "|", "^") and _is_const(left, 0):
            return right
        if op in ("*", "/") and _is_const(right, 1):
            return left
        if op == "*" and _is_const(left, 1):
            return right
        if op == "/" and _is_const(right, -1):
            return mk_un("neg", left, t)
        if op == "%" and _is_const(right, -1):
            return ir.Const(0, ir.INT)
        if op in ("<<", ">>") and isinstance(right, ir.Const) and not 0 <= right.value < 32:
            # Only the amount's low five bits count; C compilers warn about the others.
            return _mk_bin(op, left, ir.Const(int(right.value) & 31, ir.INT), t)
    # Expressions are pure: an operand that cannot change the outcome need not be evaluated.
    if op == "&&":
        if _is_const(left, True):
            return right
        if _is_const(right, True):
            return left
        if _is_const(left, False) or _is_const(right, False):
            return ir.Const(False, ir.BOOL)
    if op == "||":
        if _is_const(left, False):
            return right
        if _is_const(right, False):
            return left
        if _is_const(left, True) or _is_const(right, True):
            return ir.Const(True, ir.BOOL)
    return ir.Bin(op, left, right, t)


# ---- sums as linear combinations -------------------------------------------------------------
# Integer + and - are normalized to `terms + constant`, where each term is an atom times a
# coefficient. Arithmetic modulo 2^32 is a ring, so this is exact even when values wrap; it
# turns index arithmetic such as `(32*x + 30) - 32*x + 2` into `32`, which lets sizes that
# only look data-dependent be known at compile time.

def linear(e: ir.Expr) -> tuple[dict[str, tuple[ir.Expr, int]], int]:
    if isinstance(e, ir.Const):
        return {}, int(e.value)
    if isinstance(e, ir.Bin) and e.type == ir.INT:
        if e.op in ("+", "-"):
            terms, const = linear(e.left)
            rterms, rconst = linear(e.right)
            sign = 1 if e.op == "+" else -1
            terms = dict(terms)
            for key, (atom, coef) in rterms.items():
                old = terms.get(key, (atom, 0))[1]
                terms[key] = (atom, old + sign * coef)
            return terms, const + sign * rconst
        if e.op == "*" and isinstance(e.right, ir.Const):
            terms, const = linear(e.left)
            k = int(e.right.value)
            return {key: (atom, coef * k) for key, (atom, coef) in terms.items()}, const * k
        if e.op == "*" and isinstance(e.left, ir.Const):
            return linear(ir.Bin("*", e.right, e.left, ir.INT))
    return {ir.expr_key(e): (e, 1)}, 0


def difference(a: ir.Expr, b: ir.Expr) -> int | None:
    """a - b, when it is the same number whatever the variables are."""
    terms, const = linear(mk_bin("-", a, b, ir.INT))
    return const if all(coef == 0 for _, coef in terms.values()) else None


def _linear_sum(left: ir.Expr, right: ir.Expr, sign: int) -> ir.Expr:
    terms, const = linear(left)
    rterms, rconst = linear(right)
    terms = dict(terms)
    for key, (atom, coef) in rterms.items():
        old = terms.get(key, (atom, 0))[1]
        terms[key] = (atom, old + sign * coef)
    const = wrap32(const + sign * rconst)
    result: ir.Expr | None = None
    for atom, coef in terms.values():
        coef = wrap32(coef)
        if coef == 0:
            continue
        size = _magnitude(coef)
        term = atom if size == 1 else _mk_bin("*", atom, ir.Const(size, ir.INT), ir.INT)
        if result is None:
            result = term if size == coef else _mk_bin("-", ir.Const(0, ir.INT), term, ir.INT)
        else:
            result = _mk_bin("+" if size == coef else "-", result, term, ir.INT)
    if result is None:
        return ir.Const(const, ir.INT)
    if const:
        size = _magnitude(const)
        result = _mk_bin("+" if size == const else "-", result, ir.Const(size, ir.INT), ir.INT)
    return result


def _magnitude(value: int) -> int:
    """|value| as an int: INT_MIN has no positive counterpart, but it is its own negation (mod
    2^32), so it is added rather than subtracted."""
    return value if value == INT_MIN else abs(value)


def mk_un(op: str, arg: ir.Expr, t: str) -> ir.Expr:
    if isinstance(arg, ir.Const):
        a = arg.value
        if op == "neg":
            return ir.Const(wrap32(-int(a)) if t == ir.INT else -a, t)
        if op == "not":
            return ir.Const(not a, ir.BOOL)
        if op == "i2d":
            return ir.Const(float(a), ir.DOUBLE)
        if op in ("i2f", "d2f"):  # rounded to the nearest float, as the device does
            return ir.Const(float(np.float32(a)), ir.FLOAT)
        if op == "f2d":
            return ir.Const(float(a), ir.DOUBLE)
        if op == "f2i":
            return ir.Const(int(d2i(a)), ir.INT)
        if op == "b2i":
            return ir.Const(int(bool(a)), ir.INT)
        if op == "d2i":
            return ir.Const(int(d2i(a)), ir.INT)
        if op == "abs" and t == ir.INT:
            return ir.Const(wrap32(abs(int(a))), ir.INT)
        if op == "sign":
            return ir.Const((a > 0) - (a < 0), ir.INT)
        if op == "clz":
            return ir.Const(32 - (int(a) % 2**32).bit_length(), ir.INT)
        if op == "sqrt" and a >= 0:
            return ir.Const(math.sqrt(a) if t == ir.DOUBLE else float(np.sqrt(np.float32(a))), t)
    return ir.Un(op, arg, t)


def _is_const(e: ir.Expr, value) -> bool:
    return isinstance(e, ir.Const) and e.value == value and type(e.value) is type(value)


def rebuild(e: ir.Expr, substitute: dict[str, ir.Expr]) -> ir.Expr:
    """e with variables substituted and constant parts refolded."""
    if isinstance(e, ir.Var):
        return substitute.get(e.name, e)
    if isinstance(e, ir.Index):
        array = substitute.get(e.array.name, e.array)
        return ir.Index(array if isinstance(array, ir.Var) else e.array,
                        rebuild(e.index, substitute))
    if isinstance(e, ir.Bin):
        return mk_bin(e.op, rebuild(e.left, substitute), rebuild(e.right, substitute), e.type)
    if isinstance(e, ir.Un):
        return mk_un(e.op, rebuild(e.arg, substitute), e.type)
    if isinstance(e, ir.Select):
        return mk_select(rebuild(e.cond, substitute), rebuild(e.then, substitute),
                         rebuild(e.else_, substitute), e.type)
    return e


def mk_select(cond: ir.Expr, then: ir.Expr, else_: ir.Expr, t: str) -> ir.Expr:
    """cond ? then : else_, or the branch a known condition picks."""
    if isinstance(cond, ir.Const):
        return then if cond.value else else_
    return ir.Select(cond, then, else_, t)
