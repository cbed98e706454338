"""Timings that can be trusted: kernel time from OpenCL profiling events, repeated until the
spread settles, reported with how far it can be trusted.

One run says little on a shared machine: on the course's 2-core machine (PoCL) single runs of a
kernel vary by tens of percent and min and median differed by up to 4x (issue 16), and a cell's
wall time is mostly compiling and reading back, not the kernels the lesson is about. So kernel
time (the sum of a run's profiling events) and host overhead (the run's wall time minus that)
are reported apart; runs repeat until the middle half of them lies within a few percent of the
median or a time budget runs out; and the report says when the spread is too large to tell two
variants apart.

Pure Python and numpy, outside the OpenCL back end: the events come from the caller
(fcl.runtime.host), so the interpreter's `benchmark` shares the summaries and report lines
without depending on OpenCL code.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Beyond this spread (interquartile range over median) a timing cannot rank two variants: the
# course's variants differ by 1.2x to 3x, and a 10% spread still ranks those.
NOISY = 0.10


@dataclass(frozen=True)
class Policy:
    """When to stop repeating: after `runs` runs if given, else once at least `min_runs` runs
    have settled (half the interquartile range within `tolerance` of the median) or
    `budget_s` seconds have passed, whichever comes first."""

    budget_s: float = 2.0
    runs: int | None = None
    min_runs: int = 5
    tolerance: float = 0.03


def quartiles(times: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = np.percentile(times, [25, 50, 75])
    return float(q1), float(median), float(q3)


def settled(times: list[float], tolerance: float) -> bool:
    """Whether the middle half of the runs lies within ±tolerance of their median."""
    q1, median, q3 = quartiles(times)
    return (q3 - q1) / 2 <= tolerance * median


def finished(times: list[float], elapsed_s: float, policy: Policy) -> bool:
    """Whether to stop after these runs, `elapsed_s` seconds after the first began."""
    if policy.runs is not None:
        return len(times) >= policy.runs
    if not times:
        return False
    if elapsed_s >= policy.budget_s:
        return True
    return len(times) >= policy.min_runs and settled(times, policy.tolerance)


@dataclass(frozen=True)
class Summary:
    """A sample of times (ms): its extremes, quartiles and mean."""

    runs: int
    minimum: float
    q1: float
    median: float
    q3: float
    mean: float

    @classmethod
    def of(cls, times: list[float]) -> Summary:
        q1, median, q3 = quartiles(times)
        return cls(len(times), min(times), q1, median, q3, float(np.mean(times)))

    @property
    def spread(self) -> float:
        """The interquartile range relative to the median (0 for a sample of zeros)."""
        return (self.q3 - self.q1) / self.median if self.median > 0 else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY


@dataclass(frozen=True)
class Ranking:
    """Which of two timings is faster, if the spreads allow saying so."""

    faster: int | None  # 0 or 1: the index of the faster timing; None: they cannot be ranked
    ratio: float        # the slower median over the faster one (or second over first)
    text: str


def compare(first: Summary, second: Summary, names: tuple[str, str] = ("A", "B")) -> Ranking:
    """One timing is faster than another beyond the spreads when its interquartile range lies
    wholly below the other's."""
    if first.q3 < second.q1:
        ratio = second.median / first.median
        return Ranking(0, ratio, f"{names[0]} is faster than {names[1]}: {ratio:.2f}x, "
                                 "beyond the spreads")
    if second.q3 < first.q1:
        ratio = first.median / second.median
        return Ranking(1, ratio, f"{names[1]} is faster than {names[0]}: {ratio:.2f}x, "
                                 "beyond the spreads")
    ratio = second.median / first.median if first.median > 0 else 1.0
    return Ranking(None, ratio, f"{names[0]} and {names[1]} cannot be ranked: their middle "
                                f"halves of runs overlap (medians {first.median:.3f} and "
                                f"{second.median:.3f} ms)")


def verdict(summary: Summary) -> str:
    """Whether two variants can be ranked by timings as spread as this one."""
    percent = f"{summary.spread:.1%}"
    if summary.noisy:
        return (f"too noisy to rank two variants: the spread is {percent}; time again on a "
                "quieter machine, or with more runs")
    return f"steady: variants that differ by more than {percent} can be ranked"


# ---- kernel time from profiling events -------------------------------------------------------

class KernelClock:
    """The kernel time of the launches made while it is active (see `measuring`), by kernel.
    Events are summed in batches as they complete, so that a long loop of launches holds few."""

    BATCH = 256

    def __init__(self) -> None:
        # PyOpenCL's Events (not imported here), whose stubs lack the `profile` this reads.
        self.pending: list[tuple[str, Any]] = []
        self.ms: dict[str, float] = {}
        self.launches = 0

    def add(self, name: str, event) -> None:
        self.pending.append((name, event))
        self.launches += 1
        if len(self.pending) >= 2 * self.BATCH:
            self._fold(self.pending[:self.BATCH])
            del self.pending[:self.BATCH]

    def _fold(self, events: list[tuple[str, Any]]) -> None:
        for name, event in events:
            event.wait()
            profile = event.profile
            self.ms[name] = self.ms.get(name, 0.0) + (profile.end - profile.start) / 1e6

    def per_kernel(self) -> dict[str, float]:
        """Ms by kernel name (waits for launches still running)."""
        self._fold(self.pending)
        self.pending.clear()
        return dict(self.ms)

    def total(self) -> float:
        return sum(self.per_kernel().values())


