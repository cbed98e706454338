"""Cost counters per kernel, from one traced work-group, as a text or HTML table.

Counts are for the traced work-group (its work-items averaged), so a kernel whose groups do
different amounts of work is described by the one shown; the table says which. When a GPU is
chosen, the table ends with each kernel's occupancy and predicted time (fcl/analysis/predict.py).
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

import numpy as np

from fcl.analysis.access import (
    SECTOR_BYTES,
    Rounds,
    SiteSummary,
    distinct_sectors,
    request_rounds,
    simt_by_site,
    split_by_site,
    summarize,
)
from fcl.analysis.predict import (
    REQUESTS_IN_FLIGHT,
    KernelPrediction,
    ProgramPrediction,
    time_text,
)
from fcl.analysis.trace import KernelTrace, Trace


@dataclass
class KernelCosts:
    kernel: str
    line: int | None           # the FCL line the kernel comes from
    launches: int
    groups: int                # work-groups of its first launch
    group: int                 # the traced one
    block_size: int
    local_bytes: int
    global_loads: float        # per work-item
    global_stores: float
    load_sectors: float        # 32-byte sectors per warp load request (global) ...
    load_sectors_ideal: float  # ... the least that the same bytes could take ...
    load_lines: float          # ... and the 128-byte lines they lie in
    store_sectors: float
    store_sectors_ideal: float
    store_lines: float
    load_requests: int         # warp load requests to global memory in the traced work-group
    store_requests: int
    local_requests: int        # warp requests to local memory in the traced work-group
    local_loads: float         # per work-item
    local_stores: float
    bank_conflicts: int        # extra serialized local accesses in the work-group
    worst_conflict: int        # the worst n-way conflict of one warp request (1: none)
    barriers: int              # per work-group, warp_barriers of them a warp's
    simt_efficiency: float     # the share of the warps' lanes active (1.0: no divergence)
    atomics: float             # atomic read-modify-writes per work-item (global and local) ...
    atomic_conflicts: float    # ... and lanes per warp atomic request waiting on another's
    global_atomics: int        # lane operations on global memory in the traced work-group
    distinct_sectors: int      # 32-byte sectors the traced work-group's global requests touch,
                               # each counted once (loads and stores apart): its DRAM traffic
    warp_notes: tuple[str, ...]  # how its warp code runs, and why (Kernel.notes)
    groups_per_launch: list[int]  # work-groups of every launch of this kernel
    truncated: bool
    sites: list[SiteSummary]
    # The most a work-item of the traced group did (memory accesses, barriers and branches it
    # took), over the group's average: 1 when each does as much (work shared out evenly).
    busiest: float = field(default=1.0, kw_only=True)
    # The barriers that end a warp's exchange of values (a sub-group's, on a device with them).
    warp_barriers: int = field(default=0, kw_only=True)
    # Arithmetic operations on doubles per work-item (the roofline's work; a lower bound where
    # the trace was cut short).
    flops: float = field(default=0.0, kw_only=True)
    float_flops: float = field(default=0.0, kw_only=True)  # ... and on floats
    # The rounds of global requests its warps wait through (access.request_rounds): fewer than
    # its requests where a warp keeps several on their way at once.
    rounds: Rounds = field(default=Rounds(0, 0), kw_only=True)
    # Occupancy and time on a GPU, when one is chosen (fcl.explain sets it) ...
    predicted: KernelPrediction | None = field(default=None, kw_only=True)
    # ... and the time measured on the device that ran it: median kernel time per run, in ms.
    measured_ms: float | None = field(default=None, kw_only=True)

    @property
    def sectors(self) -> float:
        """The 32-byte sectors of all the traced work-group's global requests."""
        return self.load_sectors * self.load_requests + self.store_sectors * self.store_requests


@dataclass(frozen=True)
class Measured:
    """Where and how the kernels' measured times were taken, for the table's note."""

    device: str
    runs: int
    total_ms: float   # the median of the runs' kernel time
    spread: float     # interquartile range over median
    host_ms: float    # the median host overhead per run


