"""Run a compiled program with PyOpenCL: the host side of the generated code.

HostRun runs the host statements: it launches kernels, prints, reads inputs and benchmarks, with
its parts each kept by its own module: the host's expressions (host_values: 32-bit C semantics,
as the kernels and the interpreter), device memory (buffers), failed checks (failures) and
interrupts of kernels that may not end (interrupts). Arrays are device buffers; a host read of
one element (a scalar returned from a grid program) copies it back.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import cast

import numpy as np
import pyopencl as cl

from fcl.backend import for_device
from fcl.codegen.kernel import Compiled, Kernel, Launch, LocalArray
from fcl.defaults import BLOCK_SIZE
from fcl.errors import FCLError
from fcl.hostio import Writer, benchmark_report, format_array, read_int_csv
from fcl.il import ir
from fcl.il.dispatch import StmtVisitor
from fcl.runtime.buffers import DeviceArray, DeviceMemory, HostArray
from fcl.runtime.device import (
    DTYPES,
    Device,
    DeviceBuffer,
    build,
    is_oclgrind,
    open_device,
    serial_groups,
)
from fcl.runtime.failures import FailureRecords, failure
from fcl.runtime.host_values import HostValues
from fcl.runtime.interrupts import AbortFlag
from fcl.runtime.oclgrind import ReadProbes
from fcl.runtime.streams import StreamOptions, Streams
from fcl.timing import Policy, Sample, Timing, measuring, record, repeat
from fcl.viz.timeline import Timeline


class HostRun(StmtVisitor):
    def __init__(self, device: Device, kernels: dict[str, cl.Kernel], block_size: int,
                 out: Writer, err: Writer):
        self.device, self.kernels, self.block_size = device, kernels, block_size
        self.out, self.err = out, err
        self.env: dict[str, object] = {}
        self.values = HostValues(self.env, self.read_element, block_size)
        self.memory = DeviceMemory(device)
        self.failures = FailureRecords(device.queue, device.context, self.memory)
        self.abort = AbortFlag(device, self.memory)
        self.benchmarks: list[list[float]] = []  # each `benchmark`'s kernel ms per repetition
        self.result = None
        self.program: Compiled | None = None  # what runs: the program as shaped for the device
        self.probes: ReadProbes | None = None  # on Oclgrind, so that it checks host reads
        # Arrays already on the device that `readIntCSV PATH` gives instead of reading PATH
        # (the benchmarks' inputs, traced and timed without a file).
        self.csv_inputs: dict[str, DeviceArray] = {}
        # An entry point's arguments (fcl.python): device arrays and numpy scalars.
        self.arguments: list[DeviceArray | np.generic] = []
        # Whether the result's arrays stay on the device (as DeviceArrays): their buffers are
        # kept when the run releases its memory.
        self.results_on_device = False
        self.stream_options = StreamOptions()
        self._streams: Streams | None = None  # made by the first stream loop

    @property
    def streams(self) -> Streams:
        if self._streams is None:
            self._streams = Streams(self, self.stream_options)
        return self._streams

    def array(self, var: ir.Var) -> DeviceArray:
        """The device array that the array variable `var` holds."""
        return self._on_device(var.name)

    def _on_device(self, name: str) -> DeviceArray:
        array = self.env[name]
        if isinstance(array, HostArray):  # first read on the device: moved there now
            data = array.data
            array = self.memory.new_array(data.dtype.type, len(data), None)
            if data.size:
                cl.enqueue_copy(self.device.queue, array.buffer, data)  # type: ignore[arg-type]
            self.env[name] = array
        assert isinstance(array, DeviceArray)
        return array

    def held(self, var: ir.Var) -> np.ndarray | None:
        """The host's copy of an array it holds (see HostArray), else None."""
        array = self.env.get(var.name)
        return array.data if isinstance(array, HostArray) else None

    def eval(self, e: ir.Expr, lanes: bool = False):
        """A host expression's value (see HostValues)."""
        return self.values.eval(e, lanes)

    def read_element(self, e: ir.Index):
        """The element of device memory a host expression reads."""
        held = self.held(e.array)
        if held is not None:
            return ir.NUMPY_TYPES[ir.elem_of(e.array)](held[int(self.eval(e.index))])
        array = self.array(e.array)
        host = np.empty(1, dtype=array.dtype)
        self.read_back(array, host, int(self.eval(e.index)), e)
        return ir.NUMPY_TYPES[ir.elem_of(e.array)](host[0])

    # ---- statements
    def run(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ir.Stmt) -> None:
        try:
            self._stmt(s)
        except cl.Error as err:
            # The device refused (out of resources or memory, a lost device): an FCL error at
            # the statement, not a PyOpenCL traceback.
            raise FCLError(f"the OpenCL device failed here: {err}", s.span,
                           ["the program may need more memory than the device has; try "
                            "smaller sizes"]) from None

    def _stmt(self, s: ir.Stmt) -> None:
        self.visit(s)

    def visit_Declare(self, s: ir.Declare) -> None:
        self.env[s.var.name] = self.eval(s.init)

    def visit_Assign(self, s: ir.Assign) -> None:
        self.env[s.var.name] = self.eval(s.value)

    def visit_Alloc(self, s: ir.Alloc) -> None:
        self.env[s.var.name] = self.allocate(s)

    def visit_Launch(self, s: Launch) -> None:
        self.launch(s)

    def visit_SeqFor(self, s: ir.SeqFor) -> None:
        for k in range(int(self.eval(s.bound))):
            self.env[s.var.name] = np.int32(k)
            self.run(s.body)

    def visit_While(self, s: ir.While) -> None:
        while True:
            self.run(s.test)
            if not self.eval(s.cond):
                break
            self.run(s.body)

    def visit_If(self, s: ir.If) -> None:
        self.run(s.then if self.eval(s.cond) else s.else_)

    def visit_Fail(self, s: ir.Fail) -> None:
        if self.eval(s.cond):
            raise failure(s, [int(self.eval(v)) for v in s.values])

    def visit_Print(self, s: ir.Print) -> None:
        self.print_array(s)

    def visit_Benchmark(self, s: ir.Benchmark) -> None:
        self.benchmark(s)

    def visit_Input(self, s: ir.Input) -> None:
        self.read_input(s)

    def visit_Chunk(self, s: ir.Chunk) -> None:
        self.streams.chunk(s)

    def visit_Collect(self, s: ir.Collect) -> None:
        self.streams.collect(s)

    def visit_Result(self, s: ir.Result) -> None:
        self.check_failures()
        self.result = self.fetch(s.value)

    def visit_Store(self, s: ir.Store) -> None:
        array = self.array(s.array)
        value = np.array([self.eval(s.value)], dtype=array.dtype)
        # PyOpenCL copies to any memory object; its stubs name only Buffer, not PooledBuffer.
        cl.enqueue_copy(self.device.queue, array.buffer, value,  # type: ignore[arg-type]
                        dst_offset=int(self.eval(s.index)) * value.itemsize)

    def allocate(self, s: ir.Alloc) -> DeviceArray:
        return self.memory.new_array(DTYPES[ir.elem_of(s.var)], int(self.eval(s.size)), s.span)

    def run_program(self) -> None:
        """Run the program as `prepare_run` shaped it for this device."""
        if self.program is None:
            raise ValueError("prepare_run sets the program to run")
        self.run(self.program.host)

    def launch(self, s: Launch) -> None:
        kernel = s.kernel
        args: list[DeviceBuffer | np.generic | cl.LocalMemory] = []
        for p in kernel.params:
            value = self.env[p.name]
            if isinstance(value, HostArray):
                value = self._on_device(p.name)
            if isinstance(value, DeviceArray):
                args.append(value.buffer)
            else:
                assert isinstance(p.type, str)  # not an array: a scalar parameter
                scalar = cast(np.generic | int | float, value)
                args.append(np.int32(scalar) if p.type == ir.BOOL
                            else ir.NUMPY_TYPES[p.type](scalar))
        args += [np.int32(value) for _, value in kernel.constants]
        sizes = []
        for slot in kernel.slots:  # arrays never live at once share one buffer
            sizes.append(max(self.local_bytes(kernel, local, 1) for local in slot))
        for local in kernel.locals:
            if local.per_item:
                sizes.append(self.local_bytes(kernel, local, self.block_size))
        args += [cl.LocalMemory(max(n + -n % 8, 8)) for n in sizes]  # whole ulongs (see emit)
        local_bytes = sum(sizes)
        if local_bytes > self.device.local_mem_size:
            largest = max(kernel.locals, key=lambda local: self.local_bytes(
                kernel, local, self.block_size if local.per_item else 1))
            notes = [(largest.span, "its largest local array is made here")] \
                if largest.span is not None else []
            raise FCLError(f"this kernel needs {local_bytes} bytes of local memory per work-group, "
                           f"but the device has {self.device.local_mem_size}", s.span,
                           ["use smaller chunks per work-group, or a smaller block size"], notes)
        groups = int(self.eval(s.groups))
        if groups <= 0:
            return
        if kernel.fails:
            args.append(self.failures.record(kernel, groups))
        if kernel.abortable:
            args.append(self.abort.argument())
        args += self.extra_args(kernel, groups)
        if kernel.serial:
            group: tuple[int, ...] = (1,)
        elif kernel.width:
            group = (kernel.width, self.block_size // kernel.width)
        else:
            group = (self.block_size,)
        # PyOpenCL's kernels take LocalMemory and PooledBuffers too; its stubs leave them out.
        event = self.kernels[kernel.name](self.device.queue, (groups * group[0], *group[1:]),
                                          group, *args)  # type: ignore[arg-type]
        record(kernel.name, event)
        if self._streams is not None:
            self._streams.kernel(kernel.name, event)
        if kernel.abortable:
            self.abort.wait(event)
        if kernel.fails:
            # A failed check stops the run at the kernel that failed: nothing after it runs on
            # values the failure made meaningless.
            self.failures.check()
        self.launched(kernel, groups, local_bytes, args)

    # Hooks for instrumented runs (fcl.analysis.trace).
    def extra_args(self, kernel: Kernel, groups: int) -> list:
        return []

    def launched(self, kernel: Kernel, groups: int, local_bytes: int, args: list) -> None:
        pass

    def fetch(self, value):
        """A result as host values: numpy arrays, numpy scalars, tuples, None for unit."""
        if isinstance(value, ir.Expr):
            return self.eval(value)
        held = self.held(value.array) if isinstance(value, ir.ArrayResult) else None
        if held is not None and not self.results_on_device:
            assert isinstance(value, ir.ArrayResult)
            host = held[:int(self.eval(value.length))].copy()
            return host.astype(np.bool_) if host.dtype == np.uint8 else host
        if isinstance(value, ir.ArrayResult):
            array = self.array(value.array)
            if self.results_on_device:
                self.memory.keep(array.buffer)
                return DeviceArray(array.buffer, array.dtype, int(self.eval(value.length)))
            host = np.empty(int(self.eval(value.length)), dtype=array.dtype)
            if host.size:
                self.read_back(array, host, 0, value)
            return host.astype(np.bool_) if array.dtype == np.uint8 else host
        return None if value is None else tuple(self.fetch(v) for v in value)

    def release(self) -> None:
        """Give the run's device memory back (see DeviceMemory.release)."""
        self.memory.release()
        self.env.clear()

    def local_bytes(self, kernel: Kernel, local: LocalArray, copies: int) -> int:
        itemsize = np.dtype(DTYPES[ir.elem_of(local.var)]).itemsize
        return self.local_size(kernel, local.size) * copies * itemsize

    def local_size(self, kernel: Kernel, size: ir.Expr) -> int:
        """Elements of a local array: the largest over the kernel's iterations if it varies."""
        names: dict[str, ir.Var] = {}
        ir.expr_vars(size, names)
        group = kernel.group_var
        if group is None or group.name not in names:
            return int(self.eval(size))
        assert kernel.group_bound is not None  # set with group_var
        count = int(self.eval(kernel.group_bound))
        if count <= 0:
            return 0
        saved = self.env.get(group.name)
        self.env[group.name] = np.arange(count, dtype=np.int32)
        try:
            return int(np.max(self.eval(size, lanes=True)))
        finally:
            self.env[group.name] = saved

    def check_failures(self) -> None:
        self.failures.check()

    def read_back(self, array: DeviceArray, host: np.ndarray, offset: int, node) -> None:
        """Copy elements from `offset` on of a device array into `host`, for the host read
        `node` (a Print, an ArrayResult or an Index)."""
        if self.probes is not None:
            self.probes.probe(array.buffer, array.dtype, offset, host.size, node)
        # As in _stmt: a PooledBuffer is not a Buffer to PyOpenCL's stubs.
        cl.enqueue_copy(self.device.queue, host, array.buffer,  # type: ignore[arg-type]
                        src_offset=offset * host.itemsize)

    def print_array(self, s: ir.Print) -> None:
        self.check_failures()
        count = int(self.eval(s.count))
        held = self.held(s.array)
        if held is not None:
            host = held[:count]
        else:
            array = self.array(s.array)
            host = np.empty(count, dtype=array.dtype)
            self.read_back(array, host, 0, s)
        self.out.write(format_array(host))

    def benchmark(self, s: ir.Benchmark) -> None:
        count = int(self.eval(s.count))
        if count < 1:
            raise FCLError(f"benchmark needs at least one repetition, not {count}", s.span)
        # Each repetition's arrays go back to the pool after it (a benchmark's result is unit),
        # so that memory does not grow with the count and the next repetition reuses them: only
        # the warm-up touches fresh memory.
        kept = len(self.memory.arrays)
        self.run(s.body)  # warm-up: builds caches and first-touch allocations, not timed
        self.device.queue.finish()
        self.memory.release_arrays_since(kept)
        times = []
        for _ in range(count):
            with measuring() as clock:
                self.run(s.body)
                self.device.queue.finish()
            times.append(clock.total())
            self.memory.release_arrays_since(kept)
        self.check_failures()
        self.benchmarks.append(times)
        self.err.write(benchmark_report(times, "kernel time"))

    def read_input(self, s: ir.Input) -> None:
        if isinstance(s.source, int):
            given = self.arguments[s.source]
            if s.leaf >= 0:  # a field of an array of records: its own array
                given = cast(tuple, given)[s.leaf]
        elif s.source in self.csv_inputs:
            given = self.csv_inputs[s.source]
        else:
            values = read_int_csv(s.source, s.span)
            # one of the program's arrays
            given = self.memory.new_array(np.int32, len(values), s.span)
            if values.size:
                # As in _stmt: a PooledBuffer is not a Buffer to PyOpenCL's stubs.
                cl.enqueue_copy(self.device.queue, given.buffer,  # type: ignore[arg-type]
                                values)
        self.env[s.var.name] = given
        if s.length is not None:
            assert isinstance(given, DeviceArray)  # an array: scalar arguments have no length
            self.env[s.length.name] = np.int32(given.length)


def launch_size(compiled: Compiled, block_size: int | None) -> int:
    """The work-group size to run `compiled` with: the one it was compiled for."""
    if block_size is not None and compiled.block_size not in (None, block_size):
        raise FCLError(f"the program was compiled for work-groups of {compiled.block_size}, "
                       f"not {block_size}")
    return block_size or compiled.block_size or BLOCK_SIZE


def prepare_run(compiled: Compiled, device: str | None, block_size: int | None,
                out: Writer, err: Writer, arguments: list | None = None,
                streaming: StreamOptions | None = None) -> HostRun:
    """A host run of `compiled` on a device, its kernels built; `arguments` are an entry
    point's (see HostRun.arguments); `streaming` how its sequences are streamed (by default,
    with the budget of FCL_DEVICE_MEMORY if set)."""
    block_size = launch_size(compiled, block_size)
    dev = open_device(device)
    compiled = for_device(compiled, serial_groups(dev.device))
    if "double" in compiled.source and not dev.has_fp64:
        raise FCLError(f"the device {dev.name} does not support doubles")
    if block_size > dev.max_work_group_size:
        raise FCLError(f"block size {block_size} is larger than the device's maximum work-group "
                       f"size {dev.max_work_group_size}")
    kernels = build(dev, compiled.source, compiled.line_table) if compiled.kernels else {}
    run = HostRun(dev, kernels, block_size, out, err)
    run.program = compiled
    run.arguments = arguments or []
    run.stream_options = streaming or StreamOptions.from_environment()
    if run.stream_options.budget is not None:
        run.memory.limit = min(run.stream_options.budget, dev.global_mem_size)
    if is_oclgrind(dev.device):
        run.probes = ReadProbes(dev, compiled.host, run.memory.buffers)
    return run


def run_compiled(compiled: Compiled, device: str | None = None, block_size: int | None = None,
                 out: Writer | None = None, err: Writer | None = None,
                 arguments: list | None = None, streaming: StreamOptions | None = None,
                 on_timeline: Callable[[Timeline], None] | None = None):
    """Run on a device; the program's result if it was compiled to keep it (see ir.Result).
    `on_timeline` is given the run's sequences' timeline, if it streamed any."""
    run = prepare_run(compiled, device, block_size, out or sys.stdout, err or sys.stderr,
                      arguments, streaming)
    dev = run.device
    try:
        run.run_program()
        dev.queue.finish()
        run.check_failures()
        if on_timeline is not None and run._streams is not None:
            on_timeline(run._streams.timeline())
        return run.result
    finally:
        run.release()


def time_compiled(compiled: Compiled, device: str | None = None, block_size: int | None = None,
                  policy: Policy | None = None,
                  progress: Callable[[int, float], None] | None = None,
                  arguments: list | None = None,
                  streaming: StreamOptions | None = None) -> Timing:
    """Time a program's kernels: one warm-up run (building caches and filling the memory pool),
    then runs until `policy` says stop, each run's kernel time from profiling events and its wall
    time around it. What the program prints is dropped; its arrays go back to the pool after
    each run, so no run but the warm-up touches fresh memory."""
    with open(os.devnull, "w") as discard:
        run = prepare_run(compiled, device, block_size, discard, discard, arguments, streaming)
        dev = run.device

        def once() -> Sample:
            start = time.perf_counter()
            with measuring() as clock:
                run.run_program()
                dev.queue.finish()
            wall_ms = (time.perf_counter() - start) * 1000
            run.check_failures()
            run.memory.release_arrays_since(0)
            return Sample(wall_ms, clock.per_kernel())

        try:
            once()
            return repeat(once, policy or Policy(), progress=progress)
        finally:
            run.release()
