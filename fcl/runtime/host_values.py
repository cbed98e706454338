"""The host's expressions: host scalars with the same 32-bit C semantics as the kernels and the
interpreter (fcl.intmath), and, for sizing local memory over a kernel's iterations, one value per
iteration (numpy arrays)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fcl.codegen.kernel import Special
from fcl.il import ir
from fcl.intmath import c_div, c_mod, clz, d2i

# Conversions that are the value in the result's type: to a double or a float (rounded to the
# nearest), a bool to an int. d2i and f2i saturate instead (intmath.d2i).
CASTS = frozenset(("i2d", "i2f", "d2f", "f2d", "b2i"))
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "==": np.equal, "!=": np.not_equal,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor, "min": np.minimum,
    "max": np.maximum, "<<": lambda a, b: np.left_shift(a, b & 31),
    ">>": lambda a, b: np.right_shift(a, b & 31),
}


class HostValues:
    """Expressions over the host's variables (`env`); `read(e)` reads the one element of device
    memory an Index `e` names, `block_size` is the value of local_size."""

    def __init__(self, env: dict[str, object], read: Callable[[ir.Index], Any], block_size: int):
        self.env, self.read, self.block_size = env, read, block_size

    def eval(self, e: ir.Expr, lanes: bool = False):
        """A host expression's value; with lanes=True variables may hold one value per
        iteration (numpy arrays) and conditionals select lane by lane."""
        if isinstance(e, ir.Const):
            return ir.NUMPY_TYPES[e.type](e.value)
        if isinstance(e, ir.Var):
            return self.env[e.name]
        if lanes:
            return self._eval_lanes(e)
        if isinstance(e, Special):
            if e.name in ("local_size",):
                return np.int32(self.block_size)
            raise AssertionError(e)
        if isinstance(e, ir.Index):
            return self.read(e)
        if isinstance(e, ir.Bin):
            if e.op == "&&":
                return np.bool_(self.eval(e.left) and self.eval(e.right))
            if e.op == "||":
                return np.bool_(self.eval(e.left) or self.eval(e.right))
            a, b = self.eval(e.left), self.eval(e.right)
            if e.op in ("/", "%"):
                if e.type in ir.FLOATING:
                    return ir.NUMPY_TYPES[e.type](a / b if e.op == "/" else np.fmod(a, b))
                if b == 0:
                    return np.int32(0)  # undefined in C; kernels do not trap either
                return np.int32(c_div(a, b) if e.op == "/" else c_mod(a, b))
            with np.errstate(over="ignore"):  # int arithmetic wraps around, as numpy's does
                return BINARY[e.op](a, b)
        if isinstance(e, ir.Un):
            a = self.eval(e.arg)
            if e.op in CASTS:
                return ir.NUMPY_TYPES[e.type](a)
            with np.errstate(over="ignore"):  # -INT_MIN and abs(INT_MIN) are INT_MIN
                unary: dict[str, Callable[[], Any]] = {
                    "neg": lambda: -a, "not": lambda: np.bool_(not a), "abs": lambda: abs(a),
                    "sign": lambda: np.int32(np.sign(a)), "clz": lambda: clz(np.int32(a)),
                    "d2i": lambda: d2i(a), "f2i": lambda: d2i(a), "sqrt": lambda: np.sqrt(a)}
                return unary[e.op]()
        if isinstance(e, ir.Select):
            return self.eval(e.then) if self.eval(e.cond) else self.eval(e.else_)
        raise TypeError(e)

    def _eval_lanes(self, e: ir.Expr):
        if isinstance(e, ir.Bin):
            a, b = self.eval(e.left, True), self.eval(e.right, True)
            if e.op in ("&&", "||"):
                return (np.logical_and if e.op == "&&" else np.logical_or)(a, b)
            if e.op in ("/", "%") and e.type == ir.INT:
                b = np.where(b == 0, 1, b)  # undefined in C; only sizes are computed here
                return c_div(a, b) if e.op == "/" else c_mod(a, b)
            if e.op in BINARY:
                with np.errstate(over="ignore"):  # as in eval
                    return BINARY[e.op](a, b)
            return (np.divide if e.op == "/" else np.fmod)(a, b)
        if isinstance(e, ir.Un):
            a = self.eval(e.arg, True)
            if e.op in CASTS:
                return np.asarray(a, ir.NUMPY_TYPES[e.type])
            with np.errstate(over="ignore"):
                lanes: dict[str, Callable[[Any], Any]] = {
                    "neg": np.negative, "not": np.logical_not, "abs": np.abs,
                    "sign": np.sign, "clz": clz, "d2i": d2i, "f2i": d2i, "sqrt": np.sqrt}
                return lanes[e.op](a)
        if isinstance(e, ir.Select):
            return np.where(self.eval(e.cond, True), self.eval(e.then, True),
                            self.eval(e.else_, True))
        return self.eval(e)
