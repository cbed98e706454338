"""Compile time grows about linearly with the depth of an expression (issue 28: it was cubic, the
prover and the ranges recomputing what they had found one level down). Measured by counting the
analyses' steps, which a busy machine cannot change, at two depths; make bench times the
compiler at depths 250 to 10,000."""

import pytest

from bench.compile_speed import DEEP_SHAPES, nested_expression
from fcl import pipeline
from fcl.errors import Source
from fcl.il import prove, ranges
from fcl.session import Session


def steps(text: str, monkeypatch) -> int:
    """How many intervals and bounds the compiler works out for a program."""
    count = 0

    def counted(module, name):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            nonlocal count
            count += 1
            return original(*args, **kwargs)
        monkeypatch.setattr(module, name, wrapper)
    for module, name in ((ranges, "_interval"), (prove, "_largest"), (prove, "linear")):
        counted(module, name)
    session = Session.new()
    session.add_file(Source("deep.fcl", text))
    pipeline.compile_program(session, pipeline.main_root(session))
    monkeypatch.undo()
    return count


@pytest.mark.parametrize("shape", DEEP_SHAPES.values(), ids=DEEP_SHAPES.keys())
def test_twice_as_deep_is_about_twice_the_work(shape, monkeypatch):
    shallow, deep = steps(shape(40), monkeypatch), steps(shape(80), monkeypatch)
    assert shallow > 40  # the analyses do run on these programs
    assert deep <= 2.5 * shallow, (shallow, deep)  # cubic growth was 8 times, quadratic 4


@pytest.mark.slow  # compiles a program 3,000 deep: 3-5 s
def test_collections_pause_only_while_a_large_program_compiles(monkeypatch):
    import gc

    from fcl import deep
    seen = []

    def record(*args, **kwargs):
        seen.append(gc.isenabled())
        return original(*args, **kwargs)
    original = pipeline.lowered
    monkeypatch.setattr(pipeline, "lowered", record)
    for depth in (20, 3000):  # about 1 KB and 60 KB of source
        session = Session.new()
        session.add_file(Source("deep.fcl", nested_expression(depth)))
        assert session.large == (depth == 3000) and deep.LARGE_SOURCE == 50_000
        pipeline.compile_program(session, pipeline.main_root(session))
    # compile_program lowers: paused (gc disabled) only for the large one; resumed after.
    assert seen == [True, False] and gc.isenabled()
