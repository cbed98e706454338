"""Generated kernels under Oclgrind: no data races, out-of-bounds accesses or uninitialized reads.

`fcl run --check` runs in a child process; the many example programs run in this process on the
Oclgrind device (conftest.py turns its checks on), with its reports read from stderr.
"""
import io
import subprocess
import sys
from pathlib import Path

import pytest

import test_opencl
from fcl import driver
from fcl.errors import Source
from fcl.opencl.check import parse_reports
from fcl.session import Session

TESTS = Path(__file__).parent
EXAMPLES = sorted((TESTS / "programs").glob("*.fcl")) + sorted((TESTS / "thesis").glob("*.fcl"))
# Programs that need a file in their working directory, or are too big for a simulator.
SKIP = {"readIntCSV.fcl", "scan.fcl"}

PROGRAMS = {
    "block-while": test_opencl.CHUNKED_SUMS,
    "thread-seqfor": test_opencl.THREAD_SCANS,
    "tiled-transpose": test_opencl.TILED_TRANSPOSE,
    "doubles-power": test_opencl.DOUBLES_AND_POWER,
    "grid-while-host-scalar": test_opencl.GRID_LOOP_SCALAR,
    "shared-local-memory": test_opencl.THREE_STAGES,
}


def check(tmp_path: Path, text: str, *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "prog.fcl"
    src.write_text(text)
    return subprocess.run([sys.executable, "-m", "fcl", "run", "--check", *flags, str(src)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_example_kernels_are_clean_under_oclgrind(tmp_path, name):
    result = check(tmp_path, PROGRAMS[name], "--block-size", "32")
    assert result.returncode == 0, result.stderr
    assert "Oclgrind" not in result.stderr
    assert result.stdout.startswith("[")


def test_a_race_between_work_groups_is_reported_at_the_interleave(tmp_path):
    racy = ("val main = do<grid> {\n"
            "  ys <- generate 2 (fn b => pushM<block> (generate 32 (fn i => i + b)))\n"
            "        |> interleave<block> 32 (fn ij => snd ij) ;\n"
            "  forceAndPrint 32 ys }\n")
    result = check(tmp_path, racy, "--block-size", "32")
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'prog.fcl'}:3:12: error: Oclgrind: Write-write data race")


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name not in SKIP], ids=lambda p: p.name)
def test_every_example_program_is_clean_under_oclgrind(path, capfd):
    session = Session.new()
    session.add_file(Source(str(path), path.read_text()))
    root = driver.main_root(session)
    options = driver.CompileOptions(block_size=32)
    table = driver.compile_opencl(session, root, options).line_table
    capfd.readouterr()
    driver.run_opencl(session, root, options, device="oclgrind", out=io.StringIO(),
                      err=io.StringIO())
    findings = parse_reports(capfd.readouterr().err, table)
    assert not findings, "\n".join(f.as_error().render() for f in findings)
