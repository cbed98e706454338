"""Sequences streamed past device memory (`--only streaming`): the programs of bench/streams.fcl
on inputs several times a device-memory budget, memory-mapped from files as a user's would be,
each run with the next chunk moved while this one's kernels run (overlap) and without, taking
turns run by run. Reported: the wall time of a call (from the memmap to the result on the host),
the input's throughput, the chunks and the peak of device memory the run's arrays took, which
must stay under the budget; each result is checked against numpy."""
from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import fcl
from bench.sizes import HERE
from fcl.runtime.streams import parse_bytes

ROW = 16  # nonzeros per row of the ELLPACK matrix, as bench/streams.fcl says


@dataclass(frozen=True)
class Streamed:
    name: str
    what: str
    inputs: Callable[[int, Path], tuple]        # (bytes of the largest input, folder)
    expected: Callable[[tuple], object]


def _audio(nbytes: int, folder: Path) -> tuple:
    signal = np.random.default_rng(1).standard_normal(nbytes // 8)
    return (_mapped(folder / "signal.npy", signal),)


def _audio_expected(args: tuple) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(np.asarray(args[0]), 256)[::128]
    return np.einsum("ij,ij->i", windows, windows)


def _smvm(nbytes: int, folder: Path) -> tuple:
    rng = np.random.default_rng(2)
    rows, columns = nbytes // 8 // ROW, 1 << 12
    vals = rng.standard_normal(rows * ROW)
    cols = rng.integers(0, columns, rows * ROW).astype(np.int32)
    return (rng.standard_normal(columns), _mapped(folder / "vals.npy", vals),
            _mapped(folder / "cols.npy", cols))


def _smvm_expected(args: tuple) -> np.ndarray:
    x, vals, cols = (np.asarray(a) for a in args)
    return (vals.reshape(-1, ROW) * x[cols.reshape(-1, ROW)]).sum(axis=1)


def _csr(nbytes: int, folder: Path) -> tuple:
    """A sparse matrix of rows of skewed lengths (a few hundred times the shortest)."""
    rng = np.random.default_rng(4)
    nnz, columns = nbytes // 8, 1 << 12
    lengths = (rng.pareto(1.2, nnz // 4) * 2).astype(np.int32).clip(0, 2000)
    lengths = lengths[:int(np.searchsorted(np.cumsum(lengths), nnz))]
    nnz = int(lengths.sum())
    return (rng.standard_normal(columns), _mapped(folder / "lengths.npy", lengths),
            _mapped(folder / "csr_vals.npy", rng.standard_normal(nnz)),
            _mapped(folder / "csr_cols.npy", rng.integers(0, columns, nnz).astype(np.int32)))


def _csr_expected(args: tuple) -> np.ndarray:
    x, lengths, vals, cols = (np.asarray(a) for a in args)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    return np.bincount(rows, weights=vals * x[cols], minlength=len(lengths))


def _search(nbytes: int, folder: Path) -> tuple:
    text = np.random.default_rng(3).integers(97, 123, nbytes // 4 // 8 * 8).astype(np.int32)
    return (int(_hashes(text[:8])[0]), _mapped(folder / "text.npy", text))


def _hashes(text: np.ndarray) -> np.ndarray:
    """Each 8-character word's hash as the program computes it: 32-bit ints that wrap."""
    h = np.full(len(text) // 8, 7, dtype=np.int64)
    for word in text.reshape(-1, 8).astype(np.int64).T:
        h = (h * 31 + word) % 2**32
    return np.where(h >= 2**31, h - 2**32, h)


def _search_expected(args: tuple) -> int:
    return int((_hashes(np.asarray(args[1])) == args[0]).sum())


def _mapped(path: Path, values: np.ndarray) -> np.ndarray:
    np.save(path, values)
    return np.load(path, mmap_mode="r")


PROGRAMS = [
    Streamed("audio", "each window's energy (256 samples, a hop of 128)", _audio, _audio_expected),
    Streamed("csr", "CSR rows of skewed lengths times a vector", _csr, _csr_expected),
    Streamed("smvm", "ELLPACK rows of 16 nonzeros times a vector", _smvm, _smvm_expected),
    Streamed("search", "8-character words whose hash is one word's", _search, _search_expected),
]
FULL_BUDGET, TINY_BUDGET = "16M", "256K"
TIMES_THE_BUDGET = 5  # each input's bytes, over the budget


def _matches(result, expected) -> bool:
    if isinstance(expected, np.ndarray):
        return np.allclose(result, expected)
    return result == expected


def measure_streaming(tiny: bool, runs: int, device_id: str | None) -> list[dict]:
    budget = parse_bytes(TINY_BUDGET if tiny else FULL_BUDGET)
    library = {overlap: fcl.load_file(HERE / "streams.fcl", device=device_id,
                                      device_memory=budget, overlap=overlap)
               for overlap in (True, False)}
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for program in PROGRAMS:
            args = program.inputs(TIMES_THE_BUDGET * budget, Path(folder))
            input_bytes = sum(a.nbytes for a in args if isinstance(a, np.ndarray))
            expected = program.expected(args)
            walls: dict[bool, list[float]] = {True: [], False: []}
            for round_ in range(runs + 1):  # the first round warms up
                for overlap in (True, False):
                    entry = getattr(library[overlap], program.name)
                    start = time.perf_counter()
                    result = entry(*args)
                    wall = (time.perf_counter() - start) * 1000
                    if not _matches(result, expected):
                        raise AssertionError(f"streaming {program.name}: the result differs "
                                             "from numpy's")
                    if round_:
                        walls[overlap].append(wall)
            timeline = getattr(library[True], program.name).timeline(*args)
            if not 0 < timeline.peak <= budget:
                raise AssertionError(f"streaming {program.name}: the run's arrays took "
                                     f"{timeline.peak} bytes of a budget of {budget}")
            on, off = (statistics.median(walls[o]) for o in (True, False))
            rows.append({"program": program.name, "what": program.what,
                         "input_bytes": int(input_bytes), "budget": budget,
                         "chunks": len(timeline.chunks()), "chunk": timeline.chunk,
                         "peak": timeline.peak, "overlap_ms": on, "apart_ms": off,
                         "moving_ms": timeline.busy_ms(True),
                         "kernels_ms": timeline.busy_ms(False),
                         "both_ms": timeline.overlap_ms, "runs": runs})
    return rows


def streaming_table(rows: list[dict]) -> str:
    lines = ["| program | input MB | ÷ budget | chunks | peak ÷ budget | overlapped ms (MB/s) | "
             "apart ms (MB/s) | apart ÷ overlapped | device: moving, kernels, both ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        mb = r["input_bytes"] / 2**20
        lines.append(
            f"| {r['program']}: {r['what']} | {mb:.1f} | {r['input_bytes'] / r['budget']:.1f} | "
            f"{r['chunks']} of {r['chunk']} | {r['peak'] / r['budget']:.2f} | "
            f"{r['overlap_ms']:.1f} ({mb / r['overlap_ms'] * 1000:.0f}) | "
            f"{r['apart_ms']:.1f} ({mb / r['apart_ms'] * 1000:.0f}) | "
            f"{r['apart_ms'] / r['overlap_ms']:.2f} | {r['moving_ms']:.1f}, "
            f"{r['kernels_ms']:.1f}, {r['both_ms']:.1f} |")
    return "\n".join(lines)
