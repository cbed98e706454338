"""Group one work-group's traced sites into warp requests and count what each costs.

A warp request is what one instruction of a warp does: the k-th execution of a site by the
work-items of one warp (lockstep, as SIMT hardware runs them). Its counters follow NVIDIA GPUs
since Volta (compute capability 7.0 to 9.0):

- global memory moves 32-byte sectors of 128-byte cache lines: a request costs the sectors its
  bytes fall into (the least: its distinct bytes packed into sectors), and the lines they lie in;
- local memory is 32 banks of 4-byte words: a request costs the most distinct words any bank
  must deliver in one phase of it (the same word is broadcast for free), see PHASE_LANES;
- SIMT efficiency: a warp executing a site has some of its lanes active, the others masked
  (they took the other side of a branch, or finished their loop).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from fcl.analysis.trace import KernelTrace
from fcl.codegen.emit import Site
from fcl.errors import FCLError
from fcl.il import ir
from fcl.lmad import LMAD

WARP_SIZE = 32
SECTOR_BYTES = 32
LINE_BYTES = 128
BANKS = 32
BANK_BYTES = 4
# The lanes of a warp whose local accesses the banks serve together, by element size. The CUDA
# C++ Programming Guide (compute capability 5.x, "Shared Memory"; 6.x to 9.0 refer to it): 32
# banks, successive 32-bit words in successive banks, each bank 32 bits per clock, and no
# conflict between lanes accessing the same 32-bit word. That is 128 bytes per clock, half of a
# warp's 8-byte request, which is served per half-warp: "For 64-bit accesses, a bank conflict
# only occurs if two threads in either of the half-warps access different addresses belonging
# to the same bank" (the guide's compute capability 2.x section, "64-Bit Accesses", the last to
# spell it out). A conflict-free warp of doubles thus takes 2 phases, one per half-warp.
PHASE_LANES = {1: WARP_SIZE, 4: WARP_SIZE, 8: WARP_SIZE // 2}


@dataclass
class SiteAccesses:
    """The executions of one site in the traced work-group."""

    site: Site
    lane: np.ndarray
    occurrence: np.ndarray  # how many times this work-item had been here before
    index: np.ndarray

    @property
    def elem_bytes(self) -> int:
        assert self.site.elem is not None  # an access's site, not a barrier's
        return ir.ITEM_BYTES[self.site.elem]

    def warp_of(self) -> np.ndarray:
        return self.lane // WARP_SIZE

    def instances(self) -> np.ndarray:
        """A number per warp request (site execution by one warp), dense from 0."""
        key = self.occurrence.astype(np.int64) * (int(self.lane.max(initial=0)) // WARP_SIZE + 1) \
            + self.warp_of()
        return np.unique(key, return_inverse=True)[1].reshape(-1)

    def subset(self, chosen: np.ndarray) -> SiteAccesses:
        return SiteAccesses(self.site, self.lane[chosen], self.occurrence[chosen],
                            self.index[chosen])


@dataclass
class SiteSummary:
    """A memory site's accesses in the traced work-group and what they cost."""

    site: Site
    accesses: int            # by work-items
    requests: int            # by warps
    sectors: int             # global: 32-byte sectors, summed over the requests ...
    sectors_ideal: int       # ... the least that their distinct bytes could take ...
    lines: int               # ... and the 128-byte lines the sectors lie in
    bank_conflicts: int      # local: serialized extra accesses over all requests
    worst_conflict: int      # local: the largest n of an n-way bank conflict (1: none)
    lmad_group: LMAD | None  # the whole work-group's accesses, when affine
    lmad_warp: LMAD | None   # the first warp's accesses, when affine
    # An atomic site's contention: lanes of a warp request on an element another lane of it
    # also combines into (they take turns), summed over the requests, and the most lanes of
    # one request on one element (1: none shared).
    same_address: int = 0
    worst_same_address: int = 1


