"""Binder: binder/postBuild, run in a fresh virtual environment, gives a working FCL kernel.

repo2docker clones the repository, installs binder/apt.txt and binder/requirements.txt, then runs
binder/postBuild from the repository root. This test does the part that concerns us the same way:
it copies the checkout as a clone would have it (no .venv, no build outputs), creates a brand-new
virtual environment (no --system-site-packages, so nothing leaks in from the test's own .venv),
runs postBuild itself with that environment first on PATH, and then, from a third directory (so
`import fcl` cannot find the checkout), starts the kernel named `fcl` with jupyter_client and runs
cells. pip resolves the dependencies from the configured index or its cache, which `make setup`
has just filled: a real installation, in about 20 seconds.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
# What a fresh clone does not have.
NOT_IN_A_CLONE = shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "__pycache__",
                                        ".pytest_cache", ".hypothesis", "node_modules")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503's normal form


def runtime_pins() -> dict[str, str]:
    """The version installed here of every package that `pip install .[lab]` brings in: the
    dependencies in pyproject.toml and the `lab` extra, and theirs, recursively."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]
            + project["optional-dependencies"]["lab"]]
    pins: dict[str, str] = {}
    while todo:
        requirement = todo.pop()
        if _name(requirement.name) in pins:
            continue
        dist = metadata.distribution(requirement.name)
        pins[_name(requirement.name)] = dist.version
        for text in dist.requires or []:
            needed = Requirement(text)
            extras = requirement.extras or {""}
            if not needed.marker or any(needed.marker.evaluate({"extra": e}) for e in extras):
                todo.append(needed)
    return pins


def test_binder_requirements_pin_what_the_tests_ran():
    """Binder installs exactly the versions this environment, where the tests run, has."""
    lines = [ln for ln in (BINDER / "requirements.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    pinned = dict(ln.split("==") for ln in lines)
    expected = runtime_pins()
    assert {_name(n): v for n, v in pinned.items()} == expected, \
        "binder/requirements.txt should be:\n" + "\n".join(
            f"{n}=={v}" for n, v in sorted(expected.items()))


def test_binder_files_are_there():
    assert "graphviz" in (BINDER / "apt.txt").read_text().split()
    assert re.search(r"^jupyterlab", (BINDER / "requirements.txt").read_text(), re.M)
    version = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", version)
    assert int(version.split(".")[1]) >= 11  # pyproject.toml: requires-python >= 3.11
    assert os.access(BINDER / "postBuild", os.X_OK)


LAUNCH = textwrap.dedent("""
    import json, sys
    import fcl
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import start_new_kernel

    spec = KernelSpecManager().get_kernel_spec("fcl")
    km, kc = start_new_kernel(kernel_name="fcl", startup_timeout=120)
    results = []
    try:
        for code in sys.argv[1:]:
            msg_id = kc.execute(code)
            reply = kc.get_shell_msg(timeout=180)
            outputs = []
            while True:
                msg = kc.get_iopub_msg(timeout=60)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                kind, content = msg["msg_type"], msg["content"]
                if kind == "status" and content["execution_state"] == "idle":
                    break
                if kind == "stream":
                    outputs.append(["stream", content["text"]])
                elif kind in ("execute_result", "display_data"):
                    outputs.append([kind, content["data"].get("text/plain", "")])
                elif kind == "error":
                    outputs.append(["error", content["evalue"]])
            results.append({"status": reply["content"]["status"], "outputs": outputs})
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    print(json.dumps({"fcl": fcl.__file__, "argv": spec.argv, "spec_dir": spec.resource_dir,
                      "results": results}))
""")


@pytest.mark.slow
def test_postbuild_in_a_fresh_environment(tmp_path):
    clone = tmp_path / "clone"
    shutil.copytree(ROOT, clone, ignore=NOT_IN_A_CLONE)
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"

    env = {k: v for k, v in os.environ.items()
           if k not in ("JUPYTER_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               VIRTUAL_ENV=str(env_dir), PYTHONNOUSERSITE="1",
               # No kernelspec of the user's (or of another test) may stand in for the new one.
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-runtime"))
    build = subprocess.run(["bash", str(clone / "binder" / "postBuild")], cwd=clone, env=env,
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cells = [
        "fun square x = x * x\nsquare 12",
        "val main = do<grid> { forceAndPrint 4 (push<grid> (generate 4 (fn i => square i))) }",
        "forcePull<grid> (generate 5 (fn i => 10 * i))",
        "%lsmagic",
    ]
    run = subprocess.run([str(python), "-c", LAUNCH, *cells], cwd=elsewhere, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])

    # The kernel is the one postBuild installed, running the installed package.
    assert Path(report["spec_dir"]).resolve().is_relative_to(env_dir.resolve())
    assert Path(report["argv"][0]).parent.resolve() == (env_dir / "bin").resolve()
    assert Path(report["fcl"]).resolve().is_relative_to(env_dir.resolve())

    square, printed, program, magics = report["results"]
    assert all(r["status"] == "ok" for r in report["results"]), report["results"]
    assert square["outputs"] == [["execute_result", "144"]]
    assert printed["outputs"][0] == ["stream", "[0,1,4,9]\n"]  # then main's result
    assert program["outputs"] == [["execute_result", "[0,10,20,30,40]"]]
    assert "%%opencl" in magics["outputs"][0][1]
