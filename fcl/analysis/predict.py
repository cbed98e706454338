"""Predicted GPU time of each kernel and of a program on a chosen GPU: a roofline-style model of
the traced work-group's counts, small enough to check by hand (docs/costs.md derives it).

Per launch of g work-groups, each term is the time one resource of the GPU needs for the work:

    DRAM     g × distinct sectors per group × 32 B / achievable bandwidth
    latency  g ÷ groups at once × the rounds one warp waits for most, each a memory
             latency, or a cache latency where its L1 holds the sectors it reads
    L1       g × sectors per group × 32 B / (L1_BYTES_PER_CLOCK × active SMs × clock)
    local    g × bank passes per group / (active SMs × clock)   (a pass: 32 banks × 4 B)
    issue    g × lane accesses per group / (32 × SIMT efficiency) / (active SMs × clock)
    barriers waves × barriers per group × BARRIER_CYCLES / clock
    atomics  g × global atomic lane operations per group / (ATOMICS_PER_CLOCK × clock)
    doubles  g × operations on doubles per group / (half the FP64 peak × active SMs / SMs)
    floats   g × operations on floats per group / (half the FP32 peak × active SMs / SMs)

and the launch takes the longest of them (the resources work at once), plus the launch overhead.
Achievable bandwidth is Little's law: to keep bandwidth × latency bytes on their way, the
resident warps each have one round of requests in flight, of (sectors per round × 32 B); with
fewer bytes than that (low occupancy, few work-groups, requests that wait for each other) the
bandwidth reached falls in proportion. A round is up to REQUESTS_IN_FLIGHT of a warp's global
requests that need no value another of them loads (memory-level parallelism: a load through an
index just loaded, a store of a loaded value, or a barrier, starts the next round). With
warps of equal rounds, the DRAM term is at least the latency term; the latency term is longer
where one warp waits through more rounds than the others (a work-item with a longer loop).
A program's time is the sum of its kernels' times. A sector a work-group touches again (the
next element of a work-item's run, a row every work-item of a group reads) is served by the
L1 or L2 cache: DRAM moves each sector a work-group touches once, and every request's sectors
pass through L1. Sectors re-read by other work-groups are counted again (an upper bound).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from fcl.analysis.access import PHASE_LANES, WARP_SIZE
from fcl.analysis.gpu import GPU
from fcl.analysis.occupancy import Occupancy, occupancy
from fcl.il import ir

# Cycles a work-group waits at a barrier: the slowest warp's last local-memory access (about 30
# cycles on recent NVIDIA GPUs) and the barrier itself. An assumption, as the profiles' are.
BARRIER_CYCLES = 50
# A sub-group barrier waits for one warp, whose lanes run together: only the local-memory
# access before it. An assumption, as BARRIER_CYCLES is.
SUBGROUP_BARRIER_CYCLES = 30
# Warp requests an SM's load/store units issue per clock (32 lanes' worth). An assumption.
ISSUE_PER_CLOCK = 1
# Atomic read-modify-writes the L2 cache completes per clock, the whole GPU: each lane's is one
# operation, whether or not another lane of its warp combines into the same element (those take
# turns). An assumption, as the profiles' are; a local atomic on an element another lane of the
# request also combines into costs a pass of the banks more.
ATOMICS_PER_CLOCK = 32
# Independent global requests a warp issues before it waits for the first: an assumption, as
# the profiles' latency is (a compiler unrolling a loop 4 times issues its 4 loads before it
# uses their values). bench/calibrate.py measures what a GPU overlaps.
REQUESTS_IN_FLIGHT = 4
# Bytes the L1 cache of an SM delivers per clock: 128, as its shared-memory banks (32 × 4 B),
# with which it shares its storage and data path on NVIDIA GPUs since Volta.
L1_BYTES_PER_CLOCK = 128
TERMS = ("DRAM", "latency", "L1", "local memory", "issue", "barriers", "atomics", "doubles",
         "floats")


@dataclass(frozen=True)
class KernelWork:
    """What one kernel does, per work-group, and how often it is launched: the model's input."""

    name: str
    groups_per_launch: tuple[int, ...]
    block_size: int
    local_bytes: int          # per work-group
    registers: int            # per work-item (estimated)
    global_sectors: float     # 32-byte sectors moved by the work-group's global requests
    global_requests: int      # warp requests to global memory
    local_passes: float       # passes of the banks: a request's phases plus its conflicts
    lane_accesses: float      # loads and stores of all the work-group's work-items
    simt_efficiency: float    # 1.0: no lane of a warp ever idle
    barriers: int             # per work-group
    global_atomics: float = 0  # atomic lane operations on global memory, per work-group
    dram_sectors: float | None = None  # sectors from DRAM: the distinct ones (None: all)
    flops: float = 0.0        # operations on doubles per work-group
    warp_barriers: int = 0    # per work-group: those ending a warp's exchange ...
    subgroups: bool = False   # ... priced as sub-group barriers (else as the work-group's)
    float_flops: float = 0.0  # operations on floats per work-group
    request_rounds: int = 0   # rounds of global requests its warps wait through (0: one each)
    busiest_rounds: int = 0   # ... the most of them one warp waits for (with a load) ...
    busiest_cached_rounds: int = 0  # ... and how many of those read only sectors its L1 holds


