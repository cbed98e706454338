"""fcl.analysis: traced accesses, cost counters, LMADs and index formulas, checked against
numbers derived by hand from each program's structure.

The machine model of the counters (NVIDIA GPUs since Volta): work-groups of 256 work-items
(unless a test says otherwise), warps of 32, global memory in 32-byte sectors (8 ints) of
128-byte lines (32 ints), local memory in 32 banks of 4 bytes, 8-byte accesses served by
half-warps. An int is 4 bytes, a double 8. Each program is compiled and traced once per module.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

from fcl import pipeline
from fcl.analysis.access import (
    SiteAccesses,
    bank_conflicts,
    fit_lmad,
    sectors,
    simt,
    split_by_site,
)
from fcl.analysis.costs import KernelCosts, costs_html, costs_text, program_costs
from fcl.analysis.symbolic import formula
from fcl.analysis.trace import Trace, trace_program
from fcl.codegen.emit import Site
from fcl.codegen.kernel import Compiled
from fcl.errors import FCLError, Source
from fcl.il import ir
from fcl.lmad import LMAD
from fcl.session import Session
from sample_programs import NAIVE, REDUCE, REDUCE_DEFS, SHIFTED, TILED, TILED_DEFS


def reverse_cell(n: int) -> str:
    return f"do<grid> {{\n  xs <- forcePull<grid> (iota {n});\n  forcePull<grid> (reverse xs)\n}}"


@dataclass
class Traced:
    compiled: Compiled
    trace: Trace
    costs: list[KernelCosts]

    def sites(self, kernel: int, kind: str, space: str):
        """The summaries of one kernel's sites of a kind, in site order."""
        return [s for s in self.costs[kernel].sites
                if s.site.kind == kind and s.site.space == space]

    def accesses(self, kernel: int, kind: str, space: str) -> list[SiteAccesses]:
        name = self.trace.kernels[kernel].kernel.name
        return [a for a in split_by_site(self.trace.kernels[kernel], self.trace.sites)
                if a.site.kernel == name and a.site.kind == kind and a.site.space == space]


def compile_cell(cell: str, defs: str | None = None, block_size: int = 256) -> Compiled:
    session = Session.new(prelude=True)
    if defs:
        session.add_cell(Source("defs.fcl", defs))
    _, root = session.add_cell(Source("cell.fcl", cell))
    return pipeline.compile_program(session, root, pipeline.CompileOptions(block_size=block_size))


def traced(cell: str, defs: str | None = None, group: int = 0, block_size: int = 256,
           **kwargs) -> Traced:
    compiled = compile_cell(cell, defs, block_size)
    trace = trace_program(compiled, group=group, block_size=block_size, **kwargs)
    return Traced(compiled, trace, program_costs(trace))


@pytest.fixture(scope="module")
def reverse():
    return traced(reverse_cell(4096))


@pytest.fixture(scope="module")
def reverse_group3():
    return traced(reverse_cell(4096), group=3)


@pytest.fixture(scope="module")
def reverse_4100():
    return traced(reverse_cell(4100))


@pytest.fixture(scope="module")
def reverse_4100_past_end():
    return traced(reverse_cell(4100), group=100)


@pytest.fixture(scope="module")
def naive():
    return traced(NAIVE)


@pytest.fixture(scope="module")
def tiled():
    return traced(TILED, TILED_DEFS)


@pytest.fixture(scope="module")
def reduction():
    return traced(REDUCE, REDUCE_DEFS)


@pytest.fixture(scope="module")
def reduction_128():
    # Work-groups of 128; group 9 exists for the first kernel (16 groups) but not the second (8).
    return traced(REDUCE, REDUCE_DEFS, group=9, block_size=128)


def assert_global_only(c: KernelCosts):
    assert (c.local_loads, c.local_stores, c.local_bytes, c.barriers) == (0, 0, 0, 0)
    assert (c.bank_conflicts, c.worst_conflict, c.local_requests) == (0, 1, 0)


# ---- reverse ----------------------------------------------------------------------------------

@pytest.mark.slow  # 1.1-1.3 s
def test_reverse_reads_four_sectors_of_one_line_per_warp(reverse):
    fill, rev = reverse.costs
    assert rev.kernel == reverse.compiled.kernels[1].name
    # 4096 elements, one per work-item: 4096 / 256 = 16 work-groups, each work-item one load and
    # one store. Warp w of group 0 reads xs[4095 - 32w - 31 .. 4095 - 32w]: 32 ints (128 bytes)
    # starting at a multiple of 32, so 4 sectors of one line, which is also the least; it writes
    # 32w .. 32w + 31, alike.
    assert (rev.launches, rev.groups, rev.group, rev.block_size) == (1, 16, 0, 256)
    assert rev.groups_per_launch == [16]
    assert (rev.global_loads, rev.global_stores) == (1, 1)
    assert (rev.load_sectors, rev.load_sectors_ideal, rev.load_lines) == (4, 4, 1)
    assert (rev.store_sectors, rev.store_sectors_ideal, rev.store_lines) == (4, 4, 1)
    # 8 warps, each one load request and one store request; no branch is divergent.
    assert (rev.load_requests, rev.store_requests, rev.simt_efficiency) == (8, 8, 1)
    assert_global_only(rev)
    assert not rev.truncated
    # Per site: 256 accesses = 8 warp requests of 4 sectors in 1 line.
    (load,) = reverse.sites(1, "load", "global")
    assert (load.accesses, load.requests, load.sectors, load.sectors_ideal, load.lines) == \
        (256, 8, 32, 32, 8)
    # iota's kernel only stores, 4 contiguous sectors per warp.
    assert (fill.global_loads, fill.global_stores, fill.store_sectors, fill.store_lines) == \
        (0, 1, 4, 1)
    assert (fill.load_requests, fill.store_requests) == (0, 8)
    assert_global_only(fill)


def test_reverse_of_a_length_off_the_lines_straddles_two(reverse_4100):
    _, rev = reverse_4100.costs
    # 4100 = 16 * 256 + 4: 17 work-groups. Warp w of group 0 reads xs[4068 - 32w .. 4099 - 32w];
    # 4068 = 127 * 32 + 4, so each warp's 32 ints run from 4 ints into one line to 3 into the
    # next: bytes 16 .. 143 of a 256-byte span, sectors 0 .. 4 of it: 5 sectors where 4 would
    # do (128 bytes), in 2 lines. The stores stay aligned: 4 (4) in 1.
    assert rev.groups == 17
    assert (rev.load_sectors, rev.load_sectors_ideal, rev.load_lines) == (5, 4, 2)
    assert (rev.store_sectors, rev.store_sectors_ideal, rev.store_lines) == (4, 4, 1)
    (load,) = reverse_4100.sites(1, "load", "global")
    assert (load.requests, load.sectors, load.sectors_ideal, load.lines) == (8, 40, 32, 16)


