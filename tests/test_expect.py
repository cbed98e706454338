"""Budgets in `%%expect` (`--budget NAME OP NUMBER ...`) and `--strict`, through a real kernel:
each figure measured on a program whose count is worked out by hand in the comments."""
import os

import pytest
from jupyter_client.manager import start_new_kernel

from kernels import displayed, execute

# The tiled transpose of notebook 04 (tiledTranspose, plainTile), and a kernel per module.
from sample_programs import TILED_DEFS

NAIVE = ("do<grid> {\n  xs <- forcePull<grid> (iota (64 * 64));\n"
         "  forcePull<grid> (transpose 64 64 xs)\n}")
SQUARES_IN_MEMORY = ("do<grid> {\n  sq <- forcePull<grid> (map (fn x => x * x) (iota 1024));\n"
                     "  forcePull<grid> (map (fn x => x + 1) sq)\n}")
SQUARES_FUSED = "forcePull<grid> (map (fn x => x * x + 1) (iota 1024))"

# Every test runs its cells in the module's kernel (2 s to start, more on a loaded machine) or
# in one of its own (3.5-4 s), and several take 2-6 s more.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def doubled(tmp_path_factory) -> str:
    """A grid program that maps over 1024 ints read from a file, so the map's one kernel
    loads them from global memory."""
    path = tmp_path_factory.mktemp("expect") / "ints.csv"
    path.write_text(",".join(str(i) for i in range(1024)))
    return (f'do<grid> {{\n  xs <- readIntCSV "{path}";\n'
            "  forcePull<grid> (map (fn x => 2 * x) xs)\n}")


def checks(kc, code: str) -> tuple[dict, list[str], str]:
    """(reply, the check lines, the verdict) of an `%%expect` cell with budgets."""
    reply, messages = execute(kc, code)
    *_, lines, verdict = displayed(messages)
    return reply, lines.splitlines(), verdict


def html_of(messages) -> list[str]:
    return [m["content"]["data"]["text/html"] for m in messages
            if m["msg_type"] == "display_data" and "fcl-expect" in m["content"]["data"]
            .get("text/html", "")]


def test_every_budget_of_a_map_read_from_memory(kc, doubled):
    # One kernel; each work-item loads one int and stores one. A warp's 32 ints are 128
    # consecutive bytes: 4 sectors in 1 line, for its load and its store. No local memory, no
    # barrier, every lane busy. Occupancy on the generic GPU (1536 threads, 48 warps per SM):
    # 6 work-groups of 256, 48 warps, 100%. Predicted: 3 µs for the launch, plus DRAM: 4 groups
    # move 8 KiB; their 32 warps have one 128-byte request each in flight, 4 KiB, where 512 GB/s
    # × 500 ns = 256 KB would keep the bus busy, so 8 KiB take 500 ns × 8 KiB / 4 KiB = 1 µs.
    code = ("%%expect np.arange(1024) * 2 --budget kernels<=1 global_loads<=1 global_stores==1"
            " sectors_per_load<=4 lines_per_load==1 sectors_per_store==4 lines_per_store==1"
            " dram_sectors==64 local_loads==0 local_stores==0 bank_conflicts==0 barriers==0 simt>=1"
            " local_bytes==0 occupancy>=1 predicted_us<=4\n" + doubled)
    reply, lines, verdict = checks(kc, code)
    assert reply["status"] == "ok"
    assert lines == [
        "✓ all 1024 elements match numpy",
        "✓ kernel launches: 1 (budget ≤ 1)",
        "✓ global loads per work-item: 1 (budget ≤ 1)",
        "✓ global stores per work-item: 1 (budget = 1)",
        "✓ 32-byte sectors per warp load (worst kernel): 4 (budget ≤ 4)",
        "✓ 128-byte lines per warp load (worst kernel): 1 (budget = 1)",
        "✓ 32-byte sectors per warp store (worst kernel): 4 (budget = 4)",
        "✓ 128-byte lines per warp store (worst kernel): 1 (budget = 1)",
        "✓ 32-byte sectors from DRAM per work-group: 64 (budget = 64)",
        "✓ local loads per work-item: 0 (budget = 0)",
        "✓ local stores per work-item: 0 (budget = 0)",
        "✓ bank conflicts per work-group: 0 (budget = 0)",
        "✓ barriers per work-group: 0 (budget = 0)",
        "✓ SIMT efficiency (worst kernel): 1 (budget ≥ 1)",
        "✓ local memory per work-group (largest kernel): 0 B (budget = 0 B)",
        "✓ occupancy on generic GPU (worst kernel): 1 (budget ≥ 1)",
        "✓ predicted time on generic GPU: 4 µs (budget ≤ 4 µs)",
    ]
    assert verdict == "✓ the value matches numpy, within its 16 budgets"
    # Over budget: the same figures, ✗ where the bound is missed.
    reply, lines, verdict = checks(kc, "%%expect np.arange(1024) * 2 --budget global_loads<1 "
                                       "predicted_us<=3\n" + doubled)
    assert reply["status"] == "ok"  # a failed check is an output, so Run All goes on
    assert lines[1:] == ["✗ global loads per work-item: 1 (budget < 1)",
                         "✗ predicted time on generic GPU: 4 µs (budget ≤ 3 µs)"]
    assert verdict == "✗ the value matches numpy and misses 2 of its 2 budgets"


