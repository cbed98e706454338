"""The `fcl` command, run as a real process: output formats, options, exit status, stderr."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fcl.runtime.device import open_device

# The console script that `pip install -e .` put next to this Python.
FCL = Path(sys.executable).with_name("fcl")


def fcl(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(FCL), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def assert_clean_failure(result: subprocess.CompletedProcess, first_line: str) -> None:
    """Exit status 1, the error on stderr (first line given), nothing on stdout, no traceback."""
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines()[0] == first_line
    assert "Traceback" not in result.stderr


TYPES_PROGRAM = """\
fun k x y = x
val u = ()
fun mapP<l> f xs = return<l> (push<l> (mapPull f xs))
sig f : int -> int
fun f x = x
"""
TYPES_OUTPUT = """\
k : forall 'a 'b. 'b -> 'a -> 'b
u : ()
mapP : forall 'a 'b <l>. ('b -> 'a) -> ['b] -> Program <l> ['a]<l>
f : int -> int
"""


def test_check_types_prints_name_colon_scheme(tmp_path):
    path = write(tmp_path / "t.fcl", TYPES_PROGRAM)
    result = fcl("check", "--types", "--no-prelude", path, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, TYPES_OUTPUT, "")


@pytest.mark.slow  # 0.6-0.8 s, a process
def test_options_may_follow_the_files(tmp_path):
    path = write(tmp_path / "t.fcl", TYPES_PROGRAM)
    result = fcl("check", path, "--no-prelude", "--types", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, TYPES_OUTPUT)


@pytest.mark.slow  # 0.7-1.2 s, a process
def test_check_types_with_the_prelude_lists_the_prelude_first(tmp_path):
    path = write(tmp_path / "t.fcl", "val five = id 5\n")
    lines = fcl("check", "--types", path, cwd=tmp_path).stdout.splitlines()
    assert lines[0] == "id : forall 'a. 'a -> 'a"
    assert lines[-1] == "five : int"
    assert "iota : int -> [int]" in lines


@pytest.mark.slow  # 0.7-1.1 s, a process
def test_check_without_types_prints_nothing(tmp_path):
    path = write(tmp_path / "t.fcl", TYPES_PROGRAM)
    result = fcl("check", path, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.slow  # 1.4-2 s
def test_no_prelude_hides_prelude_names(tmp_path):
    path = write(tmp_path / "t.fcl", "val n = iota 3\n")
    assert fcl("check", path, cwd=tmp_path).returncode == 0
    result = fcl("check", "--no-prelude", path, cwd=tmp_path)
    assert_clean_failure(result, f"{path}:1:9: error: `iota` is not defined")


def test_type_error_goes_to_stderr_with_excerpt_and_caret(tmp_path):
    path = write(tmp_path / "t.fcl", "val ok = 1\nval x = 1 + 2.0\n")
    result = fcl("check", path, cwd=tmp_path)
    assert_clean_failure(result, f"{path}:2:13: error: `+` expects its 2nd argument to have "
                                 "type `int`, but this has type `double`")
    assert result.stderr.splitlines()[1:3] == ["    2 | val x = 1 + 2.0",
                                               "      |             ^~~"]


@pytest.mark.slow  # 1-1.2 s
def test_missing_file(tmp_path):
    result = fcl("check", "nothere.fcl", cwd=tmp_path)
    assert_clean_failure(result, "error: cannot read `nothere.fcl`: No such file or directory")


@pytest.mark.slow  # 1.1 s
def test_directory_instead_of_a_file(tmp_path):
    result = fcl("check", tmp_path, cwd=tmp_path)
    assert_clean_failure(result, f"error: cannot read `{tmp_path}`: Is a directory")


@pytest.mark.slow  # 0.7-1.3 s, a process
def test_non_utf8_file(tmp_path):
    (tmp_path / "bad.fcl").write_bytes(b"val x = \xff\xfe 1\n")
    result = fcl("check", "bad.fcl", cwd=tmp_path)
    assert_clean_failure(result, "error: cannot read `bad.fcl`: it is not UTF-8 text")


@pytest.mark.slow  # 9-12 s
def test_deeply_nested_input_checks_and_runs(tmp_path):
    path = write(tmp_path / "t.fcl", "val deep = " + "fn a => " * 3000 + "1\n")
    result = fcl("check", path, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    chain = "val x0 = 1\n" + "".join(f"val x{k} = x{k - 1} + 1\n" for k in range(1, 10001))
    path = write(tmp_path / "chain.fcl", chain + "val main = forceAndPrint 2 (push<grid> "
                 "(generate 2 (fn i => x10000 + i)))\n")
    for backend in ("interp", "opencl"):
        result = fcl("run", "--backend", backend, path, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (0, "[10001,10002]\n"), result.stderr


@pytest.mark.slow  # 0.7-0.9 s, a process
def test_signature_name_mismatch_is_a_warning(tmp_path):
    path = write(tmp_path / "t.fcl", "sig g : int\nval f = 1\n")
    result = fcl("check", path, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stderr.splitlines()[0] == (f"{path}:1:5: warning: this signature names `g` but "
                                             "is followed by the definition of `f`")


# `fcl run` runs generated OpenCL by default; `--backend interp` runs the reference interpreter.
@pytest.mark.parametrize("backend", [pytest.param([], marks=pytest.mark.slow),  # 1.3-1.8 s
                                     ["--backend", "interp"]], ids=["opencl", "interp"])
def test_run_prints_forced_arrays_exactly(tmp_path, backend):
    path = write(tmp_path / "t.fcl",
                 "val main = do<grid> {\n"
                 "  forceAndPrint 3 (push<grid> (generate 3 (fn i => i * i - 1)));\n"
                 "  forceAndPrintDouble 2 (push<grid> (generate 2 (fn i => divd (i2d i) 3.0)))\n"
                 "}\n")
    result = fcl("run", *backend, path, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, "[-1,0,3]\n[0.00000,0.33333]\n",
                                                                 "")


@pytest.mark.slow  # 1.5-2 s
def test_run_reads_files_in_order(tmp_path):
    lib = write(tmp_path / "lib.fcl", "fun square x = x * x\n")
    use = write(tmp_path / "use.fcl",
                "val main = forceAndPrint 4 (push<grid> (generate 4 square))\n")
    assert fcl("run", "--backend", "interp", lib, use, cwd=tmp_path).stdout == "[0,1,4,9]\n"
    assert_clean_failure(fcl("run", "--backend", "interp", use, lib, cwd=tmp_path),
                         f"{use}:1:52: error: `square` is not defined")


@pytest.mark.slow  # 0.7-1.1 s, a process
def test_run_error_keeps_earlier_output_and_exits_1(tmp_path):
    # The interpreter traps division by zero (OpenCL, like the original, does not).
    path = write(tmp_path / "t.fcl",
                 "val main = do<grid> { forceAndPrint 2 (push<grid> (iota 2));\n"
                 "  forceAndPrint 1 (push<grid> (generate 1 (fn i => 1 / i))) }\n")
    result = fcl("run", "--backend", "interp", path, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == "[0,1]\n"
    assert result.stderr.splitlines()[0] == \
        f"{path}:2:52: error: division by zero: 1 / 0 (in work-item 0)"
    assert "Traceback" not in result.stderr


@pytest.mark.slow  # 0.7-1.3 s, a process
def test_run_without_main(tmp_path):
    path = write(tmp_path / "t.fcl", "val x = 1\n")
    assert_clean_failure(fcl("run", path, cwd=tmp_path),
                         f"error: there is no `main` to run in {path}: define `val main = ...` "
                         "of type `Program <grid> 'a`")


@pytest.mark.slow  # 0.7-0.8 s, a process
def test_read_int_csv_path_is_relative_to_the_working_directory(tmp_path):
    (tmp_path / "data.csv").write_text("4, 5,6\n7\n")
    path = write(tmp_path / "t.fcl", 'val main = do<grid> { xs <- readIntCSV "data.csv"; '
                                     "forceAndPrint 4 (push<grid> xs) }\n")
    assert fcl("run", "--backend", "interp", path, cwd=tmp_path).stdout == "[4,5,6,7]\n"


@pytest.mark.parametrize("command, stage", [
    (["run"], "to compile"),
    (["run", "--backend", "interp"], "for the interpreter to run"),
    (["compile"], "to compile"),
])
@pytest.mark.slow  # 0.8-1.8 s each
def test_program_that_checks_but_nests_deeply_never_crashes(tmp_path, command, stage):
    # 150 nested lets type-check; monomorphizing, lowering and interpreting them may still
    # exhaust Python's stack, which must then be a located error rather than a traceback.
    body = "".join(f"let a{k + 1} = a{k} + 1 in " for k in range(150)) + "a150"
    path = write(tmp_path / "t.fcl", "val main = forceAndPrint 1 (push<grid> (generate 1 "
                                     f"(fn a0 => {body})))\n")
    result = fcl(*command, path, cwd=tmp_path)
    if result.returncode != 0:
        assert_clean_failure(result, f"{path}:1:5: error: the program is nested too deeply {stage}")
    elif command[0] == "run":
        assert result.stdout == "[150]\n"


@pytest.mark.parametrize("args", [["check"], ["frobnicate", "x.fcl"]])
def test_usage_errors_exit_2(tmp_path, args):
    result = fcl(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: fcl")


NAIVE_TRANSPOSE = """\
val main = do<grid> {
  xs <- forcePull<grid> (iota (64 * 64));
  forcePull<grid> (transpose 64 64 xs)
}
"""


@pytest.mark.slow  # 2-3 s
def test_costs_prints_the_table(tmp_path):
    program = write(tmp_path / "t.fcl", NAIVE_TRANSPOSE)
    result = fcl("costs", program, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["kernel0_line2", "kernel1_line3"]
    # the transpose reads down columns: 32 sectors of 32 lines per warp, where 4 would do
    cells = {label: values for label, *values in (re.split(r"\s{2,}", line) for line in lines)}
    assert cells["sectors per warp load (ideal)"] == ["–", "32 (4)"]
    assert cells["lines per warp load"] == ["–", "32"]
    assert "\nCounted in work-group 2 " in fcl("costs", "--group", "2", program,
                                               cwd=tmp_path).stdout
    assert "    warp 0:     0 + {(32:64)}" in result.stdout  # each access follows the table


@pytest.mark.slow  # 8 s
def test_costs_predicts_occupancy_and_time_on_the_gpu_named(tmp_path):
    program = write(tmp_path / "t.fcl", "val main = do<grid> {\n"
                    "  xs <- forcePull<grid> (iota (1024 * 1024));\n"
                    "  forcePull<grid> (transpose 1024 1024 xs)\n}\n")

    def cells(*args: str) -> dict[str, list[str]]:
        result = fcl("costs", *args, program, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.split("\n\n")[0].splitlines()
        return {label: values for label, *values in (re.split(r"\s{2,}", line) for line in lines)}

    generic, h100 = cells(), cells("--gpu", "H100")
    assert generic["occupancy on generic GPU"] == ["100% (threads)"] * 2
    assert h100["occupancy on H100 SXM5"] == ["100% (threads)"] * 2
    assert h100["registers per work-item (est.)"] == ["13", "13"]
    # tests/test_gpu_model.py works these out: the fill's 4.19 MB at 64.6% of 3.35 TB/s and the
    # transpose's 37.7 MB at all of it, 3 µs per launch on top.
    assert h100["predicted on H100 SXM5"] == ["4.94 µs (launch)", "14.3 µs (DRAM)"]
    assert generic["predicted on generic GPU"] != h100["predicted on H100 SXM5"]
    t4 = fcl("costs", "--gpu", "t4", program, cwd=tmp_path).stdout
    assert "\nPredicted on NVIDIA T4 16 GB (Turing, TU104), compute capability 7.5: the program " \
           "takes 137 µs, 3 µs per launch included;" in t4
    for command in ("costs", "memory"):
        assert_clean_failure(fcl(command, "--gpu", "v100", program, cwd=tmp_path),
                             "error: no GPU named `v100`; the known GPUs are: a100, generic, "
                             "h100, l4, rtx4090, t4")
    assert fcl("memory", "--gpu", "l4", "--kernel", "0", program, cwd=tmp_path).returncode == 0
    # Next to the prediction, the time measured on the device that ran it, labelled as such.
    measured = [float(v.removesuffix(" ms")) for v in h100["measured on this device"]]
    assert len(measured) == 2 and all(ms > 0 for ms in measured)
    note = re.search(r"\nMeasured on (.+) \(the device that ran it, not the GPU predicted for\): "
                     r"the kernels take ([\d.]+) ms per run, median of (\d+) runs by OpenCL "
                     r"profiling events, spread \d+%; host overhead [\d.]+ ms per run apart\.\n",
                     t4)
    assert note and note.group(1) == open_device().name and int(note.group(3)) >= 1


@pytest.mark.slow  # 4-6 s
def test_memory_writes_svg_per_kernel_and_prints_text(tmp_path):
    program = write(tmp_path / "t.fcl", NAIVE_TRANSPOSE)
    result = fcl("memory", "--pitch", "64", "--svg", "m.svg", program, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "warp 0's first access: 32 work-items touch 32 sectors of 32 bytes (ideal 4) in 32 " \
           "lines of 128 bytes" in result.stdout
    for kernel in ("kernel0_line2", "kernel1_line3"):
        assert (tmp_path / f"m-{kernel}.svg").read_text().startswith("<svg")
    one = fcl("memory", "--kernel", "1", "--warp", "7", "--svg", "one.svg", program, cwd=tmp_path)
    assert one.stdout.startswith("kernel1_line3: work-group 0 of 16, 256 work-items, warp 7")
    assert "warp 7 outlined" in (tmp_path / "one.svg").read_text()
    assert_clean_failure(fcl("memory", "--warp", "8", program, cwd=tmp_path),
                         "error: warp 8 does not exist: a work-group of 256 work-items has "
                         "warps 0 to 7")


@pytest.mark.slow  # 2 s
def test_graph_prints_dot_or_writes_svg(tmp_path):
    program = write(tmp_path / "t.fcl", NAIVE_TRANSPOSE)
    result = fcl("graph", program, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("digraph {")
    assert 'label="kernel1_line3: parallel for' in result.stdout
    assert fcl("graph", "--kernel", "0", "--svg", "g.svg", program, cwd=tmp_path).returncode == 0
    assert "kernel0_line2" in (tmp_path / "g.svg").read_text()
    assert_clean_failure(fcl("graph", "--kernel", "kernel9", program, cwd=tmp_path),
                         "error: no kernel `kernel9`; the program's kernels are: kernel0_line2, "
                         "kernel1_line3")


@pytest.mark.slow  # 1.4-2.3 s
def test_graph_without_graphviz_says_so(tmp_path):
    program = write(tmp_path / "t.fcl", NAIVE_TRANSPOSE)

    def without_dot(*args: str) -> subprocess.CompletedProcess:
        # `fcl` is called by its full path; on this PATH `dot` is not found.
        return subprocess.run([str(FCL), "graph", *args, str(program)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": str(tmp_path)})

    result = without_dot("--svg", "g.svg")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Graphviz's `dot` program is not installed" in result.stderr
    printed = without_dot()
    assert printed.returncode == 0 and printed.stdout.startswith("digraph {")


@pytest.mark.slow  # 0.7-1.3 s, a process
def test_asking_for_the_oclgrind_device_points_at_check(tmp_path):
    path = write(tmp_path / "t.fcl", "val main = forceAndPrint 1 (push<grid> (iota 1))\n")
    env = {name: value for name, value in os.environ.items() if name != "OCL_ICD_VENDORS"}
    result = subprocess.run([str(FCL), "run", "--device", "oclgrind", str(path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "`fcl run --check prog.fcl`" in result.stderr
    assert "restart the kernel" not in result.stderr


STEPPED = "val main = do<grid> { r <- concat<block> 4 (generate 8 (fn b => pushM<block> " \
    "(generate 4 (fn i => index (generate 32 (fn j => j * 2)) (b * 4 + i))))) ; " \
    "forceAndPrint 32 r }\n"


def test_list_steps_needs_no_file_and_names_every_step(tmp_path):
    from fcl.pipeline import stage_names
    listed = fcl("compile", "--list-steps", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stderr == ""
    assert [line.split()[0] for line in listed.stdout.splitlines()] == stage_names()


def test_after_prints_the_program_after_each_step(tmp_path, capsys):
    from fcl.cli import main as cli_main
    from fcl.pipeline import stage_names
    path = write(tmp_path / "p.fcl", STEPPED)

    def printed(*args: str) -> str:
        assert cli_main(["compile", *args, str(path)]) == 0
        return capsys.readouterr().out
    shown = {step: printed("--after", step) for step in stage_names()}
    assert all(text.strip() for text in shown.values())
    assert "failIf" in shown["lower"] and "failIf" not in shown["prune"]
    assert "distribute<grid>" in shown["short-circuit"]
    assert "kernel kernel0_line1(arr_1)" in shown["checks"]
    assert shown["emit"] == printed() == fcl("compile", "--after", "emit", path,
                                              cwd=tmp_path).stdout
    assert shown["unnest"] == printed("--dump-il")


def test_after_an_unknown_step_suggests_one(tmp_path):
    path = write(tmp_path / "p.fcl", STEPPED)
    result = fcl("compile", "--after", "tile", path, cwd=tmp_path)
    assert_clean_failure(result, "error: there is no compiler step `tile`")
    assert "did you mean `tiles`?" in result.stderr
