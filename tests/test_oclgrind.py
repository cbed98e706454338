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

from fcl import pipeline
from fcl.errors import Source
from fcl.runtime.oclgrind import parse_reports
from fcl.session import Session
from fclgen import SEEDS, programs
from marks import sampled
from opencl_programs import (
    CHUNKED_SUMS,
    DOUBLES_AND_POWER,
    GRID_LOOP_SCALAR,
    MANY_CHUNK_SUMS,
    OPENCL_PROGRAMS,
    THREAD_SCANS,
    THREE_STAGES,
    TILED_TRANSPOSE,
)
from runs import run_interp

TESTS = Path(__file__).parent
EXAMPLES = sorted((TESTS / "programs").glob("*.fcl")) + sorted((TESTS / "thesis").glob("*.fcl"))
# Programs that need a file in their working directory, or are too big for a simulator: they
# have tests of their own below.
SKIP = {"readIntCSV.fcl", "scan.fcl", "streamFile.fcl"}

PROGRAMS = {
    "block-while": CHUNKED_SUMS,
    "thread-seqfor": THREAD_SCANS,
    "tiled-transpose": TILED_TRANSPOSE,
    "doubles-power": DOUBLES_AND_POWER,
    "grid-while-host-scalar": GRID_LOOP_SCALAR,
    "shared-local-memory": THREE_STAGES,
}


