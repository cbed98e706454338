"""fcl.analysis: traced accesses, cost counters, LMADs and index formulas, checked against
numbers derived by hand from each program's structure.

The machine model of the counters: work-groups of 256 work-items (unless a test says
otherwise), warps of 32, global memory in 128-byte segments (32 ints), local memory in 32 banks
of 4 bytes. An int is 4 bytes, a double 8. Each program is compiled and traced once per module.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pytest

from fcl import pipeline
from fcl.analysis.access import SiteAccesses, bank_conflicts, fit_lmad, split_by_site, transactions
from fcl.analysis.costs import KernelCosts, costs_html, costs_text, program_costs
from fcl.analysis.symbolic import formula
from fcl.analysis.trace import Trace, trace_program
from fcl.errors import FCLError, Source
from fcl.il import ir
from fcl.lmad import LMAD
from fcl.opencl.emit import Site
from fcl.opencl.kernel import Compiled
from fcl.session import Session


def reverse_cell(n: int) -> str:
    return f"do<grid> {{\n  xs <- forcePull<grid> (iota {n});\n  forcePull<grid> (reverse xs)\n}}"


NAIVE = "do<grid> {\n  xs <- forcePull<grid> (iota 4096);\n" \
        "  forcePull<grid> (transpose 64 64 xs)\n}"

TILED_DEFS = """
fun tiledTranspose tileFn tileDim rows cols elems =
  let tilesPerRow = cols / tileDim
  in splitGrid tileDim cols rows elems
     |> map tileFn
     |> interleave<block> (tileDim * tileDim) (fn ij =>
          let tile = fst ij in
          let k = snd ij in
          let row = tile % tilesPerRow * tileDim + k / tileDim in
          let col = tile / tilesPerRow * tileDim + k % tileDim
          in row * rows + col)
fun plainTile tile =
  do<block> {
    t <- forcePull<block> tile;
    return<block> (push<block> (transpose 32 32 t))
  }
"""
TILED = "do<grid> { xs <- forcePull<grid> (iota (64*64)); " \
        "forceM<grid> (tiledTranspose plainTile 32 64 64 xs) }"

# bench/reduce.fcl's block reduction: 2 * #BlockSize elements per work-group, halved in local
# memory until one is left, the first halving while loading.
REDUCE_DEFS = """
sig step : forall <lvl> 'a. ('a -> 'a -> 'a) -> ['a] -> Program<lvl> ['a]<lvl>
fun step<lvl> f arr =
  let x = halve arr
  in return<lvl> (push<lvl> (zipWith f (fst x) (snd x)))

sig reduce : forall <lvl> 'a. ('a -> 'a -> 'a) -> ['a] -> Program<lvl> ['a]<lvl>
fun reduce<lvl> f arr =
  do<lvl> {
    a <- while<lvl> (fn a => 1 != length a) (step<lvl> f) (step<lvl> f arr);
    return<lvl> (push<lvl> a)
  }

