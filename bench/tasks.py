"""The bench's tasks: their sizes and inputs, and each one's FCL program, compiled as `make
bench` runs it."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from bench.reference import Reference, Result
from bench.sizes import HERE, Sizes, pad_to
from fcl.errors import Source
from fcl.pipeline import CompileOptions, compile_program, main_root
from fcl.runtime.host import DeviceArray
from fcl.session import Session


@dataclass
class Task:
    name: str
    fcl: str                 # file in bench/
    entry: str               # the grid program to run
    sizes: dict[str, int]    # FCL definitions the program expects
    inputs: dict[str, np.ndarray]
    expected: Callable[[dict[str, np.ndarray]], np.ndarray]
    reference: Callable[[Reference, dict[str, DeviceArray]], tuple[list[cl.Event], Result]]
    traffic: int             # bytes the task must read and write at least
    flatten: bool = True     # irregular arrays flattened (off: a work-item per row)


# (what a task's name adds, what its program's entry point adds)
BY_WARPS = (("", ""), (", warps", "Warps"))


def tasks(s: Sizes, rng: np.random.Generator) -> list[Task]:
    def ints(count: int, low: int = -100, high: int = 100) -> np.ndarray:
        return rng.integers(low, high, count, dtype=np.int32)

    vector = ints(s.n)
    matrix = ints(s.side * s.side)
    scan_in = ints(s.scan_n)
    hA, wA, wB = s.matmul
    a, b = ints(hA * wA, -8, 8), ints(wA * wB, -8, 8)
    word = 4
    bins_small = rng.integers(0, s.bytes_bins, s.n, dtype=np.int32)
    bins_many = rng.integers(0, s.many_bins, s.n, dtype=np.int32)
    regular, skewed = (csr(rng, s.smvm_rows, s.smvm_per_row, lengths)
                       for lengths in (regular_rows, power_law_rows))
    return [
        Task("copy", "copy.fcl", "copy", {"n": s.n}, {"input": vector},
             lambda i: i["input"], Reference.copy, 2 * word * s.n),
        Task("reverse", "reverse.fcl", "reversed", {"n": s.n}, {"input": vector},
             lambda i: i["input"][::-1], Reference.reverse, 2 * word * s.n),
        Task("transpose", "transpose.fcl", "transposed",
             {"rows": s.side, "cols": s.side, "tile": s.tile}, {"input": matrix},
             lambda i: i["input"].reshape(s.side, s.side).T.flatten(), Reference.transpose,
             2 * word * s.side * s.side),
        # Each reduction and the scan twice: as the thesis writes them, and by warps.
        *(Task(f"reduce (partial{how})", "reduce.fcl", f"partial{entry}", {"n": s.n},
               {"input": vector},
               lambda i: pad_to(i["input"], 2 * s.block).reshape(-1, 2 * s.block).sum(
                   axis=1, dtype=np.int32),
               Reference.reduce_partial, word * s.n) for how, entry in BY_WARPS),
        *(Task(f"reduce (full{how})", "reduce.fcl", f"full{entry}", {"n": s.n},
               {"input": vector}, lambda i: np.array([i["input"].sum(dtype=np.int32)]),
               Reference.reduce_full, word * s.n) for how, entry in BY_WARPS),
        *(Task(f"scan{' (warps)' if how else ''}", "scan.fcl", f"scanned{entry}",
               {"n": s.scan_n, "perItem": s.per_item}, {"input": scan_in},
               lambda i: np.cumsum(i["input"], dtype=np.int32), Reference.scan,
               2 * word * s.scan_n) for how, entry in BY_WARPS),
        Task(f"histogram ({s.bytes_bins} bins)", "histogram.fcl", "counted",
             {"n": s.n, "bins": s.bytes_bins}, {"input": bins_small},
             lambda i: np.bincount(i["input"], minlength=s.bytes_bins).astype(np.int32),
             partial_histogram(s.bytes_bins), word * s.n),
        Task(f"histogram ({s.many_bins:,} bins)", "histogram.fcl", "counted",
             {"n": s.n, "bins": s.many_bins}, {"input": bins_many},
             lambda i: np.bincount(i["input"], minlength=s.many_bins).astype(np.int32),
             partial_histogram(s.many_bins), word * s.n),
        Task("matmul", "matmul.fcl", "product",
             {"hA": hA, "wA": wA, "wB": wB, "tile": s.tile}, {"a": a, "b": b},
             lambda i: (i["a"].reshape(hA, wA) @ i["b"].reshape(wA, wB)).flatten(),
             Reference.matmul, word * (hA * wA + wA * wB + hA * wB)),
        # Sparse matrix-vector products: rows of one length, and of power-law lengths (a few
        # rows hold much of the matrix), flattened and, to compare, a work-item per row.
        *(Task(f"smvm ({kind}{', not flattened' if not flatten else ''})", "smvm.fcl",
               "product", {}, matrix, csr_product, Reference.smvm, csr_traffic(matrix),
               flatten=flatten)
          for kind, matrix, flatten in (("regular", regular, True), ("skewed", skewed, True),
                                        ("skewed", skewed, False))),
    ]


def regular_rows(rng: np.random.Generator, rows: int, per_row: int) -> np.ndarray:
    return np.full(rows, per_row, np.int64)


def power_law_rows(rng: np.random.Generator, rows: int, per_row: int) -> np.ndarray:
    """Row lengths of a power law (Pareto, shape 1) with the same total as regular rows: most
    rows short, a few holding a large share of the nonzeros."""
    weights = rng.pareto(1.0, rows)
    return np.floor(weights / weights.sum() * rows * per_row).astype(np.int64)


def csr(rng: np.random.Generator, rows: int, per_row: int, lengths) -> dict[str, np.ndarray]:
    """A random square matrix of `rows` rows in CSR, and a vector, all small ints."""
    counts = lengths(rng, rows, per_row)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    nnz = int(offsets[-1])
    return {"offsets": offsets, "cols": rng.integers(0, rows, nnz, dtype=np.int32),
            "vals": rng.integers(-8, 8, nnz, dtype=np.int32),
            "x": rng.integers(-8, 8, rows, dtype=np.int32)}


def csr_product(i: dict[str, np.ndarray]) -> np.ndarray:
    rows = len(i["offsets"]) - 1
    row_of = np.repeat(np.arange(rows), np.diff(i["offsets"]))
    products = i["vals"].astype(np.int64) * i["x"][i["cols"]]
    return np.bincount(row_of, weights=products, minlength=rows).astype(np.int64).astype(np.int32)


def csr_traffic(i: dict[str, np.ndarray]) -> int:
    """Offsets, columns and values read once, the vector at least once, the product written."""
    return 4 * (len(i["offsets"]) + 2 * len(i["cols"]) + 2 * len(i["x"]))


def partial_histogram(bins: int):
    return lambda reference, inputs: reference.histogram(inputs, bins)


def fcl_source(task: Task) -> str:
    sizes = "".join(f"val {name} = {value}\n" for name, value in task.sizes.items())
    return sizes + (HERE / task.fcl).read_text() + f"\nval main = {task.entry}\n"


def renumbered(source: str) -> str:
    """OpenCL source without the numbers that make its variable names unique."""
    return re.sub(r"_\d+\b", "", source)


def compile_task(task: Task, block: int, checks: bool = True):
    session = Session.new()
    session.add_file(Source(task.fcl, fcl_source(task)))
    return compile_program(session, main_root(session),
                           CompileOptions(block, checks=checks, keep_result=True,
                                          flatten=task.flatten))
