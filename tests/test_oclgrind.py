"""Generated kernels under Oclgrind: no data races, out-of-bounds accesses or uninitialized reads.

`fcl run --check` runs in a child process; the many example programs run in this process on the
Oclgrind device (conftest.py turns its checks on), with its reports read from stderr.
"""
import io
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import test_fuzz
import test_opencl
from fcl import pipeline
from fcl.errors import Source
from fcl.opencl.oclgrind import parse_reports
from fcl.session import Session
from fclgen import programs

TESTS = Path(__file__).parent
EXAMPLES = sorted((TESTS / "programs").glob("*.fcl")) + sorted((TESTS / "thesis").glob("*.fcl"))
# Programs that need a file in their working directory, or are too big for a simulator: they
# have tests of their own below.
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


def oclgrind_findings(text: str, name: str, capfd, block_size: int = 32) -> str:
    """What Oclgrind reports about the program's kernels, as FCL errors ('' if nothing)."""
    session = Session.new()
    session.add_file(Source(name, text))
    root = pipeline.main_root(session)
    options = pipeline.CompileOptions(block_size=block_size)
    table = pipeline.compile_program(session, root, options).line_table
    capfd.readouterr()
    pipeline.run_opencl(session, root, options, device="oclgrind", out=io.StringIO(),
                      err=io.StringIO())
    findings = parse_reports(capfd.readouterr().err, table)
    return "\n".join(f.as_error().render() for f in findings)


@pytest.mark.parametrize("path", [p for p in EXAMPLES if p.name not in SKIP], ids=lambda p: p.name)
def test_every_example_program_is_clean_under_oclgrind(path, capfd):
    assert oclgrind_findings(path.read_text(), str(path), capfd) == ""


def test_read_int_csv_program_is_clean_under_oclgrind(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "numbers.csv").write_text("3,-14, 15\n92 -6,0\n53,58,979\n")
    path = TESTS / "programs" / "readIntCSV.fcl"
    assert oclgrind_findings(path.read_text(), str(path), capfd) == ""


def test_thesis_scan_is_clean_under_oclgrind_at_a_small_size(capfd):
    # The thesis's scan works on exactly (2^lgChunkSize)^2 elements: 2^8 chunks of 2^8 in the
    # file, 2^4 chunks of 2^4 here.
    path = TESTS / "thesis" / "scan.fcl"
    text = path.read_text().replace("let lgChunkSize = 8 in", "let lgChunkSize = 4 in")
    text = text.replace("65536", "256")
    assert "lgChunkSize = 4" in text
    assert oclgrind_findings(text, str(path), capfd) == ""


# Every program of test_opencl.py and every seed of the fuzzer.
MORE = {name: text for name, text in vars(test_opencl).items()
        if isinstance(text, str) and "val main" in text}
MORE.update({f"fuzz seed: {name}": text for name, (text, _) in test_fuzz.SEEDS.items()})


@pytest.mark.parametrize("name", sorted(MORE))
def test_every_test_program_is_clean_under_oclgrind(name, capfd):
    assert oclgrind_findings(MORE[name], name, capfd) == ""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(programs(), st.sampled_from([4, 32]))
def test_random_well_typed_programs_are_clean_under_oclgrind(capfd, program, block_size):
    assert oclgrind_findings(program.text, "generated.fcl", capfd, block_size) == ""


@pytest.mark.parametrize("name, cap", [("tiled-transpose", 2048), ("block-while", 2048),
                                       ("tiled-transpose", 3)])
def test_instrumented_kernels_are_clean_under_oclgrind(name, cap, capfd):
    """The kernels `%%costs` and `%%memory` trace log into a buffer of `cap` entries per
    work-item; full or overflowing (cap 3: the log is cut short), they stay inside it."""
    from fcl.analysis.trace import trace_program
    session = Session.new(prelude=True)
    session.add_file(Source(name, PROGRAMS[name]))
    root = pipeline.main_root(session)
    options = pipeline.CompileOptions(block_size=32)
    compiled = pipeline.compile_program(session, root, options)
    capfd.readouterr()
    trace = trace_program(compiled, group=1, device="oclgrind", block_size=32, cap=cap)
    findings = parse_reports(capfd.readouterr().err, [])
    assert not findings, "\n".join(f"{f.kernel}: {f.message}" for f in findings)
    assert trace.kernels and any(k.truncated for k in trace.kernels) == (cap == 3)
