"""The thesis's chapter 5 examples (tests/thesis/, typed as printed but for the fixes noted in
each file) type-check, run on the reference interpreter and on OpenCL, and compute what numpy
computes."""
import functools
import io
import operator
from pathlib import Path

import numpy as np
import pytest

from fcl.errors import Source
from fcl.interp.eval import RunConfig
from fcl.pipeline import CompileOptions, main_root, run_interpreter, run_opencl
from fcl.session import Session

THESIS = Path(__file__).parent / "thesis"


@pytest.fixture(params=["interp", "opencl"])
def backend(request) -> str:
    return request.param


def output(source: Source, backend: str, block_size: int = 256) -> str:
    """What running the main of `source` prints."""
    session = Session.new()
    session.add_file(source)
    out = io.StringIO()
    if backend == "interp":
        run_interpreter(session, main_root(session),
                        RunConfig(block_size=block_size, out=out, err=io.StringIO()))
    else:
        run_opencl(session, main_root(session), CompileOptions(block_size), out=out,
                   err=io.StringIO())
    return out.getvalue()


def run(name: str, backend: str, block_size: int = 256) -> list[np.ndarray]:
    """The arrays that tests/thesis/<name> prints, one per forceAndPrint."""
    path = THESIS / name
    printed = []
    for line in output(Source(str(path), path.read_text()), backend, block_size).splitlines():
        assert line.startswith("[") and line.endswith("]"), line
        printed.append(np.array([float(x) if "." in x else int(x) for x in line[1:-1].split(",")]))
    return printed


def assert_ints(printed: np.ndarray, expected) -> None:
    expected = np.asarray(expected)
    assert printed.dtype.kind == "i" and printed.tolist() == expected.tolist()


def assert_doubles(printed: np.ndarray, expected) -> None:
    """Equal up to the five printed decimals (the sums may be added in another order)."""
    np.testing.assert_allclose(printed, np.asarray(expected).flatten(), rtol=0, atol=6e-6)


def test_reverse(backend):
    (out,) = run("reverse.fcl", backend)
    assert_ints(out, (3 * np.arange(32) + 1)[::-1])


def test_transpose(backend):
    tiled, naive = run("transpose.fcl", backend)
    assert_ints(tiled, (1000 + np.arange(256)).reshape(16, 16).T.flatten())
    assert_ints(naive, np.arange(25).reshape(5, 5).T.flatten())


@pytest.mark.parametrize("block_size", [256, 8])
def test_reduce(block_size, backend):
    partial, full = run("reduce.fcl", backend, block_size)
    chunk = 2 * block_size
    data = np.arange(chunk * chunk) * 37 % 101
    assert_ints(partial, data.reshape(chunk, chunk).sum(axis=1))
    assert_ints(full, [data.sum(), data.max()])


def test_foldl_and_scanl(backend):
    sums, scans = run("foldl_scanl.fcl", backend)
    chunks = (np.arange(96) ** 2 % 17 - 8).reshape(16, 6)
    assert_ints(sums, [functools.reduce(operator.sub, chunk, 100) for chunk in chunks])
    assert_ints(scans, np.concatenate([np.concatenate([[0], np.cumsum(chunk)])
                                       for chunk in chunks]))


def test_foldl_and_scanl_from_an_initial_array(backend):
    # The thesis's seqfor (Table 5.1, rule 5.56), which updates an initial push array in place.
    sums, scans, maxima = run("foldl_scanl_init.fcl", backend)
    chunks = (np.arange(96) ** 2 % 17 - 8).reshape(16, 6)
    assert_ints(sums, [functools.reduce(operator.sub, chunk, 100) for chunk in chunks])
    assert_ints(scans, np.concatenate([np.concatenate([[0], np.cumsum(chunk)])
                                       for chunk in chunks]))
    assert_doubles(maxima, np.maximum.accumulate(chunks / 4.0, axis=1))


def test_both_forms_of_seqfor_have_their_types():
    session = Session.new()
    path = THESIS / "foldl_scanl_init.fcl"
    session.add_file(Source(str(path), path.read_text()))
    assert str(session.type_of("scanl1")) == "forall 'a. ('a -> 'a -> 'a) -> ['a] -> ['a]<thread>"
    session.add_file(Source("forms.fcl", "fun sized n = seqfor n 1 (fn read => fn i => (i, 1.5))\n"
                                          "fun from xs = seqfor (push xs) 1 (fn read => fn i => "
                                          "(i, read i))"))
    assert str(session.type_of("sized")) == "int -> [double]<thread>"
    assert str(session.type_of("from")) == "forall 'a. ['a] -> ['a]<thread>"


SEQFOR_FORMS = """
-- The thesis's form over an initial array that is itself a seqfor (the original form), mapped.
val squares = seqfor 4 4 (fn read => fn i => (i, i * i))
val bumped = seqfor (mapPush (fn i => fn x => x + 10 * i) squares) 2
                    (fn read => fn i => (3 - i, read (3 - i) + read i))
val main = do<grid> {
  r <- concat<block> 5 (generate 1 (fn b => concat<thread> 5 (generate 1 (fn t => do<thread> {
         xs <- force bumped;
         return<thread> (push<thread> (generate 5 (fn k =>
           if k < 4 then index xs k else lengthPush bumped)))
       }))));
  forceAndPrint 5 r
}
"""


def test_seqfor_from_a_seqfor(backend):
    # [0, 11, 24, 39] (squares plus 10 times their index), then 39 + 0 at 3 and 24 + 11 at 2;
    # then the length, the initial array's.
    assert output(Source("forms.fcl", SEQFOR_FORMS), backend) == "[0,11,35,39,4]\n"


def test_matmul(backend):
    ints, doubles = run("matmul.fcl", backend)
    a = (np.arange(8 * 12) % 7 - 3).reshape(8, 12)
    b = (np.arange(12 * 8) % 5 - 2).reshape(12, 8)
    assert_ints(ints, (a @ b).flatten())
    a = (np.arange(8 * 12) / 96.0).reshape(8, 12)
    b = (np.arange(12 * 8) % 9 / 8.0).reshape(12, 8)
    assert_doubles(doubles, a @ b)


def test_scan(backend):
    (out,) = run("scan.fcl", backend)
    assert_ints(out, np.cumsum(np.arange(65536) * 7 % 10 - 3))