@dataclass
class SiteSimt:
    """How many lanes of the warps were active when they executed a site (of any kind)."""

    site: Site
    executions: int  # by warps
    active: int      # lanes active, summed over the executions ...
    lanes: int       # ... and the lanes those warps have
    by_occurrence: tuple[float, ...] = ()  # the efficiency of the k-th executions, k = 0, 1, ...

    @property
    def efficiency(self) -> float:
        return self.active / self.lanes if self.lanes else 1.0


def check_warp(warp: int, block_size: int) -> None:
    if warp < 0 or warp * WARP_SIZE >= block_size:
        raise FCLError(f"warp {warp} does not exist: a work-group of {block_size} work-items "
                       f"has warps 0 to {(block_size - 1) // WARP_SIZE}")


def split_by_site(trace: KernelTrace, sites: list[Site]) -> list[SiteAccesses]:
    """The traced executions of each site of the kernel, with occurrence numbers."""
    result = []
    for site_id in np.unique(trace.site):
        chosen = np.flatnonzero(trace.site == site_id)  # lane-major, in log order
        lane = trace.lane[chosen]
        starts, ends = lane_runs(lane)
        run_start = np.repeat(starts, ends - starts)
        occurrence = np.arange(len(lane)) - run_start
        result.append(SiteAccesses(sites[site_id], lane, occurrence, trace.index[chosen]))
    return result


