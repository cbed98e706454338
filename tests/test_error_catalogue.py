"""The error catalogue: every kind of error FCL reports, through the `fcl` command and in the
Jupyter kernel.

One table row per kind of error (and back end, where the two report it differently). For each
row the `fcl` command, run as a real process, must exit with status 1 and print the error on
stderr as `file:line:col: error: message`, the source line and a caret under the offending text,
with no traceback; the Jupyter kernel, driven through jupyter_client, must reply with the same
error located in the cell, and keep every earlier definition while adding none of the failed
cell's. OpenCL rows run on the default device; where a number depends on the device (its memory
sizes), the message is matched as a pattern.

Two kinds cannot come from a program text and have their own tests below: an OpenCL build
failure (the compiler never generates code that does not build, so the test corrupts generated
code) and an interrupt (Ctrl-C, i.e. SIGINT, while a program runs).
"""
from __future__ import annotations

import io
import os
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from errors_shown import underlined, underlined_in
from fcl import pipeline
from fcl.errors import FCLError, Source
from fcl.runtime.host import run_compiled
from fcl.session import Session

# test_kernel's kernel, one per module (test_kernel registers the FCL kernelspec through
# JUPYTER_PATH).
from kernels import execute, result_text

MISSING_CSV = "/nonexistent-fcl-test-dir/numbers.csv"
MISSING_NPY = "/nonexistent-fcl-test-dir/samples.npy"
N = r"\d+"  # a device-dependent byte count


@dataclass
class Case:
    kind: str
    text: str
    message: str  # a regular expression for the whole message
    line: int
    col: int
    marked: str  # the source text the caret underlines
    backend: str = "check"  # check (front end only), interp or opencl

    @property
    def id(self) -> str:
        return self.kind if self.backend == "check" else f"{self.kind}-{self.backend}"

    def command(self, path: Path) -> list[str]:
        if self.backend == "check":
            return ["check", str(path)]
        return ["run", "--backend", self.backend, str(path)]


OUT_OF_BOUNDS = ("val main = do<grid> {\n"
                 "  xs <- forcePull<grid> (generate 4 (fn i => i)) ;\n"
                 "  forceAndPrint 3 (push<grid> (generate 3"
                 " (fn i => index xs (i * 1000000000)))) }\n")
DIVISION = ("val main = do<grid> {\n"
            "  xs <- forcePull<grid> (generate 4 (fn i => i - 2)) ;\n"
            "  forceAndPrint 4 (push<grid> (generate 4 (fn i => 100 / index xs i))) }\n")
# Six arrays of 2^31 - 1 doubles (16 GiB each): more than one buffer or the whole memory of any
# device, and more than the interpreter handles at once.
TOO_LARGE = ("val main = do<grid> {\n"
             "  a <- forcePull<grid> (generate 2147483647 (fn i => i2d i)) ;\n"
             + "".join(f"  {v} <- forcePull<grid> (mapPull (fn x => addd x 1.0) {u}) ;\n"
                       for u, v in zip("abcde", "bcdef")) +
             "  forceAndPrintDouble 1 (push<grid> f) }\n")
# Chunks of a million ints per work-group: 4 MB of local memory, more than any device has.
LOCAL_MEMORY = ("fun rev c = do<block> { a <- forcePull<block> c ; pushM<block> (reverse a) }\n"
                "val main = do<grid> {\n"
                "  ys <- splitUp 1000000 (iota 2000000) |> mapPull rev |> concat<block> 1000000 ;\n"
                "  forceAndPrint 2 ys }\n")
# Work-group 1 places its elements 100000000 apart.
PLACED_OUTSIDE = ("val main = do<grid> {\n"
                  "  ys <- generate 2 (fn b => pushM<block> (generate 32 (fn i => i + b)))\n"
                  "        |> interleave<block> 32 (fn ij => fst ij * 32 + snd ij * 100000000) ;\n"
                  "  forceAndPrint 32 ys }\n")
READ_CSV = (f'val main = do<grid> {{\n  xs <- readIntCSV "{MISSING_CSV}" ;\n'
            "  forceAndPrint 1 (push<grid> xs) }\n")
