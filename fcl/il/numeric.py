"""IL expressions of int and bool arithmetic evaluated over numpy arrays of values: the proofs
by evaluation that the memory planner and the code generator make over lengths known when
compiling (every element of a step, every row and column of a loop)."""
from __future__ import annotations

import numpy as np

from fcl.il import ir

_ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply, "&": np.bitwise_and,
               "|": np.bitwise_or, "^": np.bitwise_xor, "min": np.minimum, "max": np.maximum,
               "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
               ">": np.greater, ">=": np.greater_equal, "&&": np.logical_and, "||": np.logical_or}


def evaluate(e: ir.Expr, env: dict):
    """An int or bool expression over arrays of element indices (None: not plain arithmetic,
    or a division by zero, which the run-time checks report)."""
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Var):
        return env.get(e.name)
    if isinstance(e, ir.Un) and e.op in ("not", "neg"):
        arg = evaluate(e.arg, env)
        return None if arg is None else (np.logical_not(arg) if e.op == "not" else -arg)
    if isinstance(e, ir.Select):
        parts = [evaluate(x, env) for x in (e.cond, e.then, e.else_)]
        return None if any(p is None for p in parts) else np.where(*parts)
    if not isinstance(e, ir.Bin) or e.type in ir.FLOATING:
        return None
    left, right = evaluate(e.left, env), evaluate(e.right, env)
    if left is None or right is None:
        return None
    value = _operation(e.op, np.asarray(left, np.int64) if e.type == ir.INT else left,
                       right)
    if value is None or e.type != ir.INT:
        return value
    return (np.asarray(value, np.int64) + 2**31) % 2**32 - 2**31  # ints wrap, as in the kernels


def _operation(op: str, left, right):
    if op in _ARITHMETIC:
        return _ARITHMETIC[op](left, right)
    if op in ("/", "%"):
        if np.any(np.asarray(right) == 0):
            return None
        quotient = np.trunc(np.asarray(left) / np.asarray(right)).astype(np.int64)  # C's
        return quotient if op == "/" else left - quotient * right
    if op in ("<<", ">>"):
        count = np.bitwise_and(right, 31)  # as the kernels shift, and the simplifier folds
        return np.left_shift(left, count) if op == "<<" else np.right_shift(left, count)
    return None


def with_declarations(stmts: list[ir.Stmt], env: dict) -> dict:
    """env with the values of the statements' declarations that plain arithmetic computes (for
    every element of env's arrays); other statements are passed over."""
    env = dict(env)
    for s in stmts:
        if isinstance(s, ir.Declare):
            value = evaluate(s.init, env)
            if value is not None:
                env[s.var.name] = value
    return env
