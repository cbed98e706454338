"""Simulated OpenCL machines, for tests of how FCL chooses and reports devices.

On AMD Zen 5 (and later) CPUs the PoCL inside the pyopencl wheel (LLVM 14) lists a CPU device
whose every build fails with `error: unknown target CPU 'generic'`. `broken_icd.c`, beside this
file, is a real OpenCL driver (an ICD) that behaves so on any machine: its platform looks like
PoCL's (version `BROKEN_PLATFORM_VERSION`), its one CPU device is `BROKEN_DEVICE`, contexts, queues
and buffers work, and every build fails with `BUILD_LOG`. `machine_env(kind)` is the environment
of a subprocess that sees one of `KINDS`:

    from simulate import machine_env
    subprocess.run([...], env=machine_env("broken-first"))

How the loader orders platforms (pyopencl's ocl-icd, which `PYOPENCL_HOME` points at its own
PoCL; pyopencl sets that variable when imported): first the drivers named by the `.icd` files in
`OCL_ICD_VENDORS` (else /etc/OpenCL/vendors), in the order the file system lists the folder (not
by name), then pyopencl's own PoCL; then a stable sort puts the platforms with more GPUs, then
more CPUs, then more devices first. Each folder here holds at most one `.icd` file, so the
order below does not depend on the file system. `OCL_ICD_VENDORS` also hides Debian's PoCL
(/etc/OpenCL/vendors/pocl.icd), so the machines are the same whether or not it is installed.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

SOURCE = Path(__file__).with_name("broken_icd.c")

# What the simulated driver answers (see broken_icd.c).
BROKEN_PLATFORM_NAME = "Portable Computing Language"  # the same as every PoCL's
BROKEN_PLATFORM_VERSION = "OpenCL 3.0 PoCL 3.0 (simulated: builds fail)"
BROKEN_DEVICE = "pthread-generic"
BUILD_LOG = "error: unknown target CPU 'generic'"

KINDS = ("broken-first", "broken-only", "none", "working-only")

_COMPILE = ("cc", "-shared", "-fPIC", "-O1")

# The loader's and PoCL's variables that machine_env sets or clears. OCL_ICD_PLATFORM_SORT=none
# would keep the load order; unset, the loader sorts as a real machine's does.
_LOADER_VARIABLES = ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH", "OCL_ICD_PLATFORM_SORT",
                     "POCL_DEVICES")


def _cache() -> Path:
    """A folder of this user's for this version of broken_icd.c, in the system temp dir: compiled
    once, then shared by every test, process and session (pytest-xdist workers too)."""
    digest = hashlib.sha256(SOURCE.read_bytes() + " ".join(_COMPILE).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"fcl-simulate-{os.getuid()}-{digest}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Make `path` by writing a file beside it and renaming it, so that a concurrent process sees
    either no file or the whole of it (the loader reads only names that end in `.icd`)."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def broken_icd() -> Path:
    """The simulated driver, compiled (`cc -shared -fPIC`) the first time it is asked for."""
    library = _cache() / "libbroken_icd.so"
    if not library.exists():
        def compile_to(out: Path) -> None:
            try:
                result = subprocess.run([*_COMPILE, "-o", str(out), str(SOURCE)],
                                        capture_output=True, text=True)
            except FileNotFoundError:
                raise RuntimeError(f"compiling {SOURCE.name} needs a C compiler, `cc`") from None
            if result.returncode != 0:
                raise RuntimeError(f"compiling {SOURCE.name} failed:\n{result.stderr}")
        _write_atomically(library, compile_to)
    return library


def _vendors(with_broken: bool) -> Path:
    """A folder for OCL_ICD_VENDORS: with only broken.icd, or empty."""
    folder = _cache() / ("vendors-broken" if with_broken else "vendors-empty")
    folder.mkdir(exist_ok=True)
    icd = folder / "broken.icd"
    if with_broken and not icd.exists():
        library = broken_icd()
        _write_atomically(icd, lambda out: out.write_text(f"{library}\n"))
    return folder


def machine_env(kind: str, base_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess (that imports pyopencl) on a simulated machine: `base_env`
    (by default this process's environment) with the OpenCL loader's and PoCL's variables set
    for `kind`. "pip's PoCL" is the one inside the pyopencl wheel, always listed.

    "broken-first": a Zen 5 machine whose first platform cannot build. Platform 0 is the
        simulated driver (BROKEN_DEVICE, a CPU), platform 1 pip's PoCL with its CPU device, which
        works. (Like a Zen 5 machine with Debian's PoCL installed, the broken and the working
        one swapped.)
    "broken-only": a Zen 5 machine with nothing but pip's PoCL: every device it lists fails to
        build. Platform 0 is the simulated driver, platform 1 pip's PoCL with no device
        (POCL_DEVICES=none).
    "none": no device at all. One platform, pip's PoCL, with no device.
    "working-only": a machine whose only device works. One platform, pip's PoCL, with its CPU
        device.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown machine {kind!r}: one of {', '.join(KINDS)}")
    env = dict(os.environ if base_env is None else base_env)
    for name in _LOADER_VARIABLES:
        env.pop(name, None)
    env["OCL_ICD_VENDORS"] = str(_vendors(with_broken=kind.startswith("broken")))
    if kind in ("broken-only", "none"):
        env["POCL_DEVICES"] = "none"
    return env
