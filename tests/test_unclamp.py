"""Indices clamped for a failed check read unclamped past a check that returns
(fcl.codegen.unclamp): the same results and the same failures, with fewer operations."""
import io

import pytest

from fcl import pipeline
from fcl.errors import FCLError
from fcl.interp.eval import RunConfig
from runs import run_cl, run_interp, session_for

# A gather at indices read from memory: checked in the kernel, which has no barrier.
GATHER = """val main = do<grid> {
  xs <- forcePull<grid> (generate 100 (fn i => i * 3 + 1)) ;
  ks <- forcePull<grid> (generate 50 (fn i => (i * 37) % LIMIT)) ;
  ys <- forcePull<grid> (map (fn i => index xs (index ks i) + index xs (99 - index ks i))
                             (iota 50)) ;
  forceAndPrint 50 (push<grid> ys) }
"""
# The same in local memory, between two barriers of a work-group kernel shaped for a GPU.
IN_GROUPS = """val main = do<grid> {
  xs <- forcePull<grid> (generate 256 (fn i => (i * 37) % LIMIT)) ;
  ys <- splitUp 64 xs |> mapPull (fn c => do<block> {
          t <- forcePull<block> (map (fn x => x + 1) c) ;
          pushM<block> (map (fn j => index t (index c j)) (iota 64)) }) |> concat<block> 64 ;
  forceAndPrint 256 ys }
"""


def clamps(text: str, target: str) -> int:
    """The clamped indices (`outside ? 0 : i`) in the kernels, a failure's report left out."""
    session = session_for(text)
    source = pipeline.compile_program(session, pipeline.main_root(session),
                                      pipeline.CompileOptions(32, target=target)).source
    return sum(line.count("? 0 :") for line in source.splitlines()
               if "fcl_report" not in line)


def interpreter_failure(text: str) -> str:
    session = session_for(text)
    with pytest.raises(FCLError) as caught:
        pipeline.run_interpreter(session, pipeline.main_root(session),
                                 RunConfig(out=io.StringIO(), err=io.StringIO()))
    return caught.value.message


@pytest.mark.parametrize("target", ["gpu", "cpu"])
def test_a_kernel_without_barriers_reads_what_its_checks_passed_unclamped(target):
    text = GATHER.replace("LIMIT", "100")
    assert clamps(text, target) == 0
    assert run_cl(text, block_size=32, target=target)[0] == run_interp(text)


def test_a_kernel_with_barriers_keeps_its_clamps_where_its_work_items_run_on():
    text = IN_GROUPS.replace("LIMIT", "64")
    assert clamps(text, "gpu") > 0 and clamps(text, "cpu") == 0  # serial on a CPU: it returns
    for target in ("gpu", "cpu"):
        assert run_cl(text, block_size=32, target=target)[0] == run_interp(text)


@pytest.mark.parametrize("program", [GATHER.replace("LIMIT", "101"),
                                     IN_GROUPS.replace("LIMIT", "65")], ids=["gather", "groups"])
def test_a_failing_check_reports_what_the_interpreter_reports(program):
    expected = interpreter_failure(program)
    assert "out of bounds" in expected
    for target in ("gpu", "cpu"):
        with pytest.raises(FCLError) as caught:
            run_cl(program, block_size=32, target=target)
        assert caught.value.message == expected, target
