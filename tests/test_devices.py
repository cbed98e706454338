"""A device is used only if it works, and no usable device is not a dead end.

Each test runs FCL in a process on a simulated machine (tests/simulate): a first platform whose
device lists as PoCL's but cannot build anything (as pip's PoCL on an AMD Zen 5), a working PoCL
after it, or no usable device at all. No test names a real device: ids come from the listing.
"""
import json
import subprocess
import sys
import textwrap

import pytest
from jupyter_client.manager import start_new_kernel

from kernels import execute, stdout
from simulate import BROKEN_DEVICE, BUILD_LOG, machine_env

pytestmark = pytest.mark.slow  # every test starts processes that load OpenCL and probe it

PROGRAM = textwrap.dedent("""\
    val main = do<grid> {
      r <- concat<block> 4 (generate 3 (fn b => pushM<block> (generate 4 (fn i => i * b))));
      forceAndPrint 12 r }
    """)
OUTPUT = "[0,0,0,0,0,1,2,3,0,2,4,6]\n"
NOTE = "note: FCL runs on its reference interpreter"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("devices") / "prog.fcl"
    path.write_text(PROGRAM)
    return str(path)


def fcl(machine: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fcl", *args], capture_output=True, text=True,
                          timeout=300, env={**machine_env(machine), **env})


def python(machine: str, script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=300, env=machine_env(machine))


def listing(machine: str) -> list[str]:
    """`fcl devices`'s device lines (not the hints under them)."""
    return [line for line in fcl(machine, "devices").stdout.splitlines()
            if not line.startswith(" ")]


def broken_id() -> str:
    return next(line.split()[0] for line in listing("broken-first") if BROKEN_DEVICE in line)


# ---- a broken device first, a working one after it

def test_fcl_devices_says_why_a_device_is_unusable_and_the_remedy():
    result = fcl("broken-first", "devices")
    assert result.returncode == 0, result.stderr  # one device works
    lines = result.stdout.splitlines()
    broken = next(i for i, line in enumerate(lines) if BROKEN_DEVICE in line)
    assert lines[broken].startswith("0:0  ")
    assert lines[broken].endswith(f"unusable: building a test kernel failed: {BUILD_LOG}")
    assert "pocl-opencl-icd" in lines[broken + 1] and lines[broken + 1].startswith("    hint:")
    working = [line for line in lines if line.endswith("  usable")]
    assert len(working) == 1 and working[0].startswith("1:0  ")


def test_the_default_choice_skips_a_device_that_cannot_build(program):
    result = fcl("broken-first", "run", program)
    assert (result.returncode, result.stdout, result.stderr) == (0, OUTPUT, "")
    chosen = python("broken-first", "from fcl.runtime.device import pick_device\n"
                    "import pyopencl as cl\n"
                    "print(cl.get_platforms().index(pick_device().platform))")
    assert chosen.stdout.strip() == "1", chosen.stderr


@pytest.mark.parametrize("how", ["--device", "PYOPENCL_CTX"])
def test_a_named_device_that_cannot_build_is_a_clear_error_at_once(program, how):
    named = broken_id()
    args, env = (["--device", named], {}) if how == "--device" else ([], {"PYOPENCL_CTX": named})
    result = fcl("broken-first", "run", *args, program, **env)
    assert result.returncode == 1 and result.stdout == ""
    first, *hints = result.stderr.splitlines()
    assert first.startswith(f"error: the OpenCL device `{named}`")
    assert f"({BROKEN_DEVICE}, Portable Computing Language) cannot run programs: building a " \
           f"test kernel failed: {BUILD_LOG}" in first
    assert any("pocl-opencl-icd" in hint for hint in hints)
    assert "a bug in FCL's compiler" not in result.stderr and "Traceback" not in result.stderr


def test_fcl_load_names_the_broken_device_at_once():
    script = textwrap.dedent("""\
        import sys
        import fcl
        from fcl.errors import FCLError
        try:
            fcl.load("val x = 1", device=sys.argv[1])
        except FCLError as err:
            print(err.render())
        """)
    result = python("broken-first", script, broken_id())
    assert f"cannot run programs: building a test kernel failed: {BUILD_LOG}" in result.stdout, \
        result.stderr


# ---- no usable device

@pytest.mark.parametrize("machine, why", [
    ("broken-only", f"{BROKEN_DEVICE}  [Portable Computing Language, CPU]: building a test "
                    f"kernel failed: {BUILD_LOG}"),
    ("none", "no OpenCL device is installed")])
def test_without_a_usable_device_fcl_run_interprets_with_one_note(program, machine, why):
    result = fcl(machine, "run", program)
    assert (result.returncode, result.stdout) == (0, OUTPUT), result.stderr
    assert result.stderr.startswith(NOTE) and result.stderr.count("note:") == 1
    assert why in result.stderr and "hint: " in result.stderr
    assert fcl(machine, "devices").returncode == 1


