"""GPU profiles (fcl/gpus/*.toml), occupancy, the register estimate and predicted GPU times,
checked against figures worked out by hand from the formulas in docs/costs.md."""
from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from fcl import pipeline
from fcl.analysis import gpu as gpu_module
from fcl.analysis.access import request_rounds
from fcl.analysis.costs import costs_text
from fcl.analysis.gpu import DEFAULT_GPU, gpu_names, load_gpu
from fcl.analysis.occupancy import BASE_REGISTERS, estimate_registers, occupancy
from fcl.analysis.predict import (
    ATOMICS_PER_CLOCK,
    BARRIER_CYCLES,
    REQUESTS_IN_FLIGHT,
    KernelWork,
    kernel_work,
    predict_kernel,
    predict_program,
    time_text,
)
from fcl.analysis.trace import trace_program
from fcl.codegen.kernel import Kernel
from fcl.errors import FCLError, Source
from fcl.explain import explain
from fcl.il import ir
from fcl.session import Session
from sample_programs import REDUCE_DEFS

KB, MB = 1024, 1024 * 1024


# ---- profiles ---------------------------------------------------------------------------------

def test_every_profile_loads_and_cites_its_sources():
    assert gpu_names() == ["a100", "generic", "h100", "l4", "rtx4090", "t4"]
    for name in gpu_names():
        gpu = load_gpu(name)
        assert gpu.key == name and gpu.name and gpu.description
        assert gpu.sources, name
        for source in gpu.sources:
            assert source.title and source.figures and source.url.startswith("https://")
        # Every one of them names its assumptions apart from the vendor's figures.
        assert gpu.launch_overhead_us > 0 and gpu.memory_latency_ns > 0
        assert gpu.max_warps_per_sm * gpu.warp_size == gpu.max_threads_per_sm
    assert "made-up" in load_gpu("generic").description
    assert DEFAULT_GPU == "generic"


@pytest.mark.parametrize("name, sms, threads, blocks, shared_kb, l2_mb, bandwidth", [
    # /work/shared/reference/second-edition.md, "GPU figures", checked against the sources.
    ("h100", 132, 2048, 32, 228, 50, 3.35e12),
    ("a100", 108, 2048, 32, 164, 40, 2.039e12),
    ("l4", 58, 1536, 24, 100, 48, 300e9),
    ("t4", 40, 1024, 16, 64, 4, 320e9),
    ("rtx4090", 128, 1536, 24, 100, 72, 1008e9),
])
def test_profiles_hold_the_vendors_figures(name, sms, threads, blocks, shared_kb, l2_mb,
                                           bandwidth):
    gpu = load_gpu(name)
    assert (gpu.sms, gpu.max_threads_per_sm, gpu.max_blocks_per_sm) == (sms, threads, blocks)
    assert (gpu.shared_memory_per_sm, gpu.l2_bytes) == (shared_kb * KB, l2_mb * MB)
    assert gpu.memory_bandwidth == bandwidth
    assert (gpu.registers_per_sm, gpu.registers_per_thread) == (65536, 255)


def test_a_gpu_is_named_in_any_case_and_an_unknown_one_is_an_fcl_error():
    assert load_gpu("H100") == load_gpu("h100")
    with pytest.raises(FCLError) as failure:
        load_gpu("v100")
    assert failure.value.message == ("no GPU named `v100`; the known GPUs are: a100, generic, "
                                     "h100, l4, rtx4090, t4")


def test_a_profile_with_units_the_counters_do_not_count_is_refused(tmp_path, monkeypatch):
    text = (gpu_module.PROFILES / "h100.toml").read_text()
    (tmp_path / "wide.toml").write_text(text.replace("sector_bytes = 32", "sector_bytes = 64"))
    shutil.copy(gpu_module.PROFILES / "t4.toml", tmp_path / "t4.toml")
    monkeypatch.setattr(gpu_module, "PROFILES", tmp_path)
    load_gpu.cache_clear()
    try:
        assert gpu_names() == ["t4", "wide"]
        assert load_gpu("t4").name == "T4"
        with pytest.raises(FCLError) as refused:
            load_gpu("wide")
        assert refused.value.message == (
            "GPU wide: warps of 32, 64-byte sectors, 128-byte lines and 32 banks differ from the "
            "32, 32, 128 and 32 that fcl counts")
    finally:
        load_gpu.cache_clear()


