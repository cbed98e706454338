"""Packaging of the FCL kernel: the install CLI, the kernelspec shipped in the wheel, the logos."""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from built_package import build_wheel
from fcl_kernel import install
from fcl_kernel.install import LOGOS, RESOURCES, kernel_spec

ROOT = Path(__file__).resolve().parent.parent


def test_install_kernel_py_writes_a_kernelspec_under_the_prefix(tmp_path):
    result = subprocess.run([sys.executable, "install_kernel.py", "--prefix", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "fcl"
    assert str(spec_dir) in result.stdout
    assert json.loads((spec_dir / "kernel.json").read_text()) == {
        "argv": [sys.executable, "-Xfrozen_modules=off", "-m", "fcl_kernel", "-f",
                 "{connection_file}"],
        "display_name": "FCL",
        "language": "fcl",
        "interrupt_mode": "signal",
    }
    for logo in LOGOS:
        assert (spec_dir / logo).read_bytes() == (RESOURCES / logo).read_bytes()

    # Jupyter finds it there.
    spec = KernelSpecManager(kernel_dirs=[str(spec_dir.parent)]).get_kernel_spec("fcl")
    assert (spec.display_name, spec.language, spec.interrupt_mode) == ("FCL", "fcl", "signal")
    assert Path(spec.resource_dir) == spec_dir


def test_installing_again_replaces_the_old_kernelspec(tmp_path):
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "fcl"
    spec_dir.mkdir(parents=True)
    (spec_dir / "stale.txt").write_text("from an older version")
    install.main(["--prefix", str(tmp_path)])
    assert not (spec_dir / "stale.txt").exists()
    assert (spec_dir / "kernel.json").exists()


SHARED = "share/fcl/oclgrind-19.10"


@pytest.mark.parametrize("argv, in_environment, root, expected, oclgrind", [
    (["--user"], True, False, (True, None), None),
    (["--sys-prefix"], False, False, (False, sys.prefix), f"{sys.prefix}/{SHARED}"),
    (["--prefix", "/p"], True, True, (False, "/p"), f"/p/{SHARED}"),
    # No option: the environment the spec's interpreter belongs to, else system-wide for root,
    # else the user's directory. Oclgrind goes beside the kernelspec, or into the user's cache.
    ([], True, True, (False, sys.prefix), f"{sys.prefix}/{SHARED}"),
    ([], False, True, (False, None), f"/usr/local/{SHARED}"),
    ([], False, False, (True, None), None),
])
def test_where_the_cli_installs(monkeypatch, capsys, argv, in_environment, root, expected,
                                oclgrind):
    calls, homes = [], []

    def fake_install(user, prefix):
        calls.append((user, prefix))
        return "/somewhere"

    def fake_oclgrind(home):
        homes.append(None if home is None else str(home))
        return Path("/oclgrind/vendors")

    monkeypatch.setattr(install, "install_kernel_spec", fake_install)
    monkeypatch.setattr(install, "install_oclgrind", fake_oclgrind)
    monkeypatch.setattr(install, "_in_environment", lambda: in_environment)
    monkeypatch.setattr(install, "_is_root", lambda: root)
    install.main(argv)
    assert calls == [expected] and homes == [oclgrind]
    assert "/somewhere" in capsys.readouterr().out


def test_the_cli_rejects_two_destinations():
    with pytest.raises(SystemExit):
        install.main(["--user", "--sys-prefix"])


def test_the_shipped_kernel_json_runs_the_environments_python():
    """The static kernelspec in the wheel is the CLI's, with "python" for the interpreter."""
    assert json.loads((RESOURCES / "kernel.json").read_text()) == kernel_spec("python")


@pytest.mark.slow  # 0.75-3 s
def test_the_logos_are_what_the_generator_draws():
    from tools import make_logos
    drawn = make_logos.logos()
    assert set(drawn) == set(LOGOS)
    for name, data in drawn.items():
        assert (RESOURCES / name).read_bytes() == data, f"run python -m tools.make_logos ({name})"
    for name, side in (("logo-32x32.png", 32), ("logo-64x64.png", 64)):
        data = drawn[name]
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert int.from_bytes(data[16:20], "big") == int.from_bytes(data[20:24], "big") == side
        assert len(data) < 2048  # small enough to ship in every kernelspec


@pytest.mark.slow
def test_the_wheel_ships_the_kernelspec_and_the_lexer(tmp_path):
    """`pip install` of the wheel registers the kernel (shared data) and the Pygments lexer."""
    wheel = build_wheel(tmp_path)
    dist = "-".join(wheel.name.split("-")[:2])  # name-version
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        data = f"{dist}.data/data/share/jupyter/kernels/fcl/"
        assert json.loads(zf.read(data + "kernel.json")) == kernel_spec("python")
        for logo in LOGOS:
            assert zf.read(data + logo) == (RESOURCES / logo).read_bytes()
            assert f"fcl_kernel/resources/{logo}" in names
        assert {"fcl/highlight.py", "fcl_kernel/install.py"} <= names
        entry_points = zf.read(f"{dist}.dist-info/entry_points.txt").decode()
    assert "[pygments.lexers]\nfcl = fcl.highlight:FCLLexer" in entry_points


def test_the_kernel_loads_the_debugger_without_a_warning():
    # `jupyter console` has the kernel import ipykernel's debugger (debugpy), which warns about
    # frozen modules unless the kernelspec's interpreter turns them off, as ipykernel's does.
    from fcl_kernel.install import kernel_spec
    python_and_flags = kernel_spec(sys.executable)["argv"][:-4]
    result = subprocess.run([*python_and_flags, "-c", "from ipykernel.debugger import Debugger"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "frozen modules" not in result.stderr


@pytest.mark.slow  # copies Oclgrind (100 MB), then a checked run: 5-15 s
def test_oclgrind_installed_for_a_prefix_serves_every_user_with_no_download(tmp_path):
    """`--prefix`/`--sys-prefix` (an image's build) put Oclgrind beside the kernelspec; a user
    whose own cache is empty then checks programs with it, downloading nothing."""
    install.main(["--prefix", str(tmp_path / "prefix")])
    shared = tmp_path / "prefix" / "share" / "fcl" / "oclgrind-19.10"
    assert (shared / "vendors" / "oclgrind.icd").read_text().startswith(str(shared / "lib"))
    program = tmp_path / "prog.fcl"
    program.write_text("val main = forceAndPrint 3 (push<grid> (generate 3 (fn i => i * 2)))\n")
    cache = tmp_path / "student-cache"
    env = {name: value for name, value in os.environ.items() if name != "OCL_ICD_VENDORS"}
    env.update(JUPYTER_PATH=str(tmp_path / "prefix" / "share" / "jupyter"),
               XDG_CACHE_HOME=str(cache), PIP_NO_INDEX="1")  # pip could not download anyway
    result = subprocess.run([sys.executable, "-m", "fcl", "run", "--check", str(program)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert (result.returncode, result.stdout) == (0, "[0,2,4]\n"), result.stderr
    assert not (cache / "fcl").exists()
