"""Host-side input and output shared by both back ends, in the original compiler's formats."""
from __future__ import annotations

import re
from typing import Protocol

import numpy as np

from fcl.errors import FCLError, Span
from fcl.timing import Summary, verdict

_LEADING_INT = re.compile(rb"[+-]?\d+")


class Writer(Protocol):
    """Where a program's output goes: a text file, or the Jupyter kernel's stream to the
    notebook (fcl_kernel.kernel.StreamWriter)."""

    def write(self, text: str, /) -> int: ...


def read_int_csv(path: str, span: Span | None) -> np.ndarray:
    """The ints of a file of values separated by commas, spaces or newlines.

    Like the original's C reader (strtok + atoi): each field's leading integer, else 0, and a
    value beyond 32 bits wraps as C's conversion to int does. Bytes, not text: any encoding reads.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise FCLError(f"cannot read `{path}`: {err.strerror or err}", span) from None
    values = []
    for field in re.split(rb"[,\s]+", data):
        if field:
            match = _LEADING_INT.match(field)
            value = int(match.group()) if match else 0
            values.append((value + 2**31) % 2**32 - 2**31)
    return np.array(values, dtype=np.int32)


def open_npy(path: str, dtype, span: Span | None) -> np.ndarray:
    """A .npy file's 1-D array of `dtype`, memory-mapped (read from disk as it is used)."""
    try:
        data = np.load(path, mmap_mode="r")
    except OSError as err:
        raise FCLError(f"cannot read `{path}`: {err.strerror or err}", span) from None
    except ValueError as err:  # not a .npy file, or one of Python objects
        raise FCLError(f"cannot read `{path}` as a .npy file: {err}", span) from None
    dtype = np.dtype(dtype)
    if data.ndim != 1 or data.dtype != dtype:
        raise FCLError(f"a sequence of {dtype} needs 1-D arrays of {dtype}; `{path}` holds an "
                       f"array of {data.dtype} with shape {data.shape}", span)
    return data


def format_array(values: np.ndarray) -> str:
    """`[a,b,c]` with no spaces: ints as %i, doubles and floats as %.5f."""
    fmt = "%.5f" if values.dtype in (np.float64, np.float32) else "%i"
    return "[" + ",".join(fmt % v for v in values.tolist()) + "]\n"


def benchmark_report(times_ms: list[float], what: str) -> str:
    """The original's line (the mean per run), then min, median and spread, saying what was
    timed (`what`) and, when the runs are too spread to rank two variants, that too."""
    summary = Summary.of(times_ms)
    noisy = f"; {verdict(summary)}" if summary.noisy else ""
    return (f"Benchmark ({summary.runs} repetitions): {summary.mean:f} ms per run\n"
            f"  min {summary.minimum:f} ms, median {summary.median:f} ms, spread "
            f"{summary.spread:.1%} ({what}){noisy}\n")