STREAM_FILE = (f'val main = do<grid> {{\n  s <- foldSeq addi 0 (streamFile "{MISSING_NPY}") ;\n'
               "  forceAndPrint 1 (push<grid> (generate 1 (fn i => s))) }\n")
ZIPPED = ("val main = do<grid> {\n  s <- foldSeq addi 0 (zipWithSeq addi (streamIn (iota 5)) "
          "(streamIn (iota 4))) ;\n  forceAndPrint 1 (push<grid> (generate 1 (fn i => s))) }\n")

CASES = [
    Case("lexical", "val x = 1 $ 2\n", re.escape("unexpected character `$`"), 1, 11, "$"),
    Case("unclosed-comment", "val x = 1\n(* never closed\nval y = 2\n",
         re.escape("this comment is never closed with `*)`"), 2, 1, "(*"),
    Case("parse", "val = 3\n", re.escape("unexpected `=`; expected a name"), 1, 5, "="),
    Case("parse", "sig f : int -> Program <grid int\nfun f x = return<grid> x\n",
         re.escape("unexpected `int`; expected `>` to close the level list `<grid`"), 1, 30,
         "int"),
    Case("scope", "fun square x = x * x\nval y = sqaure 3\n",
         re.escape("`sqaure` is not defined"), 2, 9, "sqaure"),
    Case("type", "val x = addi 1 2.5\n",
         re.escape("`addi` expects its 2nd argument to have type `int`, but this has type "
                   "`double`"), 1, 16, "2.5"),
    Case("level", "val p = force<grid> (push<block> (iota 4))\n",
         re.escape("`force` expects its 1st argument to have type `['a]<grid>`, but this has "
                   "type `[int]<block>`"), 1, 22, "push<block> (iota 4)"),
    Case("level", "val main = do<gird> { forceAndPrint 1 (push<grid> (iota 1)) }\n",
         re.escape("`gird` is not a level"), 1, 15, "gird"),
    Case("kind", "val p = push<block> (generate 3 (fn i => (i, iota i)))\n",
         re.escape("`[int]` is not a record of base types (int, double, float, bool, or pairs of "
                   "them), but the elements of push arrays must be"), 1, 22,
         "generate 3 (fn i => (i, iota i))"),
    # Run-time checks: the same message, values and location on both back ends.
    *(Case("out-of-bounds", OUT_OF_BOUNDS,
           re.escape("index 1000000000 is out of bounds for an array of length 4 "
                     "(in work-item 1)"), 3, 52, "index xs (i * 1000000000)", backend)
      for backend in ("interp", "opencl")),
    *(Case("placed-outside", PLACED_OUTSIDE,
           re.escape("an element was placed at index 100000000, outside the array of length 64 "
                     "(in work-group 0, work-item 1)"), 3, 12, "interleave<block>", backend)
      for backend in ("interp", "opencl")),
    *(Case("division-by-zero", DIVISION,
           re.escape("division by zero: 100 / 0 (in work-item 2)"), 3, 52, "100 / index xs i",
           backend) for backend in ("interp", "opencl")),
    Case("too-large", TOO_LARGE,
         re.escape("this needs 2147483647 elements at once, more than the interpreter's limit "
                   "of 67108864 (2^26)"), 2, 8,
         "forcePull<grid> (generate 2147483647 (fn i => i2d i))", "interp"),
    # Which array is the first that does not fit depends on the device; each is one line.
    Case("too-large", TOO_LARGE,
         r"cannot allocate 2147483647 elements \(17179869176 bytes\): (the device allows at most "
         rf"{N} bytes in one buffer|with the {N} bytes already allocated, that is more than the "
         rf"device's {N} bytes of memory)", -1, 8, "forcePull<grid> ", "opencl"),
    Case("local-memory", LOCAL_MEMORY,
         rf"this kernel needs 4000000 bytes of local memory per work-group, but the device has {N}",
         3, 9, "splitUp 1000000 (iota 2000000) |> mapPull rev |> concat<block> 1000000",
         "opencl"),
    Case("read-missing-file", READ_CSV,
         re.escape(f"cannot read `{MISSING_CSV}`: No such file or directory"), 2, 9,
         f'readIntCSV "{MISSING_CSV}"', "interp"),
    Case("read-missing-file", READ_CSV,
         re.escape(f"cannot read `{MISSING_CSV}`: No such file or directory"), 2, 9,
         f'readIntCSV "{MISSING_CSV}"', "opencl"),
    *(Case("read-missing-file", STREAM_FILE,
           re.escape(f"cannot read `{MISSING_NPY}`: No such file or directory"), 2, 24,
           f'streamFile "{MISSING_NPY}"', backend) for backend in ("interp", "opencl")),
    *(Case("sequence-lengths", ZIPPED,
           re.escape("zipWithSeq was given sequences of 5 and 4 elements: they must be as long"),
           2, 24, "zipWithSeq addi (streamIn (iota 5)) (streamIn (iota 4))", backend)
      for backend in ("interp", "opencl")),
]


