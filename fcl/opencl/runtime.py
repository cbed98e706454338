"""Run a host program on an OpenCL device with PyOpenCL.

The host statements run in Python (the original generated C for them); grid-level loops become
kernel launches. Host scalars are Python values with the kernels' C semantics, arrays are device
buffers. Kernels flag failed checks in a small buffer that the host reads whenever it looks at
device memory anyway (printing, reading an element back) and at the end.
"""
from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TextIO

import numpy as np
import pyopencl as cl

from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.il.kernels import MAX_GROUPS, Launch, SplitProgram, launch_groups, split_program
from fcl.il.simplify import wrap32
from fcl.opencl import hostops
from fcl.opencl.codegen import FP64_PRAGMA, LineTable, kernel_source
from fcl.opencl.devices import PROGRAM_CACHE, describe, queue_for, select_device

DTYPES = {ir.INT: np.dtype(np.int32), ir.DOUBLE: np.dtype(np.float64), ir.BOOL: np.dtype(np.uint8)}
HOST_VALUES = {ir.INT: int, ir.DOUBLE: float, ir.BOOL: bool}


class DeviceArray(NamedTuple):
    buffer: cl.Buffer
    length: int
    dtype: np.dtype


@dataclass
class CompiledProgram:
    split: SplitProgram
    source: str           # the OpenCL C of its kernels
    line_table: LineTable


class OpenCLRuntime:
    def __init__(self, device: str | None = None, block_size: int = 256,
                 out: TextIO | None = None, err: TextIO | None = None,
                 max_groups: int = MAX_GROUPS):
        """`device`: "platform:device" indices or part of a name (see `devices.select_device`).
        `out`/`err` default to sys.stdout/sys.stderr as they are when the program prints."""
        self.device = select_device(device)
        self.queue = queue_for(self.device)
        limit = self.device.max_work_group_size
        if not 1 <= block_size <= limit:
            raise FCLError(f"the block size must be between 1 and {limit} on {self.device_name}, "
                           f"not {block_size}")
        self.block_size, self.max_groups = block_size, max_groups
        self.out, self.err = out, err

    @property
    def device_name(self) -> str:
        return describe(self.device)

    def compile(self, host_program: list[ir.Stmt]) -> CompiledProgram:
        split = split_program(host_program)
        source, line_table = kernel_source(split.kernels)
        if FP64_PRAGMA in source and "cl_khr_fp64" not in self.device.extensions:
            raise FCLError(f"this program uses doubles, which {self.device_name} does not support")
        return CompiledProgram(split, source, line_table)

    def run(self, host_program: list[ir.Stmt]) -> None:
        program = self.compile(host_program)
        kernels = PROGRAM_CACHE.kernels_of(program.source, self.queue) if program.split.kernels \
            else {}
        _HostRun(self, program.split, kernels).run()


