"""Random well-typed programs (tests/fclgen.py) against their Python models, and the OpenCL back
end against the interpreter on the same programs."""
import io

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fcl import pipeline
from fcl.errors import Source
from fcl.interp.eval import RunConfig
from fcl.pipeline import main_root, run_interpreter
from fcl.session import Session
from fclgen import programs


def session_of(text: str) -> Session:
    session = Session.new()
    session.add_file(Source("generated.fcl", text))
    return session


def run_interp(text: str, block_size: int = 256) -> str:
    session = session_of(text)
    out = io.StringIO()
    run_interpreter(session, main_root(session),
                    RunConfig(block_size=block_size, out=out, err=io.StringIO()))
    return out.getvalue()


def run_opencl(text: str, block_size: int, target: str = "auto") -> str:
    session = session_of(text)
    out = io.StringIO()
    pipeline.run_opencl(session, main_root(session),
                        pipeline.CompileOptions(block_size=block_size, target=target),
                        out=out, err=io.StringIO())
    return out.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
@pytest.mark.slow  # 0.75-1.1 s
def test_interpreter_agrees_with_the_model(program):
    assert run_interp(program.text) == program.expected, program.text


# Each example builds an OpenCL program (about half a second on PoCL): few examples, a range of
# work-group sizes, smaller and larger than the chunks the blocks work on.
@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from([1, 4, 32, 256]), st.sampled_from(["gpu", "cpu"]))
def test_opencl_agrees_with_the_interpreter(program, block_size, target):
    expected = run_interp(program.text, block_size)
    assert expected == program.expected, program.text
    assert run_opencl(program.text, block_size, target) == expected, program.text
