"""`make bench`: the FCL programs of bench/ against hand-written OpenCL (bench/reference.cl).

Both run on the same device with the same input data; their results must agree (and match
numpy). Times are kernel times from OpenCL profiling events, summed over a run's kernels, the
median of several runs after a warm-up. Bandwidth is the bytes a task must read and write
divided by its time, as a fraction of what the copy kernel achieves. Compile speed is measured
too (FCL source to OpenCL source for the matmul program), and the Jupyter kernel against its
goals: start-up, the interrupt of an endless loop, a warm kernel cell.

    python bench/run.py [--runs N] [--tiny] [--device D] [--only WHAT] [--no-record] [--no-cell]

`--only` (repeatable) names a task, or compile, startup, interrupt, cell, or jupyter (the last
three): `make bench BENCH_ARGS="--only jupyter"` measures only the kernel.
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyopencl as cl

from fcl.errors import Source
from fcl.opencl.device import Device, build, open_device
from fcl.opencl.host import DeviceArray, HostRun
from fcl.pipeline import CompileOptions, compile_program, main_root
from fcl.session import Session

HERE = Path(__file__).parent


@dataclass
class Sizes:
    block: int      # work-group size of the 1-D kernels (#BlockSize)
    n: int          # elements of copy, reverse, reduce and scan
    side: int       # transpose: a side x side matrix
    tile: int       # transpose and matmul tiles: tile x tile, tile * tile == block
    per_item: int   # scan: elements per work-item
    scan_n: int
    matmul: tuple[int, int, int]  # hA, wA, wB


FULL = Sizes(block=256, n=1 << 22, side=2048, tile=16, per_item=8, scan_n=1 << 22,
             matmul=(512, 512, 512))
# For tests: every kernel runs, on inputs small enough to check on any device in moments.
TINY = Sizes(block=16, n=1024, side=32, tile=4, per_item=2, scan_n=1024, matmul=(16, 12, 8))


@dataclass
class Task:
    name: str
    fcl: str                 # file in bench/
    entry: str               # the grid program to run
    sizes: dict[str, int]    # FCL definitions the program expects
    inputs: dict[str, np.ndarray]
    expected: Callable[[dict[str, np.ndarray]], np.ndarray]
    reference: Callable[[Reference, dict[str, DeviceArray]], tuple[list[cl.Event], object]]
    traffic: int             # bytes the task must read and write at least


def tasks(s: Sizes, rng: np.random.Generator) -> list[Task]:
    def ints(count: int, low: int = -100, high: int = 100) -> np.ndarray:
        return rng.integers(low, high, count, dtype=np.int32)

    vector = ints(s.n)
    matrix = ints(s.side * s.side)
    scan_in = ints(s.scan_n)
    hA, wA, wB = s.matmul
    a, b = ints(hA * wA, -8, 8), ints(wA * wB, -8, 8)
    word = 4
    return [
        Task("copy", "copy.fcl", "copy", {"n": s.n}, {"input": vector},
             lambda i: i["input"], Reference.copy, 2 * word * s.n),
        Task("reverse", "reverse.fcl", "reversed", {"n": s.n}, {"input": vector},
             lambda i: i["input"][::-1], Reference.reverse, 2 * word * s.n),
        Task("transpose", "transpose.fcl", "transposed",
             {"rows": s.side, "cols": s.side, "tile": s.tile}, {"input": matrix},
             lambda i: i["input"].reshape(s.side, s.side).T.flatten(), Reference.transpose,
             2 * word * s.side * s.side),
        Task("reduce (partial)", "reduce.fcl", "partial", {"n": s.n}, {"input": vector},
             lambda i: _pad(i["input"], 2 * s.block).reshape(-1, 2 * s.block).sum(axis=1,
                                                                                  dtype=np.int32),
             Reference.reduce_partial, word * s.n),
        Task("reduce (full)", "reduce.fcl", "full", {"n": s.n}, {"input": vector},
             lambda i: np.array([i["input"].sum(dtype=np.int32)]), Reference.reduce_full,
             word * s.n),
        Task("scan", "scan.fcl", "scanned", {"n": s.scan_n, "perItem": s.per_item},
             {"input": scan_in}, lambda i: np.cumsum(i["input"], dtype=np.int32),
             Reference.scan, 2 * word * s.scan_n),
        Task("matmul", "matmul.fcl", "product",
             {"hA": hA, "wA": wA, "wB": wB, "tile": s.tile}, {"a": a, "b": b},
             lambda i: (i["a"].reshape(hA, wA) @ i["b"].reshape(wA, wB)).flatten(),
             Reference.matmul, word * (hA * wA + wA * wB + hA * wB)),
    ]


def _pad(values: np.ndarray, multiple: int) -> np.ndarray:
    return np.concatenate([values, np.zeros(-len(values) % multiple, values.dtype)])


# ---- the hand-written side -----------------------------------------------------------------------

class Reference:
    """reference.cl built for the sizes; each method enqueues one run of a task."""

    def __init__(self, device: Device, s: Sizes):
        self.device, self.s = device, s
        options = [f"-DBLOCK_SIZE={s.block}", f"-DTILE_DIM={s.tile}",
                   f"-DSCAN_PER_ITEM={s.per_item}"]
        source = (HERE / "reference.cl").read_text()
        program = cl.Program(device.context, source).build(options=options)
        self.kernels = {k.function_name: k for k in program.all_kernels()}
        self.buffers: dict[tuple, cl.Buffer] = {}

    def out(self, key: str, count: int) -> cl.Buffer:
        """An output buffer kept from run to run, as the FCL side keeps its own."""
        if (key, count) not in self.buffers:
            self.buffers[key, count] = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE,
                                                 max(count, 1) * 4)
        return self.buffers[key, count]

    def launch(self, name: str, global_size, local_size, *args) -> cl.Event:
        return self.kernels[name](self.device.queue, global_size, local_size, *args)

    def groups_of(self, count: int, per_group: int) -> int:
        return (count + per_group - 1) // per_group

    def linear(self, name: str, inputs):
        x = inputs["input"]
        out = self.out(name, x.length)
        size = self.groups_of(x.length, self.s.block) * self.s.block
        event = self.launch(name, (size,), (self.s.block,), x.buffer, out, np.int32(x.length))
        return [event], (out, x.length)

    def copy(self, inputs):
        return self.linear("copy", inputs)

    def reverse(self, inputs):
        return self.linear("reverse", inputs)

    def transpose(self, inputs):
        side, tile = self.s.side, self.s.tile
        out = self.out("transpose", side * side)
        event = self.launch("transpose", (side, side), (tile, tile), inputs["input"].buffer, out,
                            np.int32(side), np.int32(side))
        return [event], (out, side * side)

    def reduce_pass(self, source: cl.Buffer, count: int, key: str):
        groups = self.groups_of(count, 2 * self.s.block)
        out = self.out(key, groups)
        event = self.launch("reduce", (groups * self.s.block,), (self.s.block,), source, out,
                            np.int32(count))
        return event, out, groups

    def reduce_partial(self, inputs):
        x = inputs["input"]
        event, out, groups = self.reduce_pass(x.buffer, x.length, "partial")
        return [event], (out, groups)

    def reduce_full(self, inputs):
        x = inputs["input"]
        events, source, count, round = [], x.buffer, x.length, 0
        while True:
            event, source, count = self.reduce_pass(source, count, f"full{round}")
            events.append(event)
            round += 1
            if count == 1:
                return events, (source, 1)

    def scan(self, inputs):
        x, s = inputs["input"], self.s
        chunk = s.block * s.per_item
        chunks = self.groups_of(x.length, chunk)
        assert chunks <= chunk, "the chunks' totals are scanned in one work-group"
        out, sums, scanned = self.out("scan", x.length), self.out("sums", chunks), \
            self.out("scanned", chunks)
        events = [
            self.launch("scan_chunks", (chunks * s.block,), (s.block,), x.buffer, out, sums,
                        np.int32(x.length), np.int32(1)),
            self.launch("scan_chunks", (s.block,), (s.block,), sums, scanned, sums,
                        np.int32(chunks), np.int32(0)),
            self.launch("scan_add", (chunks * s.block,), (s.block,), out, scanned,
                        np.int32(x.length)),
        ]
        return events, (out, x.length)

    def matmul(self, inputs):
        (hA, wA, wB), tile = self.s.matmul, self.s.tile
        out = self.out("matmul", hA * wB)
        event = self.launch("matmul", (wB, hA), (tile, tile), inputs["a"].buffer,
                            inputs["b"].buffer, out, np.int32(wA), np.int32(wB))
        return [event], (out, hA * wB)


# ---- the FCL side --------------------------------------------------------------------------------

class BenchRun(HostRun):
    """A host run whose readIntCSV reads the benchmark's device buffers, and whose allocations are
    kept from run to run: fresh memory would add page faults to the kernel times."""

    def __init__(self, device: Device, kernels, block_size: int, inputs: dict[str, DeviceArray]):
        super().__init__(device, kernels, block_size, io.StringIO(), io.StringIO())
        self.inputs = inputs
        self.kept: list[DeviceArray] = []
        self.allocations = 0

    def read_csv(self, s) -> None:
        array = self.inputs[s.path]
        self.env[s.array.name] = array
        self.env[s.length.name] = np.int32(array.length)

    def allocate(self, s) -> DeviceArray:
        if self.allocations == len(self.kept):
            self.kept.append(super().allocate(s))
        array = self.kept[self.allocations]
        assert array.length == int(self.eval(s.size)), "runs allocate the same arrays"
        self.allocations += 1
        return array

    def once(self, host) -> tuple[list[cl.Event], object]:
        self.allocations, self.events = 0, []
        self.run(host)
        return self.events, self.result


def fcl_source(task: Task) -> str:
    sizes = "".join(f"val {name} = {value}\n" for name, value in task.sizes.items())
    return sizes + (HERE / task.fcl).read_text() + f"\nval main = {task.entry}\n"


def _renumbered(source: str) -> str:
    """OpenCL source without the numbers that make its variable names unique."""
    return re.sub(r"_\d+\b", "", source)


def compile_task(task: Task, block: int, checks: bool = True):
    session = Session.new()
    session.add_file(Source(task.fcl, fcl_source(task)))
    return compile_program(session, main_root(session),
                           CompileOptions(block, checks=checks, keep_result=True))


# ---- measuring -----------------------------------------------------------------------------------

def kernel_ms(events: list[cl.Event]) -> float:
    cl.wait_for_events(events)
    return sum(e.profile.end - e.profile.start for e in events) / 1e6


def timed(sides: list[Callable[[], tuple[list[cl.Event], object]]], runs: int):
    """For each side: the median kernel time of `runs` runs after a warm-up, the times, the
    warm-up's result and its number of kernel launches. The sides take turns run by run, so
    that a change in the machine's load affects both alike."""
    warm = [run_once() for run_once in sides]
    launches = [len(events) for events, _ in warm]
    for events, _ in warm:
        kernel_ms(events)
    times: list[list[float]] = [[] for _ in sides]
    for _ in range(runs):
        for run_once, side_times in zip(sides, times):
            events, _ = run_once()
            side_times.append(kernel_ms(events))
    return [(statistics.median(t), t, result, n)
            for t, (_, result), n in zip(times, warm, launches)]


