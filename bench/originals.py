"""The original repository's benchmark programs.

tests/benchmarks of github.com/dybber/fcl (copy, reverse, transpose, reduce, scan, matmul), read
from a copy of that repository (a checkout or a bare git directory; never copied here) and run
unchanged as `fcl run common.fcl X.fcl` runs them: their own `benchmark 100` calls time them and
print the original's lines. Then reference.cl does the same work on the same device under the
same protocol (a warm-up, then as many runs, each run's kernel time from profiling events).
--tiny scales their sizes and repetitions down by substituting numbers in their text: a check
of the harness, not a measurement."""
from __future__ import annotations

import io
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyopencl as cl

from bench.measure import upload
from bench.reference import Enqueue, Reference, Result, kernel_ms
from bench.sizes import HERE, Sizes, pad_to
from fcl.errors import Source
from fcl.pipeline import CompileOptions, compile_program, main_root
from fcl.runtime.device import (
    Device,
)
from fcl.runtime.host import DeviceArray, prepare_run
from fcl.session import Session
from fcl.timing import Summary, compare

# Where a copy is looked for unless FCL_ORIGINAL_REPO or --original says: inside this checkout's
# build folder (`git clone https://github.com/dybber/fcl build/original-fcl`).
ORIGINAL_REPO = Path(os.environ.get("FCL_ORIGINAL_REPO", HERE.parent / "build" / "original-fcl"))


ORIGINAL_FULL = Sizes(block=256, n=4096 * 4096, side=4096, tile=16, per_item=1,
                      scan_n=4096 * 4096, matmul=(1600, 800, 800))


ORIGINAL_TINY = Sizes(block=256, n=256 * 256, side=256, tile=16, per_item=1, scan_n=256 * 256,
                      matmul=(160, 16, 64))


ORIGINAL_REPETITIONS = 100  # the programs' own `benchmark 100`


TINY_REPETITIONS = 2


GOAL_RATIO = 1.05  # the original programs' `benchmark` times within 5% of the reference's


# `benchmark N: X ms per run`, then this harness's line of min, median and spread.
BENCHMARK_LINES = re.compile(r"Benchmark \((\d+) repetitions\): (\d+\.\d{6}) ms per run\n"
                             r"  min \d+\.\d{6} ms, median \d+\.\d{6} ms, spread [\d.]+% "
                             r"\(kernel time\)[^\n]*\n")


def chunked_scan(values: np.ndarray, chunk: int) -> np.ndarray:
    """What the original scan.fcl computes: inclusive scans of chunks, each chunk plus the total
    of the chunks before it as a scan of the chunks' totals within chunks of totals gives it
    (a whole scan only up to chunk * (chunk + 1) elements)."""
    scans = np.cumsum(values.reshape(-1, chunk), axis=1, dtype=np.int32)
    totals = scans[:, -1]
    scanned = np.cumsum(pad_to(totals, chunk).reshape(-1, chunk), axis=1,
                        dtype=np.int32).flatten()[:len(totals)]
    before = np.concatenate([np.zeros(1, np.int32), scanned[:-1]])
    return (scans + before[:, None]).flatten()


@dataclass
class Original:
    name: str      # tests/benchmarks/<name>.fcl
    printed: int   # elements its forceAndPrint shows (of its first benchmark's result)
    # Each `benchmark` call of the program, in order: what it times, the reference run doing the
    # same work, and that work's result (numpy).
    benchmarks: list[tuple[str, Callable[[Reference, dict[str, DeviceArray]],
                                         tuple[list[cl.Event], Result]],
                           Callable[[dict[str, np.ndarray]], np.ndarray]]]


def originals(s: Sizes) -> list[Original]:
    side, (n, p, m) = s.side, s.matmul
    group = 2 * s.block  # the reduction's `workPerBlock = 2 * 256`
    return [
        Original("copy", 100, [("copy", Reference.copy, lambda i: i["input"])]),
        Original("reverse", 100, [("reverse", Reference.reverse, lambda i: i["input"][::-1])]),
        Original("transpose", 100, [("transpose", Reference.transpose,
                                     lambda i: i["input"].reshape(side, side).T.flatten())]),
        Original("reduce", 100, [
            ("partial reduction", Reference.reduce_partial,
             lambda i: pad_to(i["input"], group).reshape(-1, group).sum(axis=1, dtype=np.int32)),
            ("full reduction", Reference.reduce_full,
             lambda i: np.array([i["input"].sum(dtype=np.int32)]))]),
        Original("scan", 128, [("scan", Reference.scan,
                                lambda i: chunked_scan(i["input"], s.block * s.per_item))]),
        Original("matmul", 8000, [("matmul (doubles)", Reference.matmul_double,
                                   lambda i: (i["a"].reshape(n, p) @ i["b"].reshape(p, m))
                                   .flatten())]),
    ]


def original_inputs(original: Original, s: Sizes) -> dict[str, np.ndarray]:
    """What the program's generateIntVec or generateDoubleVec calls (common.fcl) make."""
    if original.name == "matmul":
        n, p, m = s.matmul
        return {"a": np.arange(n * p) / (n * p), "b": np.arange(p * m) / (p * m)}
    return {"input": np.arange(s.n, dtype=np.int32)}


def original_source(repo: Path, name: str) -> str:
    """tests/benchmarks/<name> of the original repository: a checkout or a bare git directory."""
    checkout = repo / "tests" / "benchmarks" / name
    if checkout.is_file():
        return checkout.read_text()
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:tests/benchmarks/{name}"],
                          capture_output=True, text=True, check=True).stdout