def test_backend_opencl_asked_for_without_a_device_says_so(program):
    result = fcl("broken-only", "run", "--backend", "opencl", program)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("error: `--backend opencl` needs an OpenCL device, and no "
                                    "OpenCL device here can run programs:")
    assert BUILD_LOG in result.stderr and "runs the reference interpreter" in result.stderr


def test_what_needs_no_device_still_works_without_one(program):
    compiled = fcl("broken-only", "compile", program)
    assert compiled.returncode == 0 and "__kernel void" in compiled.stdout
    graph = fcl("broken-only", "graph", program)
    assert graph.returncode == 0 and graph.stdout.startswith("digraph")
    costs = fcl("broken-only", "costs", program)
    assert costs.returncode == 1
    assert costs.stderr.startswith("error: Counting a program's accesses")
    assert "needs an OpenCL device" in costs.stderr


def test_fcl_load_falls_back_to_the_interpreter_with_one_note():
    script = textwrap.dedent("""\
        import json
        import numpy as np
        import fcl
        from fcl.errors import FCLError
        source = "sig inc : [int] -> Program <grid> [int]\\n" \\
                 "fun inc xs = forcePull<grid> (map (fn x => x + 1) xs)"
        first, second = fcl.load(source), fcl.load(source)
        print(json.dumps([first.backend, second.backend,
                          second.inc(np.arange(5, dtype=np.int32)).tolist()]))
        try:
            fcl.load(source, backend="opencl")
        except FCLError as err:
            print(err.message)
        """)
    result = python("none", script)
    backends, refused = result.stdout.splitlines()
    assert json.loads(backends) == ["interp", "interp", [1, 2, 3, 4, 5]]
    assert refused == '`backend="opencl"` needs an OpenCL device, and no OpenCL device is ' \
                      'installed'
    assert result.stderr.count(NOTE) == 1, result.stderr


# ---- the Jupyter kernel

@pytest.fixture
def kernel_on():
    started = []

    def start(machine: str):
        km, kc = start_new_kernel(kernel_name="fcl", env=machine_env(machine))
        started.append((km, kc))
        return kc

    yield start
    for km, kc in started:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def stderr_text(messages) -> str:
    return "".join(m["content"]["text"] for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


def test_the_kernel_runs_cells_on_the_interpreter_without_a_device(kernel_on):
    kc = kernel_on("broken-only")
    notes = ""
    for _ in range(2):
        reply, messages = execute(kc, PROGRAM)
        assert reply["status"] == "ok" and stdout(messages) == OUTPUT
        notes += stderr_text(messages)
    assert notes.startswith(NOTE) and notes.count("note:") == 1 and BUILD_LOG in notes
    _, messages = execute(kc, "%config")
    assert stdout(messages).startswith("backend=auto (interp) ")
    reply, _ = execute(kc, "%%bench\ndo<grid> { r <- forcePull<grid> (generate 8 (fn i => i)); "
                           "return<grid> r }")
    assert reply["status"] == "error"
    assert "`%%bench`, which times a program's kernels, needs an OpenCL device" in \
        reply["evalue"]
    reply, messages = execute(kc, "%%opencl\nforcePull<grid> (generate 8 (fn i => i * 2))")
    assert reply["status"] == "ok" and any(m["msg_type"] == "display_data" for m in messages)
    _, messages = execute(kc, "%device")
    assert BROKEN_DEVICE in stdout(messages) and "unusable" in stdout(messages)


def test_the_kernel_refuses_a_device_that_cannot_build_and_keeps_its_choice(kernel_on):
    kc = kernel_on("broken-first")
    reply, _ = execute(kc, f"%device {broken_id()}")
    assert reply["status"] == "error" and BUILD_LOG in reply["evalue"]
    reply, messages = execute(kc, PROGRAM)
    assert reply["status"] == "ok" and stdout(messages) == OUTPUT
    _, messages = execute(kc, "%device")
    marked = [line for line in stdout(messages).splitlines() if line.startswith("* ")]
    assert len(marked) == 1 and BROKEN_DEVICE not in marked[0]
    _, messages = execute(kc, "%config")
    assert stdout(messages).startswith("backend=auto (opencl) ")


def test_fcl_cells_in_ipython_fall_back_with_one_note():
    km, kc = start_new_kernel(kernel_name="python3", env=machine_env("broken-only"))
    try:
        assert execute(kc, "%load_ext fcl")[0]["status"] == "ok"
        cell = "%%fcl\nsig inc : [int] -> Program <grid> [int]\n" \
               "fun inc xs = forcePull<grid> (map (fn x => x + 1) xs)"
        notes = ""
        for _ in range(2):
            reply, messages = execute(kc, cell)
            assert reply["status"] == "ok", reply
            notes += stderr_text(messages)
        assert notes.startswith(NOTE) and notes.count("note:") == 1 and BUILD_LOG in notes
        reply, messages = execute(kc, "print(fcl_lib.backend, inc(list(range(4))).tolist())")
        assert stdout(messages) == "interp [1, 2, 3, 4]\n", reply
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
