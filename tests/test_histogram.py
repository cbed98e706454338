"""Histograms (`histogram bins op neutral is xs`, Futhark's reduce_by_index): values combined
into bins with atomics on OpenCL, in the input's order in the interpreter; both print the same,
and match numpy."""
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from runs import run_cl, run_interp
from test_memory import same_everywhere
from test_oclgrind import oclgrind_findings


def program(bins: int, op: str, neutral: str, index: str, value: str, n: int,
            doubles: bool = False) -> str:
    printer = "forceAndPrintDouble" if doubles else "forceAndPrint"
    return (f"val main = do<grid> {{\n"
            f"  h <- histogram {bins} {op} {neutral} (generate {n} (fn i => {index}))\n"
            f"         (generate {n} (fn i => {value})) ;\n"
            f"  {printer} {bins} (push<grid> h)\n}}\n")


def ints(text: str) -> list[int]:
    return [int(x) for x in text.strip().strip("[]").split(",")]


def numpy_histogram(bins, combine, neutral, index, value, dtype=np.int32):
    out = np.full(bins, neutral, dtype=dtype)
    with np.errstate(over="ignore"):
        combine.at(out, index, value.astype(dtype))
    return out


@pytest.mark.parametrize("target", ["gpu", "cpu"])
def test_int_histograms_add_min_and_max_into_their_bins(target):
    i = np.arange(5000)
    cases = [("addi", "0", np.add, 0), ("mini", "1000000", np.minimum, 1000000),
             ("maxi", "(0 - 1)", np.maximum, -1)]
    for op, neutral, combine, start in cases:
        text = program(37, op, neutral, "(i * 7919) % 37", "(i * 31) % 1009", 5000)
        expected = numpy_histogram(37, combine, start, (i * 7919) % 37, (i * 31) % 1009)
        assert ints(same_everywhere(text, target)) == list(expected), op


def test_a_sum_that_overflows_wraps_as_ints_do():
    text = program(2, "addi", "0", "i % 2", "2000000000", 8)
    # 4 x 2e9 in 32 bits, the same on every back end.
    assert ints(same_everywhere(text)) == [np.int32(np.uint32(8000000000 % 2**32)).item()] * 2


def test_double_minimum_and_maximum_are_exact_in_any_order():
    for op, neutral, combine in (("mind", "1.0e9", np.fmin), ("maxd", "(negated 1.0e9)", np.fmax)):
        text = program(5, op, neutral, "(i * 13) % 5", "divd (i2d ((i * 37) % 101)) 7.0", 400,
                       doubles=True)
        i = np.arange(400)
        start = 1.0e9 if op == "mind" else -1.0e9
        expected = numpy_histogram(5, combine, start, (i * 13) % 5, ((i * 37) % 101) / 7.0,
                                   np.float64)
        shown = same_everywhere(text)
        assert shown == "[" + ",".join(f"{x:.5f}" for x in expected) + "]\n"


def test_float_minimum_and_maximum_in_local_and_global_memory():
    # Few bins combine in local memory first, many in global memory: the float compare-and-swap
    # of each, against numpy's float32 (the quotients rounded to floats).
    i = np.arange(3000)
    values = ((i * 37) % 1001).astype(np.float32) / np.float32(7)
    for bins, where in ((5, "_float_local(&sub_"), (2000, "_float(&")):
        for op, neutral, combine, start in (("minf", "1.0e9f", np.fmin, 1.0e9),
                                            ("maxf", "-1.0e9f", np.fmax, -1.0e9)):
            text = program(bins, op, neutral, f"(i * 13) % {bins}",
                           "divf (i2f ((i * 37) % 1001)) 7.0f", 3000).replace(
                "forceAndPrint ", "forceAndPrintFloat ")
            assert f"fcl_atomic_{op[:3]}{where}" in opencl_of(text)
            expected = numpy_histogram(bins, combine, start, (i * 13) % bins, values, np.float32)
            assert same_everywhere(text) == "[" + ",".join(f"{x:.5f}" for x in expected) + "]\n"


def test_a_bin_never_hit_keeps_the_neutral_element_and_no_bins_is_empty():
    assert ints(same_everywhere(program(6, "addi", "7", "2 * (i % 3)", "1", 30))) \
        == [17, 7, 17, 7, 17, 7]


