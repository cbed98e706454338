"""32-bit integer arithmetic on numpy values (scalars or arrays), shared by the interpreter and
the OpenCL back end's host code, so both compute exactly what the kernels compute: FCL's
semantics (docs/language.md), C's where C defines the result. numpy's int32 operations already
wrap around; these add C's division and remainder."""
from __future__ import annotations

import numpy as np


def c_div(a, b):
    """Integer division truncating toward zero, as in C; INT_MIN / -1 wraps around to INT_MIN.
    b must not be 0."""
    with np.errstate(over="ignore"):  # numpy wraps INT_MIN // -1 too, but warns
        return _div(a, b)


def _div(a, b):
    if isinstance(b, np.integer) and b > 0 and b & (b - 1) == 0:
        # A power of two: shift, first adding b-1 to negative numbers so they round up.
        shift = int(b).bit_length() - 1
        return (a + ((a >> 31) & (b - 1))) >> shift
    if isinstance(b, np.integer) and b > 0 and np.min(a, initial=0) >= 0:
        return np.floor_divide(a, b)  # no negative operands: floor and truncation agree
    q = np.floor_divide(a, b)
    return q + (((a % b) != 0) & ((a < 0) ^ (b < 0)))


def c_mod(a, b):
    """Remainder with the sign of the dividend, as in C; INT_MIN % -1 is 0. b must not be 0."""
    if isinstance(b, np.integer) and b > 0 and b & (b - 1) == 0:
        return a - (_div(a, b) << (int(b).bit_length() - 1))
    if isinstance(b, np.integer) and b > 0 and np.min(a, initial=0) >= 0:
        return np.remainder(a, b)
    return np.fmod(a, b)


INT_MIN, INT_MAX = -2**31, 2**31 - 1  # FCL's int: 32 bits, two's complement


def d2i(a):
    """double to int as FCL defines it (docs/language.md, `d2i`): toward zero, saturating at
    INT_MIN and INT_MAX, NaN to 0: OpenCL's convert_int_sat (the kernels' fcl_d2i)."""
    x = np.asarray(a, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        result = np.where(np.isnan(x), 0.0, np.clip(np.trunc(x), INT_MIN, INT_MAX)).astype(np.int32)
    return result if isinstance(a, np.ndarray) else np.int32(result)


def clz(a):
    u = np.asarray(a).astype(np.int64) & 0xFFFFFFFF
    bits = np.where(u == 0, 0, np.floor(np.log2(np.maximum(u, 1))) + 1)
    result = (32 - bits).astype(np.int32)
    return result if isinstance(a, np.ndarray) else np.int32(result)