# ---- occupancy --------------------------------------------------------------------------------

def test_occupancy_without_local_memory_is_limited_by_threads():
    # H100: 2048 threads / 256 = 8 work-groups of 8 warps = all 64 warps; 32 block slots, and
    # 16 registers x 32 lanes = 512 per warp leave room for 128 warps.
    full = occupancy(load_gpu("h100"), 256, 0, 16)
    assert (full.groups_per_sm, full.warps_per_sm, full.occupancy) == (8, 64, 1.0)
    assert full.limit == "threads"
    assert full.limits == {"threads": 8, "blocks": 32, "local memory": 228, "registers": 16,
                           "warps": 8}


def test_occupancy_limited_by_local_memory():
    # 48 KB per work-group plus CUDA's 1 KB reserved: 228 KB / 49 KB = 4 work-groups, 32 warps.
    half = occupancy(load_gpu("h100"), 256, 48 * KB, 16)
    assert (half.groups_per_sm, half.warps_per_sm, half.occupancy) == (4, 32, 0.5)
    assert (half.limit, half.limits["local memory"]) == ("local memory", 4)
    # The T4 reserves nothing: 64 KB / 16 KB = exactly 4.
    assert occupancy(load_gpu("t4"), 256, 16 * KB, 16).limits["local memory"] == 4


def test_occupancy_limited_by_registers():
    # 64 registers x 32 lanes = 2048 per warp: 65536 / 2048 = 32 warps = 4 work-groups of 8.
    half = occupancy(load_gpu("h100"), 256, 0, 64)
    assert (half.groups_per_sm, half.warps_per_sm, half.occupancy) == (4, 32, 0.5)
    assert (half.limit, half.registers, half.spills) == ("registers", 64, False)
    # Registers are allocated 8 per work-item at a time (256 per warp): 61 take 64.
    assert occupancy(load_gpu("h100"), 256, 0, 61).registers == 64


def test_occupancy_limited_by_warps_and_by_block_slots():
    # 80 work-items take 3 warps (the last one half empty): 64 // 3 = 21 work-groups, fewer
    # than the 2048 // 80 = 25 that the threads allow.
    partial = occupancy(load_gpu("h100"), 80, 0, 16)
    assert (partial.groups_per_sm, partial.warps_per_sm, partial.limit) == (21, 63, "warps")
    # Work-groups of one warp: 32 block slots of the 64 warps.
    small = occupancy(load_gpu("h100"), 32, 0, 16)
    assert (small.groups_per_sm, small.occupancy, small.limit) == (32, 0.5, "blocks")


def test_a_kernel_that_does_not_fit_has_no_occupancy():
    too_wide = occupancy(load_gpu("h100"), 2048, 0, 16)
    assert (too_wide.groups_per_sm, too_wide.limit) == (0, "work-groups of at most 1024 "
                                                           "work-items")
    too_much = occupancy(load_gpu("t4"), 256, 80 * KB, 16)
    assert (too_much.groups_per_sm, too_much.occupancy) == (0, 0.0)
    assert too_much.limit == "local memory: at most 65536 B per work-group"
    # More registers than a work-item may have: the compiler spills, 255 stay (8 warps' worth).
    spilling = occupancy(load_gpu("h100"), 256, 0, 300)
    assert (spilling.registers, spilling.spills, spilling.groups_per_sm) == (255, True, 1)


# ---- the register estimate ----------------------------------------------------------------------