sig reducePart : forall 'a. ('a -> 'a -> 'a) -> 'a -> ['a] -> Program<grid> ['a]<grid>
fun reducePart f neutral arr =
  let chunk = 2 * #BlockSize
  in splitUp chunk (pad chunk neutral arr)
     |> map (reduce<block> f)
     |> concat<block> 1
"""
REDUCE = "do<grid> { xs <- forcePull<grid> (iota 2048); forceM<grid> (reducePart addi 0 xs) }"


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
    assert (c.bank_conflicts, c.worst_conflict) == (0, 1)


# ---- reverse ----------------------------------------------------------------------------------

def test_reverse_reads_one_segment_per_warp(reverse):
    fill, rev = reverse.costs
    assert rev.kernel == reverse.compiled.kernels[1].name
    # 4096 elements, one per work-item: 4096 / 256 = 16 work-groups, each work-item one load and
    # one store. Warp w of group 0 reads xs[4095 - 32w - 31 .. 4095 - 32w]: 32 ints starting at a
    # multiple of 32, so one 128-byte segment, which is also the least; it writes 32w .. 32w + 31.
    assert (rev.launches, rev.groups, rev.group, rev.block_size) == (1, 16, 0, 256)
    assert (rev.global_loads, rev.global_stores) == (1, 1)
    assert (rev.load_transactions, rev.load_ideal) == (1, 1)
    assert (rev.store_transactions, rev.store_ideal) == (1, 1)
    assert_global_only(rev)
    assert not rev.truncated
    # Per site: 256 accesses = 8 warp accesses, one segment each.
    (load,) = reverse.sites(1, "load", "global")
    assert (load.accesses, load.warp_accesses, load.transactions, load.ideal_transactions) == \
        (256, 8, 8, 8)
    # iota's kernel only stores, 1 contiguous segment per warp.
    assert (fill.global_loads, fill.global_stores, fill.store_transactions) == (0, 1, 1)
    assert_global_only(fill)


def test_reverse_of_a_length_off_the_segments_straddles_two(reverse_4100):
    _, rev = reverse_4100.costs
    # 4100 = 16 * 256 + 4: 17 work-groups. Warp w of group 0 reads xs[4068 - 32w .. 4099 - 32w];
    # 4068 = 127 * 32 + 4, so each warp's 32 ints run from 4 ints into one segment to 3 into the
    # next: 2 transactions where 1 would do (128 bytes). The stores stay aligned: 1 (1).
    assert rev.groups == 17
    assert (rev.load_transactions, rev.load_ideal) == (2, 1)
    assert (rev.store_transactions, rev.store_ideal) == (1, 1)
    (load,) = reverse_4100.sites(1, "load", "global")
    assert (load.warp_accesses, load.transactions, load.ideal_transactions) == (8, 16, 8)


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
    assert reverse_group3.costs[1].load_transactions == reverse.costs[1].load_transactions == 1


def test_group_past_the_end_is_clamped_to_the_last(reverse_4100_past_end):
    run = reverse_4100_past_end
    fill, rev = run.costs
    # 17 work-groups: group 100 is traced as group 16, whose only work-items with an element are
    # the first 4 (i = 4096 .. 4099), reading xs[3], xs[2], xs[1], xs[0].
    assert (fill.group, fill.groups, rev.group, rev.groups) == (16, 17, 16, 17)
    (load,) = run.accesses(1, "load", "global")
    assert load.lane.tolist() == [0, 1, 2, 3] and load.index.tolist() == [3, 2, 1, 0]
    assert rev.global_loads == rev.global_stores == 4 / 256
    # One warp access touching one segment.
    assert (rev.load_transactions, rev.load_ideal) == (1, 1)
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

def test_naive_transpose_reads_a_segment_per_work_item(naive):
    _, t = naive.costs
    # ys[i] = xs[(i % 64) * 64 + i / 64]: a warp's 32 consecutive i read a column, 64 ints =
    # 256 bytes apart, each in its own segment: 32 transactions where the 32 ints (128 bytes)
    # would fit in 1. The writes ys[i] are contiguous: 1 (1). 4096 / 256 = 16 work-groups.
    assert (t.groups, t.global_loads, t.global_stores) == (16, 1, 1)
    assert (t.load_transactions, t.load_ideal) == (32, 1)
    assert (t.store_transactions, t.store_ideal) == (1, 1)
    assert_global_only(t)
    (load,) = naive.sites(1, "load", "global")
    assert (load.accesses, load.warp_accesses, load.transactions) == (256, 8, 8 * 32)


def test_tiled_transpose_through_local_memory(tiled):
    _, t = tiled.costs
    # A 64 x 64 matrix in 32 x 32 tiles: 4 work-groups, one per tile; 1024 elements over 256
    # work-items: 4 per work-item, each loaded from global, stored to local, loaded back from
    # local and stored to global. A warp's global access is 32 consecutive ints of one tile row,
    # starting at a multiple of 32: 1 transaction (1).
    assert (t.groups, t.block_size) == (4, 256)
    assert (t.global_loads, t.global_stores, t.local_loads, t.local_stores) == (4, 4, 4, 4)
    assert (t.load_transactions, t.load_ideal) == (1, 1)
    assert (t.store_transactions, t.store_ideal) == (1, 1)
    # The tile is 32 * 32 ints = 4096 bytes, written then read after one barrier.
    assert t.local_bytes == 4096
    assert t.barriers >= 1
    # Reading the tile transposed, a warp's lanes read words 32 apart: all in one bank, a 32-way
    # conflict, 31 extra accesses per warp access; 8 warps x 4 accesses = 32 warp accesses per
    # group: 32 * 31 = 992. Storing the tile row by row is conflict-free.
    assert (t.bank_conflicts, t.worst_conflict) == (992, 32)
    (store,) = tiled.sites(1, "store", "local")
    (load,) = tiled.sites(1, "load", "local")
    assert (store.warp_accesses, store.bank_conflicts, store.worst_conflict) == (32, 0, 1)
    assert (load.warp_accesses, load.bank_conflicts, load.worst_conflict) == (32, 992, 32)


def test_naive_transpose_reads_cost_at_least_8_times_the_tiled_ones(naive, tiled):
    def read_transactions(run: Traced) -> tuple[int, int]:
        """(elements read, transactions) over the whole matrix: every work-group does alike."""
        (load,) = run.sites(1, "load", "global")
        return load.accesses * run.costs[1].groups, load.transactions * run.costs[1].groups

    # Both read the 4096 elements once. Naive: 4096 / 32 = 128 warp accesses of 32 segments;
    # tiled: 128 warp accesses of 1.
    assert read_transactions(naive) == (4096, 4096)
    assert read_transactions(tiled) == (4096, 128)
    assert read_transactions(naive)[1] >= 8 * read_transactions(tiled)[1]
    assert naive.costs[1].load_transactions >= 8 * tiled.costs[1].load_transactions


# ---- block reduction ----------------------------------------------------------------------------

def test_block_reduction(reduction):
    _, r = reduction.costs
    # 2048 elements, 2 * 256 = 512 per work-group: 4 work-groups. Each work-item loads 2 (the
    # first addition while loading), both warp loads contiguous and aligned: 1 (1).
    assert (r.groups, r.block_size) == (4, 256)
    assert (r.global_loads, r.load_transactions, r.load_ideal) == (2, 1, 1)
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
    # One work-item writes the group's sum: 1 store, one warp access of one segment.
    assert r.global_stores == 1 / 256
    assert (r.store_transactions, r.store_ideal) == (1, 1)
    loads = reduction.sites(1, "load", "global")
    assert [(s.accesses, s.warp_accesses, s.transactions) for s in loads] == [(256, 8, 8)] * 2
    assert sum(s.accesses for s in reduction.sites(1, "store", "local")) == 511
    assert sum(s.accesses for s in reduction.sites(1, "load", "local")) == 511


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


def test_costs_text_and_html(naive, reduction_128):
    text = costs_text(naive.costs)
    fill, transpose = (k.name for k in naive.compiled.kernels)
    header, *rows = text.splitlines()
    assert header.split() == [fill, transpose]
    # cells are right-justified, two spaces or more apart
    cells = {label: values for label, *values in (re.split(r"\s{2,}", row) for row in rows)
             if values}
    assert cells["transactions per warp load (ideal)"] == ["–", "32 (1)"]
    assert cells["transactions per warp store (ideal)"] == ["1 (1)", "1 (1)"]
    assert cells["work-groups (first launch)"] == ["16", "16"]
    assert "Counted in work-group 0 of each kernel's first launch" in text
    html = costs_html(naive.costs)
    assert html.startswith("<table class='fcl-costs'>")
    assert f"<th>{transpose}</th>" in html and "32 (1)" in html
    assert costs_text([]) == "The program launches no kernels."
    # Kernels traced in different work-groups say so; a single store per group of 128 work-items
    # (1/128 per work-item) does not read as 0.
    text = costs_text(reduction_128.costs)
    fill, reduce_kernel = (k.name for k in reduction_128.compiled.kernels)
    assert f"work-group 9 of {fill}, 7 of {reduce_kernel}" in text
    stores = next(line for line in text.splitlines() if line.startswith("global stores"))
    assert stores.split()[-1] == "0.0078"


def test_truncated_trace_is_flagged():
    run = traced(reverse_cell(4096), cap=1)
    fill, rev = run.costs
    # iota's work-items do 1 access each; reverse's do 2 (a load and a store), 1 recorded.
    assert not fill.truncated and rev.truncated
    assert rev.global_loads + rev.global_stores == 1
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
    # 4095 - i for the loop counter i, which runs over the global ids with the global size as step
    (loop,) = loops
    counter, start, step, bound = LOOP.fullmatch(loop).groups()
    assert re.search(rf"\b{counter}\b", text) and "4095" in text
    assert (start, step, bound) == ("global_item", "global_size", "4096")


def test_formula_of_naive_transpose(naive):
    (load,) = naive.accesses(1, "load", "global")
    text, (loop,) = check_formula_against_trace(naive, 1, load)
    counter = LOOP.fullmatch(loop).group(1)
    assert re.search(rf"\b{counter}\b", text) and "64" in text  # (i % 64) * 64 + i / 64
    # the formula really is the transpose's, for every i
    i = np.arange(4096)
    assert np.array_equal(evaluate(text, {counter: i}), i % 64 * 64 + i // 64)


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


def test_transactions_and_bank_conflicts_of_synthetic_warps():
    lanes = np.arange(32)
    # 32 ints, stride 1 from 0: one segment; from 8: two (bytes 32 .. 159)
    assert transactions(synthetic(lanes)) == (1, 1)
    assert transactions(synthetic(lanes + 8)) == (2, 1)
    # stride 2: 256 bytes spanned, 128 needed
    assert transactions(synthetic(2 * lanes)) == (2, 1)
    # all lanes read one int: 1 segment
    assert transactions(synthetic(np.full(32, 5))) == (1, 1)
    # 32 doubles: 256 bytes, 2 segments at best
    doubles = Site(0, "k", "load", "a", "global", ir.DOUBLE, "i", None)
    assert transactions(synthetic(lanes, site=doubles)) == (2, 2)
    # two warps, each 32 segments (stride 32 ints = 128 bytes)
    assert transactions(synthetic(32 * np.arange(64))) == (64, 2)

    local = Site(0, "k", "load", "a", "local", ir.INT, "i", None)
    # (extra accesses, worst n-way): stride 1 and odd strides hit 32 different banks
    assert bank_conflicts(synthetic(lanes, site=local)) == (0, 1)
    assert bank_conflicts(synthetic(33 * lanes, site=local)) == (0, 1)
    # one word for everybody is a broadcast
    assert bank_conflicts(synthetic(np.full(32, 3), site=local)) == (0, 1)
    # stride 2: 16 banks with 2 words each: 2-way, 1 extra access
    assert bank_conflicts(synthetic(2 * lanes, site=local)) == (1, 2)
    # stride 32: one bank, 32 words: 32-way, 31 extra, per warp (two warps: 62)
    assert bank_conflicts(synthetic(32 * lanes, site=local)) == (31, 32)
    assert bank_conflicts(synthetic(32 * np.arange(64), site=local)) == (62, 32)


def test_each_access_is_described_by_formula_lmads_and_cost(tiled):
    from fcl.analysis.sites import site_rows, sites_html, sites_text
    rows = [r for r in site_rows(tiled.trace, warp=1)
            if r.kernel == tiled.trace.kernels[1].kernel.name]
    assert [r.access for r in rows] == ["reads global arr_1", "writes local arr_5",
                                        "reads local arr_5", "writes global arr_3"]
    load, store_local, load_local, store = rows
    # Work-item i of 256 moves elements i, i + 256, ... of the tile, four of them: the group
    # reads four bands of 8 rows of 32 ints (rows 64 ints apart); warp 1 reads row 1 of each.
    assert load.lmad_group == "0 + {(4:512),(8:64),(32:1)}"
    assert load.lmad_warp == "64 + {(4:512),(32:1)}"
    assert load.cost == "1 transaction per warp access (ideal 1)"
    # The transposed read of the tile: work-item 32a + b reads b * 32 + a, down a column.
    assert load_local.lmad_warp == "1 + {(4:8),(32:32)}"
    assert load_local.cost == "32-way bank conflict, 992 extra accesses"
    assert store_local.cost == "no bank conflict"
    assert "group" in store.index and store.loops == [f"{store.loops[0].split()[0]} = item, "
                                                      "+ 256 while < 1024"]
    text = sites_text(rows, warp=1)
    assert "    warp 1:     64 + {(4:512),(32:1)}" in text
    assert "<code>1 + {(4:8),(32:32)}</code>" in sites_html(rows, warp=1)


def test_an_access_that_is_not_affine_says_so():
    # Gathering through a table of indices: the addresses are data, not an LMAD.
    trace = traced("do<grid> { ix <- forcePull<grid> (generate 256 (fn i => (i * 7) % 256)); "
                   "forcePull<grid> (generate 256 (fn i => index ix (index ix i))) }")
    from fcl.analysis.sites import site_rows
    gather = [r for r in site_rows(trace.trace)
              if r.kernel == trace.trace.kernels[1].kernel.name
              and r.access == "reads global arr_1"]
    assert any(r.lmad_group.startswith("not one LMAD (256 accesses traced") for r in gather)


def test_tracing_uses_the_work_group_size_the_program_was_compiled_for():
    compiled = compile_cell(REDUCE, REDUCE_DEFS, block_size=128)
    assert trace_program(compiled).kernels[1].block_size == 128
    with pytest.raises(FCLError, match="compiled for work-groups of 128, not 256"):
        trace_program(compiled, block_size=256)