def test_the_naive_transpose_reads_32_sectors_per_warp(kc):
    # The fill kernel, then the transpose: a warp reads down a column of 64-int rows, 32 ints
    # 256 bytes apart, each in its own sector and line.
    _, messages = execute(kc, "%%expect np.arange(64 * 64).reshape(64, 64).T "
                              "--budget kernels==2 sectors_per_load<=4 lines_per_load<=32\n"
                          + NAIVE)
    *_, lines, verdict = displayed(messages)
    assert lines.splitlines()[1:] == [
        "✓ kernel launches: 2 (budget = 2)",
        "✗ 32-byte sectors per warp load (worst kernel): 32 (budget ≤ 4)",
        "✓ 128-byte lines per warp load (worst kernel): 32 (budget ≤ 32)"]
    assert verdict == "✗ the value matches numpy and misses 1 of its 3 budgets"
    # Only the verdict carries the class the browser test counts (fcl-expect-ok / -wrong).
    checks_html, verdict_html = html_of(messages)
    assert "fcl-expect-checks" in checks_html
    assert "fcl-expect-ok" not in checks_html and "fcl-expect-wrong" not in checks_html
    assert "fcl-expect-wrong" in verdict_html and "misses 1 of its 3 budgets" in verdict_html


def test_a_forced_intermediate_is_a_second_kernel(kc):
    # Writing the squares to memory, then reading them back, takes two kernels; fused, one.
    expected = "%%expect np.arange(1024) ** 2 + 1 --budget kernels<=1 global_loads==0\n"
    _, lines, verdict = checks(kc, expected + SQUARES_IN_MEMORY)
    assert lines[1:] == ["✗ kernel launches: 2 (budget ≤ 1)",
                         "✗ global loads per work-item: 1 (budget = 0)"]
    assert verdict == "✗ the value matches numpy and misses 2 of its 2 budgets"
    _, lines, verdict = checks(kc, expected + SQUARES_FUSED)
    assert lines[1:] == ["✓ kernel launches: 1 (budget ≤ 1)",
                         "✓ global loads per work-item: 0 (budget = 0)"]
    assert verdict == "✓ the value matches numpy, within its 2 budgets"
    # A wrong value within budget, and a wrong value over budget.
    _, _, verdict = checks(kc, "%%expect np.arange(1024) --budget kernels<=1\n" + SQUARES_FUSED)
    assert verdict == "✗ the value is wrong, within its budget"
    _, _, verdict = checks(kc, "%%expect np.arange(1024) --budget kernels<=1\n"
                           + SQUARES_IN_MEMORY)
    assert verdict == "✗ the value is wrong and misses its budget"


def test_budgets_of_operations_on_floats(kc):
    # x * x + 0.5: 2 operations on floats per work-item over the 4 bytes it writes (the
    # conversion not counted); none on doubles. numpy's float32 gives the same bits.
    code = ("%%expect (np.arange(1024, dtype=np.float32) ** 2 + np.float32(0.5)) --budget "
            "float_flops==2 float_intensity>=0.25 flops==0\n"
            "do<grid> { forcePull<grid> (generate 1024 (fn i => let x = i2f i in "
            "addf (mulf x x) 0.5f)) }")
    reply, lines, verdict = checks(kc, code)
    assert reply["status"] == "ok"
    assert lines == [
        "✓ all 1024 elements match numpy",
        "✓ operations on floats per work-item: 2 (budget = 2)",
        "✓ operations on floats per DRAM byte (densest kernel): 0.5 (budget ≥ 0.25)",
        "✓ operations on doubles per work-item: 0 (budget = 0)",
    ]
    assert verdict == "✓ the value matches numpy, within its 3 budgets"


