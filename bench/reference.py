"""The hand-written side: the kernels of bench/reference.cl that do each task's work, the faster of
each task's candidates chosen on the device."""
from __future__ import annotations

import math
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping
from functools import partial

import numpy as np
import pyopencl as cl

from bench.sizes import HERE, Sizes
from fcl.runtime.device import (
    Device,
    is_oclgrind,
    program_with_kernels,
)

Result = tuple[cl.Buffer, int]  # a reference run's output: its buffer and element count
Enqueue = Callable[[], tuple[list[cl.Event], Result]]


VEC_GROUP = 1024     # work-group of copy_vec and reverse_vec, at most (a power of two)


REDUCE_GROUP = 16    # chunks (work-items) per work-group of reduce_items, at most


REDUCE_BIG = 16384   # ints per work-item in the full reduction's first pass (reduce_items_big)


SMVM_LANES = 32      # work-items per row of smvm_vector (a warp), at most


CHOICE_RUNS = 5      # timed runs of each candidate reference when choosing the faster


# Run in a child process: builds the source, runs one vector matmul of reference.cl on a small
# problem in the work-group shape of the bench's runs, and exits 0 only if it computed numpy's
# product.
_CHECK_MATMUL = """
import os, sys, numpy as np, pyopencl as cl
platform, name, kernel, gx, gy, source, *options = sys.argv[1:]
device = next(d for p in cl.get_platforms() if p.name == platform
              for d in p.get_devices() if d.name == name)
context = cl.Context([device])
queue = cl.CommandQueue(context)
# A define of its own: PoCL 3.0 gives a cached build back without its kernels (device.py).
fresh = "-DFCL_FRESH_BUILD=%d" % int.from_bytes(os.urandom(4), "little")
program = cl.Program(context, source).build(options=[*options, fresh])
gx, gy = int(gx), int(gy)
width, height = 16 * gx, 4 * gy
rng = np.random.default_rng(0)
dtype = np.float64 if "double" in kernel else np.int32
a = rng.integers(-8, 8, (height, width)).astype(dtype)
b = rng.integers(-8, 8, (width, width)).astype(dtype)
flags = cl.mem_flags
buffers = [cl.Buffer(context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=m) for m in (a, b)]
c = np.empty((height, width), dtype)
out = cl.Buffer(context, flags.WRITE_ONLY, c.nbytes)
cl.Kernel(program, kernel)(queue, (gx, gy), (gx, gy), *buffers, out, np.int32(width),
                           np.int32(width)).wait()
cl.enqueue_copy(queue, c, out)
os._exit(0 if np.array_equal(c, a @ b) else 3)  # os._exit: PoCL 3.0 aborts at a normal exit
"""


