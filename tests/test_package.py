"""The package as a user gets it: one version, its metadata and readme, the sdist, a wheel in a
fresh environment, and PyOpenCL left as it was for other code (Oclgrind loaded only to check)."""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

import pyopencl as cl
import pytest

import fcl
from built_package import build_wheel, fresh_clone
from fcl.errors import FCLError
from fcl.runtime.device import device_type_text, pick_device
from fcl.runtime.oclgrind_icd import ICD_FILE, install_oclgrind

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
REPOSITORY = PROJECT["urls"]["Repository"]


def plain_environment() -> dict[str, str]:
    """This process's environment without the variables that FCL's checking runs set."""
    return {k: v for k, v in os.environ.items()
            if k != "OCL_ICD_VENDORS" and not k.startswith("OCLGRIND_")}


# ---- one version, the metadata ---------------------------------------------------------------

@pytest.mark.slow  # 0.9-1.7 s, a process
def test_fcl_version_is_the_package_version():
    result = subprocess.run([sys.executable, "-m", "fcl", "--version"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"fcl {fcl.__version__}\n"
    assert metadata.version("fcl-jupyter") == fcl.__version__
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]


def test_license_classifiers_and_urls():
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and \
        "Copyright (c) 2026 the FCL for Jupyter authors" in text
    assert "Framework :: Jupyter" in PROJECT["classifiers"]
    # The Python versions the suite was run on (3.12 and 3.13: its language and back-end tests,
    # from the wheel, on 2026-11-27), and no other.
    versions = [c.rsplit(" ", 1)[1] for c in PROJECT["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions == ["3.11", "3.12", "3.13"]
    assert PROJECT["requires-python"] == ">=3.11"
    assert REPOSITORY.startswith("https://") and {"Repository", "Issues"} <= set(PROJECT["urls"])


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_package_readme_links_absolutely_to_files_that_exist():
    """A package index page has no repository around it: every image and link of the package's
    readme is absolute, and those into the repository name files that are there."""
    readme = PROJECT["readme"]["file"]
    links = LINK.findall((ROOT / readme).read_text())
    images = [url for url in links if url.endswith(".png")]
    assert len(images) == 2 and all(url.startswith("https://") for url in links)
    owner_name = REPOSITORY.removeprefix("https://github.com/")
    for url in links:
        raw = f"https://raw.githubusercontent.com/{owner_name}/main/"
        blob = f"{REPOSITORY}/blob/main/"
        for prefix in (raw, blob):
            if url.startswith(prefix):
                assert (ROOT / url.removeprefix(prefix)).is_file(), url
    assert all(url.startswith("https://raw.githubusercontent.com/") for url in images)


# ---- devices ---------------------------------------------------------------------------------

def test_device_types_are_named_by_their_bits():
    t = cl.device_type
    assert device_type_text(t.GPU) == "GPU"
    assert device_type_text(t.CPU) == "CPU"
    assert device_type_text(t.GPU | t.DEFAULT) == "GPU | DEFAULT"
    assert device_type_text(t.CPU | t.ACCELERATOR) == "CPU | ACCELERATOR"


@pytest.mark.slow  # 0.9-2 s, a process
def test_fcl_devices_lists_types_without_pyopencl_internals():
    result = subprocess.run([sys.executable, "-m", "fcl", "devices"], capture_output=True,
                            text=True, timeout=60, env=plain_environment())
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines
    for line in lines:
        assert re.fullmatch(r"\d+:\d+  .+  \[.+, (GPU|CPU|ACCELERATOR|CUSTOM|DEFAULT)"
                            r"( \| (GPU|CPU|ACCELERATOR|CUSTOM|DEFAULT))*\]  usable", line), line


def test_other_pyopencl_code_does_not_see_oclgrind():
    """Installing FCL leaves PyOpenCL's platforms as they were: no Oclgrind, so
    create_some_context picks what it picked before."""
    script = ("import pyopencl as cl\n"
              "print([p.name for p in cl.get_platforms()])\n"
              "print(cl.create_some_context(interactive=False).devices[0].platform.name)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, env=plain_environment())
    assert result.returncode == 0, result.stderr
    platforms, chosen = result.stdout.splitlines()
    assert "Oclgrind" not in platforms and "Oclgrind" not in chosen


def test_a_checking_process_numbers_devices_as_other_code_does():
    """The test process loads Oclgrind (conftest); it comes first among the loader's platforms,
    yet `0` still means the platform other PyOpenCL code calls 0, and `oclgrind` the simulator."""
    assert any("Oclgrind" in p.name for p in cl.get_platforms())
    assert "Oclgrind" not in pick_device("0").platform.name
    assert "Oclgrind" in pick_device("oclgrind").platform.name
    with pytest.raises(FCLError, match="no OpenCL device matches `9`"):
        pick_device("9")


# Oclgrind is a second platform here only when a user's OCL_ICD_VENDORS makes it one: then
# platform 0 is Oclgrind and PoCL is 1, and every form must pick what PyOpenCL picks.
CTX_FORMS = ["0", "1", "1:pthread", "Portable:0", "portable", "1:0", "oclgrind:0", ":", "0:",
             "PORTABLE:PTHREAD"]
COMPARE = textwrap.dedent("""
    import json, sys
    import pyopencl as cl
    from fcl.runtime.device import pick_device
    same = {}
    for form in sys.argv[1:]:
        theirs = cl.choose_devices(interactive=False, answers=form.split(":"))[0]
        same[form] = [pick_device(form).int_ptr == theirs.int_ptr, theirs.platform.name]
    print(json.dumps(same))
""")


def test_pyopencl_ctx_is_read_by_pyopencls_rules(tmp_path):
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    # PyOpenCL's loader reads its own .libs (PoCL) as well as this directory.
    shutil.copy(install_oclgrind() / ICD_FILE, vendors / ICD_FILE)
    env = dict(plain_environment(), OCL_ICD_VENDORS=str(vendors))
    result = subprocess.run([sys.executable, "-c", COMPARE, *CTX_FORMS], capture_output=True,
                            text=True, timeout=120, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    same = json.loads(result.stdout)
    assert same == {form: [True, same[form][1]] for form in CTX_FORMS}
    assert same["0"][1] == "Oclgrind" and same["1:pthread"][1] == "Portable Computing Language"


# ---- the sdist and the wheel -----------------------------------------------------------------

@pytest.mark.slow
def test_the_sdist_holds_the_package_and_the_extensions_sources_and_no_tests(tmp_path):
    src = fresh_clone(tmp_path / "src")
    result = subprocess.run([sys.executable, "-m", "build", "--sdist", "-o", str(tmp_path)],
                            cwd=src, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (sdist,) = tmp_path.glob("fcl_jupyter-*.tar.gz")
    with tarfile.open(sdist) as tar:
        top = f"fcl_jupyter-{fcl.__version__}/"
        names = {name.removeprefix(top) for name in tar.getnames()}
        info = tar.extractfile(top + "PKG-INFO").read().decode()
    assert {"LICENSE", "pyproject.toml", "docs/package-readme.md", "fcl/__init__.py",
            "fcl/prelude.fcl", "fcl_kernel/resources/kernel.json", "labextension/package.json",
            "labextension/package-lock.json", "labextension/src/index.ts",
            "labextension/style/index.css", "labextension/install.json"} <= names
    assert not [name for name in names if name.startswith(("tests", "labextension/build",
                                                           "labextension/node_modules"))]
    assert f"Version: {fcl.__version__}\n" in info and "License-Expression: MIT\n" in info
    assert f"Project-URL: Repository, {REPOSITORY}\n" in info
    assert "(https://raw.githubusercontent.com/" in info and "](docs/" not in info
    assert "Classifier: Framework :: Jupyter :: JupyterLab :: Extensions :: Prebuilt\n" in info


@pytest.mark.slow
def test_the_wheel_holds_the_built_extension(tmp_path):
    with zipfile.ZipFile(build_wheel(tmp_path)) as wheel:
        names = wheel.namelist()
    shared = f"fcl_jupyter-{fcl.__version__}.data/data/share/jupyter/labextensions/fcl-jupyterlab/"
    assert {shared + "package.json", shared + "install.json",
            shared + "static/style.js"} <= set(names)
    assert [name for name in names if name.startswith(shared + "static/remoteEntry.")]


@pytest.mark.slow
def test_a_wheel_cannot_be_built_without_its_extension(tmp_path):
    # With no npm on the PATH the extension cannot be built, and neither is the wheel.
    src = fresh_clone(tmp_path / "src")
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q",
                             "-w", str(tmp_path)], cwd=src, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "npm" in result.stdout + result.stderr
    assert not list(tmp_path.glob("*.whl"))


FRESH = textwrap.dedent("""
    import json, subprocess, sys
    from importlib import metadata
    import pyopencl as cl
    from jupyter_client.kernelspec import KernelSpecManager
    version = subprocess.run([sys.executable, "-m", "fcl", "--version"], capture_output=True,
                             text=True, check=True).stdout
    print(json.dumps({
        "platforms": [p.name for p in cl.get_platforms()],
        "context": cl.create_some_context(interactive=False).devices[0].platform.name,
        "spec": KernelSpecManager().get_kernel_spec("fcl").resource_dir,
        "version": version, "metadata": metadata.version("fcl-jupyter")}))
""")


@pytest.mark.slow
def test_a_wheel_in_a_fresh_environment(tmp_path):
    """`pip install` of the wheel in a new virtual environment: the kernelspec is found, the
    version is one, and PyOpenCL's platform 0 is not Oclgrind (nor is any platform)."""
    wheel = build_wheel(tmp_path)
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in plain_environment().items()
           if k not in ("JUPYTER_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
               VIRTUAL_ENV=str(env_dir), PYTHONNOUSERSITE="1",
               JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"))
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], env=env,
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run([str(python), "-c", FRESH], cwd=elsewhere, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["platforms"] and "Oclgrind" not in report["platforms"]
    assert report["platforms"][0] == report["context"]
    assert Path(report["spec"]).resolve().is_relative_to(env_dir.resolve())
    assert report["version"] == f"fcl {report['metadata']}\n" == f"fcl {fcl.__version__}\n"
    # JupyterLab (this environment's, with the new one's data folder) finds the extension the
    # wheel installed, prebuilt: no Node.js was needed.
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"],
                            env={**env, "JUPYTER_PATH": str(env_dir / "share" / "jupyter")},
                            capture_output=True, text=True, timeout=300)
    section = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)  # no colours
    section = section[section.index(str(env_dir / "share" / "jupyter" / "labextensions")):]
    assert re.search(r"fcl-jupyterlab v[\d.]+ enabled OK \(python, fcl-jupyter\)", section), \
        section
