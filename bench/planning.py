"""Memory planning measured (`--only planning`): programs whose copies and buffers the planner
changes (fcl/memory), each run planned and unplanned on one device, taking turns run by run:
kernel time (profiling events, the median of the runs), the device memory the run allocated
(its peak) and the bytes the copy kernels planning removes read and write. Each result is
checked against numpy, planned and unplanned alike."""
from __future__ import annotations

import io
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from bench.measure import predicted_ms
from bench.sizes import HERE
from fcl.analysis.gpu import GPU
from fcl.codegen.kernel import Compiled
from fcl.errors import FCLError, Source
from fcl.memory.plan import memory_plan
from fcl.pipeline import CompileOptions, compile_program, main_root
from fcl.runtime.host import HostRun, prepare_run
from fcl.session import Session
from fcl.timing import measuring


@dataclass(frozen=True)
class Planned:
    name: str
    fcl: str                       # file in bench/
    entry: str
    sizes: dict[str, int]
    expected: Callable[[dict[str, int]], np.ndarray]


def _concat(s: dict[str, int]) -> np.ndarray:
    parts = [(np.arange(n, dtype=np.int64) * (2 * k + 1) + k) % 1000
             for k, n in enumerate((s["n1"], s["n2"], s["n3"]))]
    return np.concatenate(parts).astype(np.int32)


def _hotspot(s: dict[str, int]) -> np.ndarray:
    side = s["side"]
    t = (np.arange(side * side, dtype=np.int64) * 37 % 1000).reshape(side, side)
    r, c = np.indices((side, side))
    power = (r * 7 + c * 13) % 5
    for _ in range(s["iterations"]):
        p = np.pad(t, 1, mode="edge")
        around = 4 * t + p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:]
        t = around // 8 + power  # every sum is non-negative: C's division truncates alike
    return t.flatten().astype(np.int32)


def _blocked(s: dict[str, int]) -> np.ndarray:
    width = s["width"]
    x = np.arange(s["blocks"] * width, dtype=np.int64) % 7
    for k in range(s["blocks"] - 1):
        x[width * (k + 1):width * (k + 2)] += x[width * (k + 1) - 1]
    return x.astype(np.int32)


def nw_reference(s: dict[str, int]) -> np.ndarray:
    n, penalty = s["n"], s["penalty"]
    m = np.zeros((n + 1, n + 1), dtype=np.int64)
    m[0, :] = -np.arange(n + 1) * penalty
    m[:, 0] = -np.arange(n + 1) * penalty
    r, c = np.indices((n + 1, n + 1))
    similarity = (r * 7 + c * 13) % 21 - 10
    for d in range(2, 2 * n + 1):  # anti-diagonals r + c = d, each from the ones before it
        rows = np.arange(max(1, d - n), min(n, d - 1) + 1)
        cols = d - rows
        m[rows, cols] = np.maximum(m[rows - 1, cols - 1] + similarity[rows, cols],
                                   np.maximum(m[rows - 1, cols], m[rows, cols - 1]) - penalty)
    return m.flatten().astype(np.int32)


def lud_reference(s: dict[str, int]) -> np.ndarray:
    """Unblocked LU without pivoting: the same operations as the blocked program but for the
    order of the trailing products' additions, so equal up to rounding."""
    n = s["n"]
    r, c = np.indices((n, n))
    a = ((r * 7 + c * 3) % 10 + 1).astype(np.float64) + np.where(r == c, 10.0 * n, 0.0)
    for i in range(n):
        a[i + 1:, i] /= a[i, i]
        a[i + 1:, i + 1:] -= np.outer(a[i + 1:, i], a[i, i + 1:])
    return a.flatten()


def programs(tiny: bool) -> list[Planned]:
    concat = {"n1": 1000, "n2": 3000, "n3": 500} if tiny else \
        {"n1": 1 << 22, "n2": 3 << 21, "n3": 1 << 20}
    hotspot = {"side": 32, "iterations": 3} if tiny else {"side": 1024, "iterations": 8}
    blocked = {"blocks": 8, "width": 64} if tiny else {"blocks": 64, "width": 1 << 16}
    nw = {"n": 32, "b": 8, "penalty": 10} if tiny else {"n": 1024, "b": 16, "penalty": 10}
    lud = {"n": 32, "b": 8} if tiny else {"n": 512, "b": 16}
    return [Planned("concatenation of 3 parts", "concat.fcl", "joined", concat, _concat),
            Planned("hotspot (power)", "hotspot.fcl", "heat", hotspot, _hotspot),
            Planned("blocked running sum (power)", "blocked.fcl", "blocked", blocked,
                    _blocked),
            Planned("Needleman-Wunsch (power)", "nw.fcl", "scores", nw, nw_reference),
            Planned("LU decomposition (power)", "lud.fcl", "factored", lud, lud_reference)]