def kernel_costs(trace: KernelTrace, sites) -> KernelCosts:
    summaries = summarize(trace, sites)
    items = trace.block_size

    def total(kind: str, space: str, attribute: str = "accesses") -> int:
        return sum(getattr(s, attribute) for s in summaries
                   if s.site.kind == kind and s.site.space == space)

    def per_request(kind: str, attribute: str) -> float:
        requests = total(kind, "global", "requests")
        return total(kind, "global", attribute) / requests if requests else 0.0

    first_lane = trace.lane == int(trace.lane.min(initial=0))
    barrier_sites = [s for s in sites if s.kind == "barrier" and s.kernel == trace.kernel.name]
    barriers = int(np.isin(trace.site[first_lane], [s.id for s in barrier_sites]).sum())
    warp_barriers = int(np.isin(trace.site[first_lane],
                                [s.id for s in barrier_sites if s.level == "warp"]).sum())
    local = [s for s in summaries if s.site.space == "local"]
    atomic = [s for s in summaries if s.site.atomic]
    # Every site a warp executes (memory access, barrier, branch taken: the instructions the
    # trace sees) counts as one instruction, weighted by the lanes of its warp, as profilers
    # average the active lanes per instruction executed.
    simts = simt_by_site(trace, sites)
    lanes = sum(s.lanes for s in simts)
    rounds = request_rounds(trace, sites, REQUESTS_IN_FLIGHT)
    return KernelCosts(
        trace.kernel.name, trace.kernel.span.line if trace.kernel.span else None, trace.launches,
        trace.groups, trace.group, items, trace.local_bytes,
        total("load", "global") / items, total("store", "global") / items,
        per_request("load", "sectors"), per_request("load", "sectors_ideal"),
        per_request("load", "lines"),
        per_request("store", "sectors"), per_request("store", "sectors_ideal"),
        per_request("store", "lines"),
        total("load", "global", "requests"), total("store", "global", "requests"),
        sum(s.requests for s in local),
        total("load", "local") / items, total("store", "local") / items,
        sum(s.bank_conflicts for s in local), max((s.worst_conflict for s in local), default=1),
        barriers, sum(s.active for s in simts) / lanes if lanes else 1.0,
        sum(s.accesses for s in atomic) / items,
        sum(s.same_address for s in atomic) / max(1, sum(s.requests for s in atomic)),
        sum(s.accesses for s in atomic if s.site.space == "global"),
        distinct_sectors(split_by_site(trace, sites)), trace.kernel.notes,
        list(trace.groups_per_launch), trace.truncated, summaries, busiest=_busiest(trace),
        warp_barriers=warp_barriers, flops=_flops(trace, sites, "flops") / items,
        float_flops=_flops(trace, sites, "float_flops") / items,
        rounds=rounds)


def in_flight(costs: KernelCosts) -> float:
    """The global requests a warp of the kernel has on their way at once, on average."""
    rounds = costs.rounds
    return rounds.requests / rounds.rounds if rounds.rounds else 1.0


def _busiest(trace: KernelTrace) -> float:
    done = np.bincount(trace.lane, minlength=trace.block_size)
    return float(done.max() / done.mean()) if done.size and done.mean() else 1.0


def program_costs(trace: Trace) -> list[KernelCosts]:
    return [kernel_costs(k, trace.sites) for k in trace.kernels]


def _number(value: float) -> str:
    if value == int(value):
        return f"{value:g}"
    # Small values (say 1 store per group) with two significant digits, not as 0.00.
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