# ---- which work-group ---------------------------------------------------------------------------

def test_group_argument_picks_the_traced_work_group(reverse, reverse_group3):
    # Work-group g's work-items i = 256g .. 256g + 255 read xs[4095 - i] and write ys[i].
    for run, g in ((reverse, 0), (reverse_group3, 3)):
        k = run.trace.kernels[1]
        assert k.group == g and run.costs[1].group == g
        (load,) = run.accesses(1, "load", "global")
        (store,) = run.accesses(1, "store", "global")
        assert sorted(load.index.tolist()) == list(range(4095 - 256 * g - 255, 4096 - 256 * g))
        assert sorted(store.index.tolist()) == list(range(256 * g, 256 * g + 256))
        # item l reads 4095 - 256g - l: a descending run
        (summary,) = run.sites(1, "load", "global")
        assert summary.lmad_group == LMAD(4095 - 256 * g, ((256, -1),))
    # the same counts in both
    assert reverse_group3.costs[1].load_sectors == reverse.costs[1].load_sectors == 4


def test_group_past_the_end_is_clamped_to_the_last(reverse_4100_past_end):
    run = reverse_4100_past_end
    fill, rev = run.costs
    # 17 work-groups: group 100 is traced as group 16, whose only work-items with an element are
    # the first 4 (i = 4096 .. 4099), reading xs[3], xs[2], xs[1], xs[0].
    assert (fill.group, fill.groups, rev.group, rev.groups) == (16, 17, 16, 17)
    (load,) = run.accesses(1, "load", "global")
    assert load.lane.tolist() == [0, 1, 2, 3] and load.index.tolist() == [3, 2, 1, 0]
    assert rev.global_loads == rev.global_stores == 4 / 256
    # One warp request of 4 ints, bytes 0 .. 15: one sector, of one line. Its 4 lanes are all
    # the warp has active: the other 28 work-items have no element.
    assert (rev.load_sectors, rev.load_sectors_ideal, rev.load_lines) == (1, 1, 1)
    assert rev.load_requests == 1
    assert rev.simt_efficiency == 4 / 32
    assert "Counted in work-group 16 of each kernel's first launch" in costs_text(run.costs)


def test_negative_group_is_an_error(naive):
    with pytest.raises(FCLError, match=r"work-group to trace must be 0 or more, not -1"):
        trace_program(naive.compiled, group=-1)


def test_unknown_kernel_is_an_error(naive):
    assert naive.trace.kernel(naive.compiled.kernels[1].name) is naive.trace.kernels[1]
    with pytest.raises(FCLError) as error:
        naive.trace.kernel("kernel9")
    names = [k.name for k in naive.compiled.kernels]
    assert error.value.message == f"no kernel named kernel9 was launched; launched: " \
                                  f"{', '.join(names)}"


# ---- transposes ---------------------------------------------------------------------------------

def test_naive_transpose_reads_a_sector_and_a_line_per_work_item(naive):
    _, t = naive.costs
    # ys[i] = xs[(i % 64) * 64 + i / 64]: a warp's 32 consecutive i read a column, 64 ints =
    # 256 bytes apart, each in a sector and a line of its own: 32 sectors where the 32 ints
    # (128 bytes) would fit in 4. The writes ys[i] are contiguous: 4 (4) in 1 line.
    # 4096 / 256 = 16 work-groups.
    assert (t.groups, t.global_loads, t.global_stores) == (16, 1, 1)
    assert (t.load_sectors, t.load_sectors_ideal, t.load_lines) == (32, 4, 32)
    assert (t.store_sectors, t.store_sectors_ideal, t.store_lines) == (4, 4, 1)
    assert (t.load_requests, t.store_requests, t.simt_efficiency) == (8, 8, 1)
    assert_global_only(t)
    (load,) = naive.sites(1, "load", "global")
    assert (load.accesses, load.requests, load.sectors, load.lines) == (256, 8, 8 * 32, 8 * 32)


def test_copy_shifted_by_one_int_takes_five_sectors_in_two_lines():
    _, copy = traced(SHIFTED).costs
    # Warp w reads xs[32w + 1 .. 32w + 32]: bytes 4 .. 131 past a line's start, the sectors
    # starting at bytes 0, 32, 64, 96 and 128: 5 sectors (not twice 4) in 2 lines; its writes
    # ys[32w .. 32w + 31] are aligned: 4 sectors in 1 line.
    assert (copy.load_sectors, copy.load_sectors_ideal, copy.load_lines) == (5, 4, 2)
    assert (copy.store_sectors, copy.store_sectors_ideal, copy.store_lines) == (4, 4, 1)
    assert (copy.load_requests, copy.store_requests) == (8, 8)


@pytest.mark.slow  # 0.6-1.1 s
def test_tiled_transpose_through_local_memory(tiled):
    _, t = tiled.costs
    # A 64 x 64 matrix in 32 x 32 tiles: 4 work-groups, one per tile; 1024 elements over 256
    # work-items: 4 per work-item, each loaded from global, stored to local, loaded back from
    # local and stored to global. A warp's global access is 32 consecutive ints of one tile row,
    # starting at a multiple of 32: 4 sectors (4) of 1 line. 8 warps, 4 requests each, per
    # access: 32 requests to global memory for loads, 32 for stores, and 64 to local memory.
    assert (t.groups, t.block_size) == (4, 256)
    assert (t.global_loads, t.global_stores, t.local_loads, t.local_stores) == (4, 4, 4, 4)
    assert (t.load_sectors, t.load_sectors_ideal, t.load_lines) == (4, 4, 1)
    assert (t.store_sectors, t.store_sectors_ideal, t.store_lines) == (4, 4, 1)
    assert (t.load_requests, t.store_requests, t.local_requests) == (32, 32, 64)
    # Every work-item runs both tile loops 4 times: no divergence.
    assert t.simt_efficiency == 1
    # The tile is 32 * 32 ints = 4096 bytes, written then read after one barrier.
    assert t.local_bytes == 4096
    assert t.barriers >= 1
    # Reading the tile transposed, a warp's lanes read words 32 apart: all in one bank, a 32-way
    # conflict, 31 extra accesses per warp access; 8 warps x 4 accesses = 32 warp accesses per
    # group: 32 * 31 = 992. Storing the tile row by row is conflict-free.
    assert (t.bank_conflicts, t.worst_conflict) == (992, 32)
    (store,) = tiled.sites(1, "store", "local")
    (load,) = tiled.sites(1, "load", "local")
    assert (store.requests, store.bank_conflicts, store.worst_conflict) == (32, 0, 1)
    assert (load.requests, load.bank_conflicts, load.worst_conflict) == (32, 992, 32)