def check(tmp_path: Path, text: str, *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "prog.fcl"
    src.write_text(text)
    return subprocess.run([sys.executable, "-m", "fcl", "run", "--check", *flags, str(src)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.slow  # 1.7-3.2 s each
def test_example_kernels_are_clean_under_oclgrind(tmp_path, name):
    result = check(tmp_path, PROGRAMS[name], "--block-size", "32")
    assert result.returncode == 0, result.stderr
    assert "Oclgrind" not in result.stderr
    assert result.stdout.startswith("[")


GRID_RUNS = """val main = do<grid> {
  xs <- forcePull<grid> (generate 5000 (fn i => i * 3 - 7)) ;
  ys <- forcePull<grid> (map (fn x => x / 2) (reverse xs)) ;
  forceAndPrint 5000 (push<grid> ys) }
"""


@pytest.mark.parametrize("text", [GRID_RUNS, MANY_CHUNK_SUMS], ids=["grid-loop", "work-groups"])
@pytest.mark.slow  # 1-2 s each
def test_the_cpu_shape_s_runs_of_consecutive_iterations_are_clean_under_oclgrind(tmp_path,
                                                                                  text):
    # Each work-item (a grid loop) or work-group (serial) runs consecutive iterations, the
    # last run cut short: Oclgrind sees no access outside an array and no race.
    result = check(tmp_path, text, "--target", "cpu", "--block-size", "4")
    assert result.returncode == 0, result.stderr
    assert "Oclgrind" not in result.stderr
    assert result.stdout == run_interp(text)


@pytest.mark.slow  # 1.7-2.5 s
def test_a_race_between_work_groups_is_reported_at_the_interleave(tmp_path):
    racy = ("val main = do<grid> {\n"
            "  ys <- generate 2 (fn b => pushM<block> (generate 32 (fn i => i + b)))\n"
            "        |> interleave<block> 32 (fn ij => snd ij) ;\n"
            "  forceAndPrint 32 ys }\n")
    result = check(tmp_path, racy, "--block-size", "32")
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'prog.fcl'}:3:12: error: Oclgrind: Write-write data race")


def oclgrind_findings(text: str, name: str, capfd, block_size: int = 32,
                      target: str = "auto") -> str:
    """What Oclgrind reports about the program's kernels, as FCL errors ('' if nothing)."""
    session = Session.new()
    session.add_file(Source(name, text))
    root = pipeline.main_root(session)
    options = pipeline.CompileOptions(block_size=block_size, target=target)
    compiled = pipeline.compile_program(session, root, options)
    capfd.readouterr()
    pipeline.run_opencl(session, root, options, device="oclgrind", out=io.StringIO(),
                      err=io.StringIO())
    findings = parse_reports(capfd.readouterr().err, compiled)
    return "\n".join(f.as_error().render() for f in findings)


# Each block writes 1 element where 4 are declared. The run-time checks would stop the run at
# the `concat` (an inner array shorter than declared); without them, the 12 elements no
# work-item wrote are printed.
SHORT_INNER = ("val main = do<grid> { a <- concat<block> 4 (generate 4 (fn b => pushM<block> "
               "(generate 1 (fn i => b)))) ; forceAndPrint 16 a }\n")


@pytest.mark.slow  # 1.6-2.6 s
def test_printing_elements_no_work_item_wrote_is_reported_at_the_print(tmp_path):
    result = check(tmp_path, SHORT_INNER, "--unsafe")
    assert result.returncode == 1
    assert result.stdout.startswith("[0,")
    assert result.stderr.splitlines()[0] == (
        f"{tmp_path / 'prog.fcl'}:1:107: error: Oclgrind: reads 12 uninitialized array "
        "elements, the first at index 1")
    assert "Oclgrind found 1 problem(s)" in result.stderr


def checked(text: str, **options) -> tuple[object, list[str]]:
    """The result of a run on Oclgrind in this process, as `%%check` runs a cell, and what
    Oclgrind found, as FCL errors."""
    session = Session.new()
    session.add_file(Source("prog.fcl", text))
    value, findings = pipeline.check_on_oclgrind(
        session, pipeline.main_root(session),
        pipeline.CompileOptions(block_size=32, checks=False, **options), io.StringIO(),
        io.StringIO())
    return value, [f.as_error().render() for f in findings]


def test_a_host_read_of_an_element_no_work_item_wrote_is_reported_at_the_read():
    # `index a 1` sizes an array, so the host reads it; only a[0] and a[4] were written.
    _, findings = checked(
        "val main = do<grid> {\n"
        "  a <- forceM<grid> (concat<block> 4 (generate 2 (fn b => pushM<block> "
        "(generate 1 (fn i => b + 1))))) ;\n"
        "  let n = index a 1 ;\n"
        "  forceAndPrint 2 (push<grid> (generate (n % 4 + 2) (fn i => i))) }\n")
    assert len(findings) == 1
    assert findings[0].startswith("prog.fcl:3:3: error: Oclgrind: reads an uninitialized array "
                                  "element, at index 1\n")


def test_a_result_with_elements_no_work_item_wrote_is_reported_at_main():
    value, findings = checked("val main = forceM<grid> (concat<block> 4 (generate 2 (fn b => "
                              "pushM<block> (generate 1 (fn i => b + 1)))))\n", keep_result=True)
    assert list(value[::4]) == [1, 2]
    assert [f.splitlines()[0] for f in findings] == [
        "prog.fcl:1:5: error: Oclgrind: reads 6 uninitialized array elements, the first at "
        "index 1"]


def test_a_kernel_using_an_unwritten_local_element_notes_the_array_it_reads():
    # Each work-group's `xs` has 8 elements of which its 4 work-items write 1 each; all 8 are
    # then copied out. Oclgrind reports the copy's store of each unwritten one, which the line
    # table locates at the `concat` whose kernel makes the copy; the note points at `xs`.
    _, findings = checked(
        "val main = do<grid> {\n"
        "  a <- concat<block> 8 (generate 2 (fn b => do<block> {\n"
        "    xs <- forceM<block> (concat<thread> 2 (generate 4 (fn t => pushM<thread> "
        "(generate 1 (fn i => t + b))))) ;\n"
        "    pushM<block> (generate 8 (fn i => index xs (7 - i))) })) ;\n"
        "  forceAndPrint 16 a }\n")
    assert len(findings) == 2
    used, printed = findings
    assert used.startswith("prog.fcl:2:8: error: Oclgrind: Uninitialized value written to global "
                           "memory in kernel `kernel0_line2`")
    assert "(8 times)" in used.splitlines()[0]
    assert "prog.fcl:3:11: note: the uninitialized value may come from this array" in used
    assert printed.startswith("prog.fcl:5:3: error: Oclgrind: reads 8 uninitialized array "
                              "elements, the first at index 0")


def test_arrays_a_benchmark_freed_do_not_make_later_arrays_look_uninitialized():
    # Oclgrind hands a freed buffer's address, and what it knew of that buffer's initialized
    # bytes (here 4 elements), to the next buffer allocated.
    _, findings = checked(
        "val main = do<grid> {\n"
        "  benchmark 2 (do<grid> { a <- force (push<grid> (generate 4 (fn i => i))) ; "
        "return () }) ;\n"
        "  forceAndPrint 64 (push<grid> (generate 64 (fn i => 2 * i))) }\n")
    assert findings == []


def test_a_probe_report_per_unwritten_element_makes_one_finding_per_host_read():
    def report(site: int, index: int) -> str:
        return (f"\nUninitialized value written to global memory address 0x{index:x}\n"
                f"\tKernel: fcl_read_{site}\n"
                f"\tEntity: Global({index},0,0) Local(0,0,0) Group({index},0,0)\n"
                "\tAt line 2 (column 51) of input.cl:\n")
    stderr = report(0, 7) + report(0, 3) + report(0, 3) + report(1, 2)
    findings = parse_reports(stderr, [])
    assert [f.message for f in findings] == [
        "reads 2 uninitialized array elements, the first at index 3",
        "reads an uninitialized array element, at index 2"]
    assert all(f.span is None and f.kernel is None for f in findings)
    stderr += "\nOclgrind: 1000 errors generated - suppressing further errors\n"
    assert parse_reports(stderr, [])[1].message == ("reads at least 1 uninitialized array "
                                                     "elements, the first at index 2")


# 2-2.7 s each (a child process on Oclgrind): a sample in the fast loop, all in `make test`.
@pytest.mark.parametrize("path", sampled(sorted((TESTS / "faults").glob("*.fcl")), 4),
                         ids=lambda p: p.stem)
def test_check_reports_the_failed_check_and_no_race_after_it(tmp_path, path):
    # A failed check stops its work-group after its round: no write a stopped run would not make
    # shows up as a race, and the fault is shown as FCL reports it, with its source line.
    text = path.read_text()
    result = check(tmp_path, text)
    line, col, message = text.splitlines()[0].removeprefix("-- expect: ").split(":", 2)
    assert result.returncode == 1
    assert "Oclgrind" not in result.stderr, result.stderr
    assert result.stderr.splitlines()[0] == f"{tmp_path / 'prog.fcl'}:{line}:{col}: error:{message}"
    assert result.stderr.splitlines()[1].startswith(f"{int(line):5} | ")


# 110 programs, 0.05-1.2 s each under Oclgrind: `make test-fast` runs every fourth.
CHECKED_EXAMPLES = [p for p in EXAMPLES if p.name not in SKIP]


@pytest.mark.parametrize("path", sampled(CHECKED_EXAMPLES, 4), ids=lambda p: p.name)
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


# Every program of py and every seed of the fuzzer.
MORE = dict(OPENCL_PROGRAMS)
MORE.update({f"fuzz seed: {name}": text for name, (text, _) in SEEDS.items()})


@pytest.mark.parametrize("name", sorted(MORE))
def test_every_test_program_is_clean_under_oclgrind(name, capfd):
    assert oclgrind_findings(MORE[name], name, capfd) == ""


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(programs(), st.sampled_from([4, 32]))
def test_random_well_typed_programs_are_clean_under_oclgrind(capfd, program, block_size):
    assert oclgrind_findings(program.text, "generated.fcl", capfd, block_size) == ""


@pytest.mark.parametrize("name, cap", [("tiled-transpose", 2048),
                                       pytest.param("block-while", 2048,
                                                    marks=pytest.mark.slow),  # 1.1-1.9 s
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
