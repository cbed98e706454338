"""Compile time grows about linearly with the depth of an expression (issue 28: it was cubic, the
prover and the ranges recomputing what they had found one level down). Measured by counting the
analyses' steps, which a busy machine cannot change, at two depths; make bench times the
compiler at depths 250 to 10,000."""
import pytest

from fcl import pipeline
from fcl.errors import Source
from fcl.il import prove, ranges
from fcl.session import Session


def nested(n: int) -> str:
    """A remainder chain without lets: each level's sign depends on the level below."""
    e = "k"
    for _ in range(n):
        e = f"({e} * 5 % 7919 - k)"
    return f"val main = do<grid> {{ r <- forcePull<grid> (generate 4 (fn k => {e})) ; " \
           f"forceAndPrint 4 (push<grid> r) }}"


def lambda_chain(n: int) -> str:
    """Let-bound lambdas, each calling the one before."""
    lines = ["val main = do<grid> { r <- forcePull<grid> (generate 4 (fn k =>",
             "  let f0 = fn x => x * 3 % 1009 in"]
    lines += [f"  let f{i} = fn x => f{i - 1} x * 3 % 1009 + {i} in" for i in range(1, n)]
    lines.append(f"  f{n - 1} k)) ; forceAndPrint 4 (push<grid> r) }}")
    return "\n".join(lines)


def if_chain(n: int) -> str:
    e = "0"
    for i in range(n):
        e = f"(if k == {i % 5} then {i * 7} else {e} % 1000)"
    return f"val main = do<grid> {{ r <- forcePull<grid> (generate 4 (fn k => {e})) ; " \
           f"forceAndPrint 4 (push<grid> r) }}"


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


@pytest.mark.parametrize("shape", [nested, lambda_chain, if_chain])
def test_twice_as_deep_is_about_twice_the_work(shape, monkeypatch):
    shallow, deep = steps(shape(40), monkeypatch), steps(shape(80), monkeypatch)
    assert shallow > 40  # the analyses do run on these programs
    assert deep <= 2.5 * shallow, (shallow, deep)  # cubic growth was 8 times, quadratic 4
