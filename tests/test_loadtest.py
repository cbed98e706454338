"""A class on one machine: tools/loadtest.py's students on a real JupyterHub, and the parts of the
FCL kernel that let a class share a server (what the load test measures, one part at a time):
PoCL's bounded thread count, the pool given back when the kernel goes idle, the bounded program
cache. The hub and the proxy are the real ones (`make test-setup` installs configurable-http-proxy
into build/proxy); without the proxy the hub tests are skipped, except under FCL_E2E=required (CI,
where a skipped test would hide that it is missing)."""
import io
import os

import pytest
from jupyter_client.manager import start_new_kernel

from fcl import explain
from fcl.notebook import Workspace
from fcl.runtime import device as cl_device
from hub import hub_proxy
from kernels import BIG_CELL, big_cell, execute, result_text, rss_bytes, stdout
from tools import loadtest

MB = 10**6


@pytest.mark.slow
def test_five_students_run_a_course_notebook_on_a_hub():
    """Every cell of notebook 03 for five students at once, each through the hub's API, the proxy
    and a kernel's websocket: none fails, no kernel is lost, and once idle a student's kernel
    (with its build helper gone) holds at most 200 MB of private memory; then the fair-sharing
    round runs."""
    row = loadtest.run_class(5, proxy=hub_proxy())
    assert row["failures"] == [] and row["lost"] == []
    assert row["cells"] == 5 * len(loadtest.code_cells(loadtest.NOTEBOOK))
    assert len(row["settled"]) == 5
    # What each student costs the server: private memory (the dirty pages), not RSS, which also
    # counts the clean pages of the libraries every kernel shares, and depends on how they were
    # built: Debian's PoCL links LLVM as a shared library, and its kernels' RSS is 240 MB with
    # 85 MB private.
    assert max(loadtest.settled_mb(row, "private")) <= 200, row["settled"]
    assert row["light_p95_during"] > 0 and row["heavy_s"] > 0
    assert loadtest.table([row]).splitlines()[2].startswith("| 5 | ")


def _worker_threads(**env) -> tuple[int, int]:
    """The threads of a kernel that has run an OpenCL cell, and the PoCL CPU devices it loaded.
    Each PoCL's CPU (pthread) device starts one worker per compute unit when OpenCL loads the
    platforms, next to the kernel's own threads; every PoCL installed does, whichever device the
    cells run on (Debian's pocl-opencl-icd and pip's pocl-binary-distribution: two)."""
    settings = {k: v for k, v in os.environ.items()
                if not k.startswith(("POCL_", "FCL_CPU", "JUPYTERHUB_"))}
    km, kc = start_new_kernel(kernel_name="fcl", env={**settings, **env})
    try:
        assert result_text(execute(kc, "forcePull<grid> (generate 3 (fn i => i))")[1]) == "[0,1,2]"
        threads = len(os.listdir(f"/proc/{km.provisioner.process.pid}/task"))
        pocls = stdout(execute(kc, "%device")[1]).count("[Portable Computing Language, CPU]")
        return threads, pocls
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_the_kernels_opencl_thread_bound_reaches_pocl():
    (one, pocls), (three, _) = (_worker_threads(FCL_CPU_THREADS="1"),
                                _worker_threads(FCL_CPU_THREADS="3"))
    # Two more workers in each PoCL: the bound reaches every one (its count in its own variable:
    # POCL_MAX_PTHREAD_COUNT up to PoCL 3, POCL_CPU_MAX_CU_COUNT from 4 on; lean.py sets both).
    assert pocls >= 1
    assert three - one == 2 * pocls
    # On a JupyterHub (which sets JUPYTERHUB_USER) the kernel takes one thread unless told.
    assert _worker_threads(JUPYTERHUB_USER="student")[0] == one


@pytest.mark.slow
def test_an_idle_kernel_gives_its_cells_arrays_back():
    """After a cell of 96 MB of arrays, the kernel, idle, holds less than one of them more than
    before: its pool gave them back, and glibc returned them to the system."""
    km, kc = start_new_kernel(kernel_name="fcl")
    try:
        assert result_text(execute(kc, big_cell(8))[1]) == "16"  # built, OpenCL loaded
        before = rss_bytes(km)
        assert result_text(execute(kc, BIG_CELL)[1]) == "16000000"
        assert rss_bytes(km) - before < 32 * MB
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_program_cache_keeps_the_most_recently_used(monkeypatch):
    monkeypatch.setattr(cl_device, "PROGRAMS_KEPT", 2)
    workspace, out = Workspace(), io.StringIO()

    def run(k: int) -> None:
        workspace.execute(f"forcePull<grid> (generate 4 (fn i => i * {k}))", out, out)

    for k in (101, 102, 101, 103):  # 101 used again after 102: 102 is the one dropped
        run(k)
    builds = cl_device.build_count
    run(101)
    assert cl_device.build_count == builds
    run(102)
    assert cl_device.build_count == builds + 1


def test_only_the_explanations_traced_last_keep_their_traces(monkeypatch):
    """A notebook's memory explorers keep their explanations; the older ones' traces go, and come
    back, the same, when asked for again."""
    monkeypatch.setattr(explain, "TRACES_KEPT", 1)
    workspace = Workspace()
    first = workspace.explain_cell("forcePull<grid> (generate 64 (fn i => i * 3))")
    counted = [(k.load_requests, k.store_requests) for k in first.costs()]
    second = workspace.explain_cell("forcePull<grid> (generate 64 (fn i => i + 1))")
    second.costs()
    assert first._traces == {} and list(second._traces) == [0]
    assert [(k.load_requests, k.store_requests) for k in first.costs()] == counted  # traced again
    assert second._traces == {}