def test_bins_that_are_the_values_own_positions_are_no_copy_to_plan_away():
    # Each value in its own bin: the kernel stores at its work-item's index, as a copy does, but
    # combines with what the bin holds; the memory planner must leave it alone.
    text = program(64, "addi", "5", "i", "i * i", 64)
    assert ints(same_everywhere(text)) == [5 + i * i for i in range(64)]


@pytest.mark.parametrize("op, why, hint", [
    ("addd", "not `addd`", "a sum of doubles depends on the order of its additions"),
    ("addf", "not `addf`", "a sum of floats depends on the order of its additions"),
    ("(fn a => fn b => a + b)", "not a function of the program's", None),
    ("subi", "not `subi`", None),
])
def test_an_operator_without_a_device_atomic_is_refused_alike(op, why, hint):
    doubles, floats = op == "addd", op == "addf"
    text = program(4, op, "0.0" if doubles else "0.0f" if floats else "0", "i % 4",
                   "i2d i" if doubles else "i2f i" if floats else "i", 16, doubles=doubles)
    text = text.replace("forceAndPrint ", "forceAndPrintFloat ") if floats else text
    errors = []
    for run in (run_interp, lambda t: run_cl(t)[0]):
        with pytest.raises(Exception) as caught:
            run(text)
        errors.append(caught.value)
    interp, opencl = errors
    assert interp.render() == opencl.render()
    assert "histogram combines bins with addi, mini, maxi, mind, maxd, minf or maxf" in \
        interp.message
    assert why in interp.message
    assert (hint is None and not interp.hints) or any(hint in h for h in interp.hints)
    assert interp.span.line == 2


@pytest.mark.parametrize("index, n_values, message", [
    ("(i * 7) % 12", 100, "bin 11 is outside the histogram's 10 bins (in work-item 5)"),
    ("i % 10", 99, "histogram was given 100 bin indices and 99 values: one index per value"),
])
def test_a_bad_bin_or_length_is_the_same_error_everywhere(index, n_values, message):
    text = program(10, "addi", "0", index, "i", 100).replace(
        "(generate 100 (fn i => i))", f"(generate {n_values} (fn i => i))")
    rendered = []
    for run in (run_interp, lambda t: run_cl(t)[0], lambda t: run_cl(t, target="cpu")[0]):
        with pytest.raises(Exception) as caught:
            run(text)
        rendered.append(caught.value.render())
    assert rendered[0] == rendered[1] == rendered[2]
    assert message in rendered[0]


@pytest.mark.slow  # about 1 s per example
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bins=st.integers(1, 40), n=st.integers(0, 300), a=st.integers(1, 97),
       b=st.integers(0, 50), op=st.sampled_from(["addi", "mini", "maxi"]),
       block=st.sampled_from([1, 32, 256]))
def test_generated_histograms_match_numpy(bins, n, a, b, op, block):
    text = program(bins, op, "3", f"(i * {a} + {b}) % {bins}", f"(i * {b} + 1) % 23 - 11", n)
    i = np.arange(n)
    combine = {"addi": np.add, "mini": np.minimum, "maxi": np.maximum}[op]
    expected = numpy_histogram(bins, combine, 3, (i * a + b) % bins, (i * b + 1) % 23 - 11)
    assert ints(same_everywhere(text, block_size=block)) == list(expected)


@pytest.mark.slow  # 2-4 s on Oclgrind
def test_histograms_are_clean_under_oclgrind(capfd):
    text = """\
val main = do<grid> {
  h <- histogram 10 addi 0 (generate 300 (fn i => (i * 7) % 10)) (generate 300 (fn i => i)) ;
  forceAndPrint 10 (push<grid> h) ;
  lo <- histogram 4 mind 1.0e9 (generate 100 (fn i => i % 4))
          (generate 100 (fn i => divd (i2d ((i * 37) % 101)) 3.0)) ;
  forceAndPrintDouble 4 (push<grid> lo) ;
  hi <- histogram 4 maxf -1.0e9f (generate 100 (fn i => i % 4))
          (generate 100 (fn i => divf (i2f ((i * 37) % 101)) 3.0f)) ;
  forceAndPrintFloat 4 (push<grid> hi)
}
"""
    assert oclgrind_findings(text, "histogram.fcl", capfd) == ""


