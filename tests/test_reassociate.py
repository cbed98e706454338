"""A serial kernel's tree reduction or scan of a run of ints regrouped into one loop in index
order (fcl.codegen.reassociate): the kernel's shape, and the interpreter's output on both
targets for sums that wrap, for min and max, and for the cases it must leave alone."""
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from runs import run_cl, run_interp
from test_serial import after

ROOT = Path(__file__).parent
REDUCE = "val n = 2048\n" + (ROOT.parent / "bench" / "reduce.fcl").read_text()


def program(body: str) -> str:
    return REDUCE + f"\nval main = do<grid> {{\n{body}\n}}\n"


# Sums far past 2^31: the wrapped result is the same whatever the grouping.
WRAPPING = program("""  xs <- forcePull<grid> (generate 2048 (fn i => i * 1000003 + 2147483000)) ;
  r <- reducePartWarps addi 0 xs ;
  forceAndPrint 4 r""")
MAXIMA = program("""  xs <- forcePull<grid> (generate 2048 (fn i => (i * 7919) % 2039 - 1000)) ;
  r <- reducePart maxi (0 - 5000) xs ;
  forceAndPrint 4 r""")
# 1000 elements in chunks of 512: the second half of the last chunk's pairs is padding.
PADDED = REDUCE.replace("val n = 2048", "val n = 1000") + """
val main = do<grid> {
  xs <- forcePull<grid> (generate 1000 (fn i => i * 1000003 + 2147483000)) ;
  r <- reducePartWarps addi 0 xs ;
  forceAndPrint 2 r
}
"""
# Padding with 1 for a sum: the padded elements count, so the tree is not a run's sum.
PADDED_WITH_ONE = program("""  xs <- forcePull<grid> (generate 1000 (fn i => i)) ;
  r <- reducePart addi 1 xs ;
  forceAndPrint 2 r""")
# Each element twice: the leaves are not a run taken once.
TWICE = REDUCE + """
val main = do<grid> {
  xs <- forcePull<grid> (generate 2048 (fn i => i)) ;
  r <- splitUp 512 xs |> map (fn c => reduce<block> addi (generate 512 (fn j => index c (j / 2))))
         |> concat<block> 1 ;
  forceAndPrint 4 r
}
"""
SCAN = "val n = 4096\nval perItem = 8\n" + (ROOT.parent / "bench" / "scan.fcl").read_text()
# The bench's scan by warps: two chunks of 2048, then their two totals scanned.
WARP_SCAN = SCAN + """
val main = do<grid> {
  xs <- forcePull<grid> (generate 4096 (fn i => i * 1000003 + 2147483000)) ;
  r <- scan (scanWarps addi) perItem addi 0 xs ;
  forceAndPrint 4096 r
}
"""
DOUBLES = program("""  xs <- forcePull<grid> (generate 2048 (fn i => divd 1.0 (i2d (i + 1)))) ;
  r <- reducePart addd 0.0 xs ;
  forceAndPrintDouble 4 r""")


def cpu_kernels(text: str) -> tuple[str, str]:
    steps = after(text)
    return steps["split"], steps["reassociate"]


def test_a_warp_reduction_on_a_cpu_is_one_loop_over_the_work_groups_elements():
    before, regrouped = cpu_kernels(WRAPPING)
    assert "buf_" in before and "seqfor (j_" in before
    kernel = regrouped.split("kernel kernel")[2]
    # No tree, no scratch arrays: one accumulator over the 512 consecutive elements.
    assert "private" not in kernel and "local int" not in kernel
    assert kernel.count("seqfor (") == 1 and "seqfor (at_0 < 512) {" in kernel
    assert "folded_0 = (folded_0 + arr_1[((b_4 * 512) + at_0)]);" in kernel
    assert "arr_3[b_4] = folded_0;" in kernel


