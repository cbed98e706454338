"""Timings that can be trusted (fcl.timing) and device memory reused through the device's
pool (fcl.runtime.device, fcl.runtime.host): the settling loop and the verdicts on synthetic
times, the report lines of `benchmark` on both back ends and through `fcl run`, and the pool
counted through pyopencl's MemoryPool. No test asserts how long anything took."""
from __future__ import annotations

import io
import re
import subprocess
import sys
from itertools import count

import pytest

from fcl.errors import Source
from fcl.hostio import benchmark_report
from fcl.interp.eval import RunConfig
from fcl.pipeline import CompileOptions, compile_program, main_root, run_interpreter
from fcl.runtime.device import SLACK, open_device
from fcl.runtime.host import run_compiled, time_compiled
from fcl.session import Session
from fcl.timing import (
    NOISY,
    Policy,
    Sample,
    Summary,
    compare,
    finished,
    measuring,
    repeat,
    settled,
    single_run_report,
    verdict,
)

# The original's first line exactly (the mean per run, C's %f), then ours.
FIRST_LINE = re.compile(r"Benchmark \((\d+) repetitions\): \d+\.\d{6} ms per run")
SECOND_LINE = re.compile(r"  min \d+\.\d{6} ms, median \d+\.\d{6} ms, spread \d+\.\d% "
                         r"\((kernel time|wall time, interpreter)\)(; too noisy to rank .*)?")


def compiled_of(program: str):
    session = Session.new()
    session.add_file(Source("t.fcl", program))
    return compile_program(session, main_root(session), CompileOptions())


def interpreted(program: str) -> tuple[str, str]:
    session = Session.new()
    session.add_file(Source("t.fcl", program))
    out, err = io.StringIO(), io.StringIO()
    run_interpreter(session, main_root(session), RunConfig(out=out, err=err))
    return out.getvalue(), err.getvalue()