def test_local_memory_budgets_of_the_tiled_transpose(kc):
    assert execute(kc, TILED_DEFS)[0]["status"] == "ok"
    # The fill kernel stores 1 int per work-item (4096 ints, 16 groups of 256). The transpose
    # kernel: 4 tiles, one per work-group of 256, so each work-item loads 4 ints and stores 4,
    # in global and in local memory; one barrier between writing the tile and reading it; the
    # tile is 32 × 32 × 4 B = 4096 B. Reading a column, a warp's 32 ints are 32 words apart, all
    # in one bank: a 32-way conflict, 31 extra passes for each of the 1024 / 32 = 32 requests.
    _, lines, verdict = checks(kc, "%%expect np.arange(64 * 64).reshape(64, 64).T --budget "
                                   "global_loads==4 global_stores==5 local_loads==4 "
                                   "local_stores==4 barriers==1 local_bytes<=4096 "
                                   "bank_conflicts==0\n"
                                   "do<grid> {\n  xs <- forcePull<grid> (iota (64 * 64));\n"
                                   "  forceM<grid> (tiledTranspose plainTile 32 64 64 xs)\n}")
    assert lines[1:] == [
        "✓ global loads per work-item: 4 (budget = 4)",
        "✓ global stores per work-item: 5 (budget = 5)",
        "✓ local loads per work-item: 4 (budget = 4)",
        "✓ local stores per work-item: 4 (budget = 4)",
        "✓ barriers per work-group: 1 (budget = 1)",
        "✓ local memory per work-group (largest kernel): 4096 B (budget ≤ 4096 B)",
        "✗ bank conflicts per work-group: 992 (budget = 0)"]
    assert verdict == "✗ the value matches numpy and misses 1 of its 7 budgets"


def test_simt_occupancy_and_the_chosen_gpu(kc, doubled):
    # 16 elements in a work-group of 256: warp 0 runs with 16 of its 32 lanes, the others idle.
    _, lines, _ = checks(kc, "%%expect np.arange(16) --budget simt>=0.5 simt<1\n"
                             "forcePull<grid> (generate 16 (fn i => i))")
    assert lines[1:] == ["✓ SIMT efficiency (worst kernel): 0.5 (budget ≥ 0.5)",
                         "✓ SIMT efficiency (worst kernel): 0.5 (budget < 1)"]
    # Work-groups of 1024 (32 warps): the generic GPU's SM holds 1536 threads, so one group,
    # 32 of its 48 warps; an H100's holds 2048, two groups, all 64 of its warps.
    expected = "%%expect np.arange(1024) * 2 --budget occupancy>=0.9\n"
    try:
        execute(kc, "%config block_size=1024")
        _, lines, verdict = checks(kc, expected + doubled)
        assert lines[1:] == ["✗ occupancy on generic GPU (worst kernel): 0.667 (budget ≥ 0.9)"]
        assert verdict.startswith("✗")
        execute(kc, "%config gpu=h100")
        _, lines, verdict = checks(kc, expected + doubled)
        assert lines[1:] == ["✓ occupancy on H100 SXM5 (worst kernel): 1 (budget ≥ 0.9)"]
        assert verdict.startswith("✓")
    finally:
        execute(kc, "%config block_size=256 gpu=generic")


def test_a_cell_without_kernels_or_without_a_result(kc):
    # A pure value runs no kernel: every figure reads 0, and the clause still evaluates.
    _, lines, verdict = checks(kc, "%%expect 45 --budget kernels==0 global_loads<=1 simt>=1\n"
                                   "5 * 9")
    assert lines == ["✓ the value matches numpy", "✓ kernel launches: 0 (budget = 0)",
                     "✓ global loads per work-item: 0, no kernels (budget ≤ 1)",
                     "✗ SIMT efficiency (worst kernel): 0, no kernels (budget ≥ 1)"]
    assert verdict == "✗ the value matches numpy and misses 1 of its 3 budgets"
    # An exercise not started yet has no program to measure.
    _, lines, verdict = checks(kc, "%%expect np.arange(3) --budget kernels<=1\n"
                                   "-- write your solution here")
    assert lines[1] == "✗ kernel launches: not measured, the cell has no program (budget ≤ 1)"
    assert verdict == "✗ the value is wrong and misses its budget"


