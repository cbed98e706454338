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
    ]


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
                           CompileOptions(block, checks=checks, keep_result=True))