def to_host(device: Device, value) -> np.ndarray:
    if isinstance(value, tuple) and isinstance(value[0], cl.Buffer):
        buffer, count = value
        host = np.empty(count, np.int32)
        cl.enqueue_copy(device.queue, host, buffer)
        return host
    return np.atleast_1d(value)  # a scalar result


def upload(device: Device, inputs: dict[str, np.ndarray]) -> dict[str, DeviceArray]:
    return {name: DeviceArray(cl.Buffer(device.context,
                                        cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                                        hostbuf=values), np.int32, len(values))
            for name, values in inputs.items()}


def check(task: Task, reference: np.ndarray, fcl: np.ndarray) -> None:
    expected = np.asarray(task.expected(task.inputs))
    for who, got in (("reference", reference), ("FCL", fcl)):
        if got.shape != expected.shape or not np.array_equal(got, expected):
            raise AssertionError(f"{task.name}: the {who} result differs from numpy's")


def measure(s: Sizes, runs: int, device: Device, only: set[str] | None = None) -> list[dict]:
    reference = Reference(device, s)
    rows = []
    for task in tasks(s, np.random.default_rng(7)):
        if only and task.name not in only:
            continue
        inputs = upload(device, task.inputs)
        compiled = compile_task(task, s.block)
        # The same program without run-time checks: what the checks the compiler could not
        # prove away cost (goal: nothing, see CHECKED_GOAL). Identical kernels cost the same
        # (what the host checks is not in the kernel times): they are not timed twice.
        unchecked = compile_task(task, s.block, checks=False)
        same = _renumbered(unchecked.source) == _renumbered(compiled.source)
        run = BenchRun(device, build(device, compiled.source), s.block, inputs)
        bare = BenchRun(device, build(device, unchecked.source), s.block, inputs)
        try:
            sides = [partial(task.reference, reference, inputs), partial(run.once, compiled.host)]
            sides += [] if same else [partial(bare.once, unchecked.host)]
            (ref_ms, ref_times, ref_out, ref_launches), (fcl_ms, fcl_times, fcl_out,
                                                         fcl_launches), *rest = timed(sides, runs)
            check(task, to_host(device, ref_out), to_host(device, fcl_out))
            bare_ms = rest[0][0] if rest else fcl_ms
            if rest:
                check(task, to_host(device, ref_out), to_host(device, rest[0][2]))
        finally:
            run.release()
            bare.release()
        rows.append({"task": task.name, "reference_ms": ref_ms, "fcl_ms": fcl_ms,
                     "ratio": fcl_ms / ref_ms, "bytes": task.traffic,
                     "unchecked_ms": bare_ms, "checked_ratio": fcl_ms / bare_ms,
                     "same_kernels": same,
                     "kernel_checks": sum(len(k.fails) for k in compiled.kernels),
                     "launches": {"reference": ref_launches, "fcl": fcl_launches},
                     "reference_times_ms": ref_times, "fcl_times_ms": fcl_times})
        for buffer in inputs.values():
            buffer.buffer.release()
    copy = next((r for r in rows if r["task"] == "copy"), None)
    for row in rows:
        if copy is not None:
            copy_rate = copy["bytes"] / copy["reference_ms"]
            row["reference_bandwidth"] = row["bytes"] / row["reference_ms"] / copy_rate
            row["fcl_bandwidth"] = row["bytes"] / row["fcl_ms"] / copy_rate
    return rows


