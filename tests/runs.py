"""Running an FCL program's text on each back end, for tests that compare them."""
import io

from fcl import pipeline
from fcl.errors import Source
from fcl.interp.eval import RunConfig
from fcl.session import Session


def session_for(text: str) -> Session:
    session = Session.new()
    session.add_file(Source("prog.fcl", text))
    return session


def run_cl(text: str, **options) -> tuple[str, str]:
    session = session_for(text)
    out, err = io.StringIO(), io.StringIO()
    pipeline.run_opencl(session, pipeline.main_root(session), pipeline.CompileOptions(**options),
                      out=out, err=err)
    return out.getvalue(), err.getvalue()


def run_interp(text: str) -> str:
    session = session_for(text)
    out = io.StringIO()
    pipeline.run_interpreter(session, pipeline.main_root(session),
                             RunConfig(out=out, err=io.StringIO()))
    return out.getvalue()


def compiled_source(text: str, block_size: int = 256, target: str = "auto") -> str:
    session = session_for(text)
    return pipeline.compile_program(session, pipeline.main_root(session),
                                 pipeline.CompileOptions(block_size, target=target)).source
