"""A Jupyter kernel that shares a server with a class: it keeps little memory while idle and
takes a bounded share of the cores (`lean_process`, called by the FCL kernel and by `%load_ext
fcl`; the `fcl` command and plain Python keep PoCL's and glibc's defaults).

- PoCL's CPU device runs work-groups on one thread per compute unit, by default one per hardware
  thread: on a shared server one student's benchmark would take every core from the others.
- glibc's malloc keeps a cell's large arrays in the heap after they are freed.
- PoCL compiles with LLVM in the process that builds, and keeps LLVM's state there for good.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import threading
import warnings
from contextlib import suppress

import pyopencl as cl


def lean_process() -> None:
    bound_opencl_threads()
    hold_mmap_threshold()
    use_build_helper()


# ---- threads

# FCL_CPU_THREADS bounds PoCL's threads (a number, or `all` for PoCL's default); a kernel on a
# JupyterHub (which sets JUPYTERHUB_USER) gets HUB_THREADS unless told otherwise. PoCL reads its
# variables when OpenCL loads its platforms, at the first cell that runs OpenCL: pip's PoCL 3.0
# POCL_MAX_PTHREAD_COUNT, PoCL 4 and later POCL_CPU_MAX_CU_COUNT. A PoCL variable set by hand wins.
HUB_THREADS = "1"
POCL_THREAD_VARIABLES = ("POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_COUNT")


def bound_opencl_threads() -> None:
    threads = os.environ.get("FCL_CPU_THREADS", "").strip().lower()
    if not threads:
        threads = HUB_THREADS if "JUPYTERHUB_USER" in os.environ else "all"
    if threads == "all":
        return
    if not threads.isdigit() or int(threads) < 1:
        print(f"FCL_CPU_THREADS={threads!r} is neither a positive number nor `all`: ignored",
              file=sys.stderr)
        return
    for name in POCL_THREAD_VARIABLES:
        os.environ.setdefault(name, threads)


# ---- malloc

# glibc's malloc serves a block above its mmap threshold with mmap and unmaps it when it is freed,
# but it raises the threshold (up to 32 MB) each time such a block is freed, after which a cell's
# arrays come from the heap and stay there: a kernel held 223 MB after notebook 03 (its programs
# in PoCL's cache), and 145 MB with the threshold kept at 1 MiB. MALLOC_MMAP_THRESHOLD_, glibc's
# own setting, wins if set.
M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD = 1 << 20
_LIBC = ctypes.CDLL(None)  # the C library this process already has loaded
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)  # glibc's only
_MALLOPT = getattr(_LIBC, "mallopt", None)  # glibc's and musl's; not macOS's


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim, which also releases
    free pages inside the heap, not only at its end): after every cell, so looked up once."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def hold_mmap_threshold() -> None:
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or _MALLOPT is None:
        return
    _MALLOPT(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


# ---- building in a helper process

# LLVM's state in a process that builds with PoCL: its kernel library, about 85 MB from the first
# build on, and more with every program (a Jupyter kernel held 264 MB after notebook 03, and
# 166 MB with the helper). So a lean process has a helper process build each new program first,
# which leaves it in PoCL's program cache on disk; the build in the process itself then loads it
# from there, which costs a few MB. The helper serves a burst of cells (Run All) and exits after
# HELPER_IDLE seconds without a build, its memory with it. Any trouble with it leaves the build
# to the process itself, which reports a failing build as it always did.
HELPER_IDLE = 10.0
_helper: subprocess.Popen | None = None
_helper_wanted = False


def use_build_helper() -> None:
    global _helper_wanted
    _helper_wanted = True


def build_in_helper(device: cl.Device, source: str, options: list[str]) -> None:
    """Have the helper build source for device first, where it is wanted and the device PoCL's."""
    global _helper
    if not (_helper_wanted and is_pocl(device)):
        return
    request = json.dumps({"platform": device.platform.name, "device": device.name,
                          "source": source, "options": options}) + "\n"
    for _attempt in range(2):  # a helper found alive may exit, idle, as the request goes out
        if _helper is None or _helper.poll() is not None:
            _helper = subprocess.Popen(
                [sys.executable, "-c", "from fcl.server.lean import serve_builds; "
                 "serve_builds()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, env=_helper_environment())
            # Waited for as it exits (idle), or it would stay a zombie until this process ends.
            threading.Thread(target=_helper.wait, name="fcl-build-helper-reaper",
                             daemon=True).start()
        assert _helper.stdin is not None and _helper.stdout is not None  # both are pipes
        try:
            _helper.stdin.write(request)
            _helper.stdin.flush()
            if _helper.stdout.readline():
                return
        except OSError:
            pass
        except BaseException:  # interrupted: its answer would come to the next request
            _helper.kill()
            _helper.wait()
            _helper = None
            raise


def reap_helper() -> None:
    """Forget a helper that has exited (idle), and close its pipes."""
    global _helper
    if _helper is not None and _helper.poll() is not None:
        _helper = None


def _helper_environment() -> dict[str, str]:
    """This process's environment (PoCL's variables, its cache), with this fcl importable."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def is_pocl(dev: cl.Device) -> bool:
    return "portable computing language" in dev.platform.name.lower()


def serve_builds() -> None:
    """The helper: builds each request (a JSON line on stdin) and answers with a line when it is
    done, built or not; ends with its input, or after HELPER_IDLE seconds without a request."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the kernel's interrupts are the kernel's
    warnings.simplefilter("ignore")
    contexts: dict[tuple[str, str], cl.Context] = {}
    while select.select([sys.stdin], [], [], HELPER_IDLE)[0]:
        line = sys.stdin.readline()
        if not line:
            return
        request = json.loads(line)
        key = (request["platform"], request["device"])
        if key not in contexts:
            contexts[key] = cl.Context([next(
                dev for platform in cl.get_platforms() if platform.name == key[0]
                for dev in platform.get_devices() if dev.name == key[1])])
        with suppress(cl.Error):
            cl.Program(contexts[key], request["source"]).build(options=request["options"])
        print("done", flush=True)
