"""The Jupyter kernel under a long session: many cells with errors between them, a restart, and
memory that stays flat when a cell is run again and again. (Interrupts are in test_kernel.py.)"""
from __future__ import annotations

import os

import pytest
from jupyter_client.manager import start_new_kernel

from kernels import BIG_CELL, execute, result_text, rss_bytes


def _start(**env):
    km, kc = start_new_kernel(kernel_name="fcl", env={**os.environ, **env})
    return km, kc


@pytest.fixture
def kernel():
    km, kc = _start()
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


@pytest.fixture
def measured_kernel():
    # glibc keeps freed blocks of up to 32 MB for reuse (its mmap threshold grows with each
    # large free), so the RSS of a kernel that frees everything still climbs for a while; with
    # a fixed threshold large blocks go back to the system when freed, and RSS shows what is
    # really held. PoCL's device memory is the process's memory, so RSS counts it too.
    km, kc = _start(MALLOC_MMAP_THRESHOLD_="1048576")
    yield km, kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


# Failing cells of every stage, each of which also tries to redefine `v0`, and the back end.
FAILING = [
    ("opencl", "val v0 = 1 +"),                                          # parse
    ("interp", "val v0 = addi 1 true"),                                  # type
    ("opencl", "val v0 = undefinedName"),                                # scope
    ("opencl", "val v0 = 5\nval main = forceAndPrint 9 (push<grid> (iota 3))"),  # run time
    ("interp", "val v0 = 5\nval main = forceAndPrint 9 (push<grid> (iota 3))"),
    ("interp", "val v0 = 5\nval main = do<grid> { xs <- forcePull<grid> (generate 2000000000 "
               "(fn i => i)) ; forceAndPrint 1 (push<grid> xs) }"),      # too large
]


@pytest.mark.slow  # a kernel of its own, 100 cells: 3-6 s
def test_a_hundred_cells_with_errors_between_them(kernel):
    _, kc = kernel
    defined = []
    for n in range(100):
        if n % 4 == 3:
            backend, cell = FAILING[n // 4 % len(FAILING)]
            execute(kc, f"%config backend={backend}")
            reply, _ = execute(kc, cell)
            assert reply["status"] == "error" and reply["ename"] == "FCLError", (n, reply)
        else:
            # Each good cell uses the previous definition, so every one must have survived.
            previous = f"v{defined[-1]}" if defined else "0"
            reply, messages = execute(kc, f"val v{n} = {previous} + {n}\nv{n}")
            assert reply["status"] == "ok", (n, reply)
            defined.append(n)
            assert result_text(messages) == str(sum(defined))
    reply, messages = execute(kc, "do<grid> { xs <- forcePull<grid> (generate 4 (fn i => i + v0))"
                                  f" ; return<grid> (index xs 3 + v{defined[-1]}) }}")
    assert reply["status"] == "ok"
    assert result_text(messages) == str(3 + sum(defined))


@pytest.mark.slow
def test_restart_gives_a_fresh_kernel_that_works(kernel):
    km, kc = kernel
    execute(kc, "val before = 41")
    execute(kc, "%config backend=interp block_size=64")
    km.restart_kernel(now=True)
    kc.wait_for_ready(timeout=60)
    reply, _ = execute(kc, "before")
    assert reply["status"] == "error" and "`before` is not defined" in reply["evalue"]
    config = "".join(m["content"].get("text", "") for m in execute(kc, "%config")[1])
    assert "backend=auto (opencl)" in config and "block_size=256" in config
    assert result_text(execute(kc, "forcePull<grid> (generate 3 (fn i => i * 7))")[1]) == "[0,7,14]"


def _floor_rise(km, kc, group: int = 8, apart: int = 12) -> int:
    """How far the floor of the kernel's RSS rose over `apart` runs of BIG_CELL: the least RSS
    seen after each of `group` runs, `apart` runs later against now.

    RSS at any one moment says little: the interpreter's arrays are freed when Python's cycle
    collector gets to them, every few cells, so RSS after a cell climbs by a run's arrays (96 MB)
    four or five times in a row and then drops back. The least value over more runs than that
    is what the kernel really holds; it moves with no timing and no load."""
    samples = []
    for _ in range(apart + group):
        assert result_text(execute(kc, BIG_CELL)[1]) == "16000000"
        samples.append(rss_bytes(km))
    return min(samples[apart:]) - min(samples[:group])


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["opencl", "interp"])
def test_memory_does_not_grow_when_a_cell_runs_again(measured_kernel, backend):
    """Twelve more runs may not leave behind as much as one array (32 MB; on a GPU this bounds
    the host side). A kernel that kept anything of a run grows like that in every window (one
    array per run: 384 MB); the test looks at up to three before it concludes that memory grows,
    so that what is not a leak (an allocator pool still filling) cannot fail it."""
    km, kc = measured_kernel
    execute(kc, f"%config backend={backend}")
    for _ in range(3):  # warm up: programs built, caches and allocator pools filled
        assert result_text(execute(kc, BIG_CELL)[1]) == "16000000"
    rises = []
    for _window in range(3):
        rises.append(_floor_rise(km, kc))
        if rises[-1] < 32_000_000:
            return
    pytest.fail(f"RSS grew in every window of 12 runs: {[r // 1_000_000 for r in rises]} MB")
