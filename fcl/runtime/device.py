"""Choosing an OpenCL device and building programs for it, with a cache.

Without a choice (`--device`, or `PYOPENCL_CTX`), a GPU is used if any platform has one, else
PoCL on the CPU, which pip installs (`pocl-binary-distribution`), so a fresh machine needs no
system OpenCL. Oclgrind, a simulator, is only used when asked for, and only loaded in processes
that check programs (see fcl.runtime.oclgrind_icd).

Device memory comes from a pool kept with the device (pyopencl's MemoryPool): a buffer released
goes back to the pool, and the next run, repetition or cell that needs one of its size gets the
same memory (a Jupyter kernel going idle gives it all back: free_held_memory). Fresh memory costs
its first touch (page faults, on PoCL) inside the first kernel that writes it: with a fresh
output per repetition, the original's benchmark programs copy and reverse timed 3.3-3.6 times a
hand-written kernel on PoCL (a 64 MiB copy: 16 ms, not 4.5).
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyopencl as cl
from pyopencl.tools import ImmediateAllocator, MemoryPool, PooledBuffer

from fcl.codegen.kernel import nearest_span
from fcl.errors import FCLError
from fcl.runtime.oclgrind_icd import vendors_dir
from fcl.runtime.probe import health
from fcl.server.lean import build_in_helper, reap_helper, trim_heap

# A device array's memory: a Buffer of its own, or one from the device's pool.
DeviceBuffer: TypeAlias = cl.Buffer | PooledBuffer


@dataclass
class Device:
    context: cl.Context
    queue: cl.CommandQueue
    device: cl.Device
    pool: MemoryPool | None = None  # None on Oclgrind (see fcl.runtime.host.release_arrays_since)

    @property
    def name(self) -> str:
        return f"{self.device.name.strip()} ({self.device.platform.name.strip()})"

    @property
    def local_mem_size(self) -> int:
        return int(self.device.local_mem_size)

    @property
    def global_mem_size(self) -> int:
        return int(self.device.global_mem_size)

    @property
    def max_alloc(self) -> int:
        return int(self.device.max_mem_alloc_size)

    @property
    def max_work_group_size(self) -> int:
        return int(self.device.max_work_group_size)

    @property
    def has_fp64(self) -> bool:
        return "cl_khr_fp64" in self.device.extensions


def all_devices() -> list[tuple[str, cl.Device]]:
    """(`platform:device` id, device) for every device of every platform, numbered as PyOpenCL
    numbers them for other code (see `platforms`); Oclgrind loaded for checking is `oclgrind`."""
    found = []
    for p, platform in enumerate(platforms()):
        for d, device in enumerate(platform.get_devices()):
            found.append((f"{p}:{d}", device))
    found += [("oclgrind", dev) for dev in checking_devices()]
    return found


def platforms() -> list[cl.Platform]:
    """The platforms that PyOpenCL code sees in this environment: in a process that loads FCL's
    own Oclgrind for checking (fcl.runtime.oclgrind_icd), all but that one, which would otherwise
    come first and shift every other platform's number."""
    return [p for p in _all_platforms()
            if not (_loads_private_oclgrind() and _is_oclgrind(p))]


def checking_devices() -> list[cl.Device]:
    return [dev for p in _all_platforms() if _loads_private_oclgrind() and _is_oclgrind(p)
            for dev in p.get_devices()]


def _all_platforms() -> list[cl.Platform]:
    try:
        return cl.get_platforms()
    except cl.Error:  # the loader found no platform at all (PLATFORM_NOT_FOUND_KHR)
        return []


def _loads_private_oclgrind() -> bool:
    return os.environ.get("OCL_ICD_VENDORS") == str(vendors_dir())


# The single-bit device types, in the order they are named; PyOpenCL's device_type.to_string
# also names ALL, and _is_bitfield, its own class attribute.
_DEVICE_TYPES = ("GPU", "CPU", "ACCELERATOR", "CUSTOM", "DEFAULT")