ROWS = [
    ("launches", lambda c: str(c.launches)),
    ("work-groups (first launch)", lambda c: str(c.groups)),
    ("work-items per group", lambda c: str(c.block_size)),
    ("global loads per work-item", lambda c: _number(c.global_loads)),
    ("global stores per work-item", lambda c: _number(c.global_stores)),
    ("sectors per warp load (ideal)",
     lambda c: f"{_number(c.load_sectors)} ({_number(c.load_sectors_ideal)})" if c.global_loads
     else "–"),
    ("lines per warp load", lambda c: _number(c.load_lines) if c.global_loads else "–"),
    ("sectors per warp store (ideal)",
     lambda c: f"{_number(c.store_sectors)} ({_number(c.store_sectors_ideal)})"
     if c.global_stores else "–"),
    ("lines per warp store", lambda c: _number(c.store_lines) if c.global_stores else "–"),
    ("global requests in flight per warp",
     lambda c: _number(round(in_flight(c), 2)) if c.rounds.rounds else "–"),
    # Requests' sectors, and of those the distinct ones: the rest are served by the caches.
    ("sectors per group (from DRAM)",
     lambda c: f"{_number(c.sectors)} ({c.distinct_sectors})"
     if c.global_loads or c.global_stores else "–"),
    ("local loads per work-item", lambda c: _number(c.local_loads)),
    ("local stores per work-item", lambda c: _number(c.local_stores)),
    ("bank conflicts per group (worst)",
     lambda c: f"{c.bank_conflicts} ({c.worst_conflict}-way)" if c.bank_conflicts else "0"),
    ("barriers per group", lambda c: f"{c.barriers} ({c.warp_barriers} a warp's)"
     if c.warp_barriers else str(c.barriers)),
    ("SIMT efficiency", lambda c: _number(c.simt_efficiency)),
    ("busiest work-item ÷ average", lambda c: _number(round(c.busiest, 1))),
    ("local memory per group", lambda c: f"{c.local_bytes} B"),
]


# Shown when a kernel combines with atomics (a histogram's): how many, and how often the lanes of
# a warp combine into one element, which they do in turn.
ATOMIC_ROWS = [
    ("atomics per work-item", lambda c: _number(c.atomics)),
    ("same-element lanes per warp atomic",
     lambda c: _number(c.atomic_conflicts) if c.atomics else "–"),
]


# Shown when a kernel computes with doubles (floats): the roofline's figures.
FLOP_ROWS = [
    ("double operations per work-item", lambda c: _number(c.flops)),
    ("double operations per DRAM byte",
     lambda c: "–" if intensity(c) is None else f"{intensity(c):.3g}"),
]
FLOAT_ROWS = [
    ("float operations per work-item", lambda c: _number(c.float_flops)),
    ("float operations per DRAM byte",
     lambda c: "–" if intensity(c, "float_flops") is None
     else f"{intensity(c, 'float_flops'):.3g}"),
]


def _prediction(c: KernelCosts) -> KernelPrediction:
    assert c.predicted is not None  # the predicted rows are shown for predicted kernels
    return c.predicted


def _predicted_rows(gpu: str) -> list:
    def occupancy(c: KernelCosts) -> str:
        resident = _prediction(c).occupancy
        return f"{resident.occupancy:.0%} ({resident.limit})"

    def registers(c: KernelCosts) -> str:
        resident = _prediction(c).occupancy
        spills = f" (spills: {resident.registers} fit)" if resident.spills else ""
        return f"{_prediction(c).work.registers}{spills}"

    def time(c: KernelCosts) -> str:
        seconds = _prediction(c).time_s
        return time_text(seconds) + (f" ({_prediction(c).bound})" if seconds is not None else "")

    return [(f"occupancy on {gpu}", occupancy), ("registers per work-item (est.)", registers),
            (f"predicted on {gpu}", time)]


def _measured_row(c: KernelCosts) -> str:
    return "–" if c.measured_ms is None else f"{c.measured_ms:.3g} ms"