def test_a_warp_scan_on_a_cpu_is_one_loop_storing_each_prefix():
    regrouped = cpu_kernels(WARP_SCAN)[1]
    first = regrouped.split("kernel kernel")[2]
    assert "private" not in first and "local int" not in first
    assert "seqfor (at_0 < 2048) {" in first and first.count("seqfor (") == 1
    assert "folded_0 = (folded_0 + arr_1[((b_4 * 2048) + at_0)]);" in first
    assert "arr_3[((b_4 * 2048) + at_0)] = folded_0;" in first
    # The chunks' totals, 2048 elements apart, are not a run: that kernel keeps its steps.
    totals = regrouped.split("kernel kernel")[3]
    assert "folded" not in totals and "private" in totals


def test_a_padded_run_is_two_loops_the_second_guarded():
    kernel = cpu_kernels(PADDED)[1].split("kernel kernel")[2]
    assert "seqfor (at_0 < 256) {" in kernel and "seqfor (at_1 < 256) {" in kernel
    assert "folded_0 = (folded_0 + arr_1[((b_4 * 512) + at_0)]);" in kernel
    assert "< 1000) ? arr_1[(((b_4 * 512) + at_1) + 256)] : 0));" in kernel


def test_min_and_max_are_regrouped_too():
    regrouped = cpu_kernels(MAXIMA)[1]
    assert "int folded_0 = -2147483648;" in regrouped
    assert "folded_0 = max(folded_0, arr_1[((b_4 * 512) + at_0)]);" in regrouped


@pytest.mark.parametrize("text", [PADDED_WITH_ONE, TWICE, DOUBLES],
                         ids=["padded-with-one", "elements-twice", "doubles"])
def test_what_is_not_a_runs_reduction_is_left_alone(text):
    before, regrouped = cpu_kernels(text)
    assert regrouped == before


@pytest.mark.parametrize("text", [WRAPPING, MAXIMA, PADDED, PADDED_WITH_ONE, TWICE,
                                  WARP_SCAN],
                         ids=["wrapping", "maxima", "padded", "padded-with-one", "elements-twice",
                              "warp-scan"])
def test_the_results_are_the_interpreters_on_both_targets(text):
    expected = run_interp(text)
    for target in ("cpu", "gpu"):
        assert run_cl(text, target=target) == (expected, "")


def test_the_gpus_kernels_are_not_regrouped():
    steps = after(WRAPPING, "gpu")
    assert steps["reassociate"] == steps["split"]


# Random trees: an operation, a length (padded or not), a block size, the thesis's tree or the
# warps', and values that overflow; the CPU's kernels against the interpreter. (A full
# reduction: its one value does not depend on the block size, which the interpreter does not
# share.)
TREES = {"thesis": "reduceFull", "warps": "reduceFullWarps"}
NEUTRAL = {"addi": "0", "muli": "1", "maxi": "(0 - 2147483647 - 1)", "mini": "2147483647"}


@pytest.mark.slow  # 5-7 s
@settings(max_examples=8, deadline=None)
@given(op=st.sampled_from(sorted(NEUTRAL)), tree=st.sampled_from(sorted(TREES)),
       block=st.sampled_from([8, 16, 32]), groups=st.integers(1, 3),
       short=st.integers(0, 5), scale=st.integers(1, 2_000_000_000))
def test_random_trees_print_what_the_interpreter_prints(op, tree, block, groups, short, scale):
    n = max(1, groups * 2 * block - short)
    text = f"val n = {n}\n" + REDUCE.split("\n", 1)[1] + (
        f"\nval main = do<grid> {{\n  xs <- forcePull<grid> (generate {n} (fn i => "
        f"(i * {scale}) % 1000003 - 500001)) ;\n  r <- {TREES[tree]} {op} {NEUTRAL[op]} xs ;\n"
        "  forceAndPrint 1 (push<grid> (generate 1 (fn i => r)))\n}\n")
    expected = run_interp(text)
    assert expected.strip() and run_cl(text, target="cpu", block_size=block) == (expected, "")