def device_type_text(device_type: int) -> str:
    """`GPU`, `CPU`, or the types a device has joined by ` | ` (e.g. `GPU | DEFAULT`)."""
    return " | ".join(name for name in _DEVICE_TYPES
                      if device_type & getattr(cl.device_type, name)) or str(device_type)


def describe_device(ident: str, dev: cl.Device) -> str:
    return f"{ident}  {dev.name.strip()}  [{dev.platform.name.strip()}, " \
        f"{device_type_text(dev.type)}]"


def describe_devices(marked: cl.Device | None = None) -> list[str]:
    """A line for each device, `usable` or why not (each probed: see fcl.runtime.probe), and
    under an unusable one the remedy; with `marked`, each line starts with `* ` for that
    device and two spaces for the others."""
    devices = all_devices()
    if not devices:
        return ["no OpenCL device is installed", f"    hint: {NO_DEVICE_REMEDY}"]
    lines = []
    for ident, dev in devices:
        state = health(dev)
        mark = "" if marked is None else "* " if dev.int_ptr == marked.int_ptr else "  "
        lines.append(f"{mark}{describe_device(ident, dev)}  {state.describe()}")
        if not state.usable:
            lines.append(f"    hint: {state.remedy}")
    return lines


NO_DEVICE_REMEDY = ("pip's PoCL (`pip install pocl-binary-distribution`) or your "
                    "distribution's (Debian, Ubuntu: `pocl-opencl-icd`) gives a CPU device")


class NoUsableDevice(FCLError):
    """No OpenCL device here can build and run a kernel (or none is installed)."""


def pick_device(choice: str | None = None) -> cl.Device:
    """The device `choice` names, or PYOPENCL_CTX, read by PyOpenCL's rules (`choose`), which
    must work; without either, the first GPU that works, else the first device that works,
    never Oclgrind, a simulator."""
    devices = all_devices()
    choice = choice or os.environ.get("PYOPENCL_CTX") or None
    if choice:
        found = choose(choice, devices)
        _require_usable(choice, found)
        return found
    candidates = _candidates(devices)
    candidates.sort(key=lambda dev: not dev.type & cl.device_type.GPU)  # stable: GPUs first
    usable = next((dev for dev in candidates if health(dev).usable), None)
    if usable is None:
        raise no_usable_device(devices)
    return usable


def _candidates(devices: list[tuple[str, cl.Device]]) -> list[cl.Device]:
    """The devices programs may run on: all but Oclgrind, a simulator for checking."""
    return [dev for _, dev in devices if not is_oclgrind(dev)]


def any_usable_device() -> bool:
    return any(health(dev).usable for dev in _candidates(all_devices()))


def _require_usable(choice: str, dev: cl.Device) -> None:
    state = health(dev)
    if not state.usable:
        raise FCLError(f"the OpenCL device `{choice}` ({dev.name.strip()}, "
                       f"{dev.platform.name.strip()}) cannot run programs: {state.problem}",
                       None, [state.remedy])


def no_usable_device(devices: list[tuple[str, cl.Device]]) -> NoUsableDevice:
    listed = [(ident, dev) for ident, dev in devices if not is_oclgrind(dev)]
    if not listed:
        return NoUsableDevice("no OpenCL device is installed", None, [NO_DEVICE_REMEDY])
    states = [(ident, dev, health(dev)) for ident, dev in listed]
    reasons = "\n  ".join(f"{describe_device(ident, dev)}: {state.problem}"
                          for ident, dev, state in states)
    remedies = list(dict.fromkeys(state.remedy for _, _, state in states))
    return NoUsableDevice(f"no OpenCL device here can run programs:\n  {reasons}", None,
                          remedies)


# `auto`: OpenCL where a device works, else the reference interpreter; `opencl` insists.
BACKENDS = ("auto", "opencl", "interp")
_fallback_noted = False