@pytest.mark.slow  # 0.6-0.9 s
def test_tiled_transpose_of_doubles_conflicts_per_half_warp():
    run = traced("do<grid> { xs <- forcePull<grid> (generate (64 * 64) i2d); "
                 "forceM<grid> (tiledTranspose plainTile 32 64 64 xs) }", TILED_DEFS)
    _, t = run.costs
    # The tiled transpose of doubles: a warp's 32 doubles of a tile row are 256 bytes, 8 sectors
    # in 2 lines, both ways.
    assert (t.load_sectors, t.load_sectors_ideal, t.load_lines) == (8, 8, 2)
    assert (t.store_sectors, t.store_sectors_ideal, t.store_lines) == (8, 8, 2)
    (store,) = run.sites(1, "store", "local")
    (load,) = run.sites(1, "load", "local")
    # Stored row by row, each half-warp's 16 doubles fill the 32 banks once: no conflict.
    assert (store.requests, store.bank_conflicts, store.worst_conflict) == (32, 0, 1)
    # Read down a column, lane l reads double 32 l: words 64 l and 64 l + 1, banks 0 and 1 for
    # every lane. Per half-warp, 16 words in each: 16-way, 15 extra; 2 half-warps per request,
    # 32 requests (8 warps x 4): 32 x 2 x 15 = 960, where a whole warp at once would be 32-way.
    assert (load.requests, load.bank_conflicts, load.worst_conflict) == (32, 960, 16)
    assert (t.bank_conflicts, t.worst_conflict, t.local_bytes) == (960, 16, 8192)


def test_naive_transpose_reads_cost_8_times_the_tiled_ones(naive, tiled):
    def read_sectors(run: Traced) -> tuple[int, int]:
        """(elements read, sectors) over the whole matrix: every work-group does alike."""
        (load,) = run.sites(1, "load", "global")
        return load.accesses * run.costs[1].groups, load.sectors * run.costs[1].groups

    # Both read the 4096 elements once. Naive: 4096 / 32 = 128 warp requests of 32 sectors;
    # tiled: 128 warp requests of 4.
    assert read_sectors(naive) == (4096, 4096)
    assert read_sectors(tiled) == (4096, 512)
    assert naive.costs[1].load_sectors == 8 * tiled.costs[1].load_sectors


# ---- block reduction ----------------------------------------------------------------------------

@pytest.mark.slow  # 0.9 s
def test_block_reduction(reduction):
    _, r = reduction.costs
    # 2048 elements, 2 * 256 = 512 per work-group: 4 work-groups. Each work-item loads 2 (the
    # first addition while loading), both warp loads contiguous and aligned: 4 (4) in 1 line.
    assert (r.groups, r.block_size) == (4, 256)
    assert (r.global_loads, r.load_sectors, r.load_sectors_ideal, r.load_lines) == (2, 4, 4, 1)
    # 512 = 2^9 elements are halved 9 times down to 1, each step written to local memory and
    # followed by a barrier.
    assert r.barriers == 9
    # Local stores: 256 (while loading) + 128 + 64 + ... + 1 = 511; local loads: two per sum of
    # the 8 in-memory steps, 2 * (128 + ... + 1) = 510, and the final value read once: 511.
    assert r.local_stores == r.local_loads == 511 / 256
    # Two ping-pong buffers of 256 ints.
    assert r.local_bytes == 2 * 256 * 4
    # Work-items read consecutive words: no conflicts.
    assert (r.bank_conflicts, r.worst_conflict) == (0, 1)
    # One work-item writes the group's sum: 1 store, one warp request of one sector.
    assert r.global_stores == 1 / 256
    assert (r.store_sectors, r.store_sectors_ideal, r.store_lines) == (1, 1, 1)
    loads = reduction.sites(1, "load", "global")
    assert [(s.accesses, s.requests, s.sectors) for s in loads] == [(256, 8, 32)] * 2
    assert sum(s.accesses for s in reduction.sites(1, "store", "local")) == 511
    assert sum(s.accesses for s in reduction.sites(1, "load", "local")) == 511
    # Warp requests: 8 warps x 2 global loads; to local memory, 8 stores while loading, then
    # per step `if item < s` 2 loads and a store by each of the s / 32 warps (at least 1) with
    # a lane in it: 3 x (4 + 2 + 1 + 1 + 1 + 1 + 1 + 1) = 36, and the final load: 45.
    assert (r.load_requests, r.store_requests, r.local_requests) == (16, 1, 45)


@pytest.mark.slow  # 0.8-1.1 s
def test_block_reduction_with_work_groups_of_128(reduction_128):
    fill, r = reduction_128.costs
    # 2 * 128 = 256 per work-group: 8 groups; 256 = 2^8, halved 8 times: 8 barriers; two
    # buffers of 128 ints; 255 local stores (128 + 64 + ... + 1) and 255 loads (2 * 127 + 1).
    assert (r.groups, r.block_size, r.barriers, r.local_bytes) == (8, 128, 8, 1024)
    assert r.local_stores == r.local_loads == 255 / 128
    assert (r.global_loads, r.global_stores) == (2, 1 / 128)
    # Group 9 was asked for: the iota kernel has 2048 / 128 = 16 groups, the reduction 8, so
    # its last one, 7, is traced.
    assert (fill.groups, fill.group, r.group) == (16, 9, 7)
    assert (fill.groups_per_launch, r.groups_per_launch) == ([16], [8])


# ---- SIMT efficiency ---------------------------------------------------------------------------