def scaled(source: str, s: Sizes, repetitions: int) -> str:
    """A program's text with the sizes and repetitions of `s` instead of the original's."""
    n, p, m = s.matmul
    replacements = {r"\b4096\b": str(s.side), r"\bbenchmark 100\b": f"benchmark {repetitions}",
                    r"\blet n = 1600\b": f"let n = {n}", r"\blet p = 800\b": f"let p = {p}",
                    r"\blet m = 800\b": f"let m = {m}"}
    for pattern, value in replacements.items():
        source = re.sub(pattern, value, source)
    return source


def printed_values(text: str) -> np.ndarray:
    """The values of the first line forceAndPrint printed: `[a,b,c]`."""
    line = text.splitlines()[0]
    return np.array([float(v) for v in line.strip("[]").split(",") if v])


def run_original(original: Original, repo: Path, s: Sizes, repetitions: int,
                 device: str | None) -> tuple[str, str, list[list[float]]]:
    """(stdout, stderr, each `benchmark`'s kernel ms per repetition) of the program run as
    `fcl run common.fcl <name>.fcl` runs it."""
    common, source = original_source(repo, "common.fcl"), original_source(repo,
                                                                           f"{original.name}.fcl")
    if s != ORIGINAL_FULL:
        source = scaled(source, s, repetitions)
    session = Session.new()
    session.add_file(Source("common.fcl", common))
    session.add_file(Source(f"{original.name}.fcl", source))
    compiled = compile_program(session, main_root(session), CompileOptions(s.block))
    out, err = io.StringIO(), io.StringIO()
    run = prepare_run(compiled, device, s.block, out, err)
    try:
        run.run_program()
        run.device.queue.finish()
        run.check_failures()
        return out.getvalue(), err.getvalue(), run.benchmarks
    finally:
        run.release()


def reference_benchmark(enqueue: Enqueue, repetitions: int) -> tuple[list[float], Result]:
    """The `benchmark` protocol for a reference run: a warm-up (its result returned), then
    `repetitions` runs, each one's kernel ms."""
    events, result = enqueue()
    kernel_ms(events)
    return [kernel_ms(enqueue()[0]) for _ in range(repetitions)], result


def check_original(original: Original, inputs: dict[str, np.ndarray], out: str, err: str,
                   repetitions: int) -> None:
    """The program printed what numpy computes, and its `benchmark` calls the original's line
    with this harness's line of min, median and spread after it."""
    reports = BENCHMARK_LINES.findall(err)
    if [int(count) for count, _ in reports] != [repetitions] * len(original.benchmarks):
        raise AssertionError(f"{original.name}: expected {len(original.benchmarks)} `benchmark` "
                             f"reports of the original's shape, got:\n{err}")
    expected = original.benchmarks[0][2](inputs)[:original.printed]
    printed = printed_values(out)
    if printed.shape != expected.shape or not np.allclose(printed, expected, rtol=0, atol=1e-5):
        raise AssertionError(f"{original.name}: FCL printed something other than numpy's result")


def measure_originals(repo: Path, s: Sizes, repetitions: int, device: Device,
                      choice: str | None) -> list[dict]:
    """A row per `benchmark` call of each original program: its times and the reference's."""
    reference = Reference(device, s)
    rows = []
    for original in originals(s):
        host_inputs = original_inputs(original, s)
        inputs = upload(device, host_inputs)
        try:
            enqueues = [partial(enqueue, reference, inputs)
                        for _, enqueue, _ in original.benchmarks]
            # Half the reference's runs before the program and half after it, so that a change
            # in the machine's load while the program runs affects both sides alike.
            before = [reference_benchmark(e, repetitions - repetitions // 2) for e in enqueues]
            out, err, fcl_times = run_original(original, repo, s, repetitions, choice)
            after = [reference_benchmark(e, repetitions // 2)[0] for e in enqueues]
            check_original(original, host_inputs, out, err, repetitions)
            for (what, enqueue, expected), times, (first_half, result), second_half in zip(
                    original.benchmarks, fcl_times, before, after):
                want = expected(host_inputs)
                buffer, length = result
                got = np.empty(length, want.dtype)
                cl.enqueue_copy(device.queue, got, buffer)
                if not np.allclose(got, want, rtol=1e-9, atol=0):
                    raise AssertionError(f"{original.name}: the reference's {what} differs "
                                         "from numpy's")
                ref_times = first_half + second_half
                fcl, ref = Summary.of(times), Summary.of(ref_times)
                ranking = compare(fcl, ref, ("FCL", "reference"))
                rows.append({"program": original.name, "benchmark": what,
                             "repetitions": repetitions, "fcl_mean_ms": fcl.mean,
                             "fcl_median_ms": fcl.median, "fcl_spread": fcl.spread,
                             "reference_mean_ms": ref.mean, "reference_median_ms": ref.median,
                             "reference_spread": ref.spread, "ratio": fcl.mean / ref.mean,
                             "median_ratio": fcl.median / ref.median,
                             "ranking": ["FCL faster", "reference faster"][ranking.faster]
                             if ranking.faster is not None else "within the spreads",
                             "fcl_times_ms": times, "reference_times_ms": ref_times,
                             "reference_kernel": reference.chosen.get(enqueue.__name__),
                             "reference_left_out": list(reference.left_out)})
        finally:
            for array in inputs.values():
                array.buffer.release()
    return rows