def test_few_bins_combine_in_local_memory_first_and_many_in_global_memory():
    def opencl(bins: int) -> str:
        return opencl_of(program(bins, "addi", "0", f"(i * 7) % {bins}", "1", 100000))
    few, many = opencl(256), opencl(5000)
    # 256 bins: each work-group's sub-histogram in local memory, then its bins that changed
    # added to the histogram: one global atomic per bin and work-group, not per value.
    assert "atomic_add(&sub_" in few and "__local int* sub_" in few
    assert "if ((sub_" in few and "atomic_add(&hist_" in few
    assert "atomic_add(&sub_" not in many and "atomic_add(&hist_" in many
    for bins in (256, 5000):
        i = np.arange(100000)
        expected = np.bincount((i * 7) % bins, minlength=bins)
        assert ints(same_everywhere(program(bins, "addi", "0", f"(i * 7) % {bins}", "1",
                                            100000))) == list(expected)


def test_costs_count_atomics_and_the_lanes_that_share_an_element(tmp_path, capsys):
    from fcl.cli import main as cli_main
    path = tmp_path / "h.fcl"
    path.write_text("""\
val main = do<grid> {
  spread <- histogram 5000 addi 0 (generate 4096 (fn i => (i * 7) % 5000))
              (generate 4096 (fn i => 1)) ;
  forceAndPrint 4 (push<grid> spread) ;
  same <- histogram 5000 addi 0 (generate 4096 (fn i => i / 32)) (generate 4096 (fn i => 1)) ;
  forceAndPrint 4 (push<grid> same)
}
""")
    assert cli_main(["costs", str(path)]) == 0
    rows = {cells[0]: cells[1:] for line in capsys.readouterr().out.splitlines()
            for cells in [re.split(r"\s{2,}", line.strip())]}
    # The kernels: each histogram's bins filled, then its values combined (5000 bins: in global
    # memory), one atomic per work-item; a warp's 32 values land in 32 bins, or in one.
    assert rows["atomics per work-item"] == ["0", "1", "0", "1"]
    assert rows["same-element lanes per warp atomic"] == ["–", "0", "–", "31"]
    assert len(rows["predicted on generic GPU"]) == 4


def test_double_bins_in_local_memory_keep_infinities_and_skip_nans():
    # 3 bins: sub-histograms in local memory, starting from infinities; a NaN never wins, an
    # infinity may, and a bin that gets only NaNs keeps the neutral element.
    value = ("if i % 7 == 0 then divd 0.0 (i2d (i - i))"
             " else if i == 5 then divd 1.0 (i2d (i - i))"
             " else if i == 9 then divd (negated 1.0) (i2d (i - i)) else i2d ((i * 37) % 101)")
    for op, combine in (("mind", np.fmin), ("maxd", np.fmax)):
        text = program(3, op, "42.0", "if i % 7 == 0 then 2 else i % 2", value, 300,
                       doubles=True)
        assert "_double_local(&sub_" in opencl_of(text)
        i = np.arange(300)
        with np.errstate(divide="ignore", invalid="ignore"):
            values = np.where(i % 7 == 0, np.nan, np.where(i == 5, np.inf, np.where(
                i == 9, -np.inf, ((i * 37) % 101).astype(float))))
        expected = numpy_histogram(3, combine, 42.0, np.where(i % 7 == 0, 2, i % 2), values,
                                   np.float64)
        assert same_everywhere(text) == "[" + ",".join(
            "inf" if x == np.inf else "-inf" if x == -np.inf else f"{x:.5f}"
            for x in expected) + "]\n"


def opencl_of(text: str) -> str:
    from fcl import pipeline
    from runs import session_for
    session = session_for(text)
    return pipeline.compile_program(session, pipeline.main_root(session),
                                    pipeline.CompileOptions()).source


def test_memory_diagrams_show_atomics_and_the_lanes_that_take_turns(tmp_path, capsys):
    from fcl.cli import main as cli_main
    path = tmp_path / "h.fcl"
    path.write_text("val main = do<grid> {\n"
                    "  h <- histogram 4 addi 0 (generate 4096 (fn i => i % 4))"
                    " (generate 4096 (fn i => 1)) ;\n"
                    "  forceAndPrint 4 (push<grid> h)\n}\n")
    assert cli_main(["memory", str(path)]) == 0
    shown = capsys.readouterr().out
    # 32 lanes on 4 bins of the sub-histogram: 28 wait, 8 on each bin.
    assert "combines atomically into local sub_" in shown
    assert "28 lanes wait on another's element (at most 8 on one)" in shown
    # The merge: one lane per bin.
    assert "combines atomically into global hist_" in shown
    assert "0 lanes wait on another's element" in shown