def vector_matmul_works(device: cl.Device, kernel: str, source: str, options: list[str],
                        group: tuple[int, int]) -> bool:
    """Whether a child process runs reference.cl's vector matmul `kernel` on device and gets
    numpy's product. On an AMD EPYC, pip's PoCL (LLVM 14) aborts the whole process making
    machine code for `matmul_vec` (int16: "Do not know how to scalarize this operator's
    operand"), which PoCL does at a kernel's first launch; it computes `matmul_vec_double`
    (double16) wrong, and crashes running `matmul_vec8_double`. Such a kernel is no candidate."""
    child = subprocess.run([sys.executable, "-c", _CHECK_MATMUL, device.platform.name,
                            device.name, kernel, str(group[0]), str(group[1]), source, *options],
                           capture_output=True, text=True, check=False)
    return child.returncode == 0


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
        self.smvm_lanes = min(SMVM_LANES, s.block)
        options = [f"-DBLOCK_SIZE={s.block}", f"-DTILE_DIM={s.tile}",
                   f"-DSCAN_PER_ITEM={s.per_item}", f"-DVEC_GROUP={self.vec_group}",
                   f"-DREDUCE_GROUP={self.reduce_group}", f"-DREDUCE_BIG={REDUCE_BIG}",
                   f"-DREDUCE_BIG_GROUP={self.big_group}",
                   f"-DMATMUL_GX={self.matmul_group[0]}", f"-DMATMUL_GY={self.matmul_group[1]}",
                   f"-DSMVM_LANES={self.smvm_lanes}"]
        # Oclgrind interprets LLVM IR but not all of what LLVM's optimizer makes of it (its
        # uninitialized-value check crashes on the vector reductions): as for FCL's kernels
        # (fcl.runtime.device.build), it gets the code unoptimized.
        options += ["-cl-opt-disable"] if is_oclgrind(device.device) else []
        source = (HERE / "reference.cl").read_text()
        self.source, self.options = source, options
        program = program_with_kernels(device.context, source, options)
        self.kernels = {k.function_name: k for k in program.all_kernels()}
        self.buffers: dict[tuple, cl.Buffer] = {}
        self.chosen: dict[str, str] = {}  # task: the candidate its runs use
        self.checked: dict[str, bool] = {}  # vector matmuls: whether each runs right here
        self.last_chosen: str | None = None  # the candidate of the last run
        # task: each candidate's median time while choosing (tasks with several), in ms
        self.candidate_ms: dict[str, dict[str, float]] = {}
        self.last_candidates: dict[str, float] = {}  # those of the last run's task

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

    def best(self, task: str, candidates: Mapping[str, Enqueue],
             dtype=np.int32) -> tuple[list[cl.Event], Result]:
        """One run of the task by its fastest candidate (chosen on the task's first run)."""
        if task not in self.chosen:
            self.chosen[task] = self.choose(task, candidates, dtype)
        self.last_chosen = self.chosen[task]
        self.last_candidates = self.candidate_ms.get(task, {})
        return candidates[self.chosen[task]]()

    def choose(self, task: str, candidates: Mapping[str, Enqueue], dtype) -> str:
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
        medians = {name: statistics.median(runs) for name, runs in times.items()}
        self.candidate_ms[task] = medians
        return min(medians, key=lambda name: medians[name])

    # ---- the tasks

    def linear(self, name: str, inputs):
        x = inputs["input"]
        out = self.out(name, x.length)
        size = self.groups_of(x.length, self.s.block) * self.s.block
        event = self.launch(name, (size,), (self.s.block,), x.buffer, out, np.int32(x.length))
        return [event], (out, x.length)

    def linear_vec(self, name: str, width: int, inputs):
        """copy_vec, reverse_vec, copy_run, reverse_run: `width` ints per work-item, exactly
        n / width work-items."""
        x = inputs["input"]
        out = self.out(name, x.length)
        args = (x.buffer, out) + ((np.int32(x.length),) if name.startswith("reverse") else ())
        return [self.launch(name, (x.length // width,), (self.vec_group,), *args)], \
            (out, x.length)

    def vec_fits(self, n: int) -> bool:
        return n > 0 and n % 16 == 0 and (n // 16) % self.vec_group == 0

    def copy(self, inputs):
        candidates = {"copy": partial(self.linear, "copy", inputs)}
        if self.vec_fits(inputs["input"].length):
            candidates["copy_vec"] = partial(self.linear_vec, "copy_vec", 8, inputs)
            candidates["copy_run"] = partial(self.linear_vec, "copy_run", 16, inputs)
        return self.best("copy", candidates)

    def reverse(self, inputs):
        candidates = {"reverse": partial(self.linear, "reverse", inputs)}
        if self.vec_fits(inputs["input"].length):
            candidates["reverse_vec"] = partial(self.linear_vec, "reverse_vec", 8, inputs)
            candidates["reverse_run"] = partial(self.linear_vec, "reverse_run", 16, inputs)
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

    def reduce_partial_vec(self, inputs, kernel: str = "reduce_items"):
        x = inputs["input"]
        items = x.length // (2 * self.s.block)
        out = self.out(f"partial_{kernel}", items)
        return [self.launch(kernel, (items,), (self.reduce_group,), x.buffer, out)], \
            (out, items)

    def reduce_partial(self, inputs):
        candidates = {"reduce": partial(self.reduce_partial_sdk, inputs)}
        if self.items_fit(inputs["input"].length, 2 * self.s.block, self.reduce_group):
            for kernel in ("reduce_items", "reduce_loop"):
                candidates[kernel] = partial(self.reduce_partial_vec, inputs, kernel)
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

    def reduce_full_vec(self, inputs, kernel: str = "reduce_items_big"):
        """`kernel` (REDUCE_BIG ints per work-item) where it fits, then one work-item sums what
        is left (reduce_rest)."""
        x = inputs["input"]
        events, source, count = [], x.buffer, x.length
        if self.items_fit(count, REDUCE_BIG, self.big_group):
            items = count // REDUCE_BIG
            out = self.out(f"full_{kernel}", items)
            events.append(self.launch(kernel, (items,), (self.big_group,), source, out))
            source, count = out, items
        out = self.out("full_rest", 1)
        events.append(self.launch("reduce_rest", (1,), (1,), source, out, np.int32(count)))
        return events, (out, 1)

    def reduce_full(self, inputs):
        return self.best("reduce_full", {
            "reduce": partial(self.reduce_full_sdk, inputs),
            "reduce_items": partial(self.reduce_full_vec, inputs),
            "reduce_loop": partial(self.reduce_full_vec, inputs, "reduce_loop_big")})

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

    def scan_loop(self, inputs):
        """scan_chunks_loop, a work-item per chunk; scan_totals_loop; scan_add_loop."""
        x, s = inputs["input"], self.s
        chunk = s.block * s.per_item
        chunks = x.length // chunk
        group = math.gcd(chunks, 16)
        out, sums = self.out("scan_loop", x.length), self.out("sums_loop", chunks)
        events = [
            self.launch("scan_chunks_loop", (chunks,), (group,), x.buffer, out, sums),
            self.launch("scan_totals_loop", (1,), (1,), sums, np.int32(chunks)),
        ]
        if chunks > 1:
            events.append(self.launch("scan_add_loop", (chunks - 1,),
                                      (math.gcd(chunks - 1, 16),), out, sums))
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
        if n > 0 and n % chunk == 0:
            candidates["scan_chunks_loop"] = partial(self.scan_loop, inputs)
        return self.best("scan", candidates)

    def histogram_zeroed(self, key: str, bins: int) -> tuple[cl.Buffer, cl.Event]:
        counts = self.out(key, bins)
        size = self.groups_of(bins, self.s.block) * self.s.block
        return counts, self.launch("histogram_zero", (size,), (self.s.block,), counts,
                                   np.int32(bins))

    def histogram_global(self, inputs, bins: int):
        x = inputs["input"]
        counts, zero = self.histogram_zeroed("histogram_global", bins)
        size = self.groups_of(x.length, self.s.block) * self.s.block
        event = self.launch("histogram_global", (size,), (self.s.block,), x.buffer, counts,
                            np.int32(x.length))
        return [zero, event], (counts, bins)

    def histogram_local(self, inputs, bins: int):
        x = inputs["input"]
        counts, zero = self.histogram_zeroed("histogram_local", bins)
        groups = self.groups_of(x.length, self.s.block * 8)  # HISTOGRAM_PER_ITEM
        event = self.launch("histogram_local", (groups * self.s.block,), (self.s.block,),
                            x.buffer, counts, np.int32(x.length), np.int32(bins))
        return [zero, event], (counts, bins)

    def histogram(self, inputs, bins: int):
        candidates = {"histogram_global": partial(self.histogram_global, inputs, bins)}
        if bins <= self.s.block:
            candidates["histogram_local"] = partial(self.histogram_local, inputs, bins)
        return self.best(f"histogram {bins}", candidates)

    def works(self, kernel: str) -> bool:
        """Whether a vector matmul runs right on this device (checked once, in a child)."""
        if kernel not in self.checked:
            self.checked[kernel] = vector_matmul_works(
                self.device.device, kernel, self.source, self.options, self.matmul_group)
        return self.checked[kernel]

    @property
    def left_out(self) -> list[str]:
        """The vector matmuls checked that do not run right on this device."""
        return [kernel for kernel, works in self.checked.items() if not works]

    def matmul_sdk(self, inputs, kernel: str):
        (hA, wA, wB), tile = self.s.matmul, self.s.tile
        out = self.out(kernel, hA * wB, np.dtype(inputs["a"].dtype).itemsize)
        event = self.launch(kernel, (wB, hA), (tile, tile), inputs["a"].buffer,
                            inputs["b"].buffer, out, np.int32(wA), np.int32(wB))
        return [event], (out, hA * wB)

    def matmul_vec(self, inputs, kernel: str):
        hA, wA, wB = self.s.matmul  # matmul_vec, _vec8 and _rows8: 16 columns per work-item
        out = self.out(kernel, hA * wB, np.dtype(inputs["a"].dtype).itemsize)
        event = self.launch(kernel, (wB // 16, hA // 4), self.matmul_group, inputs["a"].buffer,
                            inputs["b"].buffer, out, np.int32(wA), np.int32(wB))
        return [event], (out, hA * wB)

    def matmul(self, inputs, kernel: str = "matmul"):
        hA, _, wB = self.s.matmul
        candidates = {kernel: partial(self.matmul_sdk, inputs, kernel)}
        rows = "matmul_rows4" if kernel.endswith("double") else "matmul_rows8"
        for wide in ("matmul_vec", "matmul_vec8", rows):
            vec = kernel.replace("matmul", wide)
            if wB % 16 == 0 and hA % 4 == 0 and vec in self.kernels and self.works(vec):
                candidates[vec] = partial(self.matmul_vec, inputs, vec)
        return self.best(kernel, candidates, np.dtype(inputs["a"].dtype).type)

    def matmul_double(self, inputs):
        return self.matmul(inputs, "matmul_double")


    def smvm_kernel(self, inputs, kernel: str):
        rows = inputs["offsets"].length - 1
        y = self.out(kernel, rows)
        per_group = self.s.block if kernel == "smvm_scalar" else self.s.block // self.smvm_lanes
        groups = self.groups_of(rows, per_group)
        event = self.launch(kernel, (groups * self.s.block,), (self.s.block,),
                            *(inputs[name].buffer for name in ("offsets", "cols", "vals", "x")),
                            y, np.int32(rows))
        return [event], (y, rows)

    def smvm(self, inputs):
        """The faster of scalar CSR (a work-item per row) and vector CSR (a warp per row)."""
        task = f"smvm {id(inputs['offsets'])}"  # each matrix chooses its own
        return self.best(task, {kernel: partial(self.smvm_kernel, inputs, kernel)
                                for kernel in ("smvm_scalar", "smvm_vector")})


def kernel_ms(events: list[cl.Event]) -> float:
    cl.wait_for_events(events)
    return sum(e.profile.end - e.profile.start for e in events) / 1e6
