"""Random well-typed programs (tests/fclgen.py) against their Python models."""
import io

from hypothesis import HealthCheck, given, settings

from fcl.driver import main_root, run_interpreter
from fcl.errors import Source
from fcl.interp.eval import RunConfig
from fcl.session import Session
from fclgen import programs


def run_interp(text: str) -> str:
    session = Session.new()
    session.add_file(Source("generated.fcl", text))
    out = io.StringIO()
    run_interpreter(session, main_root(session), RunConfig(out=out, err=io.StringIO()))
    return out.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_interpreter_agrees_with_the_model(program):
    assert run_interp(program.text) == program.expected, program.text