def _compiled(program: Planned, block: int, planned: bool) -> Compiled:
    session = Session.new()
    sizes = "".join(f"val {name} = {value}\n" for name, value in program.sizes.items())
    text = sizes + (HERE / program.fcl).read_text() + f"\nval main = {program.entry}\n"
    session.add_file(Source(program.fcl, text))
    options = CompileOptions(block, keep_result=True, short_circuit=planned)
    return compile_program(session, main_root(session), options)


def _matches(result: np.ndarray, expected: np.ndarray) -> bool:
    if expected.dtype == np.float64:  # the same operations, added in another order
        return result.shape == expected.shape and np.allclose(result, expected, rtol=1e-12,
                                                              atol=1e-9)
    return np.array_equal(result, expected)


def measure_planning(tiny: bool, runs: int, device_id: str | None, block: int = 256,
                     gpu: GPU | None = None) -> list[dict]:
    """With `gpu`, also the cost model's time for each program planned and not on that GPU (the
    thesis measures these programs on GPUs, where the copies weigh more than on a CPU)."""
    rows = []
    for program in programs(tiny):
        expected = program.expected(program.sizes)
        sides: dict[bool, tuple[HostRun, Compiled, list[float]]] = {}
        for planned in (True, False):
            compiled = _compiled(program, block, planned)
            run = prepare_run(compiled, device_id, block, io.StringIO(), io.StringIO())
            sides[planned] = (run, compiled, [])
        plan = memory_plan(sides[True][1].il)
        peaks: dict[bool, int] = {}
        for round_ in range(runs + 1):  # the first round warms up
            for planned, (run, _, times) in sides.items():
                with measuring() as clock:
                    run.run_program()
                    run.device.queue.finish()
                run.check_failures()
                if round_ == 0:
                    if not _matches(np.asarray(run.result), expected):
                        raise FCLError(f"{program.name}: the result planned={planned} does "
                                       f"not match numpy")
                    peaks[planned] = run.memory.peak
                else:
                    times.append(clock.total())
                run.memory.release_arrays_since(0)
        for run, _, _ in sides.values():
            run.release()
        on, off = (statistics.median(sides[p][2]) for p in (True, False))
        rows.append({"program": program.name, "planned_ms": on, "unplanned_ms": off,
                     "speedup": off / on, "planned_bytes": peaks[True],
                     "unplanned_bytes": peaks[False], "copy_bytes_removed": plan.copy_bytes_saved,
                     "copies_of_unknown_size": plan.unknown_savings,
                     "kernels": (len(sides[True][1].kernels), len(sides[False][1].kernels)),
                     "runs": runs})
        if gpu is not None:
            rows[-1]["predicted_gpu"] = gpu.name
            rows[-1]["predicted_ms"] = tuple(
                predicted_ms(_compiled(program, block, planned), gpu, {}, block, device_id)
                for planned in (True, False))
    return rows


def _predicted_cells(r: dict, gpu: str | None) -> str:
    if gpu is None:
        return ""
    on, off = r.get("predicted_ms", (None, None))
    if on is None or off is None:
        return " – | – | – |"
    return f" {on * 1000:.1f} | {off * 1000:.1f} | {off / on:.2f} |"


def planning_table(rows: list[dict]) -> str:
    gpu = next((r["predicted_gpu"] for r in rows if "predicted_gpu" in r), None)
    predicted = f" predicted on {gpu}: planned µs | unplanned µs | unplanned / planned |" \
        if gpu else ""
    lines = ["| program | kernels planned / unplanned | planned ms | unplanned ms | unplanned / "
             "planned time | device memory planned | unplanned | bytes the removed copies "
             "move |" + predicted,
             "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * predicted.count("|")]
    for r in rows:
        planned_kernels, unplanned_kernels = r["kernels"]
        lines.append(f"| {r['program']} | {planned_kernels} / {unplanned_kernels} | "
                     f"{r['planned_ms']:.3f} | {r['unplanned_ms']:.3f} | {r['speedup']:.2f} | "
                     f"{r['planned_bytes']:,} | {r['unplanned_bytes']:,} | "
                     f"{r['copy_bytes_removed']:,}{' + ?' * bool(r['copies_of_unknown_size'])} |"
                     + _predicted_cells(r, gpu))
    return "\n".join(lines)