# ---- compile speed -------------------------------------------------------------------------------

def compile_speed(s: Sizes, repeats: int = 7) -> float:
    """Median ms from FCL source to OpenCL source for the matmul program (the prelude checked
    once before, as in any process that has compiled something)."""
    task = next(t for t in tasks(s, np.random.default_rng(0)) if t.name == "matmul")
    compile_task(task, s.block)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        compile_task(task, s.block)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


# ---- the Jupyter kernel: start-up, interrupts, a warm cell ---------------------------------------
#
# What a notebook user waits for, each with its goal. The tests check the behaviour behind these
# (the kernel starts, an interrupt stops a loop and keeps the definitions) only within bounds a
# loaded machine keeps; the speed is measured here. The kernel is driven as in
# tests/test_kernel.py: jupyter_client's KernelManager and BlockingKernelClient.

# Run-time checks the compiler cannot prove away may cost at most this (checked / unchecked).
CHECKED_GOAL = 1.02
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


# ---- reporting -----------------------------------------------------------------------------------

def _ms(value: float) -> str:
    """A time in ms, in seconds from one second on."""
    return f"{value / 1e3:.2f} s" if value >= 1000 else f"{value:.1f} ms"


def table(rows: list[dict], compile_ms: float | None, kernel: dict | None = None) -> str:
    lines = []
    if rows:
        lines += ["| task | reference ms | FCL ms | FCL / reference | reference bandwidth | "
                  "FCL bandwidth | checked / unchecked | checks in kernels |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['task']} | {r['reference_ms']:.3f} | {r['fcl_ms']:.3f} | "
                         f"{r['ratio']:.2f} | {r.get('reference_bandwidth', 0):.2f} | "
                         f"{r.get('fcl_bandwidth', 0):.2f} | {r['checked_ratio']:.3f}"
                         f"{' (same kernels)' if r['same_kernels'] else ''} | "
                         f"{r['kernel_checks']} |")
    if compile_ms is not None:
        lines += [""] if lines else []
        lines.append(f"FCL source to OpenCL source (matmul): {compile_ms:.1f} ms")
    if kernel:
        lines += [""] if lines else []
        lines += ["| Jupyter kernel | median | goal | met | runs |", "|---|---:|---:|---|---|"]
        for entry in kernel.values():
            goal = entry["goal_ms"]
            goal_text = f"{goal / 1e3:g} s" if goal >= 1000 else f"{goal:g} ms"
            runs = ", ".join(f"{t:.1f}" for t in entry["runs_ms"])
            lines.append(f"| {entry['what']} | {_ms(entry['median_ms'])} | < {goal_text} | "
                         f"{'yes' if entry['met'] else '**no**'} | {runs} ms |")
    return "\n".join(lines)


