"""Group one work-group's traced accesses into warp accesses and describe each access site.

A warp access is what one instruction of a warp does: the k-th execution of a site by the
work-items of one warp (lockstep, as SIMT hardware runs them). For global memory its cost is
the number of distinct 128-byte segments it touches (memory transactions); for local memory,
the number of distinct 4-byte words that fall into the same one of the 32 banks (the accesses
a bank must serialize; the same word is broadcast for free).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fcl.analysis.trace import KernelTrace
from fcl.errors import FCLError
from fcl.il import ir
from fcl.lmad import LMAD
from fcl.opencl.emit import Site

WARP_SIZE = 32
SEGMENT_BYTES = 128
BANKS = 32
BANK_BYTES = 4
ELEM_BYTES = {ir.INT: 4, ir.DOUBLE: 8, ir.BOOL: 1}


@dataclass
class SiteAccesses:
    """The accesses of one site in the traced work-group."""

    site: Site
    lane: np.ndarray
    occurrence: np.ndarray  # how many times this work-item had been here before
    index: np.ndarray

    @property
    def elem_bytes(self) -> int:
        return ELEM_BYTES[self.site.elem]

    def warp_of(self) -> np.ndarray:
        return self.lane // WARP_SIZE

    def instances(self) -> np.ndarray:
        """A number per warp access (site execution by one warp), dense from 0."""
        key = self.occurrence.astype(np.int64) * (int(self.lane.max(initial=0)) // WARP_SIZE + 1) \
            + self.warp_of()
        return np.unique(key, return_inverse=True)[1].reshape(-1)


@dataclass
class SiteSummary:
    site: Site
    accesses: int            # in the traced work-group
    warp_accesses: int
    transactions: int        # global: 128-byte segments over all warp accesses
    ideal_transactions: int  # if each warp access touched contiguous memory
    bank_conflicts: int      # local: serialized extra accesses over all warp accesses
    worst_conflict: int      # local: the largest n of an n-way bank conflict (1: none)
    lmad_group: LMAD | None  # the whole work-group's accesses, when affine
    lmad_warp: LMAD | None   # the first warp's accesses, when affine


def check_warp(warp: int, block_size: int) -> None:
    if warp < 0 or warp * WARP_SIZE >= block_size:
        raise FCLError(f"warp {warp} does not exist: a work-group of {block_size} work-items "
                       f"has warps 0 to {(block_size - 1) // WARP_SIZE}")


def split_by_site(trace: KernelTrace, sites: list[Site]) -> list[SiteAccesses]:
    """The traced accesses of each site of the kernel, with occurrence numbers."""
    result = []
    for site_id in np.unique(trace.site):
        chosen = np.flatnonzero(trace.site == site_id)  # lane-major, in log order
        lane = trace.lane[chosen]
        starts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])
        run_start = np.repeat(starts, np.diff(np.r_[starts, len(lane)]))
        occurrence = np.arange(len(lane)) - run_start
        result.append(SiteAccesses(sites[site_id], lane, occurrence, trace.index[chosen]))
    return result


def transactions(accesses: SiteAccesses) -> tuple[int, int]:
    """(128-byte segments touched, summed over warp accesses; the least that could be)."""
    instance = accesses.instances()
    segment = accesses.index.astype(np.int64) * accesses.elem_bytes // SEGMENT_BYTES
    touched = len(np.unique(np.stack([instance, segment]), axis=1).T)
    distinct = np.unique(np.stack([instance, accesses.index.astype(np.int64)]), axis=1)
    per_instance = np.bincount(distinct[0])
    ideal = int(np.sum(-(-per_instance * accesses.elem_bytes // SEGMENT_BYTES)))
    return touched, ideal


def bank_conflicts(accesses: SiteAccesses) -> tuple[int, int]:
    """(extra serialized accesses summed over warp accesses, the worst n-way conflict)."""
    instance = accesses.instances()
    first = accesses.index.astype(np.int64) * accesses.elem_bytes // BANK_BYTES
    words_per_access = max(1, accesses.elem_bytes // BANK_BYTES)
    words = np.concatenate([first + k for k in range(words_per_access)])
    owners = np.tile(instance, words_per_access)
    distinct = np.unique(np.stack([owners, words]), axis=1)
    banks = np.unique(np.stack([distinct[0], distinct[1] % BANKS]), axis=1, return_counts=True)
    per_bank = banks[1]  # distinct words per (warp access, bank)
    degree = np.zeros(int(owners.max(initial=-1)) + 1, np.int64)
    np.maximum.at(degree, banks[0][0], per_bank)
    return int(np.sum(degree - 1)), int(degree.max(initial=1))


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
    """One summary per memory site of the kernel (barriers excluded), in site order."""
    summaries = []
    warp_lanes = range(warp * WARP_SIZE, min((warp + 1) * WARP_SIZE, trace.block_size))
    for accesses in split_by_site(trace, sites):
        if accesses.site.kind == "barrier":
            continue
        touched = ideal = conflicts = 0
        worst = 1
        if accesses.site.space == "global":
            touched, ideal = transactions(accesses)
        else:
            conflicts, worst = bank_conflicts(accesses)
        summaries.append(SiteSummary(
            accesses.site, len(accesses.lane), int(accesses.instances().max(initial=-1)) + 1,
            touched, ideal, conflicts, worst,
            fit_lmad(accesses, range(trace.block_size)), fit_lmad(accesses, warp_lanes)))
    return summaries
