"""A loop's leading checks made first in a loop of their own on a CPU (fcl.codegen.checkfirst):
the kernel's shape, and failures that are the interpreter's, with the same values, wherever the
failing element lies."""
import pytest

from runs import compiled_source
from test_checks import run
from test_serial import after
from test_stops import product

# Three rows of 40 elements: long enough for the first pass (checkfirst.MIN_TRIPS).
LONG_ROWS = {"n": 120, "offset": "r * 40"}


def test_a_rows_loop_checks_its_columns_in_a_loop_without_exits_first():
    source = compiled_source(product(**LONG_ROWS), target="cpu")
    at = source.index("int failing_0 = ")
    assert "< 32) ? 1 : 0);" in source[at:source.index("\n", at)]  # short rows: checks kept
    first_pass = source[source.index("if ((failing_0 == 0)) {", at):
                        source.index("if ((failing_0 != 0)) {", at)]
    # The first loop ORs the column checks of every element, with no branch out of the kernel.
    assert "failing_0 = (failing_0 | (((" in first_pass and "return;" not in first_pass
    checked, unchecked = source[source.index("if ((failing_0 != 0)) {", at):].split(
        "} else {", 1)
    assert "return;" in checked  # as before: fails at the first bad column
    loop = unchecked[:unchecked.index("\n        }\n")]
    assert "for (int k_" in loop and "return;" not in loop and "acc_" in loop


def test_gpu_kernels_keep_their_checks_in_the_loop():
    steps = after(product(**LONG_ROWS), target="gpu")
    assert steps["checks-first"] == steps["reads"]


# Where the bad column is: a row's first, a middle and the last element of the last row, in
# rows long enough for the first pass and in short ones; and nowhere.
@pytest.mark.parametrize("rows", [LONG_ROWS, {}], ids=["long-rows", "short-rows"])
@pytest.mark.parametrize("column", ["if i == 40 then 9 else i % 8",
                                    "if i == 9 then 0 - 1 else i % 8",
                                    "if i == 11 then 8 else i % 8",
                                    "if i == 119 then 8 else i % 8", "i % 8"])
def test_failures_are_the_interpreters_wherever_the_column(column, rows):
    text = product(column=column, **rows)
    reports = []
    for backend in ("interp", "opencl:cpu", "opencl:gpu"):
        out, err = run(text, backend)
        reports.append((out, err and (err.message, err.span.line, err.span.col)))
    assert reports[0] == reports[1] == reports[2]
    bad = int(column.split("== ")[1].split()[0]) if "==" in column else None
    assert (reports[0][1] is not None) == (bad is not None and bad < rows.get("n", 12))