def test_simt_efficiency_of_the_reduction_tree(reduction):
    _, r = reduction.costs
    # Each site a warp executes counts once, with the lanes of the warp active in it:
    # - the 2 global loads, the store to local memory and the 9 barriers, by all 8 warps in
    #   full: 12 x 8 = 96 executions of 32 lanes;
    # - `if item < s` for s = 128, 64, 32: the branch, 2 local loads and a local store, by the
    #   s / 32 warps in it, in full: 4 x (4 + 2 + 1) = 28 executions of 32 lanes;
    # - s = 16, 8, 4, 2, 1: the same 4 sites by warp 0 with s lanes active: 5 x 4 executions,
    #   4 x (16 + 8 + 4 + 2 + 1) = 124 lanes;
    # - the last `if item < 1`: the branch, a local load and the global store, 1 lane each.
    executions = 96 + 28 + 20 + 3
    active = 96 * 32 + 28 * 32 + 124 + 3
    assert r.simt_efficiency == active / (32 * executions)  # 4095 / 4704, about 0.87
    # Branch sites are no memory accesses: the counts above (511 local loads, ...) are those
    # of the loads and stores alone, and no summary is of a branch.
    assert all(s.site.is_memory for s in r.sites)
    branches = [s for s in reduction.trace.sites if s.kernel == r.kernel and s.kind == "branch"]
    assert [s.branch for s in branches] == ["then"] * 9


def test_simt_efficiency_of_each_branch(reduction):
    from fcl.analysis.sites import site_rows, sites_text
    name = reduction.costs[1].kernel
    rows = [r for r in site_rows(reduction.trace) if r.kernel == name and r.branch]
    assert all(r.access == "takes the if" for r in rows)
    # The first three steps fill whole warps; then warp 0 runs with s of its 32 lanes.
    assert [(r.index, r.cost) for r in rows] == [
        ("item < 128", "SIMT efficiency 1: 128 of 128 lanes active in 4 warp executions"),
        ("item < 64", "SIMT efficiency 1: 64 of 64 lanes active in 2 warp executions"),
        ("item < 32", "SIMT efficiency 1: 32 of 32 lanes active in 1 warp execution"),
        ("item < 16", "SIMT efficiency 0.5: 16 of 32 lanes active in 1 warp execution"),
        ("item < 8", "SIMT efficiency 0.25: 8 of 32 lanes active in 1 warp execution"),
        ("item < 4", "SIMT efficiency 0.125: 4 of 32 lanes active in 1 warp execution"),
        ("item < 2", "SIMT efficiency 0.0625: 2 of 32 lanes active in 1 warp execution"),
        ("item < 1", "SIMT efficiency 0.0312: 1 of 32 lanes active in 1 warp execution"),
        ("item < 1", "SIMT efficiency 0.0312: 1 of 32 lanes active in 1 warp execution")]
    assert f"{name}, line 10: takes the if (item < 16)\n    SIMT efficiency 0.5: 16 of 32 " \
           "lanes active in 1 warp execution" in sites_text(rows)


# Harris's interleaved addressing: in step s, the work-items i with i % (2 s) == 0 add element
# i + s to element i. (The `let` gives the then-side a statement of its own, so the compiler
# emits a branch rather than a select; the else-side copies the element to the other buffer.)
INTERLEAVED_DEFS = """
fun interleavedStep s arr =
  return<block> (push<block> (generate (length arr) (fn i =>
    if i % (2 * s) == 0 then (let right = index arr (i + s) in index arr i + right)
    else index arr i)))

fun interleavedTree chunk =
  do<block> {
    c <- forcePull<block> chunk;
    a <- power 8 (fn k => interleavedStep (sll 1 k)) (return<block> (push<block> c));
    return<block> (push<block> (generate 1 (fn i => index a 0)))
  }
"""
INTERLEAVED = "do<grid> { xs <- forcePull<grid> (iota 1024); " \
              "forceM<grid> (splitUp 256 xs |> map interleavedTree |> concat<block> 1) }"


@pytest.mark.slow  # 1-1.7 s
def test_simt_efficiency_of_interleaved_addressing():
    run = traced(INTERLEAVED, INTERLEAVED_DEFS)
    _, r = run.costs
    # Before the tree: the global load, a barrier, the store of the chunk to local memory and
    # a barrier, by the 8 warps in full: 32 executions of 32 lanes.
    executions, active = 32, 32 * 32
    for s in (1, 2, 4, 8, 16, 32, 64, 128):
        adders = 256 // (2 * s)  # i % (2 s) == 0
        warps_adding = min(8, adders)  # with a lane that adds
        # the then-side (branch, 2 loads), the else-side (branch, 1 load), by every warp with
        # a lane on that side; the store and the barrier, by all 8 warps
        executions += 3 * warps_adding + 2 * 8 + 2 * 8
        active += 3 * adders + 2 * (256 - adders) + 2 * 256
    # the last `if item < 1`: the branch, a local load and the global store, 1 lane each
    executions, active = executions + 3, active + 3
    assert (executions, active) == (432, 9474)
    assert r.simt_efficiency == active / (32 * executions)  # about 0.69
    from fcl.analysis.sites import site_rows
    rows = [row for row in site_rows(run.trace) if row.kernel == r.kernel and row.branch]
    # s = 1: half of every warp's lanes add, the other half copy
    assert [(row.access, row.index, row.cost) for row in rows[:2]] == [
        ("takes the if", "(item & 1) == 0",
         "SIMT efficiency 0.5: 128 of 256 lanes active in 8 warp executions"),
        ("takes the else of the if", "(item & 1) == 0",
         "SIMT efficiency 0.5: 128 of 256 lanes active in 8 warp executions")]


def test_simt_efficiency_of_a_loop_by_iteration():
    """Work-item t of a work-group of 64 runs a thread-level while loop t % 4 times: iteration
    k has the lanes with t % 4 > k, 3/4, 2/4 and 1/4 of each warp; the row says so."""
    from fcl.analysis.sites import site_rows
    run = traced("do<grid> { forceM<grid> (concat<block> 64 (generate 4 (fn b => "
                 "concat<thread> 1 (generate 64 (fn t => liftM<thread> push<thread> "
                 "(while<thread> (fn s => index s 0 < t % 4) "
                 "(fn s => return<thread> (push<thread> (generate 1 (fn k => index s 0 + 1)))) "
                 "(return<thread> (push<thread> (generate 1 (fn k => 0)))))))))) }")
    [loop] = [row for row in site_rows(run.trace) if row.branch and "go_" in row.index]
    # 2 warps, 3 iterations: 2 x (24 + 16 + 8) of 2 x 3 x 32 lanes
    assert loop.cost == ("SIMT efficiency 0.5: 96 of 192 lanes active in 6 warp executions; "
                         "by execution: 0.75, 0.5, 0.25")


