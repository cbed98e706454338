"""A work-group's loop whose steps each change a moving band of a local array
(fcl.memory.waves): NW's block kernel sweeps its anti-diagonals in place, over their cells only;
the results are the interpreter's and numpy's, and a step reading its own band is left alone."""
import re

import pytest

from bench.planning import nw_reference
from fcl.il import ir
from fcl.memory.waves import _piecewise
from runs import run_cl, run_interp
from test_memory import bench_program, printed, same_everywhere
from test_oclgrind import oclgrind_findings
from test_serial import after

SIZES = {"n": 32, "b": 16, "penalty": 10}  # blocks of 16: a loop of 31 steps, not unrolled
NW = bench_program("nw.fcl", "scores", SIZES, "forceAndPrint", 33 * 33)


def block_kernels(text: str, step: str = "short-circuit") -> list[str]:
    """The IL of each work-group's part (`distribute<grid>`) after the step."""
    program = after(text, target="gpu")[step]
    return [part.split("parfor<grid>")[0] for part in program.split("distribute<grid>")[1:]]


def test_each_anti_diagonal_is_swept_in_place_over_its_cells():
    for kernel in block_kernels(NW):
        assert kernel.count("allocate<block>(int, 289)") == 1  # one local array, not two
        # Step k changes min(k + 1, 31 - k) cells, 16 apart: those alone run.
        assert re.search(r"_wave < min\(\((1 \+ iter_\d+|iter_\d+ \+ 1)\), ", kernel)
        assert "_wave * 16))" in kernel and "swap_" not in kernel
        assert "failIf" not in kernel.split("seqfor")[1]  # its checks can never fail
    for kernel in block_kernels(NW, "layouts"):  # before the step: two arrays, all 289 cells
        assert kernel.count("allocate<block>(int, 289)") == 2 and "swap_" in kernel


def test_the_swept_scores_are_numpys():
    out, err = run_cl(NW, target="cpu")
    assert err == "" and printed(out) == list(nw_reference(SIZES))


@pytest.mark.slow  # 5 s: both targets, planned and not, verified after every step
def test_the_swept_scores_are_the_interpreters_everywhere():
    for target in ("gpu", "cpu"):
        assert printed(same_everywhere(NW, target=target)) == list(nw_reference(SIZES))


def test_a_step_reading_a_cell_of_its_own_band_keeps_both_arrays():
    # Each cell reads its upper-right neighbour, on the same anti-diagonal: another work-item
    # changes it in the same step.
    racy = NW.replace("(index s (x - 1) - penalty)", "(index s (x - side + 1) - penalty)")
    assert racy != NW
    for kernel in block_kernels(racy):
        assert kernel.count("allocate<block>(int, 289)") == 2 and "_wave" not in kernel
    out, err = run_cl(racy, target="cpu")
    assert err == "" and out == run_interp(racy)


@pytest.mark.slow  # 5-10 s on Oclgrind
def test_the_sweep_is_clean_under_oclgrind(capfd):
    assert oclgrind_findings(NW, "nw.fcl", capfd) == ""


def test_first_elements_and_counts_are_fitted_by_lines():
    k = ir.Var("k", ir.INT)

    def shown(values: dict[int, int]) -> str | None:
        found = _piecewise(values, k)
        return None if found is None else ir.show_expr(found)
    assert shown({x: min(x + 1, 31 - x) for x in range(31)}) == "min((1 + k), (31 - k))"
    assert shown({x: max(18 + x, 17 * x - 222) for x in range(31)}) == \
        "max((18 + k), (-222 + (k * 17)))"
    assert shown({x: 5 - 2 * x for x in range(3)}) == "(5 - (k * 2))"
    assert shown({4: 7}) == "7"
    assert shown({x: x * x for x in range(6)}) is None  # no line, nor two
