"""Whether an OpenCL device works: a tiny kernel built and run on it, once per process.

A device can be listed and still build nothing. pip's PoCL (inside the pyopencl wheel: PoCL 3.0
on LLVM 14) names a CPU that LLVM 14 does not know (AMD Zen 5, and every later one) `generic`
and then fails every build with `error: unknown target CPU 'generic'`. Without this test such a
device is chosen by default, and every program then fails with an error that blames FCL.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from fcl.server.lean import build_in_helper, is_pocl

# Integer arithmetic and a global read and write: what every FCL kernel does.
PROBE_SOURCE = """
__kernel void fcl_probe(__global int *xs) {
  int i = get_global_id(0);
  xs[i] = xs[i] * 3 + i;
}
"""
PROBE_ITEMS = 16

# Debian and Ubuntu package the PoCL that knows newer CPUs (PoCL 3.1 on LLVM 15 falls back to a
# known CPU model by its features); `make setup` installs it where apt works.
SYSTEM_POCL_REMEDY = ("install your distribution's PoCL, which knows newer CPUs (Debian, "
                      "Ubuntu: `sudo apt-get install pocl-opencl-icd`; `make setup` does this "
                      "where it can), or choose another device (`fcl devices`)")
GENERIC_REMEDY = ("check the device's OpenCL driver, or choose another device (`fcl devices`); "
                  "the reference interpreter needs none (`--backend interp`)")


@dataclass(frozen=True)
class Health:
    usable: bool
    problem: str = ""  # why not, in one line: the build log's first error, or the step that failed
    remedy: str = ""

    def describe(self) -> str:
        return "usable" if self.usable else f"unusable: {self.problem}"


_health: dict[int, Health] = {}


def health(device: cl.Device) -> Health:
    """The device's probe result, probed the first time this process asks."""
    key = device.int_ptr
    if key not in _health:
        _health[key] = _probe(device)
    return _health[key]


def _probe(device: cl.Device) -> Health:
    step = "creating a context"
    try:
        context = cl.Context([device])
        queue = cl.CommandQueue(context)
        step = "building a test kernel"
        # A lean process (the Jupyter kernel) builds in its helper first, as for every program:
        # LLVM's state then stays out of the kernel's own memory (fcl.server.lean).
        build_in_helper(device, PROBE_SOURCE, [])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = cl.Program(context, PROBE_SOURCE).build()
        step = "running a test kernel"
        xs = np.arange(PROBE_ITEMS, dtype=np.int32)
        buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                           hostbuf=xs)
        program.fcl_probe(queue, (PROBE_ITEMS,), None, buffer)
        result = np.empty_like(xs)
        cl.enqueue_copy(queue, result, buffer)
        queue.finish()
    except cl.Error as err:
        problem = _first_error(str(err)) if step == "building a test kernel" else \
            f"{step} failed: {_first_line(str(err))}"
        return Health(False, problem, _remedy(device, problem))
    if not np.array_equal(result, xs * 3 + np.arange(PROBE_ITEMS, dtype=np.int32)):
        problem = "a test kernel computed wrong results"
        return Health(False, problem, GENERIC_REMEDY)
    return Health(True)


def _first_error(log: str) -> str:
    """The build log's first line that says what went wrong (PyOpenCL frames it with the failed
    call and the options)."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()
              and not line.startswith(("clBuildProgram failed", "(options:", "(source saved"))]
    meaningful = errors or [line for line in lines if not line.startswith("(")]
    return "building a test kernel failed: " + (meaningful[0] if meaningful else "no build log")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), text)


def _remedy(device: cl.Device, problem: str) -> str:
    if is_pocl(device) and "target cpu" in problem.lower():
        return f"this PoCL's LLVM does not know this CPU: {SYSTEM_POCL_REMEDY}"
    return GENERIC_REMEDY
