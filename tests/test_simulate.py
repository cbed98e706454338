"""The simulated machines of tests/simulate: what PyOpenCL lists on each, and that the simulated
Zen 5 device fails every build as pip's PoCL does there while the working PoCL beside it builds
and runs. Each check runs in a fresh Python, since the loader reads its variables once."""
import json
import subprocess
import sys

import pytest

from simulate import BROKEN_DEVICE, BROKEN_PLATFORM_VERSION, BUILD_LOG, machine_env

# Every platform and device as (platform version, [(device name, device type)]).
LIST = """
import json, pyopencl as cl
print(json.dumps([[p.version, [[d.name, d.type] for d in p.get_devices()]]
                  for p in cl.get_platforms()]))
"""

# Build (and run) a tiny kernel on platform P's first device; print the result or the error.
BUILD = """
import json, sys, numpy as np, pyopencl as cl
device = cl.get_platforms()[int(sys.argv[1])].get_devices()[0]
context = cl.Context([device])
queue = cl.CommandQueue(context)
try:
    program = cl.Program(context, '''
        __kernel void triple(__global int *xs) { int i = get_global_id(0); xs[i] = 3 * xs[i]; }
    ''').build()
except cl.RuntimeError as err:
    print(json.dumps({"error": str(err)}))
    sys.exit()
xs = np.arange(8, dtype=np.int32)
buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=xs)
program.triple(queue, xs.shape, None, buffer)
cl.enqueue_copy(queue, xs, buffer)
print(json.dumps({"result": xs.tolist()}))
"""

CPU = 2  # CL_DEVICE_TYPE_CPU


def run(kind: str, script: str, *args: str) -> object:
    result = subprocess.run([sys.executable, "-c", script, *args], env=machine_env(kind),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("kind, broken_first, working_devices", [
    ("broken-first", True, 1),
    ("broken-only", True, 0),
    ("none", False, 0),
    ("working-only", False, 1),
])
def test_platforms(kind, broken_first, working_devices):
    platforms = run(kind, LIST)
    if broken_first:
        (version, devices), *platforms = platforms
        assert version == BROKEN_PLATFORM_VERSION
        assert devices == [[BROKEN_DEVICE, CPU]]
    # The rest is pip's PoCL alone: Debian's (if installed) is hidden, the simulated one is gone.
    [(version, devices)] = platforms
    assert "PoCL" in version and "simulated" not in version
    assert len(devices) == working_devices
    assert all(device_type == CPU for _, device_type in devices)


def test_broken_device_fails_every_build():
    assert BUILD_LOG in run("broken-only", BUILD, "0")["error"]


# PoCL compiles the kernel: over 2 s where its cache is cold, as on a fresh machine.
@pytest.mark.slow
def test_working_pocl_beside_the_broken_device_builds_and_runs():
    assert run("broken-first", BUILD, "1") == {"result": [3 * x for x in range(8)]}


def test_unknown_machine():
    with pytest.raises(ValueError, match="unknown machine"):
        machine_env("zen5")
