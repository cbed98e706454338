"""The package as a user installs it: the wheel built from the files of a fresh clone."""
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _wheel_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fcl-wheel-"))


def build_wheel(tmp_path: Path) -> Path:
    """The package's wheel, built by pip from the files of a fresh clone (the JupyterLab
    extension built by the build itself, with npm): once per test session, it takes a minute."""
    out = _wheel_dir()
    if not list(out.glob("fcl_jupyter-*.whl")):
        result = subprocess.run(
            [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", str(out)],
            cwd=fresh_clone(out / "src"), capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (wheel,) = out.glob("fcl_jupyter-*.whl")
    return wheel


def fresh_clone(to: Path) -> Path:
    """The files a fresh clone of this working tree has (those git tracks, and new ones it does
    not ignore): no build outputs, no npm packages, no virtual environment."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in filter(None, listed.stdout.decode().split("\0")):
        if (ROOT / name).is_file():
            (to / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, to / name)
    return to