_clocks: ContextVar[tuple[KernelClock, ...]] = ContextVar("clocks", default=())


@contextmanager
def measuring() -> Iterator[KernelClock]:
    """A clock of the kernels launched inside the block (by fcl.runtime.host), nested ones
    included: a `benchmark` inside a timed cell counts for both."""
    clock = KernelClock()
    token = _clocks.set((*_clocks.get(), clock))
    try:
        yield clock
    finally:
        _clocks.reset(token)


def record(name: str, event) -> None:
    """A kernel launch, for every active clock."""
    for clock in _clocks.get():
        clock.add(name, event)


# ---- repeated runs -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Sample:
    """One run: its wall time and, on OpenCL, its kernel time by kernel (None: not measured,
    as on the interpreter, where the wall time is what is timed)."""

    wall_ms: float
    kernels: dict[str, float] | None = None

    @property
    def timed_ms(self) -> float:
        return self.wall_ms if self.kernels is None else sum(self.kernels.values())


@dataclass(repr=False)
class Timing:
    samples: list[Sample]
    settled: bool
    policy: Policy = field(default_factory=Policy)

    def __repr__(self) -> str:  # what Python shows of a timing (fcl.python's `bench`)
        return self.report().rstrip("\n")

    @property
    def kernel_times(self) -> bool:
        return self.samples[0].kernels is not None

    @property
    def timed(self) -> Summary:
        """Kernel time per run on OpenCL, wall time per run on the interpreter."""
        return Summary.of([s.timed_ms for s in self.samples])

    @property
    def host_overhead(self) -> Summary:
        return Summary.of([max(s.wall_ms - s.timed_ms, 0.0) for s in self.samples])

    def kernel_medians(self) -> dict[str, float]:
        """The median ms per run of each kernel, by name (empty on the interpreter)."""
        if not self.kernel_times:
            return {}
        names = dict.fromkeys(name for s in self.samples for name in s.kernels or {})
        return {name: float(np.median([(s.kernels or {}).get(name, 0.0) for s in self.samples]))
                for name in names}

    def report(self) -> str:
        timed = self.timed
        if self.policy.runs is not None:
            stop = "as many as asked"
        elif self.settled:
            stop = "settled"
        else:
            stop = f"not settled within the {self.policy.budget_s:g} s budget"
        what = "kernel time per run" if self.kernel_times else \
            "wall time per run (interpreter: no kernels to time apart)"
        lines = [f"{what}: median {timed.median:.3f} ms, min {timed.minimum:.3f} ms, "
                 f"spread {timed.spread:.1%} (interquartile range / median); "
                 f"{timed.runs} runs, {stop}"]
        if self.kernel_times:
            lines.append(f"host overhead per run: median {self.host_overhead.median:.3f} ms "
                         "(wall time of a run minus its kernel time: host code, launches)")
            kernels = self.kernel_medians()
            lines.append("kernels (median per run): " + (", ".join(
                f"{name} {ms:.3f} ms" for name, ms in kernels.items()) or "none ran"))
        lines.append(f"verdict: {verdict(timed)}")
        return "\n".join(lines) + "\n"


def repeat(run_once: Callable[[], Sample], policy: Policy,
           clock: Callable[[], float] = time.perf_counter,
           progress: Callable[[int, float], None] | None = None) -> Timing:
    """Run until `policy` says stop; `progress(runs, elapsed_s)` after each run."""
    samples: list[Sample] = []
    start = clock()
    while True:
        samples.append(run_once())
        elapsed = clock() - start
        if progress is not None:
            progress(len(samples), elapsed)
        times = [s.timed_ms for s in samples]
        if finished(times, elapsed, policy):
            return Timing(samples, settled(times, policy.tolerance), policy)


def single_run_report(wall_ms: float, clock: KernelClock | None) -> str:
    """%time's report: the wall time, and on OpenCL the kernel time and host overhead apart."""
    lines = [f"Wall time: {wall_ms:.1f} ms"]
    if clock is None:
        lines.append("  (interpreter: no kernel time to report apart)")
    elif clock.launches == 0:
        lines.append("  kernel time: none (no kernel ran); host overhead: all of it")
    else:
        kernel = clock.total()
        lines.append(f"  kernel time: {kernel:.3f} ms ({clock.launches} launches, OpenCL "
                     "profiling events)")
        lines.append(f"  host overhead: {max(wall_ms - kernel, 0.0):.1f} ms (compiling, "
                     "transfers, host code: wall time minus kernel time)")
    return "\n".join(lines) + "\n"