def test_strict_makes_a_failed_check_an_error(kc):
    # Over budget: the checks are shown, then the cell fails; it ran, so its definitions stay.
    reply, messages = execute(kc, "%%expect --strict np.arange(1024) ** 2 + 1 --budget "
                                  "kernels<=1\nval strictlyDefined = 7\n" + SQUARES_IN_MEMORY)
    assert reply["status"] == "error" and reply["ename"] == "FCLError"
    assert reply["evalue"] == ("the check failed: the value matches numpy and misses its budget "
                               "(`--strict` makes a failed check an error)")
    assert displayed(messages)[-1] == "✗ the value matches numpy and misses its budget"
    assert execute(kc, "strictlyDefined")[0]["status"] == "ok"
    # A wrong value, with no budget; `--strict` may also follow the budgets.
    reply, _ = execute(kc, "%%expect --strict np.arange(4)\nforcePull<grid> (iota 5)")
    assert reply["status"] == "error"
    assert reply["evalue"].startswith("the check failed: expected 4 elements, got 5 elements")
    reply, _ = execute(kc, "%%expect np.arange(1024) ** 2 + 1 --budget kernels<=1 --strict\n"
                       + SQUARES_FUSED)
    assert reply["status"] == "ok"


@pytest.mark.parametrize("execution", ["autograde", "validate"])
def test_strict_under_nbgrader(execution):
    # nbgrader starts the kernel with NBGRADER_EXECUTION=autograde in its environment while it
    # grades a notebook (=validate while it checks one for the student): a failed check is then
    # an error without --strict. tests/test_nbgrader.py runs nbgrader itself.
    km, kc = start_new_kernel(kernel_name="fcl",
                              env={**os.environ, "NBGRADER_EXECUTION": execution})
    try:
        reply, _ = execute(kc, "%%expect np.arange(1024) ** 2 + 1 --budget kernels<=1\n"
                           + SQUARES_IN_MEMORY)
        assert reply["status"] == "error"
        assert reply["evalue"] == ("the check failed: the value matches numpy and misses its "
                                   "budget (while nbgrader grades or validates the notebook, a "
                                   "failed check is an error)")
        assert execute(kc, "%%expect np.arange(1024) ** 2 + 1 --budget kernels<=1\n"
                       + SQUARES_FUSED)[0]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.parametrize("args, message", [
    ("--budget kernels <= 1", "%%expect: cannot read the budget `kernels`: write NAME OP NUMBER "
                              "without spaces, e.g. `kernels<=1`, OP one of <= >= == < >"),
    ("--budget kernels=1", "%%expect: cannot read the budget `kernels=1`"),
    ("--budget kernels<=few", "%%expect: cannot read the budget `kernels<=few`"),
    ("--budget kernels<=nan", "%%expect: cannot read the budget `kernels<=nan`"),
    ("--budget kernel<=1", "%%expect: no budget named `kernel` (did you mean `kernels`?); the "
                           "budgets are: kernels, global_loads, global_stores, sectors_per_load, "
                           "sectors_per_store, lines_per_load, lines_per_store, dram_sectors, "
                           "flops, intensity, float_flops, float_intensity, local_loads, "
                           "local_stores, bank_conflicts, barriers, simt, local_bytes, "
                           "occupancy, predicted_us"),
    ("--budget", "%%expect: `--budget` needs one or more budgets"),
    ("--bugdet kernels<=1", "%%expect: no option `--bugdet`; the form is `%%expect [--strict] "
                            "NUMPY-EXPR [--budget NAME<=NUMBER ...]`"),
    ("--strict 3", "%%expect: `--strict` takes no value, but `3` follows it"),
])
def test_malformed_budgets_are_errors_and_the_cell_is_not_run(kc, args, message):
    reply, _ = execute(kc, f"%%expect np.arange(3) {args}\nval neverDefined = 1")
    assert reply["status"] == "error" and reply["ename"] == "FCLError"
    assert reply["evalue"].startswith(message)
    assert execute(kc, "neverDefined")[0]["status"] == "error"


def test_the_magic_describes_the_budgets(kc):
    _, messages = execute(kc, "%expect?")
    text = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
    assert "--budget CLAUSE" in text and "predicted_us" in text and "--strict" in text