def sectors(accesses: SiteAccesses) -> tuple[int, int, int]:
    """(32-byte sectors touched, the least that could be, 128-byte lines touched), summed over
    warp requests. Elements are 1, 4 or 8 bytes, aligned, so each lies in a single sector."""
    instance = accesses.instances()
    byte = accesses.index.astype(np.int64) * accesses.elem_bytes

    def touched(unit: int) -> int:
        return np.unique(np.stack([instance, byte // unit]), axis=1).shape[1]

    distinct = np.unique(np.stack([instance, accesses.index.astype(np.int64)]), axis=1)
    per_request = np.bincount(distinct[0])
    ideal = int(np.sum(-(-per_request * accesses.elem_bytes // SECTOR_BYTES)))
    return touched(SECTOR_BYTES), ideal, touched(LINE_BYTES)


def distinct_sectors(by_site: list[SiteAccesses]) -> int:
    """The 32-byte sectors the global accesses touch, each counted once per array for loads
    and once for stores: what a work-group moves to and from DRAM when every sector it touches
    again is still in the L1 or L2 cache."""
    touched: dict[tuple[str, str | None], set] = {}
    for accesses in by_site:
        if accesses.site.space != "global" or not accesses.site.is_memory:
            continue
        sector = accesses.index.astype(np.int64) * accesses.elem_bytes // SECTOR_BYTES
        touched.setdefault((accesses.site.kind, accesses.site.array), set()).update(
            np.unique(sector).tolist())
    return sum(len(s) for s in touched.values())


def bank_words(accesses: SiteAccesses) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(phase, bank, distinct words of the bank the phase accesses), one entry per bank a
    phase of a warp request uses; phases are numbered densely from 0."""
    phase_lanes = PHASE_LANES[accesses.elem_bytes]
    phase = accesses.instances() * (WARP_SIZE // phase_lanes) \
        + accesses.lane % WARP_SIZE // phase_lanes
    first = accesses.index.astype(np.int64) * accesses.elem_bytes // BANK_BYTES
    words_each = max(1, accesses.elem_bytes // BANK_BYTES)
    words = np.concatenate([first + k for k in range(words_each)])
    owners = np.unique(np.tile(phase, words_each), return_inverse=True)[1].reshape(-1)
    distinct = np.unique(np.stack([owners, words]), axis=1)
    (phases, banks), count = np.unique(np.stack([distinct[0], distinct[1] % BANKS]), axis=1,
                                       return_counts=True)
    return phases, banks, count


def bank_conflicts(accesses: SiteAccesses) -> tuple[int, int]:
    """(extra serialized accesses summed over warp requests, the worst n-way conflict)."""
    phases, _, words = bank_words(accesses)
    degree = np.zeros(int(phases.max(initial=-1)) + 1, np.int64)
    np.maximum.at(degree, phases, words)
    return int(np.sum(degree - 1)), int(degree.max(initial=1))


def simt(accesses: SiteAccesses, block_size: int) -> SiteSimt:
    """The site's warp executions and their active lanes. A warp's lanes are those of its
    work-items that exist: a work-group of 16 runs a warp of 16 without divergence."""
    instance = accesses.instances()
    executions = int(instance.max(initial=-1)) + 1
    warp = np.zeros(executions, np.int64)
    warp[instance] = accesses.warp_of()
    lanes = np.minimum(WARP_SIZE, block_size - warp * WARP_SIZE)
    # The k-th executions of the site (a loop's k-th iteration): a reduction tree's steps.
    occurrence = np.zeros(executions, np.int64)
    occurrence[instance] = accesses.occurrence
    active_by_occurrence = np.bincount(accesses.occurrence)
    lanes_by_occurrence = np.bincount(occurrence, weights=lanes)
    return SiteSimt(accesses.site, executions, len(accesses.lane), int(lanes.sum()),
                    tuple(float(a / n) for a, n in zip(active_by_occurrence, lanes_by_occurrence)))


def fit_lmad(accesses: SiteAccesses, lanes: range) -> LMAD | None:
    """The LMAD of these work-items' accesses: (occurrence dims..., lane dim), if affine."""
    chosen = np.isin(accesses.lane, np.asarray(lanes))
    lane, occurrence, index = (accesses.lane[chosen], accesses.occurrence[chosen],
                               accesses.index[chosen].astype(np.int64))
    present = np.unique(lane)
    if len(present) == 0:
        return None
    count = int(occurrence.max()) + 1
    if len(lane) != count * len(present):
        return None  # some work-items did this more often than others: not one LMAD
    table = np.empty((count, len(present)), np.int64)
    table[occurrence, np.searchsorted(present, lane)] = index
    if not np.all(np.diff(present) == 1):
        return None
    across_lanes = table[0] - table[0, 0]
    if np.any(table != table[:, :1] + across_lanes):
        return None  # the lanes' pattern changes from one occurrence to the next
    outer, inner = _fit_sequence(table[:, 0]), _fit_sequence(table[0])
    if outer is None or inner is None:
        return None
    dims = [d for d in outer + inner if d[0] > 1]
    return LMAD(int(table[0, 0]), tuple(dims))


def _fit_sequence(values: np.ndarray) -> list[tuple[int, int]] | None:
    """Nested (size, stride) dims, outermost first, whose enumeration is `values`."""
    n = len(values)
    if n <= 1:
        return []
    stride = int(values[1] - values[0])
    run = 1
    while run < n and values[run] - values[0] == run * stride:
        run += 1
    if n % run:
        return None
    rows = values.reshape(n // run, run)
    if np.any(rows != rows[:, :1] + stride * np.arange(run)):
        return None
    outer = _fit_sequence(rows[:, 0])
    return None if outer is None else outer + [(run, stride)]


def summarize(trace: KernelTrace, sites: list[Site], warp: int = 0) -> list[SiteSummary]:
    """One summary per memory site of the kernel (not barriers or branches), in site order."""
    summaries = []
    warp_lanes = range(warp * WARP_SIZE, min((warp + 1) * WARP_SIZE, trace.block_size))
    for accesses in split_by_site(trace, sites):
        if not accesses.site.is_memory:
            continue
        touched = ideal = lines = conflicts = 0
        worst = 1
        if accesses.site.space == "global":
            touched, ideal, lines = sectors(accesses)
        else:
            conflicts, worst = bank_conflicts(accesses)
        same, worst_same = same_addresses(accesses) if accesses.site.atomic else (0, 1)
        summaries.append(SiteSummary(
            accesses.site, len(accesses.lane), int(accesses.instances().max(initial=-1)) + 1,
            touched, ideal, lines, conflicts, worst,
            fit_lmad(accesses, range(trace.block_size)), fit_lmad(accesses, warp_lanes),
            same, worst_same))
    return summaries


def same_addresses(accesses: SiteAccesses) -> tuple[int, int]:
    """(lanes beyond the first on each element, summed over the warp requests; the most lanes
    of one request on one element)."""
    if not len(accesses.lane):
        return 0, 1
    pairs = np.stack([accesses.instances().astype(np.int64), accesses.index.astype(np.int64)])
    _, counts = np.unique(pairs, axis=1, return_counts=True)
    return int((counts - 1).sum()), int(counts.max())


def simt_by_site(trace: KernelTrace, sites: list[Site]) -> list[SiteSimt]:
    """The SIMT counts of every traced site of the kernel (memory, barrier, branch)."""
    return [simt(accesses, trace.block_size) for accesses in split_by_site(trace, sites)]


class Rounds(NamedTuple):
    rounds: int        # a warp's waits for its global requests, summed over the warps ...
    requests: int      # ... the requests it issues in them (repeated loads left out) ...
    busiest: int = 0   # ... the most rounds one warp waits for: those with a load (a warp
                       # does not wait for its stores) ...
    cached: int = 0    # ... and of those, the rounds whose loads all read sectors its lanes
                       # loaded in earlier rounds: its SM's L1 holds them (the busiest warp's)


def request_rounds(trace: KernelTrace, sites: list[Site], in_flight: int) -> Rounds:
    """The rounds of global requests the traced work-group's warps wait through, summed over
    its warps: a warp issues up to `in_flight` requests together and then waits, and a request
    starts a round of its own when it needs a value loaded in the current round (Site.needs) or
    follows a barrier. A load repeating one of the work-item's earlier loads is no request
    (repeated_loads). A warp takes as many rounds as its busiest lane, and a lane whose log was
    cut short as many as its logged part in proportion to all it did. A lane's round is cached
    when its loads all read sectors the lane loaded in earlier rounds (a work-item walking
    consecutive elements reads each sector several times); a warp's rounds are cached but for
    as many as its lane with the most uncached ones waits for."""
    counted = np.zeros(len(sites), bool)  # the sites that count: global accesses, barriers
    array_code = _load_arrays(sites)
    item_bytes = np.ones(len(sites), np.int64)
    for site in sites:
        counted[site.id] = site.kind == "barrier" or (site.is_memory and site.space == "global")
        if array_code[site.id] >= 0 and site.elem:
            item_bytes[site.id] = ir.ITEM_BYTES[site.elem]
    counted_entries = counted[trace.site] & ~repeated_loads(trace, sites, array_code)
    # lanes of a warp mostly run the same sequence: its rounds are counted once
    known: dict[bytes, tuple[Rounds, np.ndarray]] = {}
    by_warp: dict[int, tuple[int, ...]] = {}  # rounds, requests, waits, uncached
    for start, end in zip(*lane_runs(trace.lane)):
        entries = np.flatnonzero(counted_entries[start:end]) + start
        sequence = trace.site[entries]
        key = sequence.tobytes()
        if key not in known:
            known[key] = _rounds([sites[s] for s in sequence], in_flight)
        counts, round_of = known[key]
        loads = array_code[sequence] >= 0
        sector = array_code[sequence[loads]] << 40 | (
            trace.index[entries[loads]].astype(np.int64) * item_bytes[sequence[loads]]
            // SECTOR_BYTES)
        lane_counts = (*counts[:3], counts.busiest - _cached(round_of[loads], sector))
        lane = int(trace.lane[start])
        if trace.made is not None and trace.made[lane] > end - start:
            # A log cut short: the work-item is taken to go on as it began (a long loop).
            lane_counts = tuple(round(n * trace.made[lane] / (end - start)) for n in lane_counts)
        warp = lane // WARP_SIZE
        by_warp[warp] = tuple(map(max, by_warp.get(warp, (0, 0, 0, 0)), lane_counts))
    # The busiest warp: the most rounds uncached, then the most in all.
    waits, uncached = max(((w, u) for _, _, w, u in by_warp.values()),
                          key=lambda wu: (wu[1], wu[0]), default=(0, 0))
    return Rounds(sum(r[0] for r in by_warp.values()), sum(r[1] for r in by_warp.values()),
                  waits, waits - uncached)


def _cached(round_of: np.ndarray, sector: np.ndarray) -> int:
    """How many rounds of a lane's loads (round_of: each load's round, sector: its sector)
    read only sectors the lane loaded in an earlier round."""
    if not sector.size:
        return 0
    _, first, which = np.unique(sector, return_index=True, return_inverse=True)
    fresh = round_of <= round_of[first][which.reshape(-1)]  # the sector's first round
    return int(np.unique(round_of).size - np.unique(round_of[fresh]).size)


def _load_arrays(sites: list[Site]) -> np.ndarray:
    """For each site: a number for the array a global load reads; -1 for any other site."""
    codes = np.full(len(sites), -1, np.int64)
    arrays: dict[str, int] = {}
    for site in sites:
        if site.space == "global" and site.kind == "load" and site.array is not None:
            codes[site.id] = arrays.setdefault(site.array, len(arrays))
    return codes


def repeated_loads(trace: KernelTrace, sites: list[Site], load_arrays: np.ndarray
                   ) -> np.ndarray:
    """For each logged access: whether it is a global load of an element its work-item loaded
    before, with no global store or barrier between, at an index computed from no loaded value.
    Such a load (a check reading an index a second time, a loop reading its bound again) is
    kept in a register by the compiler, or served with the first by the cache. A store may
    change any global array, as the compiler must assume; an index computed from a loaded value
    (a chain of loads) is a new address to the compiler, whatever its value. `load_arrays`:
    _load_arrays(sites)."""
    load_of = load_arrays.copy()  # a global load's array, by site, where its index is known
    clobbers = np.zeros(len(sites), bool)
    for site in sites:
        if site.index_loaded:
            load_of[site.id] = -1
        clobbers[site.id] = site.kind == "barrier" or (site.kind == "store"
                                                       and site.space == "global")
    repeated = np.zeros(trace.site.size, bool)
    loads = np.flatnonzero(load_of[trace.site] >= 0)
    if loads.size:
        # Logs are lane-major, so a running count of clobbers separates each lane's epochs.
        epoch = np.cumsum(clobbers[trace.site])
        key = np.stack([trace.lane[loads], epoch[loads], load_of[trace.site[loads]],
                        trace.index[loads]], axis=1)
        first = np.unique(key, axis=0, return_index=True)[1]
        repeated[loads] = True
        repeated[loads[first]] = False
    return repeated


def lane_runs(lane: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each work-item's entries of a lane-major log start and end."""
    starts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]]) if lane.size \
        else np.zeros(0, np.int64)
    return starts, np.r_[starts[1:], lane.size]


def _rounds(sequence: list[Site], in_flight: int) -> tuple[Rounds, np.ndarray]:
    """A lane's rounds (see request_rounds), and the round of each entry of its sequence."""
    rounds = issued = requests = waits = 0
    loaded: set[str] = set()
    round_of = np.zeros(len(sequence), np.int64)
    for k, site in enumerate(sequence):
        if site.kind == "barrier":
            issued = 0
            continue
        if issued in (0, in_flight) or site.needs & loaded:
            rounds, issued = rounds + 1, 0
            loaded = set()
        round_of[k] = rounds
        issued += 1
        requests += 1
        if site.kind == "load" and site.array is not None:
            waits += not loaded
            loaded.add(site.array)
    return Rounds(rounds, requests, waits), round_of