def test_registers_count_the_most_variables_live_at_once():
    i, j, d = ir.Var("i", ir.INT), ir.Var("j", ir.INT), ir.Var("d", ir.DOUBLE)
    out = ir.Var("out", ir.ArrayType(ir.DOUBLE))
    body = [
        ir.Declare(i, ir.Const(1, ir.INT)),
        ir.Declare(d, ir.Const(2.0, ir.DOUBLE)),
        # i and d live (3 registers), then j and d (i is dead after j's definition).
        ir.Declare(j, ir.Bin("+", i, ir.Const(1, ir.INT), ir.INT)),
        ir.Store(out, j, d),
    ]
    assert estimate_registers(Kernel("k", body)) == BASE_REGISTERS + 3
    # Arrays held in registers count whole: 4 doubles are 8 registers.
    assert estimate_registers(Kernel("k", body, private=[(out, 4)])) == BASE_REGISTERS + 11


def test_a_value_used_in_a_later_iteration_stays_live_through_the_loop():
    k, acc, t = ir.Var("k", ir.INT), ir.Var("acc", ir.INT), ir.Var("t", ir.INT)
    out = ir.Var("out", ir.ArrayType(ir.INT))
    loop = ir.SeqFor(k, ir.Const(8, ir.INT), [
        ir.Declare(t, ir.Bin("*", k, k, ir.INT)),
        ir.Assign(acc, ir.Bin("+", acc, t, ir.INT)),
    ])
    body = [ir.Declare(acc, ir.Const(0, ir.INT)), loop, ir.Store(out, ir.Const(0, ir.INT), acc)]
    # Inside the loop k, acc and t are live at once.
    assert estimate_registers(Kernel("k", body)) == BASE_REGISTERS + 3


def compiled(cell: str, defs: str | None = None, block_size: int = 256):
    session = Session.new(prelude=True)
    if defs:
        session.add_cell(Source("defs.fcl", defs))
    _, root = session.add_cell(Source("cell.fcl", cell))
    return session, root, pipeline.CompileOptions(block_size=block_size)


def test_registers_of_compiled_kernels():
    session, root, options = compiled(
        "do<grid> { xs <- forcePull<grid> (iota 4096); forcePull<grid> (reverse xs) }")
    kernels = pipeline.compile_program(session, root, options).kernels
    # Each kernel keeps one variable, its grid-stride loop's counter.
    assert [estimate_registers(k) for k in kernels] == [BASE_REGISTERS + 1] * 2


# ---- predicted times on hand-made work ----------------------------------------------------------