def _rows(costs: list[KernelCosts]) -> list:
    predicted = [c.predicted for c in costs if c.predicted is not None]
    measured = [("measured on this device", _measured_row)] \
        if any(c.measured_ms is not None for c in costs) else []
    atomics = ATOMIC_ROWS if any(c.atomics for c in costs) else []
    atomics += FLOP_ROWS if any(c.flops for c in costs) else []
    atomics += FLOAT_ROWS if any(c.float_flops for c in costs) else []
    return ROWS + atomics + (_predicted_rows(predicted[0].gpu.name) if predicted else []) \
        + measured


def _prediction_note(predicted: list[KernelPrediction]) -> str:
    gpu = predicted[0].gpu
    seconds = ProgramPrediction(gpu, predicted).time_s
    total = "cannot run there" if seconds is None else f"takes {time_text(seconds)}"
    return (f"Predicted on {gpu.description}: the program {total}, "
            f"{gpu.launch_overhead_us:g} µs per launch included; each kernel takes its "
            "launches plus the longest of its DRAM, latency, L1, local memory, issue and "
            "barrier times, shown in brackets; a sector a work-group touches again comes from the "
            "caches, not DRAM. docs/costs.md explains the model.")


def _heading(c: KernelCosts) -> str:
    return c.kernel


def _measured_note(measured: Measured) -> str:
    return (f"Measured on {measured.device} (the device that ran it, not the GPU predicted for): "
            f"the kernels take {measured.total_ms:.3g} ms per run, median of {measured.runs} "
            f"runs by OpenCL profiling events, spread {measured.spread:.0%}; host overhead "
            f"{measured.host_ms:.3g} ms per run apart.")


def _notes(costs: list[KernelCosts], measured: Measured | None = None) -> list[str]:
    groups = {c.group for c in costs}
    # A kernel launching fewer work-groups than the one asked for is traced in its last one.
    where = f"work-group {costs[0].group} of each kernel's first launch" if len(groups) == 1 \
        else "the first launch of each kernel, in work-group " + ", ".join(
            f"{c.group} of {c.kernel}" for c in costs)
    notes = [f"Counted in {where}.",
             "As on NVIDIA GPUs since Volta: warps of 32 work-items; global memory in 32-byte "
             "sectors of 128-byte lines; local memory in 32 banks of 4 bytes (8-byte words served "
             "by half-warps).",
             "SIMT efficiency: the share of the warps' lanes active in the memory accesses, "
             "barriers and branches they execute. Busiest work-item: what the work-item that "
             "did most did, over the group's average (1: the work shared out evenly)."]
    predicted = [c.predicted for c in costs if c.predicted is not None]
    if predicted:
        notes.append(_prediction_note(predicted))
    if measured is not None:
        notes.append(_measured_note(measured))
    if any(c.truncated for c in costs):
        notes.append("Some work-items did more accesses than were recorded: counts are lower "
                     "bounds, but for the rounds of requests a warp waits for, which take such "
                     "a work-item to go on as it began.")
    # How each kernel's warp code runs (fcl.codegen.warps): what its counts describe.
    notes += [f"{c.kernel}, {note}." for c in costs for note in c.warp_notes]
    notes += [_warp_barrier_note(c) for c in costs if c.warp_barriers]
    notes += [_roofline_note(c, DOUBLES) for c in costs if c.flops]
    notes += [_roofline_note(c, FLOATS) for c in costs if c.float_flops]
    return notes


def _flops(trace: KernelTrace, sites, count: str) -> float:
    """The traced work-group's operations on doubles (count "flops") or floats ("float_flops"):
    each branch's code as often as its work-items took the branch, the kernel's other code once
    per work-item."""
    total = 0.0
    for site in sites:
        if site.kernel != trace.kernel.name or not getattr(site, count):
            continue
        runs = trace.block_size if site.kind == "ops" else int(np.count_nonzero(
            trace.site == site.id))
        total += getattr(site, count) * runs
    return total


def intensity(c: KernelCosts, count: str = "flops") -> float | None:
    """Operations on doubles (count "float_flops": on floats) per byte the work-group moves from
    DRAM (None: it moves none)."""
    dram = c.distinct_sectors * SECTOR_BYTES
    return getattr(c, count) * c.block_size / dram if dram else None


