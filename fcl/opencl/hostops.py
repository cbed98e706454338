"""The IL's scalar operators on the host, with the kernels' 32-bit C semantics.

Ints are Python ints kept in the int32 range, doubles Python floats, bools Python bools.
"""
from __future__ import annotations

import math
import operator

from fcl.il import ir
from fcl.il.simplify import INT_MIN, INT_MAX, wrap32

_PLAIN = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "&": operator.and_,
    "|": operator.or_, "^": operator.xor, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    # OpenCL uses only the low five bits of a 32-bit shift count.
    "<<": lambda a, b: a << (b & 31), ">>": lambda a, b: a >> (b & 31),
}


def binary(op: str, a, b, arg_type: str, result_type: str):
    """`a op b`; an integer division by zero raises ZeroDivisionError."""
    if arg_type == ir.DOUBLE:
        return _double_binary(op, a, b)
    if op in ("/", "%"):
        if b == 0:
            raise ZeroDivisionError
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # toward zero
        return wrap32(quotient if op == "/" else a - quotient * b)
    value = min(a, b) if op == "min" else max(a, b) if op == "max" else _PLAIN[op](a, b)
    return wrap32(value) if result_type == ir.INT else value


def _double_binary(op: str, a: float, b: float):
    if op == "/":
        if b == 0:
            return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * \
                math.copysign(1.0, b)
        return a / b
    if op == "%":
        return math.nan if b == 0 else math.fmod(a, b)
    if op in ("min", "max"):  # fmin/fmax: a NaN argument loses
        if math.isnan(a) or math.isnan(b):
            return b if math.isnan(a) else a
        return min(a, b) if op == "min" else max(a, b)
    return _PLAIN[op](a, b)


def unary(op: str, a, result_type: str):
    if op == "neg":
        return -a if isinstance(a, float) else wrap32(-a)
    if op == "abs":
        return abs(a) if isinstance(a, float) else wrap32(abs(a))
    if op == "sign":
        sign = (a > 0) - (a < 0)
        return float(sign) if result_type == ir.DOUBLE else sign
    if op == "d2i":
        # What x86 CPUs (and so PoCL) give for values outside the int range and NaN.
        return int(a) if math.isfinite(a) and INT_MIN <= math.trunc(a) <= INT_MAX else INT_MIN
    if op == "sqrt":
        return math.sqrt(a) if a >= 0 else math.nan
    return {"not": lambda: not a, "clz": lambda: 32 - (a & 0xFFFFFFFF).bit_length(),
            "i2d": lambda: float(a), "b2i": lambda: int(a)}[op]()