SECTIONS = ("compile", "startup", "interrupt", "cell")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per kernel (at least 5)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: a correctness check")
    parser.add_argument("--device", help="platform:device or part of a name")
    parser.add_argument("--only", action="append", metavar="WHAT",
                        help="measure only this (repeatable): a task (copy, matmul, ...), "
                             f"{', '.join(SECTIONS)}, or jupyter (startup, interrupt and cell)")
    parser.add_argument("--no-record", action="store_true",
                        help="print only: leave results.json and README.md alone")
    parser.add_argument("--no-cell", action="store_true",
                        help="skip the Jupyter kernel's measurements (where no FCL kernel is "
                             "installed)")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    names = {t.name for t in tasks(sizes, np.random.default_rng(0))}
    only = set(args.only or ())
    if "jupyter" in only:
        only = (only - {"jupyter"}) | {"startup", "interrupt", "cell"}
    if only - names - set(SECTIONS):
        parser.error(f"--only: unknown {', '.join(sorted(only - names - set(SECTIONS)))}")
    wanted = (lambda name: name in only) if only else (lambda name: True)
    device = open_device(args.device)
    chosen = {name for name in names if wanted(name)}
    rows = measure(sizes, args.runs, device, chosen) if chosen else []
    compile_ms = compile_speed(sizes) if wanted("compile") else None
    sections = set() if args.tiny or args.no_cell else {s for s in SECTIONS[1:] if wanted(s)}
    kernel = jupyter(sections) if sections else None
    report = table(rows, compile_ms, kernel)
    date = datetime.date.today().isoformat()
    print(f"{device.name}, {date}\n\n{report}")
    missed = [entry["what"] for entry in (kernel or {}).values() if not entry["met"]]
    missed += [f"{r['task']}: checked / unchecked {r['checked_ratio']:.3f} > {CHECKED_GOAL}"
               for r in rows if r["checked_ratio"] > CHECKED_GOAL]
    if missed:
        print(f"\ngoals missed: {'; '.join(missed)}")
    if not args.no_record:
        # One entry per device: a run on another device (a GPU) keeps this one's. A run of some
        # measurements (--only) replaces those and keeps the rest.
        path = HERE / "results.json"
        results = json.loads(path.read_text()) if path.exists() else {}
        entry = results.get(device.name, {})
        entry["date"] = date
        if rows:
            entry.update(sizes=vars(sizes), runs=args.runs)
            measured = {r["task"] for r in rows}
            entry["tasks"] = [r for r in entry.get("tasks", []) if r["task"] not in measured] + rows
        if compile_ms is not None:
            entry["compile_ms"] = compile_ms
        if kernel:
            entry.setdefault("kernel", {}).update(kernel)
            if "cell" in kernel:
                entry["cell_round_trip_ms"] = kernel["cell"]["median_ms"]
        results[device.name] = entry
        path.write_text(json.dumps(results, indent=2) + "\n")
        with open(HERE / "README.md", "a") as readme:
            readme.write(f"\n### {device.name}, {date}\n\n{report}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
