"""The Jupyter kernel: start-up, interrupts, a warm cell.

What a notebook user waits for, each with its goal. The tests check the behaviour behind these
(the kernel starts, an interrupt stops a loop and keeps the definitions) only within bounds a
loaded machine keeps; the speed is measured here. The kernel is driven as in
tests/kernels.py: jupyter_client's KernelManager and BlockingKernelClient."""
from __future__ import annotations

import statistics
import time

GOALS_MS = {
    "startup": 2000.0,    # launch to the kernel's first kernel_info reply
    "interrupt": 1000.0,  # interrupt of an endless loop to the cell's reply (docs/language.md)
    "cell": 100.0,        # a warm kernel cell, request to idle: a tenth of a second feels instant
}


# A kernel cell: definitions, then a grid program (a tiled transpose) whose result is shown.
CELL = """\
val side = 64
fun flip tile = pushM<block> (transpose 16 16 tile)
do<grid> {
    xs <- forcePull<grid> (generate (side * side) (fn i => i * 7 % 13));
    forceM<grid> (splitGrid 16 side side xs |> map flip
                  |> transpose (side / 16) (side / 16) |> concatGrid<block> 16 side)
  }
"""


# The endless loops of tests/test_kernel.py: a loop of the host program (on the interpreter and
# on OpenCL), and a `while` inside an OpenCL kernel, which stops only with the kernel's help.
GRID_LOOP = ("val main = do<grid> { xs <- while<grid> (fn a => true) "
             "(fn a => pushM<grid> (mapPull (fn x => x + 1) a)) "
             "(pushM<grid> (generate 1000 (fn i => i))) ; forceAndPrint 1 (push<grid> xs) }")


KERNEL_LOOP = ("val main = do<grid> { ys <- generate 2 (fn b => do<block> { a <- while<block> "
               "(fn a => true) (fn a => pushM<block> (mapPull (fn x => x + 1) a)) "
               "(pushM<block> (generate 64 (fn i => i))) ; pushM<block> a }) "
               "|> concat<block> 64 ; forceAndPrint 3 ys }")


INTERRUPTED = [("interpreter loop", "interp", GRID_LOOP),
               ("OpenCL host loop", "opencl", GRID_LOOP),
               ("loop in an OpenCL kernel", "opencl", KERNEL_LOOP)]


def start_kernel():
    from jupyter_client.manager import start_new_kernel
    return start_new_kernel(kernel_name="fcl", startup_timeout=120)


def stop_kernel(km, kc) -> None:
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def reply_to(kc, msg_id: str, timeout: float = 120) -> dict:
    """The shell reply to msg_id (replies to earlier requests skipped)."""
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply


def run_cell(kc, code: str) -> None:
    """Execute code and wait for the kernel to go idle; an error is a RuntimeError."""
    msg_id = kc.execute(code)
    while True:
        msg = kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            raise RuntimeError("\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return


def kernel_startup(repeats: int = 5) -> list[float]:
    """Ms from launching a kernel to its first kernel_info reply (what start_new_kernel
    waits for: the notebook shows the kernel idle), for each of `repeats` starts after one that
    is not counted (it fills the file cache with the kernel's modules)."""
    times = []
    for attempt in range(repeats + 1):
        start = time.perf_counter()
        km, kc = start_kernel()
        elapsed = (time.perf_counter() - start) * 1e3
        stop_kernel(km, kc)
        if attempt:
            times.append(elapsed)
    return times


def interrupt_latency(repeats: int = 5) -> dict[str, list[float]]:
    """For each endless loop: ms from the interrupt (SIGINT, as the notebook's stop button
    sends it) to the reply of the interrupted cell, the loop having run for a second; after one
    run that is not counted (it builds the OpenCL program). The definitions must survive."""
    km, kc = start_kernel()
    try:
        run_cell(kc, "val kept = 7")
        found = {}
        for name, backend, loop in INTERRUPTED:
            run_cell(kc, f"%config backend={backend}")
            times = []
            for attempt in range(repeats + 1):
                msg_id = kc.execute(loop)
                time.sleep(1.0)
                start = time.perf_counter()
                km.interrupt_kernel()
                reply = reply_to(kc, msg_id)
                elapsed = (time.perf_counter() - start) * 1e3
                if reply["content"].get("ename") != "KeyboardInterrupt":
                    raise RuntimeError(f"{name}: the interrupt gave {reply['content']}")
                if attempt:
                    times.append(elapsed)
            found[name] = times
        run_cell(kc, "%config backend=opencl")
        run_cell(kc, "kept")  # still defined
        return found
    finally:
        stop_kernel(km, kc)


def cell_round_trip(repeats: int = 7) -> list[float]:
    """Ms for a Jupyter kernel (already warm) to compile and run a kernel cell, from sending
    execute_request to the kernel going idle, for each of `repeats` runs after the first (which
    builds the OpenCL program)."""
    km, kc = start_kernel()
    try:
        times = []
        for attempt in range(repeats + 1):
            start = time.perf_counter()
            run_cell(kc, CELL)
            if attempt:
                times.append((time.perf_counter() - start) * 1e3)
        return times
    finally:
        stop_kernel(km, kc)


def jupyter(sections: set[str]) -> dict:
    """The Jupyter kernel's measurements named in sections ("startup", "interrupt", "cell"):
    each a median with its runs and its goal."""
    found: dict = {}

    def record(key: str, what: str, goal: str, times: list[float]) -> None:
        median = statistics.median(times)
        found[key] = {"what": what, "median_ms": median, "goal_ms": GOALS_MS[goal],
                      "met": median < GOALS_MS[goal], "runs_ms": times}

    if "startup" in sections:
        record("startup", "kernel start-up (launch to the first kernel_info reply)", "startup",
               kernel_startup())
    if "interrupt" in sections:
        for name, times in interrupt_latency().items():
            record(f"interrupt: {name}", f"interrupt of an endless loop ({name}) to its reply",
                   "interrupt", times)
    if "cell" in sections:
        record("cell", "warm kernel cell round trip (request to idle)", "cell",
               cell_round_trip())
    return found