@dataclass(frozen=True)
class Precision:
    """The doubles or the floats, for the roofline note."""
    name: str        # "doubles", "floats"
    count: str       # the KernelCosts field of its operations per work-item
    peak: str        # the GPU's peak FLOP/s field
    rate: str        # ... and its operations per second


DOUBLES = Precision("doubles", "flops", "fp64_flops", "double_ops")
FLOATS = Precision("floats", "float_flops", "fp32_flops", "float_ops")


def _roofline_note(c: KernelCosts, kind: Precision) -> str:
    """Where a kernel sits under the GPU's roofline of doubles (floats): its arithmetic
    intensity against the ridge point, where the units' peak meets the memory's bandwidth."""
    p, ai = c.predicted, intensity(c, kind.count)
    said = f"{c.kernel}: {_number(getattr(c, kind.count))} operations on {kind.name} per work-item"
    if ai is None:
        return said + ", and no DRAM traffic."
    said += f", {ai:.3g} per byte from DRAM (its arithmetic intensity)"
    if p is None:
        return said + "."
    ops = getattr(p.gpu, kind.rate)
    ridge = ops / p.gpu.memory_bandwidth
    bound = f"compute-bound: the units for {kind.name} limit it" if ai > ridge else \
        "memory-bound: DRAM limits it"
    attainable = min(ops, ai * p.gpu.memory_bandwidth)
    peak, bandwidth = getattr(p.gpu, kind.peak) / 1e12, p.gpu.memory_bandwidth / 1e12
    rate = f"{attainable / 1e12:.3g} T" if attainable >= 1e12 else f"{attainable / 1e9:.3g} G"
    return (said + f"; the {p.gpu.name}'s ridge point is {ridge:.3g} (half its {peak:.3g} "
            f"TFLOPS of {kind.name}, an FMA counting two, over {bandwidth:.3g} TB/s): {bound}, "
            f"at most {rate} operations per second at peak (the predicted time above also "
            f"weighs how much of the GPU the launch keeps busy).")


def _warp_barrier_note(c: KernelCosts) -> str:
    """What a kernel's warp barriers cost, and would as sub-group barriers."""
    said = (f"{c.kernel}: {c.warp_barriers} of its {c.barriers} barriers per group end an "
            f"exchange between a warp's lanes (a shuffle, a step of a warp's reduction or scan, "
            f"through local memory); without sub-groups each is the work-group's")
    p = c.predicted
    if p is None or p.time_s is None or p.with_subgroups_s is None:
        return said + "."
    return (said + f". As sub-group barriers, each waiting for its warp alone, the kernel would "
            f"take {time_text(p.with_subgroups_s)} on the {p.gpu.name} instead of "
            f"{time_text(p.time_s)}.")


def costs_text(costs: list[KernelCosts], measured: Measured | None = None) -> str:
    if not costs:
        return "The program launches no kernels."
    table = [["", *(_heading(c) for c in costs)], *([label, *(cell(c) for c in costs)]
                                                     for label, cell in _rows(costs))]
    return "\n".join(aligned(table) + _notes(costs, measured))


def aligned(table: list[list[str]]) -> list[str]:
    """A table's rows as text: the first column to the left, the others to the right."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in table]


def costs_html(costs: list[KernelCosts], measured: Measured | None = None) -> str:
    if not costs:
        return "<p>The program launches no kernels.</p>"
    head = "".join(f"<th>{html.escape(_heading(c))}</th>" for c in costs)
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
        + "".join(f"<td style='text-align:right'>{html.escape(cell(c))}</td>" for c in costs)
        + "</tr>" for label, cell in _rows(costs))
    notes = "".join(f"<p><small>{html.escape(n)}</small></p>" for n in _notes(costs, measured))
    return (f"<table class='fcl-costs'><thead><tr><th></th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{notes}")
