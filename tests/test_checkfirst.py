"""A loop's leading checks made first in a loop of their own on a CPU (fcl.codegen.checkfirst):
the kernel's shape, and failures that are the interpreter's, with the same values, wherever the
failing element lies."""
import pytest

from runs import compiled_source
from test_checks import run
from test_serial import after
from test_stops import product


def test_a_rows_loop_checks_its_columns_in_a_loop_without_exits_first():
    source = compiled_source(product(), target="cpu")
    at = source.index("int failing_0 = 0;")
    first_pass = source[at:source.index("if ((failing_0 != 0)) {", at)]
    # The first loop ORs the column checks of every element, with no branch out of the kernel.
    assert "failing_0 = (failing_0 | (((" in first_pass and "return;" not in first_pass
    checked, unchecked = source[at:].split("} else {", 1)
    assert "return;" in checked  # as before: fails at the first bad column
    loop = unchecked[:unchecked.index("\n        }\n")]
    assert "for (int k_" in loop and "return;" not in loop and "acc_" in loop


def test_gpu_kernels_keep_their_checks_in_the_loop():
    steps = after(product(), target="gpu")
    assert steps["checks first"] == steps["reads"]


# Where the bad column is: the first, a middle and the last element of a row, and none.
@pytest.mark.parametrize("column", ["if i == 4 then 9 else i % 8",
                                    "if i == 6 then 0 - 1 else i % 8",
                                    "if i == 11 then 8 else i % 8", "i % 8"])
def test_failures_are_the_interpreters_wherever_the_column(column):
    text = product(column=column)
    reports = []
    for backend in ("interp", "opencl:cpu", "opencl:gpu"):
        out, err = run(text, backend)
        reports.append((out, err and (err.message, err.span.line, err.span.col)))
    assert reports[0] == reports[1] == reports[2]
    assert (reports[0][1] is None) == (column == "i % 8")