class _HostRun:
    """One run of a host program: its variables, buffers and timings."""

    def __init__(self, runtime: OpenCLRuntime, program: SplitProgram,
                 kernels: dict[str, cl.Kernel]):
        self.runtime, self.program, self.kernels = runtime, program, kernels
        self.queue = runtime.queue
        self.out = runtime.out or sys.stdout
        self.err = runtime.err or sys.stderr
        self.env: dict[str, object] = {}
        self.buffers: list[cl.Buffer] = []
        self.events: list[cl.Event] | None = None  # kernel runs, collected while benchmarking
        self.span: Span | None = None     # of the statement running, for errors in expressions
        self.failure_flag = self.upload(np.zeros(1, np.int32)) if program.failures else None

    def run(self) -> None:
        try:
            self.block(self.program.host)
            self.check_failures()
        finally:
            self.queue.finish()
            for buffer in self.buffers:
                buffer.release()

    # ---- statements
    def block(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.span = s.span or self.span
            self.stmt(s)

    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Declare):
            self.env[s.var.name] = self.eval(s.init)
        elif isinstance(s, ir.Assign):
            self.env[s.var.name] = self.eval(s.value)
        elif isinstance(s, ir.Alloc):
            self.env[s.var.name] = self.alloc(s)
        elif isinstance(s, ir.Store):
            self.store(s)
        elif isinstance(s, Launch):
            self.launch(s)
        elif isinstance(s, ir.SeqFor):
            for i in range(self.eval(s.bound)):
                self.env[s.var.name] = i
                self.block(s.body)
        elif isinstance(s, ir.While):
            while True:
                self.block(s.test)
                if not self.eval(s.cond):
                    break
                self.block(s.body)
        elif isinstance(s, ir.If):
            self.block(s.then if self.eval(s.cond) else s.else_)
        elif isinstance(s, ir.Barrier):
            self.queue.finish()
        elif isinstance(s, ir.Fail):
            if self.eval(s.cond):
                self.check_failures()  # a kernel that failed earlier is the first error
                raise FCLError(s.message, s.span)
        elif isinstance(s, ir.Print):
            self.print_array(s)
        elif isinstance(s, ir.Benchmark):
            self.benchmark(s)
        elif isinstance(s, ir.ReadCSV):
            self.read_csv(s)
        else:
            raise TypeError(f"{type(s).__name__} cannot run on the host")

    def alloc(self, s: ir.Alloc) -> DeviceArray:
        length, dtype = self.eval(s.size), DTYPES[s.var.type.elem]
        if length < 0:
            raise FCLError(f"cannot allocate an array of negative length {length}", s.span)
        limit = self.runtime.device.max_mem_alloc_size
        if length * dtype.itemsize > limit:
            raise FCLError(f"an array of {length} elements needs {length * dtype.itemsize} bytes, "
                           f"but {self.runtime.device_name} allows at most {limit} in one buffer",
                           s.span)
        # OpenCL has no empty buffers.
        buffer = cl.Buffer(self.queue.context, cl.mem_flags.READ_WRITE,
                           max(length, 1) * dtype.itemsize)
        self.buffers.append(buffer)
        return DeviceArray(buffer, length, dtype)

    def upload(self, values: np.ndarray) -> cl.Buffer:
        buffer = cl.Buffer(self.queue.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                           hostbuf=values)
        self.buffers.append(buffer)
        return buffer

    def store(self, s: ir.Store) -> None:
        array = self.env[s.array.name]
        index = self.checked_index(array, self.eval(s.index), s.span)
        value = np.array([self.eval(s.value)], dtype=array.dtype)
        cl.enqueue_copy(self.queue, array.buffer, value, dst_offset=index * array.dtype.itemsize)

    def launch(self, s: Launch) -> None:
        kernel, block_size = s.kernel, self.runtime.block_size
        groups = launch_groups(s, self.eval(s.iterations), block_size, self.runtime.max_groups)
        if groups == 0:
            return
        limit = self.kernels[kernel.name].get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, self.runtime.device)
        if block_size > limit:
            raise FCLError(f"{self.runtime.device_name} runs this kernel with at most {limit} "
                           f"work-items per work-group, fewer than the block size {block_size}",
                           s.span, ["choose a smaller block size"])
        args = [self.kernel_arg(p) for p in s.args] + self.local_memory(s)
        if kernel.flags_failures:
            args.append(self.failure_flag)
        event = self.kernels[kernel.name](self.queue, (groups * block_size,), (block_size,), *args)
        if self.events is not None:
            self.events.append(event)

    def kernel_arg(self, param: ir.Var):
        value = self.env[param.name]
        if isinstance(value, DeviceArray):
            return value.buffer
        return np.float64(value) if param.type == ir.DOUBLE else np.int32(value)

    def local_memory(self, s: Launch) -> list[cl.LocalMemory]:
        """Exactly the local memory the kernel's arrays need, within the device's limit."""
        limit, total, args = self.runtime.device.local_mem_size, 0, []
        for alloc in s.kernel.local_allocs:
            length = self.eval(alloc.host_size)
            if length < 0:
                raise FCLError(f"cannot allocate an array of negative length {length}", alloc.span)
            if alloc.per_work_item:
                length *= self.runtime.block_size
            n_bytes = max(length, 1) * DTYPES[alloc.var.type.elem].itemsize
            total += n_bytes
            if total > limit:
                per_item = " (one per work-item)" if alloc.per_work_item else ""
                raise FCLError(f"this array{per_item} brings the local memory of a work-group to "
                               f"{total} bytes, but {self.runtime.device_name} has {limit}",
                               alloc.span, ["make the arrays of a work-group smaller, e.g. by "
                                            "giving each work-group fewer elements"])
            args.append(cl.LocalMemory(n_bytes))
        return args

    def print_array(self, s: ir.Print) -> None:
        array, count = self.env[s.array.name], self.eval(s.count)
        if not 0 <= count <= array.length:
            raise FCLError(f"cannot print {count} elements of an array of length "
                           f"{array.length}", s.span)
        self.check_failures()
        values = np.empty(count, array.dtype)
        if count:
            cl.enqueue_copy(self.queue, values, array.buffer)
        fmt = "%.5f" if s.array.type.elem == ir.DOUBLE else "%i"
        self.out.write("[" + ",".join(fmt % v for v in values.tolist()) + "]\n")

    def benchmark(self, s: ir.Benchmark) -> None:
        count = self.eval(s.count)
        if count < 1:
            raise FCLError(f"benchmark needs at least one repetition, not {count}", s.span)
        self.repeat(s.body)  # warm-up: caches, lazy allocation and kernel specialization
        times = [self.repeat(s.body) for _ in range(count)]
        self.err.write(f"Benchmark ({count} repetitions): {sum(times) / count:f} ms per run\n")
        self.err.write(f"  min {min(times):f} ms, median {statistics.median(times):f} ms\n")

    def repeat(self, body: list[ir.Stmt]) -> float:
        """Run a benchmark's body and free what it allocated: its kernels' time in ms."""
        outer_events, self.events = self.events, []
        buffers_before = len(self.buffers)
        self.block(body)
        self.queue.finish()
        self.check_failures()
        for buffer in self.buffers[buffers_before:]:
            buffer.release()
        del self.buffers[buffers_before:]
        ms = sum(e.profile.end - e.profile.start for e in self.events) / 1e6
        if outer_events is not None:  # a benchmark inside a benchmark's body
            outer_events += self.events
        self.events = outer_events
        return ms

    def read_csv(self, s: ir.ReadCSV) -> None:
        try:
            text = Path(s.path).read_text()
        except OSError as error:
            raise FCLError(f"cannot read `{s.path}`: {error.strerror or error}", s.span) from None
        # Like C's atoi on each comma/space-separated field: a leading integer, else 0.
        fields = [f for f in re.split(r"[,\s]+", text) if f]
        values = np.array([wrap32(int(m.group())) if (m := re.match(r"[+-]?\d+", f)) else 0
                           for f in fields], np.int32)
        buffer = self.upload(values if len(values) else np.zeros(1, np.int32))
        self.env[s.array.name] = DeviceArray(buffer, len(values), values.dtype)
        self.env[s.length.name] = len(values)

    def check_failures(self) -> None:
        """Raise the first check that failed in a kernel so far."""
        if self.failure_flag is None:
            return
        code = np.zeros(1, np.int32)
        cl.enqueue_copy(self.queue, code, self.failure_flag)
        if code[0]:
            failed = self.program.failures[code[0] - 1]
            raise FCLError(failed.message, failed.span)

    # ---- expressions
    def eval(self, e: ir.Expr):
        if isinstance(e, ir.Const):
            return HOST_VALUES[e.type](e.value)
        if isinstance(e, ir.Var):
            return self.env[e.name]
        if isinstance(e, ir.Index):
            return self.read_element(e)
        if isinstance(e, ir.Bin):
            if e.op in ("&&", "||"):
                left = self.eval(e.left)
                return (left and self.eval(e.right)) if e.op == "&&" else \
                    (left or self.eval(e.right))
            try:
                return hostops.binary(e.op, self.eval(e.left), self.eval(e.right),
                                      ir.type_of(e.left), e.type)
            except ZeroDivisionError:
                raise FCLError("integer division by zero", self.span) from None
        if isinstance(e, ir.Un):
            return hostops.unary(e.op, self.eval(e.arg), e.type)
        if isinstance(e, ir.Select):
            return self.eval(e.then) if self.eval(e.cond) else self.eval(e.else_)
        raise TypeError(f"{e!r} cannot be computed on the host")

    def read_element(self, e: ir.Index):
        """One element of a device array, read back (e.g. a scalar computed by a kernel)."""
        array = self.env[e.array.name]
        index = self.checked_index(array, self.eval(e.index), self.span)
        self.check_failures()
        value = np.empty(1, array.dtype)
        cl.enqueue_copy(self.queue, value, array.buffer, src_offset=index * array.dtype.itemsize)
        return HOST_VALUES[e.array.type.elem](value[0])

    @staticmethod
    def checked_index(array: DeviceArray, index: int, span: Span | None) -> int:
        if not 0 <= index < array.length:
            raise FCLError(f"index {index} is out of bounds for an array of length "
                           f"{array.length}", span)
        return index