def choose_backend(requested: str, device: str | None = None, note=None,
                   asked_as: str = "the OpenCL back end") -> str:
    """`opencl` or `interp` for a run that asked for `requested`. `auto` falls back to the
    interpreter when no device is named and none works, and says so through `note` (a function
    taking the text) the first time in this process; a named device must work (pick_device),
    and so must some device when `opencl` was asked for (`asked_as` says how, in the error)."""
    global _fallback_noted
    if requested == "opencl":
        require_device(asked_as, device, "the default back end, `auto`, runs the reference "
                       "interpreter when no device works")
    if requested != "auto":
        return requested
    try:
        # A named device (`device`, PYOPENCL_CTX) that cannot build is an error now, not at a
        # build, and not a reason to fall back: only NoUsableDevice is.
        pick_device(device)
        return "opencl"
    except NoUsableDevice as why:
        if note is not None and not _fallback_noted:
            _fallback_noted = True
            note(fallback_note(why))
        return "interp"


def fallback_note(why: FCLError) -> str:
    hints = "".join(f"\n  hint: {hint}" for hint in why.hints)
    return (f"note: FCL runs on its reference interpreter (the same output, without kernels): "
            f"{why.message}{hints}")


def require_device(what: str, device: str | None = None, instead: str | None = None) -> None:
    """An error saying that `what` needs a working OpenCL device, unless one is there;
    `instead` is what the user can do without one."""
    try:
        pick_device(device)
    except NoUsableDevice as why:
        raise NoUsableDevice(f"{what} needs an OpenCL device, and {why.message}", None,
                             why.hints + ([instead] if instead else [])) from None


def choose(choice: str, devices: list[tuple[str, cl.Device]]) -> cl.Device:
    """PyOpenCL's reading of PYOPENCL_CTX (pyopencl.choose_devices, not called because it
    numbers the platforms this process loads): `PLATFORM[:DEVICE]`, each a number or a part of
    the name, any case, an empty one the first. Beyond those, as FCL's `--device` always took:
    `oclgrind`, or a part of a device's or platform's name alone."""
    if choice.lower() == "oclgrind" and not any(is_oclgrind(dev) for _, dev in devices):
        raise FCLError("Oclgrind is not a device of this process: it is loaded only to check "
                       "a program", None,
                       ["on the command line, `fcl run --check prog.fcl` runs a program on "
                        "Oclgrind; in a notebook, `%%check`"])
    platform_part, _, device_part = choice.partition(":")
    found = _pyopencl_choice(platform_part, device_part) if ":" not in device_part else None
    if found is None and ":" not in choice:
        found = next((dev for _, dev in devices if choice.lower() in dev.name.lower()
                      or choice.lower() in dev.platform.name.lower()), None)
    if found is None:
        raise FCLError(f"no OpenCL device matches `{choice}`; the devices are:\n  " +
                       "\n  ".join(describe_devices()) if devices else
                       f"no OpenCL device matches `{choice}`: none is installed",
                       None, ["`PLATFORM:DEVICE`, each a number or a part of its name, as "
                              "PyOpenCL reads PYOPENCL_CTX"])
    return found


def _pyopencl_choice(platform_part: str, device_part: str) -> cl.Device | None:
    listed = platforms()
    platform = _numbered_or_named(listed, platform_part)
    if platform is None:
        return None
    if "," in device_part:
        raise FCLError(f"FCL runs on one device, not `{device_part}`")
    return _numbered_or_named(platform.get_devices(), device_part)


def _numbered_or_named(items: list, answer: str):
    """PyOpenCL's rule: empty is the first, a number in range is that one, else the last (for
    a platform) or first (for a device) whose name contains it; a platform's last, as PyOpenCL's
    loop keeps overwriting."""
    if not items:
        return None
    if not answer:
        return items[0]
    with suppress(ValueError):
        if 0 <= int(answer) < len(items):
            return items[int(answer)]
    named = [item for item in items if answer.lower() in item.name.lower()]
    return (named[-1] if isinstance(items[0], cl.Platform) else named[0]) if named else None


