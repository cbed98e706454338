"""bench/run.py's correctness check at tiny sizes: each FCL benchmark program computes what its
hand-written OpenCL reference and numpy compute. Timings are the harness's business, not tests'."""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from fcl.opencl.device import open_device
from fcl.opencl.oclgrind import parse_reports

_PATH = Path(__file__).parents[1] / "bench" / "run.py"
_spec = importlib.util.spec_from_file_location("bench_run", _PATH)
bench = sys.modules["bench_run"] = importlib.util.module_from_spec(_spec)  # dataclasses need it
_spec.loader.exec_module(bench)

TASKS = [task.name for task in bench.tasks(bench.TINY, np.random.default_rng(0))]


@pytest.mark.parametrize("task", TASKS)
def test_fcl_program_agrees_with_the_reference_kernel(task):
    (row,) = bench.measure(bench.TINY, runs=1, device=open_device(), only={task})
    assert row["task"] == task and row["fcl_ms"] > 0 and row["reference_ms"] > 0


def test_matmul_compiles_to_opencl():
    assert bench.compile_speed(bench.TINY, repeats=1) > 0


@pytest.mark.parametrize("task", [t for t in TASKS if t != "copy"])
def test_fcl_program_is_clean_under_oclgrind(task, capfd):
    # Oclgrind reports data races between the work-items of a group (a barrier too few), reads
    # out of bounds and of uninitialized memory; the reference kernels run too, and must be clean.
    capfd.readouterr()
    bench.measure(bench.TINY, runs=1, device=open_device("oclgrind"), only={task})
    findings = parse_reports(capfd.readouterr().err, [])
    assert not findings, "\n".join(f"{f.kernel}: {f.message}" for f in findings)
