"""`make bench`: the FCL programs of bench/ against hand-written OpenCL (bench/reference.cl).

Both run on the same device with the same input data; their results must agree (and match
numpy). Times are kernel times from OpenCL profiling events, summed over a run's kernels, the
median of several runs after a warm-up. Bandwidth is the bytes a task must read and write
divided by its time, as a fraction of what the copy kernel achieves. Compile speed is measured
too (FCL source to OpenCL source for the matmul program, and for programs nested 250 to 10,000
deep), and the Jupyter kernel against its goals: start-up, the interrupt of an endless loop, a
warm kernel cell.

It also runs the original repository's benchmark programs unchanged against reference.cl doing
the same work (see "the original repository's benchmark programs" below).

    python -m bench.run [--runs N] [--tiny] [--device D] [--only WHAT] [--original PATH]
                        [--no-record] [--no-cell]

Without `--device`, the tasks and the original programs are measured on every device that works
(`fcl devices`), one after the other: on a CPU machine, pip's PoCL and the distribution's.

`--only` (repeatable) names a task, or originals, compile, startup, interrupt, cell, memory (the
kernel's memory after each course notebook, bench/memory.py), or jupyter (startup, interrupt and
cell): `make bench BENCH_ARGS="--only jupyter"` measures only the kernel.
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pyopencl as cl

from fcl.analysis.costs import program_costs
from fcl.analysis.gpu import GPU, gpu_names, load_gpu
from fcl.analysis.trace import trace_program
from fcl.errors import Source
from fcl.explain import predict_costs
from fcl.opencl.backend import for_device
from fcl.opencl.device import (
    Device,
    all_devices,
    build,
    is_oclgrind,
    open_device,
    serial_groups,
)
from fcl.opencl.host import DeviceArray, HostRun, prepare_run
from fcl.opencl.probe import health
from fcl.pipeline import CompileOptions, compile_program, main_root
from fcl.session import Session
from fcl.timing import Summary, compare, measuring

HERE = Path(__file__).parent

Measured = tuple[float, object, int]  # one run of a side: kernel ms, result, kernel launches


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

Enqueue = Callable[[], tuple[list[cl.Event], object]]

VEC_GROUP = 1024     # work-group of copy_vec and reverse_vec, at most (a power of two)
REDUCE_GROUP = 16    # chunks (work-items) per work-group of reduce_items, at most
REDUCE_BIG = 16384   # ints per work-item in the full reduction's first pass (reduce_items_big)
CHOICE_RUNS = 5      # timed runs of each candidate reference when choosing the faster


def _pow2_dividing(count: int, limit: int) -> int:
    """The largest power of two at most `limit` that divides `count` (1 for 0)."""
    found = 1
    while count and found * 2 <= limit and count % (found * 2) == 0:
        found *= 2
    return found


class Reference:
    """reference.cl built for the sizes; each method enqueues one run of a task. A task has
    candidate kernels: the SDK-style one (for GPUs) and, where the sizes suit it, the one
    written for CPUs. A task's first run times each candidate (a warm-up, whose results must
    agree, then CHOICE_RUNS runs taking turns) and keeps the fastest on this device for the
    task's runs; `chosen` names it."""

    def __init__(self, device: Device, s: Sizes):
        self.device, self.s = device, s
        most = device.max_work_group_size
        hA, _, wB = s.matmul
        self.vec_group = _pow2_dividing(s.n // 16, min(VEC_GROUP, most))
        self.reduce_group = _pow2_dividing(s.n // (2 * s.block), REDUCE_GROUP)
        self.big_group = _pow2_dividing(s.n // REDUCE_BIG, REDUCE_GROUP)
        gx = _pow2_dividing(wB // 16, 4)  # 4 x 8 for the bench's ints, 2 x 16 for the
        self.matmul_group = (gx, _pow2_dividing(hA // 4, 32 // gx))  # original's doubles
        # 16 ints per work-item measured 2-6% faster than 8 on both PoCLs, but Oclgrind takes
        # the lanes of a shuffled int16 for uninitialized values.
        self.reverse_width = 8 if is_oclgrind(device.device) else 16
        options = [f"-DBLOCK_SIZE={s.block}", f"-DTILE_DIM={s.tile}",
                   f"-DSCAN_PER_ITEM={s.per_item}", f"-DVEC_GROUP={self.vec_group}",
                   f"-DREVERSE_WIDTH={self.reverse_width}",
                   f"-DREDUCE_GROUP={self.reduce_group}", f"-DREDUCE_BIG={REDUCE_BIG}",
                   f"-DREDUCE_BIG_GROUP={self.big_group}",
                   f"-DMATMUL_GX={self.matmul_group[0]}", f"-DMATMUL_GY={self.matmul_group[1]}"]
        # Oclgrind interprets LLVM IR but not all of what LLVM's optimizer makes of it (its
        # uninitialized-value check crashes on the vector reductions): as for FCL's kernels
        # (fcl.opencl.device.build), it gets the code unoptimized.
        options += ["-cl-opt-disable"] if is_oclgrind(device.device) else []
        source = (HERE / "reference.cl").read_text()
        program = cl.Program(device.context, source).build(options=options)
        self.kernels = {k.function_name: k for k in program.all_kernels()}
        self.buffers: dict[tuple, cl.Buffer] = {}
        self.chosen: dict[str, str] = {}  # task: the candidate its runs use

    def out(self, key: str, count: int, itemsize: int = 4) -> cl.Buffer:
        """An output buffer kept from run to run, as the FCL side's come back from its pool."""
        if (key, count) not in self.buffers:
            self.buffers[key, count] = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE,
                                                 max(count, 1) * itemsize)
        return self.buffers[key, count]

    def zeroed(self, key: str, count: int) -> cl.Buffer:
        """An int buffer kept from run to run, zeros when made (its tail stays zero)."""
        if (key, count) not in self.buffers:
            self.buffers[key, count] = cl.Buffer(
                self.device.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                hostbuf=np.zeros(max(count, 1), np.int32))
        return self.buffers[key, count]

    def launch(self, name: str, global_size, local_size, *args) -> cl.Event:
        return self.kernels[name](self.device.queue, global_size, local_size, *args)

    def groups_of(self, count: int, per_group: int) -> int:
        return (count + per_group - 1) // per_group

    # ---- choosing between a task's candidates

    def best(self, task: str, candidates: dict[str, Enqueue], dtype=np.int32):
        """One run of the task by its fastest candidate (chosen on the task's first run)."""
        if task not in self.chosen:
            self.chosen[task] = self.choose(task, candidates, dtype)
        return candidates[self.chosen[task]]()

    def choose(self, task: str, candidates: dict[str, Enqueue], dtype) -> str:
        if len(candidates) == 1:
            return next(iter(candidates))
        results = {}
        for name, enqueue in candidates.items():
            events, (buffer, count) = enqueue()
            kernel_ms(events)
            results[name] = np.empty(count, dtype)
            cl.enqueue_copy(self.device.queue, results[name], buffer)
        (first, expected), *others = results.items()
        for name, got in others:
            same = (np.allclose(got, expected, rtol=1e-9, atol=0)
                    if np.issubdtype(dtype, np.floating) else np.array_equal(got, expected))
            if not same:
                raise AssertionError(f"{task}: the reference kernels {first} and {name} differ")
        times: dict[str, list[float]] = {name: [] for name in candidates}
        for _ in range(CHOICE_RUNS):
            for name, enqueue in candidates.items():
                times[name].append(kernel_ms(enqueue()[0]))
        return min(times, key=lambda name: statistics.median(times[name]))

    # ---- the tasks

    def linear(self, name: str, inputs):
        x = inputs["input"]
        out = self.out(name, x.length)
        size = self.groups_of(x.length, self.s.block) * self.s.block
        event = self.launch(name, (size,), (self.s.block,), x.buffer, out, np.int32(x.length))
        return [event], (out, x.length)

    def linear_vec(self, name: str, width: int, inputs):
        """copy_vec, reverse_vec: `width` ints per work-item, exactly n / width work-items."""
        x = inputs["input"]
        out = self.out(name, x.length)
        args = (x.buffer, out) + ((np.int32(x.length),) if name == "reverse_vec" else ())
        return [self.launch(name, (x.length // width,), (self.vec_group,), *args)], \
            (out, x.length)

    def vec_fits(self, n: int) -> bool:
        return n > 0 and n % 16 == 0 and (n // 16) % self.vec_group == 0

    def copy(self, inputs):
        candidates = {"copy": partial(self.linear, "copy", inputs)}
        if self.vec_fits(inputs["input"].length):
            candidates["copy_vec"] = partial(self.linear_vec, "copy_vec", 8, inputs)
        return self.best("copy", candidates)

    def reverse(self, inputs):
        candidates = {"reverse": partial(self.linear, "reverse", inputs)}
        if self.vec_fits(inputs["input"].length):
            candidates["reverse_vec"] = partial(self.linear_vec, "reverse_vec",
                                                self.reverse_width, inputs)
        return self.best("reverse", candidates)

    def transpose_sdk(self, inputs):
        side, tile = self.s.side, self.s.tile
        out = self.out("transpose", side * side)
        event = self.launch("transpose", (side, side), (tile, tile), inputs["input"].buffer, out,
                            np.int32(side), np.int32(side))
        return [event], (out, side * side)

    def transpose_vec(self, inputs):
        side = self.s.side
        out = self.out("transpose_vec", side * side)
        event = self.launch("transpose_vec", (side // 4, side), (8, 32), inputs["input"].buffer,
                            out, np.int32(side), np.int32(side))
        return [event], (out, side * side)

    def transpose(self, inputs):
        candidates = {"transpose": partial(self.transpose_sdk, inputs)}
        if self.s.side % 32 == 0 and self.device.max_work_group_size >= 256:
            candidates["transpose_vec"] = partial(self.transpose_vec, inputs)
        return self.best("transpose", candidates)

    def reduce_pass(self, source: cl.Buffer, count: int, key: str):
        groups = self.groups_of(count, 2 * self.s.block)
        out = self.out(key, groups)
        event = self.launch("reduce", (groups * self.s.block,), (self.s.block,), source, out,
                            np.int32(count))
        return event, out, groups

    def items_fit(self, n: int, per_item: int, group: int) -> bool:
        """Whether reduce_items (per_item ints per work-item, `group` per work-group) covers n
        exactly."""
        return n > 0 and per_item % 16 == 0 and n % per_item == 0 and \
            (n // per_item) % group == 0

    def reduce_partial_sdk(self, inputs):
        x = inputs["input"]
        event, out, groups = self.reduce_pass(x.buffer, x.length, "partial")
        return [event], (out, groups)

    def reduce_partial_vec(self, inputs):
        x = inputs["input"]
        items = x.length // (2 * self.s.block)
        out = self.out("partial_vec", items)
        return [self.launch("reduce_items", (items,), (self.reduce_group,), x.buffer, out)], \
            (out, items)

    def reduce_partial(self, inputs):
        candidates = {"reduce": partial(self.reduce_partial_sdk, inputs)}
        if self.items_fit(inputs["input"].length, 2 * self.s.block, self.reduce_group):
            candidates["reduce_items"] = partial(self.reduce_partial_vec, inputs)
        return self.best("reduce_partial", candidates)

    def reduce_full_sdk(self, inputs):
        x = inputs["input"]
        events, source, count, round = [], x.buffer, x.length, 0
        while True:
            event, source, count = self.reduce_pass(source, count, f"full{round}")
            events.append(event)
            round += 1
            if count == 1:
                return events, (source, 1)

    def reduce_full_vec(self, inputs):
        """reduce_items_big (REDUCE_BIG ints per work-item) where it fits, then one work-item
        sums what is left (reduce_rest)."""
        x = inputs["input"]
        events, source, count = [], x.buffer, x.length
        if self.items_fit(count, REDUCE_BIG, self.big_group):
            items = count // REDUCE_BIG
            out = self.out("full_big", items)
            events.append(self.launch("reduce_items_big", (items,), (self.big_group,), source,
                                      out))
            source, count = out, items
        out = self.out("full_rest", 1)
        events.append(self.launch("reduce_rest", (1,), (1,), source, out, np.int32(count)))
        return events, (out, 1)

    def reduce_full(self, inputs):
        return self.best("reduce_full", {"reduce": partial(self.reduce_full_sdk, inputs),
                                         "reduce_items": partial(self.reduce_full_vec, inputs)})

    def scan_sdk(self, inputs):
        x, s = inputs["input"], self.s
        chunk = s.block * s.per_item
        chunks = self.groups_of(x.length, chunk)
        out, sums, scanned = self.out("scan", x.length), self.out("sums", chunks), \
            self.out("scanned", chunks)
        events = [
            self.launch("scan_chunks", (chunks * s.block,), (s.block,), x.buffer, out, sums,
                        np.int32(x.length), np.int32(1)),
            self.launch("scan_chunks", (self.groups_of(chunks, chunk) * s.block,), (s.block,),
                        sums, scanned, sums, np.int32(chunks), np.int32(0)),
            self.launch("scan_add", (chunks * s.block,), (s.block,), out, scanned,
                        np.int32(x.length)),
        ]
        return events, (out, x.length)

    def scan_vec(self, inputs):
        """scan_chunks_vec, over the input and over the chunks' totals (padded with zeros to
        whole chunks), then scan_add_vec."""
        x, s = inputs["input"], self.s
        chunk = s.block * s.per_item
        group = chunk // 8
        chunks = x.length // chunk
        padded = self.groups_of(chunks, chunk) * chunk
        out, sums, scanned = self.out("scan_vec", x.length), self.zeroed("sums_vec", padded), \
            self.out("scanned_vec", padded)
        events = [
            self.launch("scan_chunks_vec", (x.length // 8,), (group,), x.buffer, out, sums,
                        np.int32(1)),
            self.launch("scan_chunks_vec", (padded // 8,), (group,), sums, scanned, sums,
                        np.int32(0)),
            self.launch("scan_add_vec", (x.length // 8,), (group,), out, scanned),
        ]
        return events, (out, x.length)

    def scan(self, inputs):
        """Chunks scanned, their totals scanned in chunks too, each chunk adjusted by the total
        before it: a whole scan when there is one chunk of totals (the bench task), else the
        original repository's scan.fcl, which scans the totals only within chunks."""
        chunk = self.s.block * self.s.per_item
        n = inputs["input"].length
        candidates = {"scan_chunks": partial(self.scan_sdk, inputs)}
        if chunk % 8 == 0 and chunk // 8 <= self.device.max_work_group_size and n > 0 and \
                n % chunk == 0:
            candidates["scan_chunks_vec"] = partial(self.scan_vec, inputs)
        return self.best("scan", candidates)

    def matmul_sdk(self, inputs, kernel: str):
        (hA, wA, wB), tile = self.s.matmul, self.s.tile
        out = self.out(kernel, hA * wB, np.dtype(inputs["a"].dtype).itemsize)
        event = self.launch(kernel, (wB, hA), (tile, tile), inputs["a"].buffer,
                            inputs["b"].buffer, out, np.int32(wA), np.int32(wB))
        return [event], (out, hA * wB)

    def matmul_vec(self, inputs, kernel: str):
        hA, wA, wB = self.s.matmul
        out = self.out(kernel, hA * wB, np.dtype(inputs["a"].dtype).itemsize)
        event = self.launch(kernel, (wB // 16, hA // 4), self.matmul_group, inputs["a"].buffer,
                            inputs["b"].buffer, out, np.int32(wA), np.int32(wB))
        return [event], (out, hA * wB)

    def matmul(self, inputs, kernel: str = "matmul"):
        hA, _, wB = self.s.matmul
        candidates = {kernel: partial(self.matmul_sdk, inputs, kernel)}
        vec = kernel.replace("matmul", "matmul_vec")
        if wB % 16 == 0 and hA % 4 == 0 and vec in self.kernels:
            candidates[vec] = partial(self.matmul_vec, inputs, vec)
        return self.best(kernel, candidates, np.dtype(inputs["a"].dtype).type)

    def matmul_double(self, inputs):
        return self.matmul(inputs, "matmul_double")


# ---- the FCL side --------------------------------------------------------------------------------

class BenchRun(HostRun):
    """A host run whose readIntCSV reads the benchmark's device buffers. Its arrays go back to
    the device's memory pool after each run, and the next run gets the same memory."""

    def __init__(self, device: Device, kernels, block_size: int, inputs: dict[str, DeviceArray]):
        super().__init__(device, kernels, block_size, io.StringIO(), io.StringIO())
        self.csv_inputs = inputs

    def once(self, host) -> Measured:
        with measuring() as clock:
            self.run(host)
            self.device.queue.finish()
        self.release_arrays_since(0)
        return clock.total(), self.result, clock.launches


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


def measured(enqueue: Callable[[], tuple[list[cl.Event], object]]) -> Callable[[], Measured]:
    """A reference side as a run to time: its kernel ms, result and launches."""
    def once() -> Measured:
        events, result = enqueue()
        return kernel_ms(events), result, len(events)
    return once


def timed(sides: list[Callable[[], Measured]], runs: int):
    """For each side: the median kernel time of `runs` runs after a warm-up, the times, the
    warm-up's result and its number of kernel launches. The sides take turns run by run, so
    that a change in the machine's load affects both alike."""
    warm = [run_once() for run_once in sides]
    times: list[list[float]] = [[] for _ in sides]
    for _ in range(runs):
        for run_once, side_times in zip(sides, times):
            side_times.append(run_once()[0])
    return [(statistics.median(t), t, result, launches)
            for t, (_, result, launches) in zip(times, warm)]


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
                                        hostbuf=values), values.dtype.type, len(values))
            for name, values in inputs.items()}


def check(task: Task, reference: np.ndarray, fcl: np.ndarray) -> None:
    expected = np.asarray(task.expected(task.inputs))
    for who, got in (("reference", reference), ("FCL", fcl)):
        if got.shape != expected.shape or not np.array_equal(got, expected):
            raise AssertionError(f"{task.name}: the {who} result differs from numpy's")


PREDICTION_GOAL = 1.5  # on a GPU: predicted within 1.5x of measured, either way
PREDICTED_GPU = "h100"  # the course's reference GPU, where no profile matches the device


def matching_gpu(device: Device) -> str | None:
    """The profile of the GPU running the benchmarks, when there is one for it."""
    if not is_gpu(device):
        return None
    words = set(re.sub(r"[^a-z0-9]+", " ", device.name.lower()).split())
    return next((name for name in gpu_names() if name in words or
                 name.removeprefix("rtx") in words), None)


def is_gpu(device: Device) -> bool:
    return bool(device.device.type & cl.device_type.GPU)


def predicted_ms(compiled, gpu: GPU, inputs: dict[str, DeviceArray], block: int,
                 device: str | None) -> float | None:
    """The cost model's time for the program on `gpu` (docs/costs.md), from one traced
    work-group per kernel; None where a kernel cannot run there."""
    costs = program_costs(trace_program(compiled, 0, device, block, inputs=inputs))
    seconds = predict_costs(compiled, gpu, costs).time_s
    return None if seconds is None else seconds * 1000


def measure(s: Sizes, runs: int, device: Device, only: set[str] | None = None,
            gpu: GPU | None = None, device_choice: str | None = None) -> list[dict]:
    reference = Reference(device, s)
    rows = []
    for task in tasks(s, np.random.default_rng(7)):
        if only and task.name not in only:
            continue
        inputs = upload(device, task.inputs)
        cpu = serial_groups(device.device)
        portable = compile_task(task, s.block)  # shaped for a GPU, as the cost model predicts
        compiled = for_device(portable, cpu)
        # The same program without run-time checks: what the checks the compiler could not
        # prove away cost (goal: nothing, see CHECKED_GOAL). Identical kernels cost the same
        # (what the host checks is not in the kernel times): they are not timed twice.
        unchecked = for_device(compile_task(task, s.block, checks=False), cpu)
        same = _renumbered(unchecked.source) == _renumbered(compiled.source)
        run = BenchRun(device, build(device, compiled.source), s.block, inputs)
        bare = BenchRun(device, build(device, unchecked.source), s.block, inputs)
        try:
            sides = [measured(partial(task.reference, reference, inputs)),
                     partial(run.once, compiled.host)]
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
                     "reference_times_ms": ref_times, "fcl_times_ms": fcl_times,
                     "reference_kernel": reference.chosen.get(task.reference.__name__)})
        if gpu is not None:
            rows[-1]["predicted_ms"] = predicted_ms(portable, gpu, inputs, s.block, device_choice)
            rows[-1]["predicted_gpu"] = gpu.name
        for buffer in inputs.values():
            buffer.buffer.release()
    copy = next((r for r in rows if r["task"] == "copy"), None)
    for row in rows:
        if copy is not None:
            copy_rate = copy["bytes"] / copy["reference_ms"]
            row["reference_bandwidth"] = row["bytes"] / row["reference_ms"] / copy_rate
            row["fcl_bandwidth"] = row["bytes"] / row["fcl_ms"] / copy_rate
    return rows


# ---- the original repository's benchmark programs ----------------------------------------------
#
# tests/benchmarks of github.com/dybber/fcl (copy, reverse, transpose, reduce, scan, matmul), read
# from a copy of that repository (a checkout or a bare git directory; never copied here) and run
# unchanged as `fcl run common.fcl X.fcl` runs them: their own `benchmark 100` calls time them and
# print the original's lines. Then reference.cl does the same work on the same device under the
# same protocol (a warm-up, then as many runs, each run's kernel time from profiling events).
# --tiny scales their sizes and repetitions down by substituting numbers in their text: a check
# of the harness, not a measurement.

# Where a copy is looked for unless FCL_ORIGINAL_REPO or --original says: inside this checkout's
# build folder (`git clone https://github.com/dybber/fcl build/original-fcl`).
ORIGINAL_REPO = Path(os.environ.get("FCL_ORIGINAL_REPO", HERE.parent / "build" / "original-fcl"))
ORIGINAL_FULL = Sizes(block=256, n=4096 * 4096, side=4096, tile=16, per_item=1,
                      scan_n=4096 * 4096, matmul=(1600, 800, 800))
ORIGINAL_TINY = Sizes(block=256, n=256 * 256, side=256, tile=16, per_item=1, scan_n=256 * 256,
                      matmul=(160, 16, 64))
ORIGINAL_REPETITIONS = 100  # the programs' own `benchmark 100`
TINY_REPETITIONS = 2
GOAL_RATIO = 1.05  # the original programs' `benchmark` times within 5% of the reference's

# `benchmark N: X ms per run`, then this harness's line of min, median and spread.
BENCHMARK_LINES = re.compile(r"Benchmark \((\d+) repetitions\): (\d+\.\d{6}) ms per run\n"
                             r"  min \d+\.\d{6} ms, median \d+\.\d{6} ms, spread [\d.]+% "
                             r"\(kernel time\)[^\n]*\n")


def chunked_scan(values: np.ndarray, chunk: int) -> np.ndarray:
    """What the original scan.fcl computes: inclusive scans of chunks, each chunk plus the total
    of the chunks before it as a scan of the chunks' totals within chunks of totals gives it
    (a whole scan only up to chunk * (chunk + 1) elements)."""
    scans = np.cumsum(values.reshape(-1, chunk), axis=1, dtype=np.int32)
    totals = scans[:, -1]
    scanned = np.cumsum(_pad(totals, chunk).reshape(-1, chunk), axis=1,
                        dtype=np.int32).flatten()[:len(totals)]
    before = np.concatenate([np.zeros(1, np.int32), scanned[:-1]])
    return (scans + before[:, None]).flatten()


@dataclass
class Original:
    name: str      # tests/benchmarks/<name>.fcl
    printed: int   # elements its forceAndPrint shows (of its first benchmark's result)
    # Each `benchmark` call of the program, in order: what it times, the reference run doing the
    # same work, and that work's result (numpy).
    benchmarks: list[tuple[str, Callable[[Reference, dict[str, DeviceArray]],
                                         tuple[list[cl.Event], object]],
                           Callable[[dict[str, np.ndarray]], np.ndarray]]]


def originals(s: Sizes) -> list[Original]:
    side, (n, p, m) = s.side, s.matmul
    group = 2 * s.block  # the reduction's `workPerBlock = 2 * 256`
    return [
        Original("copy", 100, [("copy", Reference.copy, lambda i: i["input"])]),
        Original("reverse", 100, [("reverse", Reference.reverse, lambda i: i["input"][::-1])]),
        Original("transpose", 100, [("transpose", Reference.transpose,
                                     lambda i: i["input"].reshape(side, side).T.flatten())]),
        Original("reduce", 100, [
            ("partial reduction", Reference.reduce_partial,
             lambda i: _pad(i["input"], group).reshape(-1, group).sum(axis=1, dtype=np.int32)),
            ("full reduction", Reference.reduce_full,
             lambda i: np.array([i["input"].sum(dtype=np.int32)]))]),
        Original("scan", 128, [("scan", Reference.scan,
                                lambda i: chunked_scan(i["input"], s.block * s.per_item))]),
        Original("matmul", 8000, [("matmul (doubles)", Reference.matmul_double,
                                   lambda i: (i["a"].reshape(n, p) @ i["b"].reshape(p, m))
                                   .flatten())]),
    ]


def original_inputs(original: Original, s: Sizes) -> dict[str, np.ndarray]:
    """What the program's generateIntVec or generateDoubleVec calls (common.fcl) make."""
    if original.name == "matmul":
        n, p, m = s.matmul
        return {"a": np.arange(n * p) / (n * p), "b": np.arange(p * m) / (p * m)}
    return {"input": np.arange(s.n, dtype=np.int32)}


def original_source(repo: Path, name: str) -> str:
    """tests/benchmarks/<name> of the original repository: a checkout or a bare git directory."""
    checkout = repo / "tests" / "benchmarks" / name
    if checkout.is_file():
        return checkout.read_text()
    return subprocess.run(["git", "-C", str(repo), "show", f"HEAD:tests/benchmarks/{name}"],
                          capture_output=True, text=True, check=True).stdout


def scaled(source: str, s: Sizes, repetitions: int) -> str:
    """A program's text with the sizes and repetitions of `s` instead of the original's."""
    n, p, m = s.matmul
    replacements = {r"\b4096\b": str(s.side), r"\bbenchmark 100\b": f"benchmark {repetitions}",
                    r"\blet n = 1600\b": f"let n = {n}", r"\blet p = 800\b": f"let p = {p}",
                    r"\blet m = 800\b": f"let m = {m}"}
    for pattern, value in replacements.items():
        source = re.sub(pattern, value, source)
    return source


def printed_values(text: str) -> np.ndarray:
    """The values of the first line forceAndPrint printed: `[a,b,c]`."""
    line = text.splitlines()[0]
    return np.array([float(v) for v in line.strip("[]").split(",") if v])


def run_original(original: Original, repo: Path, s: Sizes, repetitions: int,
                 device: str | None) -> tuple[str, str, list[list[float]]]:
    """(stdout, stderr, each `benchmark`'s kernel ms per repetition) of the program run as
    `fcl run common.fcl <name>.fcl` runs it."""
    common, source = original_source(repo, "common.fcl"), original_source(repo,
                                                                           f"{original.name}.fcl")
    if s != ORIGINAL_FULL:
        source = scaled(source, s, repetitions)
    session = Session.new()
    session.add_file(Source("common.fcl", common))
    session.add_file(Source(f"{original.name}.fcl", source))
    compiled = compile_program(session, main_root(session), CompileOptions(s.block))
    out, err = io.StringIO(), io.StringIO()
    run = prepare_run(compiled, device, s.block, out, err)
    try:
        run.run_program()
        run.device.queue.finish()
        run.check_failures()
        return out.getvalue(), err.getvalue(), run.benchmarks
    finally:
        run.release()


def reference_benchmark(enqueue: Callable[[], tuple[list[cl.Event], object]],
                        repetitions: int) -> tuple[list[float], object]:
    """The `benchmark` protocol for a reference run: a warm-up (its result returned), then
    `repetitions` runs, each one's kernel ms."""
    events, result = enqueue()
    kernel_ms(events)
    return [kernel_ms(enqueue()[0]) for _ in range(repetitions)], result


def check_original(original: Original, inputs: dict[str, np.ndarray], out: str, err: str,
                   repetitions: int) -> None:
    """The program printed what numpy computes, and its `benchmark` calls the original's line
    with this harness's line of min, median and spread after it."""
    reports = BENCHMARK_LINES.findall(err)
    if [int(count) for count, _ in reports] != [repetitions] * len(original.benchmarks):
        raise AssertionError(f"{original.name}: expected {len(original.benchmarks)} `benchmark` "
                             f"reports of the original's shape, got:\n{err}")
    expected = original.benchmarks[0][2](inputs)[:original.printed]
    printed = printed_values(out)
    if printed.shape != expected.shape or not np.allclose(printed, expected, rtol=0, atol=1e-5):
        raise AssertionError(f"{original.name}: FCL printed something other than numpy's result")


def measure_originals(repo: Path, s: Sizes, repetitions: int, device: Device,
                      choice: str | None) -> list[dict]:
    """A row per `benchmark` call of each original program: its times and the reference's."""
    reference = Reference(device, s)
    rows = []
    for original in originals(s):
        host_inputs = original_inputs(original, s)
        inputs = upload(device, host_inputs)
        try:
            enqueues = [partial(enqueue, reference, inputs)
                        for _, enqueue, _ in original.benchmarks]
            # Half the reference's runs before the program and half after it, so that a change
            # in the machine's load while the program runs affects both sides alike.
            before = [reference_benchmark(e, repetitions - repetitions // 2) for e in enqueues]
            out, err, fcl_times = run_original(original, repo, s, repetitions, choice)
            after = [reference_benchmark(e, repetitions // 2)[0] for e in enqueues]
            check_original(original, host_inputs, out, err, repetitions)
            for (what, enqueue, expected), times, (first_half, result), second_half in zip(
                    original.benchmarks, fcl_times, before, after):
                want = expected(host_inputs)
                buffer, length = result
                got = np.empty(length, want.dtype)
                cl.enqueue_copy(device.queue, got, buffer)
                if not np.allclose(got, want, rtol=1e-9, atol=0):
                    raise AssertionError(f"{original.name}: the reference's {what} differs "
                                         "from numpy's")
                ref_times = first_half + second_half
                fcl, ref = Summary.of(times), Summary.of(ref_times)
                ranking = compare(fcl, ref, ("FCL", "reference"))
                rows.append({"program": original.name, "benchmark": what,
                             "repetitions": repetitions, "fcl_mean_ms": fcl.mean,
                             "fcl_median_ms": fcl.median, "fcl_spread": fcl.spread,
                             "reference_mean_ms": ref.mean, "reference_median_ms": ref.median,
                             "reference_spread": ref.spread, "ratio": fcl.mean / ref.mean,
                             "median_ratio": fcl.median / ref.median,
                             "ranking": ["FCL faster", "reference faster"][ranking.faster]
                             if ranking.faster is not None else "within the spreads",
                             "fcl_times_ms": times, "reference_times_ms": ref_times,
                             "reference_kernel": reference.chosen.get(enqueue.__name__)})
        finally:
            for array in inputs.values():
                array.buffer.release()
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


# Programs nested n deep (issue 28): compile time must grow about linearly with n.

def _over_k(body: str) -> str:
    """A program printing `body` for k = 0..3."""
    return f"val main = do<grid> {{ r <- forcePull<grid> (generate 4 (fn k => {body})) ; " \
           f"forceAndPrint 4 (push<grid> r) }}"


def nested_expression(n: int) -> str:
    """A remainder chain without lets: each level's sign depends on the level below."""
    e = "k"
    for _ in range(n):
        e = f"({e} * 5 % 7919 - k)"
    return _over_k(e)


def lambda_chain(n: int) -> str:
    """Let-bound lambdas, each calling the one before."""
    lines = ["", "  let f0 = fn x => x * 3 % 1009 in"]
    lines += [f"  let f{i} = fn x => f{i - 1} x * 3 % 1009 + {i} in" for i in range(1, n)]
    lines.append(f"  f{n - 1} k")
    return _over_k("\n".join(lines))


def if_chain(n: int) -> str:
    """Conditionals nested in their else branches."""
    e = "0"
    for i in range(n):
        e = f"(if k == {i % 5} then {i * 7} else {e} % 1000)"
    return _over_k(e)


DEEP_SHAPES = {"nested expression": nested_expression, "lambda chain": lambda_chain,
               "if chain": if_chain}
DEEP_DEPTHS = (250, 1000, 10_000)
DEEP_GOAL_S = 10.0  # at 10,000 deep


def deep_compile_speed(depths: tuple[int, ...] = DEEP_DEPTHS) -> dict[str, dict[int, float]]:
    """Seconds from FCL source (checked with the prelude) to OpenCL source, once per shape and
    depth."""
    times: dict[str, dict[int, float]] = {}
    for name, shape in DEEP_SHAPES.items():
        for depth in depths:
            start = time.perf_counter()
            session = Session.new()
            session.add_file(Source("deep.fcl", shape(depth)))
            compile_program(session, main_root(session))
            times.setdefault(name, {})[depth] = time.perf_counter() - start
    return times


def deep_table(times: dict[str, dict[int, float]]) -> str:
    depths = sorted({d for row in times.values() for d in row})
    lines = ["| compile, s | " + " | ".join(f"{d:,} deep" for d in depths) + " |",
             "|---|" + "---:|" * len(depths)]
    for name, row in times.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[d]:.2f}" for d in depths) + " |")
    return "\n".join(lines)


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


def originals_table(rows: list[dict]) -> str:
    lines = ["| original program | `benchmark` of | runs | FCL ms per run | reference ms per run | "
             "FCL / reference | medians: FCL / reference | spreads: FCL, reference | ranked |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['program']} | {r['benchmark']} | {r['repetitions']} | "
                     f"{r['fcl_mean_ms']:.3f} | {r['reference_mean_ms']:.3f} | {r['ratio']:.2f} | "
                     f"{r['median_ratio']:.2f} | {r['fcl_spread']:.1%}, "
                     f"{r['reference_spread']:.1%} | {r['ranking']} |")
    return "\n".join(lines)


def _prediction_cells(r: dict, on_gpu: bool) -> str:
    """The predicted time, and on a GPU its ratio to the measured one (on a CPU the model,
    which is of a GPU, has nothing to be compared with)."""
    if "predicted_ms" not in r:
        return ""
    if r["predicted_ms"] is None:
        return " cannot run there |" + (" – |" if on_gpu else "")
    cells = f" {r['predicted_ms'] * 1000:.1f} |"
    return cells + (f" {r['predicted_ms'] / r['fcl_ms']:.2f} |" if on_gpu else "")


def table(rows: list[dict], compile_ms: float | None, kernel: dict | None = None,
          original_rows: list[dict] | None = None, on_gpu: bool = False,
          memory_table: str | None = None) -> str:
    lines = []
    if rows:
        gpu = next((r["predicted_gpu"] for r in rows if "predicted_gpu" in r), None)
        predicted = (f" predicted on {gpu} µs |" + (" predicted / measured |" if on_gpu else "")
                     if gpu else "")
        lines += ["| task | reference ms | FCL ms | FCL / reference | reference bandwidth | "
                  "FCL bandwidth | checked / unchecked | checks in kernels |" + predicted,
                  "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * predicted.count("|")]
        for r in rows:
            lines.append(f"| {r['task']} | {r['reference_ms']:.3f} | {r['fcl_ms']:.3f} | "
                         f"{r['ratio']:.2f} | {r.get('reference_bandwidth', 0):.2f} | "
                         f"{r.get('fcl_bandwidth', 0):.2f} | {r['checked_ratio']:.3f}"
                         f"{' (same kernels)' if r['same_kernels'] else ''} | "
                         f"{r['kernel_checks']} |" + _prediction_cells(r, on_gpu))
    if original_rows:
        lines += [""] if lines else []
        lines.append(originals_table(original_rows))
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
    if memory_table:
        lines += [""] if lines else []
        lines.append(memory_table)
    return "\n".join(lines)


def kernel_memory():
    """bench/memory.py (the kernel's memory after each course notebook, by the load test)."""
    from bench import memory
    return memory


SECTIONS = ("originals", "compile", "startup", "interrupt", "cell", "memory")
JUPYTER = ("startup", "interrupt", "cell")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per kernel (at least 5)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: a correctness check")
    parser.add_argument("--device", help="platform:device or part of a name (default: every "
                                         "device that works)")
    parser.add_argument("--only", action="append", metavar="WHAT",
                        help="measure only this (repeatable): a task (copy, matmul, ...), "
                             f"{', '.join(SECTIONS)}, or jupyter (startup, interrupt and cell)")
    parser.add_argument("--no-record", action="store_true",
                        help="print only: leave results.json and README.md alone")
    parser.add_argument("--original", type=Path, default=ORIGINAL_REPO,
                        help="the original FCL repository (a checkout or a bare git directory), "
                             "for its benchmark programs (default: $FCL_ORIGINAL_REPO, else "
                             f"{ORIGINAL_REPO})")
    parser.add_argument("--gpu", choices=gpu_names(), metavar="NAME",
                        help="the GPU whose time the cost model predicts for each task: "
                             f"{', '.join(gpu_names())} (default: h100; on a GPU, the profile "
                             "its name matches, when there is one)")
    parser.add_argument("--no-cell", action="store_true",
                        help="skip the Jupyter kernel's measurements (where no FCL kernel is "
                             "installed)")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    names = {t.name for t in tasks(sizes, np.random.default_rng(0))}
    only = set(args.only or ())
    if "jupyter" in only:
        only = (only - {"jupyter"}) | set(JUPYTER)
    if only - names - set(SECTIONS):
        parser.error(f"--only: unknown {', '.join(sorted(only - names - set(SECTIONS)))}")
    wanted = (lambda name: name in only) if only else (lambda name: True)
    # Without --device, every device that works (fcl devices), one after the other in this run:
    # on a CPU machine pip's PoCL and the distribution's side by side. The Jupyter kernel and
    # compile speed are measured once, beside the first.
    device_ids = [args.device] if args.device else usable_device_ids()
    for index, device_id in enumerate(device_ids):
        measure_device(args, sizes, names, wanted, device_id, first=index == 0)
    return 0


def usable_device_ids() -> list[str | None]:
    ids = [ident for ident, dev in all_devices() if not is_oclgrind(dev) and health(dev).usable]
    return ids or [None]  # none: open_device's error says why


def measure_device(args, sizes: Sizes, names: set[str], wanted: Callable[[str], bool],
                   device_id: str | None, first: bool) -> None:
    """The tasks and the original programs on one device, printed and recorded; with `first`,
    compile speed and the Jupyter kernel too."""
    if not first:
        print()
    device = open_device(device_id)
    chosen = {name for name in names if wanted(name)}
    gpu = load_gpu(args.gpu or matching_gpu(device) or PREDICTED_GPU)
    rows = measure(sizes, args.runs, device, chosen, gpu, device_id) if chosen else []
    original_rows = None
    if wanted("originals"):
        if args.original.exists():
            original_rows = measure_originals(
                args.original, ORIGINAL_TINY if args.tiny else ORIGINAL_FULL,
                TINY_REPETITIONS if args.tiny else ORIGINAL_REPETITIONS, device, device_id)
        else:
            print(f"note: no copy of the original FCL repository at {args.original} (set "
                  "FCL_ORIGINAL_REPO or --original): its benchmark programs are left out\n")
    compile_ms = compile_speed(sizes) if first and wanted("compile") else None
    deep = deep_compile_speed((50, 100) if args.tiny else DEEP_DEPTHS) \
        if first and wanted("compile") else None
    sections = set() if args.tiny or args.no_cell or not first else \
        {s for s in JUPYTER if wanted(s)}
    kernel = jupyter(sections) if sections else None
    memory_rows, memory = None, kernel_memory()
    if first and wanted("memory") and not (args.tiny or args.no_cell):
        if memory.available():
            memory_rows = memory.measure(memory.course_notebooks())
        else:
            print("note: no configurable-http-proxy (`make test-setup` installs it): the "
                  "kernel's memory after the course notebooks is left out\n")
    report = table(rows, compile_ms, kernel, original_rows, is_gpu(device),
                   memory.table(memory_rows) if memory_rows else None)
    if deep:
        report += "\n\n" + deep_table(deep)
    kernels = [f"{r['task']}: {r['reference_kernel']}" for r in rows if r.get("reference_kernel")]
    kernels += [f"original {r['program']} ({r['benchmark']}): {r['reference_kernel']}"
                for r in original_rows or [] if r.get("reference_kernel")]
    if kernels:  # the faster of each task's candidates in reference.cl, on this device
        report += f"\n\nReference kernels: {'; '.join(kernels)}."
    date = datetime.date.today().isoformat()
    print(f"{device.name}, {date}\n\n{report}")
    missed = [entry["what"] for entry in (kernel or {}).values() if not entry["met"]]
    missed += [f"compiling the {name} {depth:,} deep: {seconds:.1f} s > {DEEP_GOAL_S:g} s"
               for name, row in (deep or {}).items() for depth, seconds in row.items()
               if depth >= 10_000 and seconds > DEEP_GOAL_S]
    if is_gpu(device):
        ratios = {r["task"]: r["predicted_ms"] / r["fcl_ms"] for r in rows if r.get("predicted_ms")}
        missed += [f"{task}: predicted / measured {ratio:.2f} is not within {PREDICTION_GOAL}x"
                   for task, ratio in ratios.items()
                   if not 1 / PREDICTION_GOAL <= ratio <= PREDICTION_GOAL]
    missed += [f"{r['task']}: checked / unchecked {r['checked_ratio']:.3f} > {CHECKED_GOAL}"
               for r in rows if r["checked_ratio"] > CHECKED_GOAL]
    missed += [f"original {r['program']} ({r['benchmark']}): FCL / reference {r['ratio']:.2f} > "
               f"{GOAL_RATIO}" for r in original_rows or [] if r["ratio"] > GOAL_RATIO]
    missed += [f"{r['notebook']}: the kernel holds {r['private_mb']:.0f} MB after it (goal "
               f"{memory.GOAL_MB:.0f}){', ' if r['problems'] else ''}{'; '.join(r['problems'])}"
               for r in memory_rows or [] if not r["met"]]
    if missed:
        print(f"\ngoals missed: {'; '.join(missed)}")
    if not args.no_record and report.strip():  # a device with nothing measured (--only) is left
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
        if original_rows:
            entry["originals"] = original_rows
        if compile_ms is not None:
            entry["compile_ms"] = compile_ms
        if deep:
            entry["deep_compile_s"] = {name: {str(depth): seconds for depth, seconds in row.items()}
                                       for name, row in deep.items()}
        if memory_rows:
            entry["kernel_memory"] = memory_rows
        if kernel:
            entry.setdefault("kernel", {}).update(kernel)
            if "cell" in kernel:
                entry["cell_round_trip_ms"] = kernel["cell"]["median_ms"]
        results[device.name] = entry
        path.write_text(json.dumps(results, indent=2) + "\n")
        with open(HERE / "README.md", "a") as readme:
            readme.write(f"\n### {device.name}, {date}\n\n{report}\n")


if __name__ == "__main__":
    sys.exit(main())