def serial_groups(dev: cl.Device) -> bool:
    """Whether work-groups run best as one work-item each on `dev` (a CPU; Oclgrind, which
    checks the work-items' interplay, gets them as a GPU would, see fcl.backend)."""
    return bool(dev.type & cl.device_type.CPU) and not is_oclgrind(dev)


def is_oclgrind(dev: cl.Device) -> bool:
    return _is_oclgrind(dev.platform)


def _is_oclgrind(platform: cl.Platform) -> bool:
    return "oclgrind" in platform.name.lower()


_devices: dict[int, Device] = {}


def open_device(choice: str | None = None) -> Device:
    dev = pick_device(choice)
    key = dev.int_ptr
    if key not in _devices or is_oclgrind(dev):
        # Oclgrind gets a fresh context per run: its uninitialized-memory tracking otherwise
        # carries over from earlier runs in the same context and reports values that are set.
        context = cl.Context([dev])
        # Profiling events time kernels (fcl.timing) at no cost worth measuring.
        queue = cl.CommandQueue(context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        # ImmediateAllocator: a device out of memory says so when allocating, not at a later
        # kernel launch.
        pool = None if is_oclgrind(dev) else MemoryPool(ImmediateAllocator(queue))
        _devices[key] = Device(context, queue, dev, pool)
    return _devices[key]


# A pool holding more than this many times what the last run used, and more than SLACK bytes
# beyond it, gives its memory back: a cell of large arrays followed by small ones should not keep
# the large ones forever, while a cell run again keeps all of its memory.
HELD_FACTOR = 2
SLACK = 16 << 20


def trim_pool(device: Device, used: int) -> None:
    """After a run that allocated at most `used` bytes at once: free the pool's unused memory if
    it holds much more than that."""
    pool = device.pool
    if pool is None:
        return
    held = pool.managed_bytes - pool.active_bytes
    if held > HELD_FACTOR * used + SLACK:
        pool.free_held()


def free_held_memory() -> None:
    """Give back all the memory the pools hold unused: for a Jupyter kernel going idle, which
    would otherwise keep its last cell's arrays (on PoCL, the process's own memory) while the
    student reads. The cell run again pays only the first touch of fresh memory, which timed
    runs leave out with their warm-up run."""
    for device in _devices.values():
        if device.pool is not None:
            device.pool.free_held()
    reap_helper()
    trim_heap()


# Built programs kept, the least recently used dropped first: a notebook of the course builds 30
# to 40, and each keeps its compiled code loaded (on PoCL, a shared library mapped into the
# process), which a long session would otherwise pile up.
PROGRAMS_KEPT = 64
_programs: dict[tuple[int, str], dict[str, cl.Kernel]] = {}  # by (context, source), oldest first
build_count = 0  # programs actually built, for tests of the cache


def build(device: Device, source: str, line_table: list | None = None) -> dict[str, cl.Kernel]:
    """The kernels of `source` by name, built once per device; a build failure is an FCL error
    at the FCL line of the first OpenCL line the compiler complains about (via line_table)."""
    global build_count
    key = (device.context.int_ptr, source)
    if key in _programs:
        _programs[key] = _programs.pop(key)  # now the most recently used
    else:
        try:
            with warnings.catch_warnings(), _compiler_notes():
                if not _show_compiler_output():
                    # Compiler warnings about generated code are not the FCL program's problem.
                    warnings.simplefilter("ignore", cl.CompilerWarning)
                # Oclgrind interprets LLVM IR but not all of what LLVM's optimizer makes of it
                # (closed forms of loops use odd-width integers): it gets the code unoptimized.
                options = ["-cl-opt-disable"] if is_oclgrind(device.device) else []
                if "float" in source:  # float / and sqrt rounded as numpy's (and C's on a CPU)
                    options.append("-cl-fp32-correctly-rounded-divide-sqrt")
                build_in_helper(device.device, source, options)
                program = program_with_kernels(device.context, source, options)
            _programs[key] = {k.function_name: k for k in program.all_kernels()}
            while len(_programs) > PROGRAMS_KEPT:
                del _programs[next(iter(_programs))]
        except cl.RuntimeError as err:
            raise build_error(str(err), line_table or []) from None
        build_count += 1
    return _programs[key]


_KERNEL = re.compile(r"^\s*__kernel\b", re.M)


def program_with_kernels(context: cl.Context, source: str, options: list[str]) -> cl.Program:
    """The built program. PoCL 3.0 (pip's) on some CPUs (an AMD EPYC, znver3) builds some
    sources (bench/reference.cl) with all their kernels, then, finding the build in its cache
    (~/.cache/pocl/kcache) the next time, gives back a program without any: a define no build
    had before misses the cache."""
    program = cl.Program(context, source).build(options=options)
    if program.all_kernels() or not _KERNEL.search(source):
        return program
    fresh = f"-DFCL_FRESH_BUILD={int.from_bytes(os.urandom(4), 'little') >> 1}"
    return cl.Program(context, source).build(options=[*options, fresh])


def _show_compiler_output() -> bool:
    """Whether the user asked to see build logs (PyOpenCL's variable and its true values)."""
    return os.environ.get("PYOPENCL_COMPILER_OUTPUT", "").lower() in \
        ("y", "yes", "t", "true", "on", "1")


# What clang, inside PoCL and others, writes to the process's stderr at the end of a build that
# had diagnostics (the diagnostics themselves go to the build log).
_NOTE = re.compile(r"\d+ (warnings?|errors?)( and \d+ errors?)? generated\.")


@contextmanager
def _compiler_notes() -> Iterator[None]:
    """Keep the compiler's "1 warning generated." notes off the user's stderr unless
    PYOPENCL_COMPILER_OUTPUT is set. C++ code in this process writes them to file descriptor 2,
    past Python: while it runs, that is a file, and what else went there is passed on to
    sys.stderr."""
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            written = capture.read().decode(errors="replace")
            if not _show_compiler_output():
                written = "".join(line for line in written.splitlines(keepends=True)
                                  if not _NOTE.fullmatch(line.strip()))
            if written:  # through Python's stderr, which a notebook cell's output may be
                sys.stderr.write(written)


# A diagnostic in a build log: PoCL writes `error: /path/x.cl:3:10: msg`, clang-based compilers
# (Oclgrind, NVIDIA, AMD) `input.cl:3:10: error: msg` or `<kernel>:3:10: error: msg`.
_DIAGNOSTIC = re.compile(r"(?:error: )?\S*?:(\d+):(\d+): (?:error: )?(.*)")


def build_error(log: str, line_table: list) -> FCLError:
    """The OpenCL compiler's complaint about the generated code, at the FCL line it came from,
    with the whole build log."""
    first = next((m for line in log.splitlines() if (m := _DIAGNOSTIC.search(line.strip()))
                  and "warning:" not in line), None)
    # PyOpenCL's own framing (the failed call, the options) says nothing about the program.
    lines = [line for line in log.splitlines() if line.strip() and not line.startswith(
        ("clBuildProgram failed", "(options:", "(source saved"))]
    # Only devices that built and ran a test kernel get here (pick_device, fcl.runtime.probe).
    cause = "a bug in FCL's compiler or a limit of this device (it builds other kernels)"
    log = "the build log:\n    " + "\n    ".join(lines)
    if first is None:
        return FCLError("the OpenCL compiler rejected the generated code", None,
                        [f"{cause}; `fcl compile` shows the OpenCL", log])
    hints = [f"{cause}; `fcl compile` shows the OpenCL (its line numbers are the log's)", log]
    cl_line = int(first.group(1))
    return FCLError(f"the OpenCL compiler rejected the generated code: {first.group(3)} "
                    f"(OpenCL line {cl_line})", nearest_span(line_table, cl_line), hints)


DTYPES: dict[str, type[np.generic]] = {"int": np.int32, "double": np.float64, "float": np.float32,
                                       "bool": np.uint8}