@pytest.mark.slow  # 0.8-1.3 s
def test_groups_of_every_launch(tmp_path, monkeypatch):
    # A length known only at run time: the host loops, launching the step kernel again and
    # again, each time on half the elements: 1024, 512, ..., 1, in ceil(n / 256) groups.
    (tmp_path / "numbers.csv").write_text(",".join(map(str, range(4096))))
    monkeypatch.chdir(tmp_path)
    run = traced('do<grid> { xs <- readIntCSV "numbers.csv"; '
                 "while<grid> (fn a => 1 != length a) (step<grid> addi) (step<grid> addi xs) }",
                 REDUCE_DEFS)
    first, again = run.costs
    assert (first.groups_per_launch, first.launches) == ([8], 1)
    assert again.groups_per_launch == [4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert (again.launches, again.groups) == (11, 4)


def test_costs_text_and_html(naive, reduction_128):
    text = costs_text(naive.costs)
    fill, transpose = (k.name for k in naive.compiled.kernels)
    header, *rows = text.splitlines()
    assert header.split() == [fill, transpose]
    # cells are right-justified, two spaces or more apart
    cells = {label: values for label, *values in (re.split(r"\s{2,}", row) for row in rows)
             if values}
    assert cells["sectors per warp load (ideal)"] == ["–", "32 (4)"]
    assert cells["lines per warp load"] == ["–", "32"]
    assert cells["sectors per warp store (ideal)"] == ["4 (4)", "4 (4)"]
    assert cells["lines per warp store"] == ["1", "1"]
    assert cells["SIMT efficiency"] == ["1", "1"]
    assert cells["work-groups (first launch)"] == ["16", "16"]
    assert "Counted in work-group 0 of each kernel's first launch" in text
    assert "global memory in 32-byte sectors of 128-byte lines" in text
    html = costs_html(naive.costs)
    assert html.startswith("<table class='fcl-costs'>")
    assert f"<th>{transpose}</th>" in html and "32 (4)" in html
    assert costs_text([]) == "The program launches no kernels."
    # Kernels traced in different work-groups say so; a single store per group of 128 work-items
    # (1/128 per work-item) does not read as 0.
    text = costs_text(reduction_128.costs)
    fill, reduce_kernel = (k.name for k in reduction_128.compiled.kernels)
    assert f"work-group 9 of {fill}, 7 of {reduce_kernel}" in text
    stores = next(line for line in text.splitlines() if line.startswith("global stores"))
    assert stores.split()[-1] == "0.0078"


def test_truncated_trace_is_flagged():
    run = traced(reverse_cell(4096), cap=2)
    fill, rev = run.costs
    # Each work-item enters its kernel's loop body once. Then iota's store: 2 log entries;
    # reverse's load and store: 3, of which the loop and the load are recorded.
    assert not fill.truncated and rev.truncated
    assert (rev.global_loads, rev.global_stores) == (1, 0)
    assert "counts are lower bounds" in costs_text(run.costs)


# ---- index formulas -----------------------------------------------------------------------------

FORMULA = re.compile(r"[\w\s()+\-*/%&|^<>]*")
LOOP = re.compile(r"(\w+) = (.+), \+ (.+) while < (.+)")


def evaluate(text: str, values: dict):
    """A formula's value (vectorized over numpy values); its operands are never negative here, so
    C's `/` is Python's `//`."""
    assert FORMULA.fullmatch(text), text
    names = set(re.findall(r"[A-Za-z_]\w*", text))
    assert names <= set(values), (text, names - set(values))
    return eval(text.replace("/", "//"), {"__builtins__": {}}, dict(values))


def check_formula_against_trace(run: Traced, kernel: int, accesses: SiteAccesses
                                ) -> tuple[str, list[str]]:
    """The site's formula, evaluated for every traced access, gives the index it accessed."""
    k = run.trace.kernels[kernel]
    text, loops = formula(accesses.site.index_expr, k.kernel)
    item = accesses.lane.astype(np.int64)
    values = {"item": item, "group": k.group, "block_size": k.block_size, "groups": k.groups,
              "global_item": k.group * k.block_size + item, "global_size": k.groups * k.block_size}
    for loop in loops:
        name, start, step, bound = LOOP.fullmatch(loop).groups()
        values[name] = evaluate(start, values) + evaluate(step, values) * accesses.occurrence
        assert np.all(values[name] < evaluate(bound, values))
    assert np.array_equal(np.broadcast_to(evaluate(text, values), item.shape),
                          accesses.index), text
    return text, loops


def test_formula_of_reverse(reverse_group3):
    (load,) = reverse_group3.accesses(1, "load", "global")
    text, loops = check_formula_against_trace(reverse_group3, 1, load)
    # 4095 - i for the work-item's global id i: each work-item runs the grid loop once, so its
    # counter is the id, and there is no loop to describe
    assert loops == []
    assert re.search(r"\bglobal_item\b", text) and "4095" in text


def test_formula_of_naive_transpose(naive):
    (load,) = naive.accesses(1, "load", "global")
    text, loops = check_formula_against_trace(naive, 1, load)
    assert loops == [] and "64" in text  # (i % 64) * 64 + i / 64 over the global id i
    # the formula really is the transpose's, for every i
    i = np.arange(4096)
    assert np.array_equal(evaluate(text, {"global_item": i}), i % 64 * 64 + i // 64)


def test_formula_of_tiled_transpose(tiled):
    # The global read depends on the work-group (its tile) and the block-level loop counter.
    (load,) = tiled.accesses(1, "load", "global")
    text, (loop,) = check_formula_against_trace(tiled, 1, load)
    counter, start, step, bound = LOOP.fullmatch(loop).groups()
    assert re.search(r"\bgroup\b", text) and re.search(rf"\b{counter}\b", text)
    assert (start, step, bound) == ("item", "256", "1024")
    # tile row-major in 2 x 2 tiles of 32 x 32: row (group / 2) * 32 + k / 32, col
    # (group % 2) * 32 + k % 32 of the 64-wide matrix, for every group and k
    group, k = np.meshgrid(np.arange(4), np.arange(1024))
    assert np.array_equal(evaluate(text, {"group": group, counter: k}),
                          (group // 2 * 32 + k // 32) * 64 + group % 2 * 32 + k % 32)
    for accesses in tiled.accesses(1, "load", "local") + tiled.accesses(1, "store", "local") + \
            tiled.accesses(1, "store", "global"):
        check_formula_against_trace(tiled, 1, accesses)


def test_formula_of_block_reduction(reduction_128):
    # No loops: the first loads are group * 256 + item and group * 256 + item + 128.
    first, second = reduction_128.accesses(1, "load", "global")
    texts = []
    for accesses in (first, second):
        text, loops = check_formula_against_trace(reduction_128, 1, accesses)
        assert loops == [] and re.search(r"\bgroup\b", text) and re.search(r"\bitem\b", text)
        texts.append(text)
    group, item = np.meshgrid(np.arange(8), np.arange(128))
    assert np.array_equal(evaluate(texts[0], {"group": group, "item": item}), group * 256 + item)
    assert np.array_equal(evaluate(texts[1], {"group": group, "item": item}),
                          group * 256 + item + 128)
    for accesses in reduction_128.accesses(1, "load", "local"):
        check_formula_against_trace(reduction_128, 1, accesses)


# ---- LMADs --------------------------------------------------------------------------------------

def test_lmads_of_naive_transpose(naive):
    (load,) = naive.sites(1, "load", "global")
    (store,) = naive.sites(1, "store", "global")
    # Lane l of warp 0 reads (l % 64) * 64 + l / 64 = 64 l: 32 elements 64 apart.
    assert load.lmad_warp == LMAD(0, ((32, 64),))
    # The group's i = 64 a + b (a < 4, b < 64) read 64 b + a: 4 columns of 64, stride 64.
    assert load.lmad_group == LMAD(0, ((4, 1), (64, 64)))
    # The copy out is contiguous.
    assert store.lmad_warp == LMAD(0, ((32, 1),))
    assert store.lmad_group == LMAD(0, ((256, 1),))
    # Warp 1 (lanes 32 .. 63) reads from 64 * 32 = 2048 on.
    (accesses,) = naive.accesses(1, "load", "global")
    assert fit_lmad(accesses, range(32, 64)) == LMAD(2048, ((32, 64),))


def test_lmads_of_reverse_and_tiled(reverse, tiled):
    (load,) = reverse.sites(1, "load", "global")
    assert load.lmad_warp == LMAD(4095, ((32, -1),))
    # Tiled, group 0, warp 0: access k (of 4) by lane l is element i = l + 256 k of the tile:
    # global row i / 32 = 8 k, column l: 512 k + l; in local memory, transposed, 32 l + 8 k.
    (global_load,) = tiled.sites(1, "load", "global")
    (local_load,) = tiled.sites(1, "load", "local")
    assert global_load.lmad_warp == LMAD(0, ((4, 512), (32, 1)))
    assert local_load.lmad_warp == LMAD(0, ((4, 8), (32, 32)))


SITE = Site(0, "k", "load", "a", "global", ir.INT, "i", None)


def synthetic(index, lanes=None, occurrence=None, site=SITE) -> SiteAccesses:
    index = np.asarray(index, np.int32)
    lanes = np.arange(len(index)) if lanes is None else np.asarray(lanes)
    occurrence = np.zeros(len(index), np.int64) if occurrence is None else np.asarray(occurrence)
    return SiteAccesses(site, lanes.astype(np.int32), occurrence, index)


def test_fit_lmad_of_synthetic_patterns():
    # 4 lanes, 2 accesses each: index 100 k + 2 l
    lane, occurrence = np.repeat(np.arange(4), 2), np.tile(np.arange(2), 4)
    assert fit_lmad(synthetic(100 * occurrence + 2 * lane, lane, occurrence), range(4)) == \
        LMAD(0, ((2, 100), (4, 2)))
    assert fit_lmad(synthetic([7, 7, 7]), range(3)) == LMAD(7, ((3, 0),))  # a broadcast
    assert fit_lmad(synthetic([0, 1, 3]), range(3)) is None  # not affine across lanes
    assert fit_lmad(synthetic([0, 1]), range(5, 9)) is None  # no such lanes
    assert fit_lmad(synthetic([0, 2, 4], lanes=[0, 2, 3]), range(4)) is None  # lane 1 missing
    # lane 0 accesses twice, lane 1 once
    assert fit_lmad(synthetic([0, 1, 5], [0, 0, 1], [0, 1, 0]), range(2)) is None
    # the lanes' pattern changes between accesses: (0, 1) then (10, 12)
    assert fit_lmad(synthetic([0, 10, 1, 12], [0, 0, 1, 1], [0, 1, 0, 1]), range(2)) is None


DOUBLES = Site(0, "k", "load", "a", "global", ir.DOUBLE, "i", None)
BOOLS = Site(0, "k", "load", "a", "global", ir.BOOL, "i", None)
LOCAL = Site(0, "k", "load", "a", "local", ir.INT, "i", None)
LOCAL_DOUBLES = Site(0, "k", "load", "a", "local", ir.DOUBLE, "i", None)
LOCAL_BOOLS = Site(0, "k", "load", "a", "local", ir.BOOL, "i", None)


def test_sectors_and_lines_of_synthetic_warps():
    lanes = np.arange(32)
    # (sectors, the least, lines). 32 ints from 0: 4 sectors of one line; from 1: bytes
    # 4 .. 131, 5 sectors in 2 lines; from 8 (32 bytes in): 4 sectors, but in 2 lines
    assert sectors(synthetic(lanes)) == (4, 4, 1)
    assert sectors(synthetic(lanes + 1)) == (5, 4, 2)
    assert sectors(synthetic(lanes + 8)) == (4, 4, 2)
    # stride 2: 256 bytes spanned, all 8 sectors of 2 lines touched, 4 needed
    assert sectors(synthetic(2 * lanes)) == (8, 4, 2)
    # stride 8 ints = 32 bytes: a sector each, 4 of them per line
    assert sectors(synthetic(8 * lanes)) == (32, 4, 8)
    # all lanes read one int: 1 sector
    assert sectors(synthetic(np.full(32, 5))) == (1, 1, 1)
    # 32 doubles are 256 bytes: 8 sectors in 2 lines at best; 32 bools 32 bytes, one sector
    assert sectors(synthetic(lanes, site=DOUBLES)) == (8, 8, 2)
    assert sectors(synthetic(lanes, site=BOOLS)) == (1, 1, 1)
    # two warps, each 32 sectors in 32 lines (stride 32 ints = 128 bytes)
    assert sectors(synthetic(32 * np.arange(64))) == (64, 8, 64)


def test_bank_conflicts_of_synthetic_warps():
    lanes = np.arange(32)
    # (extra accesses, worst n-way): stride 1 and odd strides hit 32 different banks
    assert bank_conflicts(synthetic(lanes, site=LOCAL)) == (0, 1)
    assert bank_conflicts(synthetic(33 * lanes, site=LOCAL)) == (0, 1)
    # one word for everybody is a broadcast
    assert bank_conflicts(synthetic(np.full(32, 3), site=LOCAL)) == (0, 1)
    # stride 2: 16 banks with 2 words each: 2-way, 1 extra access
    assert bank_conflicts(synthetic(2 * lanes, site=LOCAL)) == (1, 2)
    # stride 32: one bank, 32 words: 32-way, 31 extra, per warp (two warps: 62)
    assert bank_conflicts(synthetic(32 * lanes, site=LOCAL)) == (31, 32)
    assert bank_conflicts(synthetic(32 * np.arange(64), site=LOCAL)) == (62, 32)
    # bools: 4 lanes share a word, 8 words in 8 banks
    assert bank_conflicts(synthetic(lanes, site=LOCAL_BOOLS)) == (0, 1)


def test_bank_conflicts_of_synthetic_warps_of_doubles():
    lanes = np.arange(32)
    # A warp's 8-byte request is served by half-warps: 16 lanes, 32 words. Stride 1: lane l
    # of a half-warp reads words 2l and 2l + 1, all 32 banks once: no conflict (a whole warp
    # at once would put 2 words in every bank).
    assert bank_conflicts(synthetic(lanes, site=LOCAL_DOUBLES)) == (0, 1)
    # Stride 2 doubles: lane l reads words 4l and 4l + 1, and lane l + 8 words 4l + 32 and
    # 4l + 33 of the same two banks: 16 banks with 2 words, 2-way, 1 extra per half-warp.
    assert bank_conflicts(synthetic(2 * lanes, site=LOCAL_DOUBLES)) == (2, 2)
    # All lanes read one double: its 2 words are broadcast.
    assert bank_conflicts(synthetic(np.full(32, 3), site=LOCAL_DOUBLES)) == (0, 1)
    # Stride 16 doubles (128 bytes): a half-warp's 16 lanes all in banks 0 and 1, 16-way.
    assert bank_conflicts(synthetic(16 * lanes, site=LOCAL_DOUBLES)) == (30, 16)


def test_simt_of_synthetic_sites():
    # Lanes 0 .. 15 of warp 0 once, all of warp 1 twice: 3 warp executions, 16 + 2 x 32 lanes
    # active of 3 x 32.
    lane = np.r_[np.arange(16), np.repeat(np.arange(32, 64), 2)]
    occurrence = np.r_[np.zeros(16, np.int64), np.tile([0, 1], 32)]
    counts = simt(synthetic(np.zeros(len(lane)), lane, occurrence), block_size=64)
    assert (counts.executions, counts.active, counts.lanes) == (3, 80, 96)
    assert counts.efficiency == 80 / 96
    # A work-group of 40 has a warp of 8 lanes: all of them active is no divergence.
    counts = simt(synthetic(np.zeros(40)), block_size=40)
    assert (counts.executions, counts.active, counts.lanes, counts.efficiency) == (2, 40, 40, 1)


def test_each_access_is_described_by_formula_lmads_and_cost(tiled):
    from fcl.analysis.sites import site_rows, sites_html, sites_text
    rows = [r for r in site_rows(tiled.trace, warp=1)
            if r.kernel == tiled.trace.kernels[1].kernel.name]
    assert [r.access for r in rows] == [
        "runs the loop body while", "reads global xs", "writes local t",
        "runs the loop body while", "reads local t", "writes global arr_3"]
    copy_in, load, store_local, copy_out, load_local, store = rows
    # Both loops over the tile: 4 iterations for each of the 256 work-items, in 8 warps.
    for loop in copy_in, copy_out:
        assert loop.branch and loop.index == f"{loop.loops[0].split()[0]} < 1024"
        assert loop.cost == "SIMT efficiency 1: 1024 of 1024 lanes active in 32 warp executions"
    # Work-item i of 256 moves elements i, i + 256, ... of the tile, four of them: the group
    # reads four bands of 8 rows of 32 ints (rows 64 ints apart); warp 1 reads row 1 of each.
    assert load.lmad_group == "0 + {(4:512),(8:64),(32:1)}"
    assert load.lmad_warp == "64 + {(4:512),(32:1)}"
    assert load.cost == "4 sectors per warp request (ideal 4) in 1 line"
    # The transposed read of the tile: work-item 32a + b reads b * 32 + a, down a column.
    assert load_local.lmad_warp == "1 + {(4:8),(32:32)}"
    assert load_local.cost == "32-way bank conflict, 992 extra accesses"
    assert store_local.cost == "no bank conflict"
    assert "group" in store.index and store.loops == [f"{store.loops[0].split()[0]} = item, "
                                                      "+ 256 while < 1024"]
    text = sites_text(rows, warp=1)
    assert "    warp 1:     64 + {(4:512),(32:1)}" in text
    # The FCL name, then the kernel's: the program binds `xs`, the kernel reads arr_1.
    assert load.kernel_array == "arr_1" and f"reads global xs[{load.index}] (arr_1 in the " \
        "kernel)" in text
    assert "<code>1 + {(4:8),(32:32)}</code>" in sites_html(rows, warp=1)


@pytest.mark.slow  # 0.75 s
def test_an_access_that_is_not_affine_says_so():
    # Gathering through a table of indices: the addresses are data, not an LMAD.
    trace = traced("do<grid> { ix <- forcePull<grid> (generate 256 (fn i => (i * 7) % 256)); "
                   "forcePull<grid> (generate 256 (fn i => index ix (index ix i))) }")
    from fcl.analysis.sites import site_rows
    gather = [r for r in site_rows(trace.trace)
              if r.kernel == trace.trace.kernels[1].kernel.name
              and r.access == "reads global ix"]
    assert any(r.lmad_group.startswith("not one LMAD (256 accesses traced") for r in gather)


def test_tracing_uses_the_work_group_size_the_program_was_compiled_for():
    compiled = compile_cell(REDUCE, REDUCE_DEFS, block_size=128)
    assert trace_program(compiled).kernels[1].block_size == 128
    with pytest.raises(FCLError, match="compiled for work-groups of 128, not 256"):
        trace_program(compiled, block_size=256)


def test_index_formulas_read_in_the_programs_names_without_the_checks_guards():
    # An entry point's parameters name its arguments (img, h, w) and their lengths; the
    # guards that keep a faulty index or divisor in range (the run-time checks report those)
    # are left out of the formula.
    import fcl
    lib = fcl.load("""
sig blur : int -> int -> [double] -> Program <grid> [double]
fun blur h w img =
  forcePull<grid> (generate (h * w) (fn i => addd (index img i) (index img ((i + 1) % (h * w)))))
""")
    text = lib.blur.costs(4, 64, np.arange(256.0)).costs_bundle()["text/plain"]
    each = text.split("Each access:\n")[1]
    assert re.search(r"reads global img\[(\w+)\] \(arg_\d+ in the kernel\)", each)
    assert re.search(r"reads global img\[\((\w+) \+ 1\) % \(h \* w\)\] \(arg_\d+ in the kernel\)",
                     each)
    assert "runs the loop body while (" in each and " < h * w)" in each
    assert "arglen" not in each and "? 0 :" not in each


@pytest.mark.slow  # 1.5-2.5 s: three programs traced and predicted
def test_operations_on_doubles_and_the_roofline():
    # x * x + 2 * x: 3 operations per work-item, 16 bytes from DRAM (a double read, one
    # written); a loop of 10 steps of a * 0.5 + x: 20, each step counted as often as it ran.
    import fcl
    lib = fcl.load("""
sig poly : [double] -> Program <grid> [double]
fun poly xs = forcePull<grid> (map (fn x => addd (muld x x) (muld 2.0 x)) xs)

sig sums : [double] -> Program <grid> [double]<grid>
fun sums xs = concat<block> #BlockSize (map (fn chunk => concat<thread> 1 (map (fn x =>
  do<thread> {
    acc <- force<thread> (foldl (fn a => fn k => addd (muld a 0.5) x) 0.0 (iota 10)) ;
    return<thread> (push<thread> (generate 1 (fn i => index acc 0))) }) chunk))
  (splitUp #BlockSize xs))
""")
    poly = lib.poly.costs(np.arange(1024.0), gpu="h100")
    [kernel] = poly.costs()
    assert kernel.flops == 3
    text = poly.costs_bundle()["text/plain"]
    rows = {line[:40].strip(): line[40:].split() for line in text.splitlines()}
    assert rows["double operations per work-item"] == ["3"]
    assert rows["double operations per DRAM byte"] == ["0.188"]
    assert ("kernel0_line3: 3 operations on doubles per work-item, 0.188 per byte from DRAM (its "
            "arithmetic intensity); the H100 SXM5's ridge point is 5.07 (half its 34 TFLOPS of "
            "doubles, an FMA counting two, over 3.35 TB/s): memory-bound: DRAM limits it, at "
            "most 628 G operations per second at peak") in text
    [loop] = lib.sums.costs(np.arange(1024.0)).costs()
    assert loop.flops == 20
    # A program of ints has no such rows.
    ints = fcl.load("sig f : [int] -> Program <grid> [int]\n"
                    "fun f xs = forcePull<grid> (map (fn x => x * 3) xs)")
    assert "double operations" not in ints.f.costs(np.arange(64, dtype=np.int32)).costs_bundle()[
        "text/plain"]


def test_operations_on_floats_and_their_roofline():
    # The polynomial on floats: 3 operations per work-item, 8 bytes from DRAM (a float read,
    # one written), twice the doubles' intensity; the H100's floats (67 TFLOPS) put the ridge
    # at 10. Conversions are not operations.
    import fcl
    lib = fcl.load("""
sig poly : [float] -> Program <grid> [float]
fun poly xs = forcePull<grid> (map (fn x => addf (mulf x x) (mulf 2.0f x)) xs)

sig widened : [float] -> Program <grid> [double]
fun widened xs = forcePull<grid> (map (fn x => addd (f2d x) 1.0) xs)
""")
    poly = lib.poly.costs(np.arange(1024, dtype=np.float32), gpu="h100")
    [kernel] = poly.costs()
    assert (kernel.float_flops, kernel.flops) == (3, 0)
    text = poly.costs_bundle()["text/plain"]
    rows = {line[:40].strip(): line[40:].split() for line in text.splitlines()}
    assert rows["float operations per work-item"] == ["3"]
    assert rows["float operations per DRAM byte"] == ["0.375"]
    assert "double operations per work-item" not in rows
    assert ("kernel0_line3: 3 operations on floats per work-item, 0.375 per byte from DRAM (its "
            "arithmetic intensity); the H100 SXM5's ridge point is 10 (half its 67 TFLOPS of "
            "floats, an FMA counting two, over 3.35 TB/s): memory-bound: DRAM limits it") in text
    [mixed] = lib.widened.costs(np.arange(1024, dtype=np.float32)).costs()
    assert (mixed.float_flops, mixed.flops) == (0, 1)


def test_memory_that_holds_several_arrays_in_turn_is_named_by_all():
    # Each map writes where its input was (nothing reads the input after): one buffer holds
    # xs, then ys, zs and ws, and the views say so.
    trace = traced("""do<grid> {
  xs <- forcePull<grid> (generate 1024 (fn i => i * 3));
  ys <- forcePull<grid> (map (fn x => x + 1) xs);
  zs <- forcePull<grid> (map (fn y => y * 2) ys);
  forcePull<grid> (map (fn z => z - 5) zs)
}""")
    from fcl.analysis.sites import site_rows
    accesses = {row.access for row in site_rows(trace.trace) if not row.branch}
    assert accesses == {"writes global (xs / ys / zs)", "reads global (xs / ys / zs)"}


def test_the_kernels_parameters_say_which_arrays_of_the_program_they_are():
    import fcl
    lib = fcl.load("sig f : [int] -> Program <grid> [int]\n"
                   "fun f xs = do<grid> { ys <- forcePull<grid> (map (fn x => x * 3) xs);\n"
                   "                      forcePull<grid> (map (fn y => y + 1) ys) }")
    heads = [line for line in lib.f.opencl.splitlines() if line.startswith("__kernel")]
    assert heads and "restrict arg_1 /* xs */" in heads[0]
    assert any("/* ys */" in head or "/* (ys" in head for head in heads[1:] + heads[:1])


def test_each_operation_counts_as_often_as_its_own_code_runs():
    # complex.fcl's escape loop: 12 steps of z * z (6 operations), |z|^2 (3) and z * z + c (2),
    # then min(4, |z|^2) once (4): 136 per work-item. Code after a branch counts as often as
    # the code around the branch runs, not as the branch does.
    from pathlib import Path

    from fcl.explain import explain
    from runs import session_for
    session = session_for((Path(__file__).parent / "programs" / "complex.fcl").read_text())
    costs = explain(session, pipeline.main_root(session),
                    pipeline.CompileOptions(keep_result=False)).costs()
    assert costs[1].flops == 12 * 11 + 4