def on_opencl(program: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    run_compiled(compiled_of(program), out=out, err=err)
    return out.getvalue(), err.getvalue()


# ---- the settling loop, on synthetic times -------------------------------------------------------

def runs_until_finished(times: list[float], policy: Policy, seconds_per_run: float = 0.01):
    """After how many of `times` the policy stops, each run taking `seconds_per_run`."""
    for n in range(1, len(times) + 1):
        if finished(times[:n], n * seconds_per_run, policy):
            return n
    return None


def test_steady_runs_stop_after_the_least_number_of_runs():
    steady = [10.0, 10.1, 9.9, 10.0, 10.05, 10.0, 9.95]
    assert runs_until_finished(steady, Policy(min_runs=5)) == 5


def test_runs_go_on_until_the_middle_half_lies_within_the_tolerance():
    # 10 and 12 ms alternating, then steady at 10: the middle half spans 10..12 (±9%), still
    # 10..11 (±5%) after seven runs; after eight (six 10s, two 12s) it spans 10..10.5 (±2.5%).
    times = [10.0, 12.0, 10.0, 12.0, 10.0] + [10.0] * 5
    assert not settled(times[:5], 0.03) and not settled(times[:7], 0.03)
    assert runs_until_finished(times, Policy(min_runs=5, tolerance=0.03)) == 8


def test_the_budget_stops_runs_that_never_settle():
    wild = [10.0, 40.0] * 50
    policy = Policy(budget_s=0.2)
    assert runs_until_finished(wild, policy, seconds_per_run=0.01) == 20
    # A run longer than the budget is the only one.
    assert runs_until_finished(wild, policy, seconds_per_run=5.0) == 1


def test_a_number_of_runs_asked_for_is_exactly_that_many():
    wild = [10.0, 40.0] * 10
    assert runs_until_finished(wild, Policy(runs=7, budget_s=0.001)) == 7
    assert runs_until_finished([10.0] * 10, Policy(runs=8)) == 8


def test_repeat_runs_until_the_policy_stops_and_says_whether_runs_settled():
    clock = count(0.0, 0.05)  # every reading of the clock 50 ms later
    runs = iter([Sample(30.0, {"k": 10.0}), Sample(11.0, {"k": 10.1}), Sample(11.0, {"k": 10.0}),
                 Sample(11.0, {"k": 10.0})])
    timing = repeat(lambda: next(runs), Policy(min_runs=3), clock=lambda: next(clock))
    # Kernel times 10, 10.1, 10: settled after three runs, whatever the wall times.
    assert len(timing.samples) == 3 and timing.settled
    assert timing.kernel_medians() == {"k": 10.0}
    assert timing.host_overhead.median == pytest.approx(1.0)
    wild = iter([10.0, 30.0] * 100)
    clock = count(0.0, 0.125)
    timing = repeat(lambda: Sample(next(wild)), Policy(budget_s=1.0), clock=lambda: next(clock))
    assert not timing.settled and len(timing.samples) == 8  # 8 runs: 1 s
    assert "not settled within the 1 s budget" in timing.report()


# ---- summaries, verdicts, comparisons ------------------------------------------------------------

def test_spread_is_the_interquartile_range_over_the_median():
    summary = Summary.of([8.0, 9.0, 10.0, 11.0, 12.0])
    assert (summary.minimum, summary.q1, summary.median, summary.q3) == (8.0, 9.0, 10.0, 11.0)
    assert summary.spread == pytest.approx(0.2) and summary.mean == 10.0
    assert Summary.of([0.0, 0.0]).spread == 0.0


def test_the_verdict_says_when_runs_are_too_spread_to_rank_two_variants():
    steady, wild = Summary.of([10.0, 10.1, 10.2, 9.9]), Summary.of([10.0, 14.0, 10.0, 14.0])
    assert not steady.noisy and wild.spread > NOISY and wild.noisy
    assert verdict(steady).startswith("steady: variants that differ by more than")
    assert verdict(wild).startswith("too noisy to rank two variants")


def test_compare_ranks_two_timings_only_beyond_their_spreads():
    fast, slow = Summary.of([10.0, 10.2, 10.4, 10.6]), Summary.of([12.0, 12.2, 12.4, 12.6])
    ranking = compare(fast, slow, ("padded", "naive"))
    assert ranking.faster == 0 and ranking.ratio == pytest.approx(12.3 / 10.3)
    assert ranking.text.startswith("padded is faster than naive: 1.19x")
    assert compare(slow, fast).faster == 1
    overlapping = Summary.of([10.0, 10.3, 11.0, 13.0])  # its lower quartile below fast's upper
    tie = compare(fast, overlapping)
    assert tie.faster is None and "cannot be ranked" in tie.text


def test_benchmark_report_keeps_the_originals_line_then_min_median_and_spread():
    lines = benchmark_report([2.0, 1.0, 3.0, 2.0], "kernel time").splitlines()
    assert lines == ["Benchmark (4 repetitions): 2.000000 ms per run",
                     "  min 1.000000 ms, median 2.000000 ms, spread 25.0% (kernel time); "
                     "too noisy to rank two variants: the spread is 25.0%; time again on a "
                     "quieter machine, or with more runs"]
    steady = benchmark_report([1.0, 1.0], "wall time, interpreter").splitlines()
    assert steady[1] == ("  min 1.000000 ms, median 1.000000 ms, spread 0.0% "
                         "(wall time, interpreter)")


def test_single_run_report_names_kernel_time_and_host_overhead():
    assert single_run_report(12.0, None).splitlines() == [
        "Wall time: 12.0 ms", "  (interpreter: no kernel time to report apart)"]
    with measuring() as clock:
        on_opencl("val main = forceAndPrint 4 (push<grid> (generate 4 (fn i => i)))")
    lines = single_run_report(1000.0, clock).splitlines()
    assert lines[0] == "Wall time: 1000.0 ms"
    assert lines[1].startswith("  kernel time: ") and "(1 launches" in lines[1]
    assert lines[2].startswith("  host overhead: ")


# ---- kernel times of real runs -------------------------------------------------------------------

TWO_KERNELS = ("val main = do<grid> { xs <- forcePull<grid> (generate 4096 (fn i => i)) ;\n"
               "  ys <- forcePull<grid> (mapPull (fn x => x * 2) xs) ;\n"
               "  forceAndPrint 2 (push<grid> ys) }\n")


def test_a_clock_counts_every_launch_by_kernel_and_clocks_nest():
    compiled = compiled_of(TWO_KERNELS)
    with measuring() as outer:
        with measuring() as inner:
            run_compiled(compiled, out=io.StringIO())
        run_compiled(compiled, out=io.StringIO())
    names = {k.name for k in compiled.kernels}
    assert len(names) == 2
    assert inner.launches == 2 and set(inner.per_kernel()) == names
    assert outer.launches == 4 and set(outer.per_kernel()) == names
    assert all(ms > 0 for ms in outer.per_kernel().values())


def test_time_compiled_times_each_kernel_and_the_host_overhead_apart():
    compiled = compiled_of(TWO_KERNELS)
    timing = time_compiled(compiled, policy=Policy(runs=4))
    assert len(timing.samples) == 4 and timing.kernel_times
    assert set(timing.kernel_medians()) == {k.name for k in compiled.kernels}
    assert all(s.wall_ms >= s.timed_ms > 0 for s in timing.samples)
    lines = timing.report().splitlines()
    assert lines[0].startswith("kernel time per run: median ")
    assert lines[0].endswith("; 4 runs, as many as asked")
    assert lines[1].startswith("host overhead per run: median ")
    assert lines[2].startswith("kernels (median per run): kernel")
    assert lines[3].startswith("verdict: ")


# ---- benchmark's lines on both back ends and through `fcl run` -----------------------------------

BENCHMARK = ("val main = do<grid> { xs <- forcePull<grid> (generate 1000 (fn i => i)) ;\n"
             "  benchmark 3 (forcePull<grid> (mapPull (fn x => x * 2) xs)) }\n")


@pytest.mark.parametrize("backend", ["interp", "opencl"])
def test_benchmark_prints_the_same_line_shapes_on_both_back_ends(backend):
    out, err = (interpreted if backend == "interp" else on_opencl)(BENCHMARK)
    first, second = err.splitlines()
    assert out == "" and FIRST_LINE.fullmatch(first).group(1) == "3"
    match = SECOND_LINE.fullmatch(second)
    assert match and match.group(1) == ("kernel time" if backend == "opencl"
                                        else "wall time, interpreter")


@pytest.mark.slow  # 0.9-1.4 s, a process
def test_fcl_run_prints_the_originals_benchmark_line_on_stderr(tmp_path):
    path = tmp_path / "bench.fcl"
    path.write_text(BENCHMARK)
    result = subprocess.run([sys.executable, "-m", "fcl", "run", str(path)],
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == ""
    first, second = result.stderr.splitlines()
    assert FIRST_LINE.fullmatch(first) and SECOND_LINE.fullmatch(second)


# ---- device memory reused ------------------------------------------------------------------------

# Two arrays of 8 million ints (32 MB each).
BIG = ("val main = do<grid> { xs <- forcePull<grid> (generate 8000000 (fn i => i)) ;\n"
       "  ys <- forcePull<grid> (mapPull (fn x => x + 1) xs) ;\n"
       "  forceAndPrint 1 (push<grid> (mapPull (fn i => index xs i + index ys i) (iota 1))) }\n")


@pytest.fixture
def pool():
    """The default device's pool, emptied of what earlier tests left in it."""
    pool = open_device().pool
    pool.free_held()
    return pool


def test_a_second_run_reuses_the_first_runs_memory(pool):
    compiled = compiled_of(BIG)
    run_compiled(compiled, out=io.StringIO())
    managed, held = pool.managed_bytes, pool.held_blocks
    assert managed >= 2 * 4 * 8_000_000 and held == 2 and pool.active_blocks == 0
    run_compiled(compiled, out=io.StringIO())
    assert (pool.managed_bytes, pool.held_blocks) == (managed, held)  # nothing new allocated


def test_benchmark_repetitions_reuse_one_repetitions_memory(pool):
    body = "forcePull<grid> (generate 4000000 (fn i => i * 3))"
    run_compiled(compiled_of(f"val main = benchmark 1 ({body})"), err=io.StringIO())
    once = pool.managed_bytes
    run_compiled(compiled_of(f"val main = benchmark 20 ({body})"), err=io.StringIO())
    assert pool.managed_bytes == once and pool.active_blocks == 0


def test_the_pool_gives_back_what_a_smaller_run_does_not_need(pool):
    run_compiled(compiled_of(BIG), out=io.StringIO())
    assert pool.managed_bytes >= 64_000_000
    run_compiled(compiled_of("val main = forceAndPrint 1 (push<grid> (generate 8 (fn i => i)))"),
                 out=io.StringIO())
    assert pool.managed_bytes <= SLACK


def test_oclgrind_runs_allocate_outside_any_pool():
    # Oclgrind keeps every buffer until the run ends (see release_arrays_since): no pool there.
    assert open_device("oclgrind").pool is None