def check_location(case: Case, line: int, col: int, marked: str) -> None:
    if case.line == -1:  # any line of the program that starts with the marked text
        assert case.text.splitlines()[line - 1][col - 1:].startswith(case.marked)
    else:
        assert (line, col) == (case.line, case.col)
        assert marked == case.marked


def test_every_kind_is_in_the_catalogue():
    kinds = {case.kind for case in CASES}
    assert kinds == {"lexical", "unclosed-comment", "parse", "scope", "type", "level", "kind",
                     "out-of-bounds", "placed-outside", "division-by-zero", "too-large",
                     "local-memory",
                     "read-missing-file", "sequence-lengths"}
    # Run-time errors are caught by both back ends.
    for kind in kinds - {"lexical", "unclosed-comment", "parse", "scope", "type", "level", "kind",
                         "local-memory"}:
        assert {c.backend for c in CASES if c.kind == kind} == {"interp", "opencl"}, kind


# ---- the `fcl` command ------------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
@pytest.mark.slow  # 0.7-3.6 s each, a process
def test_cli_reports_the_error_with_exit_status_1(case, tmp_path):
    path = tmp_path / "t.fcl"
    path.write_text(case.text)
    result = subprocess.run([sys.executable, "-m", "fcl", *case.command(path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    # Devices may print their own notes (PoCL: "1 warning generated.") before the error.
    lines = result.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{path}:"))
    match = re.fullmatch(rf"{re.escape(str(path))}:(\d+):(\d+): error: (.*)", lines[start])
    assert match and re.fullmatch(case.message, match.group(3)), lines[start]
    check_location(case, int(match.group(1)), int(match.group(2)),
                   underlined_in("\n".join(lines[start:])))


@pytest.mark.slow  # 0.7-1.7 s, a process
def test_cli_reports_a_missing_source_file(tmp_path):
    result = subprocess.run([sys.executable, "-m", "fcl", "run", str(tmp_path / "nope.fcl")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr == (f"error: cannot read `{tmp_path / 'nope.fcl'}`: "
                             "No such file or directory\n")


# ---- the Jupyter kernel -----------------------------------------------------------------------

@pytest.mark.slow  # the module's kernel (2 s to start) for 20 cases of 0.1-0.3 s
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_kernel_reports_the_error_and_keeps_its_state(case, kernel):
    _, kc = kernel
    backend = "interp" if case.backend == "check" else case.backend
    execute(kc, f"%config backend={backend}")
    assert execute(kc, "val kept = 7")[0]["status"] == "ok"
    # The failing cell also redefines `kept` and defines `lost`: neither may survive.
    reply, messages = execute(kc, case.text + "val kept = 8\nval lost = 1\n")
    assert reply["status"] == "error" and reply["ename"] == "FCLError", reply
    assert re.fullmatch(case.message, reply["evalue"]), reply["evalue"]
    error = next(m for m in messages if m["msg_type"] == "error")["content"]
    match = re.fullmatch(r"<cell \d+>:(\d+):(\d+): error: .*", error["traceback"][0])
    assert match, error["traceback"][0]
    check_location(case, int(match.group(1)), int(match.group(2)),
                   underlined_in("\n".join(error["traceback"])))
    assert result_text(execute(kc, "kept")[1]) == "7"
    assert execute(kc, "lost")[0]["status"] == "error"


@pytest.mark.slow  # 0.6-0.7 s, a process
def test_a_warning_is_shown_by_the_cli_and_the_kernel(kernel, tmp_path):
    text = "sig g : int\nval f = 1\n"
    warning = ":1:5: warning: this signature names `g` but is followed by the definition of `f`"
    path = tmp_path / "t.fcl"
    path.write_text(text)
    result = subprocess.run([sys.executable, "-m", "fcl", "check", str(path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr.startswith(f"{path}{warning}\n")
    _, kc = kernel
    reply, messages = execute(kc, text)
    assert reply["status"] == "ok"
    stderr = "".join(m["content"]["text"] for m in messages
                     if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")
    assert re.match(rf"<cell \d+>{re.escape(warning)}\n", stderr), stderr


# ---- OpenCL build failures ----------------------------------------------------------------------

def test_an_opencl_build_failure_is_shown_at_the_fcl_line_with_the_build_log():
    text = ("val main = do<grid> {\n"
            "  xs <- forcePull<grid> (generate 10 (fn i => i * 3)) ;\n"
            "  forceAndPrint 2 (push<grid> (map (fn x => x + 1) xs)) }\n")
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    # Shaped for one kind of device, so that it is not reshaped (from the IL) for the device.
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(target="gpu"))
    # Break the store of line 3's kernel with an undeclared name, as a compiler bug would.
    lines = compiled.source.splitlines()
    (cl_line,) = [n for n, line in enumerate(lines, 1) if "+ 1" in line]
    lines[cl_line - 1] = lines[cl_line - 1].replace(";", " + notDeclared;")
    compiled.source = "\n".join(lines) + "\n"
    with pytest.raises(FCLError) as info:
        run_compiled(compiled, out=io.StringIO(), err=io.StringIO())
    err = info.value
    assert err.message == ("the OpenCL compiler rejected the generated code: use of undeclared "
                           f"identifier 'notDeclared' (OpenCL line {cl_line})")
    assert (err.span.line, err.span.col) == (3, 3)
    assert underlined(err) == "forceAndPrint 2 (push<grid> (map (fn x => x + 1) xs))"
    log = err.hints[-1]
    assert log.startswith("the build log:") and "notDeclared" in log
    assert "clBuildProgram failed" not in log


# ---- interrupts ---------------------------------------------------------------------------------

# It prints a line first: once the test has read it, the program is past start-up (a SIGINT
# during Python's imports would end it with a traceback) and about to enter the loop.
ENDLESS = ("val main = do<grid> {\n"
           "  forceAndPrint 1 (push<grid> (generate 1 (fn i => 7))) ;\n"
           "  xs <- while<grid> (fn a => true) (fn a => pushM<grid> (mapPull (fn x => x + 1) a))"
           " (pushM<grid> (generate 1000 (fn i => i))) ;\n"
           "  forceAndPrint 1 (push<grid> xs) }\n")


@pytest.mark.parametrize("backend", ["interp", "opencl"])
@pytest.mark.slow  # 1-3 s each
def test_cli_interrupted_exits_130_without_a_traceback(backend, tmp_path):
    path = tmp_path / "t.fcl"
    path.write_text(ENDLESS)
    # SIGINT is ignored in background jobs of a non-interactive shell: restore its default, so
    # the program sees it as it would from a terminal's Ctrl-C.
    command = [sys.executable, "-m", "fcl", "run", "--backend", backend, str(path)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        # Bounds generous enough for a loaded machine: they catch a hang, not slowness.
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "the program printed nothing within 60 s"
        assert process.stdout.readline() == "[7]\n"
        time.sleep(0.3)
        assert process.poll() is None  # still looping
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, out, err) == (130, "", "error: interrupted\n")
