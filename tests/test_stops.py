"""Checks out of a loop's iterations (fcl.il.stops): a work-item's fold over its row checks the
element's position once, where the loop stops short, and fails as the interpreter does, with the
same values, whichever of its checks fails first."""
import pytest

from test_checks import run
from test_serial import after

# A sparse product's rows, a work-item each on a CPU (bench/smvm.fcl's shape): each element's
# position in the values, and its column in the vector, checked.
PRODUCT = """val main =
  let vals = generate {n} (fn i => i % 7 + 1) in
  let cols = generate {n} (fn i => {column}) in
  let x = generate 8 (fn i => 10 * i) in
  do<grid> {{
    offsets <- forcePull<grid> (generate 4 (fn r => {offset}));
    sums <- reduceRows addi 0 (map (map (fn p => fst p * index x (snd p)))
                                   (segments offsets (zipWith (fn v => fn c => (v, c)) vals cols)));
    forceAndPrint 3 (push<grid> sums)
  }}
"""


def product(n: int = 12, column: str = "i % 8", offset: str = "r * 4") -> str:
    return PRODUCT.format(n=n, column=column, offset=offset)


def test_a_rows_loop_checks_the_position_before_it_and_stops_short():
    stopped = after(product(), target="cpu")["stops"]
    loop = stopped.index("seqfor (k_")
    head = stopped[loop:stopped.index("\n", loop)]
    assert "_stop))" in head  # the loop runs up to where the position leaves the values
    # Before it, where the row runs past the values, its first element past them fails.
    stopping = stopped[stopped.rindex("int k_", 0, loop):loop]
    assert "_stop = (" in stopping and "if ((k_" in stopping and "failIf" in stopping
    body = stopped[loop:stopped.index("\n  }", loop)]
    assert body.count("failIf") == 1  # the column's, each element's own


# Case, column of element i, offset of row r: 12 values, rows of 4 (or 5 or 7: the last runs
# past the values), one column past the vector in some.
CASES = [
    ("fine", "i % 8", "r * 4"),
    ("the last row runs past the values", "i % 8", "r * 5"),
    ("a column past the vector in an earlier row", "if i == 9 then 8 else i % 8", "r * 5"),
    ("a row starting past the values", "i % 8", "r * 7"),
]


@pytest.mark.parametrize(("case", "column", "offset"), CASES)
def test_failures_are_the_interpreters(case, column, offset):
    text = product(column=column, offset=offset)
    reports = []
    for backend in ("interp", "opencl:cpu", "opencl:gpu"):
        out, err = run(text, backend)
        reports.append((out, err and (err.message, err.span.line, err.span.col)))
    assert reports[0] == reports[1] == reports[2], case
    assert (reports[0][1] is None) == (case == "fine"), reports[0]


@pytest.mark.parametrize(("column", "expected"), [
    # The interpreter makes a row's elements, checking where each lies, before it reads the
    # vector at their columns: element 12 past the values is reported, not element 11's column;
    ("if i == 11 then 8 else i % 8",
     "index 12 is out of bounds for an array of length 12 (in work-item 2)"),
    # ... but row by row: a column past the vector in an earlier row is reported first.
    ("if i == 6 then 8 else i % 8",
     "index 8 is out of bounds for an array of length 8 (in work-item 1)"),
])
def test_a_rows_position_fails_before_an_earlier_elements_column(column, expected):
    text = product(column=column, offset="r * 5")
    # Flattened (opencl:gpu), each element that fails its column checks its row's positions
    # first, as its row's work-item does not flattened (opencl:cpu).
    for backend in ("interp", "opencl:cpu", "opencl:gpu"):
        assert run(text, backend)[1].message == expected, backend
