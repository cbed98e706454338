"""Register the FCL kernel: `python -m fcl_kernel.install [--user|--sys-prefix|--prefix P]`.

Also installs Oclgrind, which `%%check` runs on, where only FCL's checking runs load it (see
fcl.runtime.oclgrind_icd), so that the kernel finds it when it starts.

Writes a kernelspec (kernel.json and the logos) into a temporary directory and hands it to
jupyter_client's KernelSpecManager, as bash_kernel does. The kernel.json written here names this
interpreter by its absolute path, so the kernel runs in this environment whichever Jupyter
launches it. (`pip install` also ships a static kernelspec as wheel data; see pyproject.toml.)

Where it goes when no option is given:
* inside a virtual or conda environment: that environment (--sys-prefix), because the spec
  points at its interpreter and should disappear with it;
* otherwise, as root: the system-wide directory (/usr/local/share/jupyter/kernels);
* otherwise: the user's directory (--user), which needs no privileges.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_core.paths import SYSTEM_JUPYTER_PATH

from fcl.errors import FCLError
from fcl.runtime.oclgrind_icd import install_oclgrind, prefix_home

KERNEL_NAME = "fcl"
RESOURCES = Path(__file__).resolve().parent / "resources"
LOGOS = ("logo-svg.svg", "logo-32x32.png", "logo-64x64.png")


def kernel_spec(python: str) -> dict:
    """The kernel.json contents for a kernel run by the interpreter `python`."""
    # As ipykernel's own kernelspec: with frozen modules, importing its debugger (debugpy)
    # prints a warning at start-up in `jupyter console`.
    frozen = ["-Xfrozen_modules=off"] if platform.python_implementation() == "CPython" else []
    return {
        "argv": [python, *frozen, "-m", "fcl_kernel", "-f", "{connection_file}"],
        "display_name": "FCL",
        "language": "fcl",
        # The kernel turns SIGINT into KeyboardInterrupt inside execution (ipykernel's default).
        "interrupt_mode": "signal",
    }


def write_kernel_spec(jupyter_dir: Path) -> Path:
    """A kernelspec for this interpreter in `jupyter_dir` (a directory to put on JUPYTER_PATH:
    tests, tools and servers run the kernel of this environment without installing it);
    returns `jupyter_dir`."""
    spec = jupyter_dir / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps(kernel_spec(sys.executable)))
    return jupyter_dir


def install_kernel_spec(user: bool = False, prefix: str | None = None) -> str:
    """Install the kernelspec; returns the directory it was installed in.

    user=True installs for the current user; otherwise into `prefix`/share/jupyter/kernels, or
    the system-wide directory when prefix is None. An existing FCL kernelspec there is replaced.
    """
    with tempfile.TemporaryDirectory() as td:
        spec = Path(td) / KERNEL_NAME
        spec.mkdir()
        (spec / "kernel.json").write_text(json.dumps(kernel_spec(sys.executable), indent=2) + "\n")
        for logo in LOGOS:
            shutil.copy(RESOURCES / logo, spec / logo)
        return KernelSpecManager().install_kernel_spec(str(spec), KERNEL_NAME, user=user,
                                                       prefix=prefix)


def _in_environment() -> bool:
    return sys.prefix != sys.base_prefix or (Path(sys.prefix) / "conda-meta").is_dir()


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Install the FCL Jupyter kernelspec. Without an option: into the current "
                    "virtual/conda environment if there is one, else system-wide as root, else "
                    "for the current user.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="install for the current user (~/.local/share/jupyter/kernels)")
    where.add_argument("--sys-prefix", action="store_true",
                       help=f"install into this Python's prefix ({sys.prefix})")
    where.add_argument("--prefix", metavar="P", help="install into P/share/jupyter/kernels")
    args = parser.parse_args(argv)

    user = args.user
    if args.prefix:
        prefix = args.prefix
    elif args.sys_prefix or (not user and _in_environment()):
        prefix = sys.prefix
    else:
        prefix = None
        user = user or not _is_root()
    destination = install_kernel_spec(user=user, prefix=prefix)
    print(f"Installed the FCL kernelspec in {destination}")
    # Beside the kernelspec, for everyone who uses it (a user's own: in their cache).
    home = None if user else prefix_home(prefix or Path(SYSTEM_JUPYTER_PATH[0]).parents[1])
    try:
        print(f"Oclgrind, for %%check, is in {install_oclgrind(home).parent}")
    except FCLError as err:  # the kernel works without it; %%check then says how to get it
        print(err.render(), file=sys.stderr)


if __name__ == "__main__":
    main()