def copy_work(n: int, block_size: int = 256, name: str = "copy") -> KernelWork:
    """A copy of n ints, one per work-item: each warp reads 4 sectors and writes 4."""
    warps = block_size // 32
    return KernelWork(name, (n // block_size,), block_size, 0, 16,
                      global_sectors=8 * warps, global_requests=2 * warps, local_passes=0,
                      lane_accesses=2 * block_size, simt_efficiency=1.0, barriers=0)


def test_a_copy_takes_its_bytes_over_the_bandwidth_plus_the_launch():
    # On a T4 the resident warps keep enough in flight: 40 SMs x 4 work-groups x 8 warps x
    # 128 B = 163840 B >= 320 GB/s x 500 ns = 160000 B.
    n = 1 << 22
    predicted = predict_kernel(load_gpu("t4"), copy_work(n))
    assert predicted.occupancy.groups_per_sm == 4
    assert predicted.terms["DRAM"] == pytest.approx(2 * n * 4 / 320e9)
    assert predicted.time_s == pytest.approx(2 * n * 4 / 320e9 + 3e-6)
    assert predicted.bound == "DRAM"
    # Issue: 2 lane accesses per work-item, a warp request per 32, one per clock per SM.
    assert predicted.terms["issue"] == pytest.approx(n * 2 / 32 / (40 * 1.59e9))


def test_too_few_warps_in_flight_reach_only_part_of_the_bandwidth():
    # On an H100 they keep 132 x 8 x 8 x 128 B = 1081344 B in flight of the 3.35 TB/s x 500 ns
    # = 1675000 B needed: 64.6% of the bandwidth.
    n = 1 << 22
    predicted = predict_kernel(load_gpu("h100"), copy_work(n))
    reached = 1081344 / 1675000
    assert predicted.terms["DRAM"] == pytest.approx(2 * n * 4 / (3.35e12 * reached))
    # One work-group alone: 8 warps x 128 B in flight, 2048 B to move: two round trips.
    one = predict_kernel(load_gpu("h100"), copy_work(256))
    assert one.terms["DRAM"] == pytest.approx(2 * 500e-9)
    assert one.time_s == pytest.approx(3e-6 + 1e-6) and one.bound == "launch"


def test_local_memory_issue_and_barrier_terms():
    h100 = load_gpu("h100")
    # Steps of a tree in local memory only: 8 barriers, 20 bank passes (say 8 requests and 12
    # conflicts), 21120 work-groups = 20 waves of 132 SMs x 8 work-groups.
    work = KernelWork("tree", (21120,), 256, 2 * KB, 16, global_sectors=0, global_requests=0,
                      local_passes=20, lane_accesses=256, simt_efficiency=0.5, barriers=8)
    predicted = predict_kernel(h100, work)
    clocks = 132 * 1.98e9
    assert predicted.terms == pytest.approx({
        "DRAM": 0.0,
        "latency": 0.0,
        "L1": 0.0,
        "local memory": 21120 * 20 / clocks,
        "issue": 21120 * 256 / (32 * 0.5) / clocks,  # half the lanes idle: twice the requests
        "barriers": 20 * 8 * BARRIER_CYCLES / 1.98e9,
        "atomics": 0.0,
        "doubles": 0.0,
        "floats": 0.0,
    })
    assert predicted.bound == "barriers"
    assert predicted.time_s == pytest.approx(3e-6 + 20 * 8 * BARRIER_CYCLES / 1.98e9)


def test_operations_on_doubles_take_half_the_peak_over_the_sms_in_use():
    # 1,024 operations on doubles per work-item, 256 work-items, 1,320 work-groups: on an H100
    # (34 TFLOPS, an FMA counting two; FCL's operations are each an instruction) 17e12 per second.
    work = KernelWork("compute", (1320,), 256, 0, 16, global_sectors=64, global_requests=16,
                      local_passes=0, lane_accesses=256, simt_efficiency=1.0, barriers=0,
                      flops=1024 * 256)
    predicted = predict_kernel(load_gpu("h100"), work)
    assert predicted.terms["doubles"] == pytest.approx(1320 * 1024 * 256 / 17e12)
    assert predicted.bound == "doubles"
    # A T4 runs doubles at 1/32 of its floats' rate: 0.253 TFLOPS over its 40 SMs.
    t4 = predict_kernel(load_gpu("t4"), work)
    assert t4.terms["doubles"] == pytest.approx(1320 * 1024 * 256 / (0.253e12 / 2))
    # One work-group uses one SM of 132.
    one = predict_kernel(load_gpu("h100"), replace(work, groups_per_launch=(1,)))
    assert one.terms["doubles"] == pytest.approx(1024 * 256 / (17e12 / 132))


def test_operations_on_floats_take_half_the_fp32_peak():
    # The same work on floats: an H100's 67 TFLOPS of floats, half of them per operation; a T4
    # runs floats at 32 times its doubles' rate (8.1 TFLOPS against 0.253).
    work = KernelWork("compute", (1320,), 256, 0, 16, global_sectors=64, global_requests=16,
                      local_passes=0, lane_accesses=256, simt_efficiency=1.0, barriers=0,
                      float_flops=1024 * 256)
    predicted = predict_kernel(load_gpu("h100"), work)
    assert predicted.terms["floats"] == pytest.approx(1320 * 1024 * 256 / 33.5e12)
    assert predicted.terms["doubles"] == 0.0 and predicted.bound == "floats"
    t4 = predict_kernel(load_gpu("t4"), work)
    assert t4.terms["floats"] == pytest.approx(1320 * 1024 * 256 / 4.05e12)
    doubles = predict_kernel(load_gpu("t4"), replace(work, float_flops=0.0, flops=1024 * 256))
    assert doubles.time_s > 30 * t4.time_s


def test_sectors_a_work_group_reads_again_come_from_the_caches():
    h100 = load_gpu("h100")
    # Each work-item sums 8 consecutive ints (the scan's first step): a warp's 8 load requests
    # each touch 32 sectors, one per lane, but together only the 32 sectors of its 256 ints;
    # its one store request touches 4. 8 warps per group, 16384 groups: 4M ints read.
    warps, groups = 8, 16384
    work = KernelWork("runs", (groups,), 256, 0, 16, global_sectors=(8 * 32 + 4) * warps,
                      global_requests=9 * warps, local_passes=0, lane_accesses=9 * 256,
                      simt_efficiency=1.0, barriers=0, dram_sectors=(32 + 4) * warps)
    predicted = predict_kernel(h100, work)
    # A request waits on DRAM for its share of the new sectors, 36 / 9 = 4 of them: 132 SMs x 8
    # groups x 8 warps x 128 B = 1081344 B in flight, 64.6% of the 1675000 B Little's law asks.
    reached = 3.35e12 * 1081344 / 1675000
    assert predicted.terms["DRAM"] == pytest.approx(groups * 36 * warps * 32 / reached)
    # Every request's sectors pass through L1: 128 B per clock on each of 132 SMs.
    assert predicted.terms["L1"] == pytest.approx(groups * 260 * warps * 32 / (128 * 132 * 1.98e9))
    assert predicted.terms["L1"] < predicted.terms["DRAM"] and predicted.bound == "DRAM"
    # Counted as DRAM traffic, the same work would move 7.2 times the bytes, with enough in
    # flight for the whole bandwidth.
    all_dram = predict_kernel(h100, replace(work, dram_sectors=None))
    assert all_dram.terms["DRAM"] == pytest.approx(groups * 260 * warps * 32 / 3.35e12)


def test_global_atomics_take_their_turns_in_the_l2():
    h100 = load_gpu("h100")
    # A histogram's combining kernel: 4096 work-groups of 256 work-items, one global atomic
    # each, one sector stored per warp request (8 per group).
    work = KernelWork("histogram", (4096,), 256, 0, 16, global_sectors=8, global_requests=8,
                      local_passes=0, lane_accesses=256, simt_efficiency=1.0, barriers=0,
                      global_atomics=256)
    predicted = predict_kernel(h100, work)
    assert predicted.terms["atomics"] == pytest.approx(4096 * 256 / (ATOMICS_PER_CLOCK * 1.98e9))
    assert predicted.bound == "atomics"


def test_every_launch_pays_its_overhead_and_the_program_sums_its_kernels():
    h100 = load_gpu("h100")
    twice = KernelWork("twice", (1, 1), 256, 0, 16, 64, 16, 0, 512, 1.0, 0)
    program = predict_program(h100, [twice, copy_work(1 << 22)])
    first, second = program.kernels
    assert first.launch_s == pytest.approx(6e-6)
    assert first.time_s == pytest.approx(6e-6 + 2 * 2 * 500e-9)
    assert program.time_s == pytest.approx(first.time_s + second.time_s)


def test_a_kernel_that_cannot_run_has_no_time():
    crowded = KernelWork("crowded", (4,), 256, 80 * KB, 16, 64, 16, 0, 512, 1.0, 0)
    program = predict_program(load_gpu("t4"), [crowded, copy_work(1024)])
    assert program.kernels[0].time_s is None and program.time_s is None
    assert predict_program(load_gpu("h100"), [crowded]).time_s is not None


def test_times_are_shown_with_three_digits():
    assert [time_text(t) for t in (None, 4e-7, 12.345e-6, 999.7e-6, 0.0314, 2.0)] == [
        "cannot run", "0.4 µs", "12.3 µs", "1 ms", "31.4 ms", "2 s"]


# ---- predicted times of traced programs ---------------------------------------------------------

def predicted_kernels(cell: str, gpu: str, defs: str | None = None):
    explanation = explain(*compiled(cell, defs), gpu=gpu)
    return explanation.costs()


MATRIX = "xs <- forcePull<grid> (iota (1024 * 1024))"


@pytest.mark.slow  # 1-2.2 s
def test_a_naive_transpose_is_predicted_slower_than_a_copy_of_the_same_size():
    naive = predicted_kernels(f"do<grid> {{ {MATRIX}; forcePull<grid> (transpose 1024 1024 xs) }}",
                              "h100")[1]
    copy = predicted_kernels(f"do<grid> {{ {MATRIX}; forcePull<grid> (map (fn x => x + 1) xs) }}",
                             "h100")[1]
    # 4096 work-groups of 8 warps. The transpose's warps read 32 sectors and write 4, 1152 B per
    # request in flight on average: plenty. The copy's read 4 and write 4: 64.6% of 3.35 TB/s.
    assert naive.groups_per_launch == copy.groups_per_launch == [4096]
    naive_bytes, copy_bytes = 4096 * 8 * 36 * 32, 4096 * 8 * 8 * 32
    assert naive.predicted.terms["DRAM"] == pytest.approx(naive_bytes / 3.35e12)
    assert copy.predicted.terms["DRAM"] == pytest.approx(copy_bytes / (3.35e12 * 1081344 / 1675000))
    assert naive.predicted.time_s > 2 * copy.predicted.time_s
    assert naive.predicted.gpu.name == "H100 SXM5"


@pytest.mark.slow  # 1.2 s
def test_the_sectors_a_work_group_reads_again_are_counted_once_for_dram():
    runs = predicted_kernels(
        "do<grid> { xs <- forcePull<grid> (iota 4096); forcePull<grid> (generate 512 (fn i => "
        "let r = fn k => index xs (8 * i + k) in r 0 + r 1 + r 2 + r 3 + r 4 + r 5 + r 6 + r 7)) }",
        "h100")[1]
    # A group's 8 warps make 8 load requests of 32 sectors each (a lane's ints are 32 B apart),
    # but its 256 work-items read 8 KB: 256 sectors. Its 8 store requests write 4 sectors each.
    assert runs.sectors == 8 * 8 * 32 + 8 * 4
    assert runs.distinct_sectors == 256 + 32
    assert kernel_work(runs, 16).dram_sectors == 288
    assert "2080 (288)" in costs_text([runs])


@pytest.mark.slow  # 0.8-1.7 s
def test_kernel_work_comes_from_the_counts():
    # test_analysis's block reduction, of doubles: its local requests take two passes each.
    reduction = predicted_kernels(
        "do<grid> { xs <- forcePull<grid> (generate 2048 i2d); "
        "forceM<grid> (reducePart addd 0.0 xs) }", "generic", REDUCE_DEFS)[1]
    work = kernel_work(reduction, 20)
    assert work.groups_per_launch == tuple(reduction.groups_per_launch) == (4,)
    assert work.global_sectors == pytest.approx(
        reduction.load_sectors * reduction.load_requests
        + reduction.store_sectors * reduction.store_requests)
    assert work.global_requests == reduction.load_requests + reduction.store_requests
    assert reduction.local_requests > 0
    assert work.local_passes == 2 * reduction.local_requests + reduction.bank_conflicts
    assert work.lane_accesses == pytest.approx(256 * (
        reduction.global_loads + reduction.global_stores + reduction.local_loads
        + reduction.local_stores))
    assert (work.registers, work.barriers) == (20, reduction.barriers)
    assert work.simt_efficiency == reduction.simt_efficiency < 1


def test_a_warp_waits_a_latency_per_round_of_requests_not_per_request():
    # 64 work-groups of 8 warps on an H100, each warp 256 loads of 4 sectors. One request in
    # flight per warp: 512 x 128 B; each warp waits 256 latencies. In rounds of 4: 512 B per
    # warp, 262144 B in flight of 1675000, and 64 latencies: 64 x 500 ns.
    sum_work = KernelWork("sums", (64,), 256, 0, 16, global_sectors=8 * 256 * 4,
                          global_requests=8 * 256, local_passes=0, lane_accesses=256 * 256,
                          simt_efficiency=1.0, barriers=0)
    h100 = load_gpu("h100")
    assert predict_kernel(h100, sum_work).terms["DRAM"] == pytest.approx(256 * 500e-9)
    rounds = replace(sum_work, request_rounds=8 * 64)
    assert predict_kernel(h100, rounds).terms["DRAM"] == pytest.approx(64 * 500e-9)
    # At full occupancy, rounds of 4 requests keep 4 times the bytes in flight: 2048 work-groups
    # x 8 warps x 512 B = 8.4 MB, more than the 1.68 MB the bandwidth needs.
    full = replace(rounds, groups_per_launch=(2048,))
    assert predict_kernel(h100, full).terms["DRAM"] == pytest.approx(2048 * 8192 * 32 / 3.35e12)


def test_the_busiest_warp_waits_through_its_rounds_one_after_another():
    # 4 work-groups of 8 warps on an H100: 7 warps wait through 3 rounds each, one through 500
    # (a lane with a loop 2,000 loads long), 521 in all. Averaged over the warps the DRAM term
    # is 521 / 8 rounds of 500 ns; the busiest warp alone takes 500 of them.
    work = KernelWork("rows", (4,), 256, 0, 16, global_sectors=3000, global_requests=2100,
                      local_passes=0, lane_accesses=4000, simt_efficiency=0.11, barriers=0,
                      dram_sectors=300, request_rounds=521, busiest_rounds=500)
    predicted = predict_kernel(load_gpu("h100"), work)
    assert predicted.terms["DRAM"] == pytest.approx(521 / 8 * 500e-9)
    assert predicted.terms["latency"] == pytest.approx(500 * 500e-9)
    assert predicted.bound == "latency"
    # Balanced warps (520 rounds, 65 each): the terms agree, and DRAM is named the bound.
    even = predict_kernel(load_gpu("h100"), replace(work, request_rounds=520, busiest_rounds=65))
    assert even.terms["latency"] == pytest.approx(even.terms["DRAM"])
    assert even.bound == "DRAM"
    # 1056 work-groups, as many as an H100 runs at once, then 1584: one and a half at a time.
    assert predict_kernel(load_gpu("h100"), replace(work, groups_per_launch=(1584,))) \
        .terms["latency"] == pytest.approx(1.5 * 500 * 500e-9)
    # Its lane walks consecutive ints, 4 a round: every other round reads the sector the one
    # before it loaded, which L1 serves in 33 clocks at 1.98 GHz (16.7 ns, the profile's).
    cached = predict_kernel(load_gpu("h100"), replace(work, busiest_cached_rounds=250))
    assert cached.terms["latency"] == pytest.approx(250 * 500e-9 + 250 * 16.7e-9)


def rounds_of(cell: str) -> tuple[int, int, int, str]:
    """The last kernel's: the traced group's rounds, the global requests issued in them and all
    its global requests (repeated loads too), and the table's requests in flight."""
    costs = predicted_kernels(f"do<grid> {{ xs <- forcePull<grid> (iota 4096); {cell} }}",
                              "h100")[-1]
    row = next(line for line in costs_text([costs]).splitlines()
               if line.startswith("global requests in flight per warp"))
    return (costs.rounds.rounds, costs.rounds.requests,
            costs.load_requests + costs.store_requests, row.split()[-1])


@pytest.mark.slow  # 3-5 s
def test_requests_wait_for_the_values_they_need():
    # 8 independent loads per work-item: rounds of 4 and 4, then the store, which needs them:
    # 3 rounds for each of the traced group's 8 warps, 9 requests each.
    reads = " + ".join(f"index xs ({512 * k} + i)" for k in range(8))
    assert rounds_of(f"forcePull<grid> (generate 512 (fn i => {reads}))") \
        == (8 * 3, 8 * 9, 8 * 9, "3")
    # A gather: the load of xs needs the index loaded from ys, the store the value: 3 rounds.
    # (The index's check reads ys[i] too: the compiler reads it once, fcl/codegen/reads.py.)
    assert rounds_of("ys <- forcePull<grid> (generate 4096 (fn i => (i * 7) % 4096)); "
                     "forcePull<grid> (generate 4096 (fn i => index xs (index ys i)))") \
        == (3 * 8, 3 * 8, 3 * 8, "1")
    # Squares of the even elements, written over them: the kernel writes xs, so its two reads
    # of xs[i] in the branch stay two in the code. The second is no request: the value is
    # kept from the first. Even lanes load, then store (2 rounds); odd ones only store.
    assert rounds_of("forcePull<grid> (generate 4096 (fn i => "
                     "if i % 2 == 0 then index xs i * index xs i else 0))") \
        == (2 * 8, 2 * 8, 3 * 8, "1")
    # A chain: each load's index is the one before it: 8 loads, 8 rounds, and the store. Here
    # every load reads the same element (xs[i] = i), but its address waits on the one before.
    assert rounds_of("forceM<grid> (splitUp 256 (iota 512) |> map (fn c => do<block> { "
                     "r <- forceM<block> (c |> map (fn i => return<thread> "
                     "(foldl (fn at k => index xs at) i (iota 8))) |> concat<thread> 1); "
                     "return<block> (push<block> r) }) |> concat<block> 256)") \
        == (8 * 9, 8 * 9, 8 * 9, "1")


def test_a_loop_over_a_row_waits_for_its_bounds_once():
    # A work-item per row of 8 elements (offsets 8r): the row's offsets are its loop's bound
    # and each element's position, read once (fcl/codegen/reads.py). The two offsets in one
    # round, the 8 elements in two rounds of 4 (they need the offsets), the store: 4 rounds of
    # each warp's 11 requests.
    rows = ("offs <- forcePull<grid> (generate 513 (fn r => 8 * r)); "
            "forceM<grid> (concat<block> 256 (map (fn block => concat<thread> 1 (map (fn r => "
            "return<thread> (foldl addi 0 (generate (index offs (r + 1) - index offs r) "
            "(fn k => index xs (index offs r + k))))) block)) (splitUp 256 (iota 512))))")
    assert rounds_of(rows) == (8 * 4, 8 * 11, 8 * 11, "2.75")
    # Of the 3 rounds with loads, the second of the row's two reads the sector (8 ints) the
    # first loaded: L1 holds it.
    costs = predicted_kernels(f"do<grid> {{ xs <- forcePull<grid> (iota 4096); {rows} }}",
                              "h100")[-1]
    assert (costs.rounds.busiest, costs.rounds.cached) == (3, 1)
    # Rows of 16 (offsets 16r): 4 rounds of elements over 2 sectors, each loaded by the first
    # of its two rounds.
    longer = rows.replace("8 * r", "16 * r")
    costs = predicted_kernels(f"do<grid> {{ xs <- forcePull<grid> (iota 8192); {longer} }}",
                              "h100")[-1]
    assert (costs.rounds.busiest, costs.rounds.cached) == (5, 2)


@pytest.mark.slow  # 2-4 s
def test_a_work_item_cut_short_in_the_trace_goes_on_as_it_began():
    # A work-item per row, 64 to a work-group: row 0 has 600 elements, the others 4. Lane 0
    # logs some 20 entries per element (its loop reads the row's offsets again and again), far
    # past a cap of 1024; with a cap of 16384 its whole loop is logged: 150 rounds of 4 loads.
    session, root, options = compiled(
        "do<grid> { offs <- forcePull<grid> (generate 65 (fn r => 4 * r + 596 * min 1 r)); "
        "vals <- forcePull<grid> (generate 852 (fn e => e % 10)); "
        "forceM<grid> (concat<block> 64 (map (fn block => concat<thread> 1 (map (fn r => "
        "return<thread> (foldl addi 0 (generate (index offs (r + 1) - index offs r) "
        "(fn k => index vals (index offs r + k))))) block)) (splitUp 64 (iota 64)))) }",
        block_size=64)
    program = pipeline.compile_program(session, root, options)

    def rounds(cap: int):
        trace = trace_program(program, cap=cap)
        sums = trace.kernels[-1]
        return sums.truncated, request_rounds(sums, trace.sites, REQUESTS_IN_FLIGHT)

    (cut, short), (whole_cut, whole) = rounds(1024), rounds(16384)
    assert cut and not whole_cut
    assert whole.busiest == 1 + 150  # the offsets, then the elements 4 at a time
    assert whole.cached == 75  # every other round of elements: the sector read before
    assert short.busiest == pytest.approx(whole.busiest, rel=0.1)
    assert short.rounds == pytest.approx(whole.rounds, rel=0.1)