@dataclass(frozen=True)
class KernelPrediction:
    work: KernelWork
    gpu: GPU
    occupancy: Occupancy
    terms: dict[str, float]   # seconds per term ("DRAM", "local memory", ...), over all launches
    launch_s: float           # launch overhead, over all launches
    time_s: float | None      # launches + the longest term of each launch; None: cannot run
    with_subgroups_s: float | None = None  # the same, its warp barriers a sub-group's

    @property
    def bound(self) -> str:
        """What limits the kernel most: the term taking the longest (the first of those as long,
        within rounding), or the launches."""
        longest = max(self.terms.values())
        term = next(t for t, seconds in self.terms.items() if seconds >= longest * (1 - 1e-9))
        return term if longest > self.launch_s else "launch"


@dataclass(frozen=True)
class ProgramPrediction:
    gpu: GPU
    kernels: list[KernelPrediction]

    @property
    def time_s(self) -> float | None:
        times = [k.time_s for k in self.kernels]
        return None if None in times else sum(t for t in times if t is not None)


def kernel_work(costs, registers: int) -> KernelWork:
    """The model's input from one kernel's counts, a fcl.analysis.costs.KernelCosts (which
    shows this module's predictions, so is not imported here)."""
    local_sites = [s for s in costs.sites if s.site.space == "local"]
    phases = sum(s.requests * (WARP_SIZE // PHASE_LANES[ir.ITEM_BYTES[s.site.elem]])
                 for s in local_sites)
    accesses = costs.global_loads + costs.global_stores + costs.local_loads + costs.local_stores
    waiting = sum(s.same_address for s in local_sites)  # local atomics taking turns
    return KernelWork(
        costs.kernel, tuple(costs.groups_per_launch), costs.block_size, costs.local_bytes,
        registers,
        costs.sectors,
        costs.load_requests + costs.store_requests, phases + costs.bank_conflicts + waiting,
        accesses * costs.block_size, costs.simt_efficiency, costs.barriers,
        costs.global_atomics, costs.distinct_sectors, costs.flops * costs.block_size,
        costs.warp_barriers, float_flops=costs.float_flops * costs.block_size,
        request_rounds=costs.rounds.rounds, busiest_rounds=costs.rounds.busiest,
        busiest_cached_rounds=costs.rounds.cached)


def predict_kernel(gpu: GPU, work: KernelWork) -> KernelPrediction:
    resident = occupancy(gpu, work.block_size, work.local_bytes, work.registers)
    launch_s = len(work.groups_per_launch) * gpu.launch_overhead_us * 1e-6
    terms = dict.fromkeys(TERMS, 0.0)
    if resident.groups_per_sm == 0:
        return KernelPrediction(work, gpu, resident, terms, launch_s, None)
    longest = 0.0
    for groups in work.groups_per_launch:
        launch = _launch_terms(gpu, work, resident, groups)
        for term, seconds in launch.items():
            terms[term] += seconds
        longest += max(launch.values())
    subgroups = predict_kernel(gpu, replace(work, subgroups=True)).time_s \
        if work.warp_barriers and not work.subgroups else None
    return KernelPrediction(work, gpu, resident, terms, launch_s, launch_s + longest, subgroups)


def _launch_terms(gpu: GPU, work: KernelWork, resident: Occupancy,
                  groups: int) -> dict[str, float]:
    if not groups:
        return dict.fromkeys(TERMS, 0.0)
    warps = math.ceil(work.block_size / gpu.warp_size)
    at_once = min(groups, resident.groups_per_sm * gpu.sms)  # work-groups running together
    active_sms = min(groups, gpu.sms)
    sm_clocks = active_sms * gpu.clock_hz
    distinct = work.global_sectors if work.dram_sectors is None else work.dram_sectors
    dram_bytes = groups * distinct * gpu.sector_bytes
    l1_bytes = groups * work.global_sectors * gpu.sector_bytes
    # A round waits on DRAM for the sectors no earlier request brought into the caches.
    rounds = work.request_rounds or work.global_requests
    in_flight = at_once * warps * (distinct * gpu.sector_bytes / rounds if rounds else 0)
    needed = gpu.memory_bandwidth * gpu.memory_latency_ns * 1e-9  # bytes, by Little's law
    bandwidth = gpu.memory_bandwidth * min(1.0, in_flight / needed)
    issued = work.lane_accesses / (gpu.warp_size * work.simt_efficiency) \
        if work.lane_accesses else 0.0
    waves = math.ceil(groups / (resident.groups_per_sm * gpu.sms))
    return {
        "DRAM": dram_bytes / bandwidth if dram_bytes else 0.0,
        # A warp waits for its rounds one after another, however many warps the others keep
        # busy: where one warp has more rounds than the rest, it alone takes this long.
        "latency": groups / at_once * 1e-9 * (
            (work.busiest_rounds - work.busiest_cached_rounds) * gpu.memory_latency_ns
            + work.busiest_cached_rounds * gpu.cache_latency_ns),
        "L1": l1_bytes / (L1_BYTES_PER_CLOCK * sm_clocks),
        "local memory": groups * work.local_passes / sm_clocks,
        "issue": groups * issued / (ISSUE_PER_CLOCK * sm_clocks),
        "barriers": waves * (work.barriers * BARRIER_CYCLES - work.warp_barriers * (
            BARRIER_CYCLES - SUBGROUP_BARRIER_CYCLES) * work.subgroups) / gpu.clock_hz,
        "atomics": groups * work.global_atomics / (ATOMICS_PER_CLOCK * gpu.clock_hz),
        # Over the SMs the launch occupies.
        "doubles": groups * work.flops / (gpu.double_ops * active_sms / gpu.sms),
        "floats": groups * work.float_flops / (gpu.float_ops * active_sms / gpu.sms),
    }


def predict_program(gpu: GPU, works: list[KernelWork]) -> ProgramPrediction:
    return ProgramPrediction(gpu, [predict_kernel(gpu, work) for work in works])


def time_text(seconds: float | None) -> str:
    """A time in µs or ms with three significant digits ("cannot run" for None)."""
    if seconds is None:
        return "cannot run"
    rounded = float(f"{seconds:.3g}")
    scale, unit = next((s, u) for s, u in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"))
                       if rounded >= s or u == "µs")
    return f"{rounded / scale:.3g} {unit}"
