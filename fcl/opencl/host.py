"""Run a compiled program with PyOpenCL: the host side of the generated code.

Host scalars follow the same 32-bit C semantics as the kernels and the interpreter
(fcl.intmath). Arrays are device buffers; a host read of one element (a scalar returned from a
grid program) copies it back.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyopencl as cl

from fcl import checks
from fcl.defaults import BLOCK_SIZE
from fcl.errors import FCLError, Span
from fcl.hostio import Writer, benchmark_report, format_array, read_int_csv
from fcl.il import ir
from fcl.intmath import c_div, c_mod, clz, d2i
from fcl.opencl.backend import for_device
from fcl.opencl.device import (
    DTYPES,
    Device,
    DeviceBuffer,
    build,
    is_oclgrind,
    open_device,
    serial_groups,
    trim_pool,
)
from fcl.opencl.emit import FAIL_SLOTS, fail_slots
from fcl.opencl.kernel import Compiled, Kernel, Launch, LocalArray, Special
from fcl.opencl.oclgrind import ReadProbes
from fcl.timing import Policy, Sample, Timing, measuring, record, repeat

READ_WRITE_COPY = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR  # a buffer from host data
NP_TYPES = {ir.INT: np.int32, ir.DOUBLE: np.float64, ir.BOOL: np.bool_}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "==": np.equal, "!=": np.not_equal,
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor, "min": np.minimum,
    "max": np.maximum, "<<": lambda a, b: np.left_shift(a, b & 31),
    ">>": lambda a, b: np.right_shift(a, b & 31),
}


NO_FAILURE = np.uint64(2**64 - 1)


def failure(check: ir.Fail, values: list[int]) -> FCLError:
    return FCLError(check.message.format(*values), check.span,
                    [check.hint] if check.hint else [])


def lowest_failure(kernel: Kernel, groups: np.ndarray) -> FCLError:
    """The failure to report from the records of a kernel's work-groups, one row each: the
    lowest failing work-group's (work-groups may each run several of the parallel loop's
    iterations, so its index is the one the check recorded), then its lowest work-item's."""
    found = []
    for row in groups[groups[:, FAIL_SLOTS - 1] != NO_FAILURE]:
        low = (row & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
        check = kernel.fails[int(low[FAIL_SLOTS - 1]) - 1]
        values = [int(v) for v in low[FAIL_SLOTS:FAIL_SLOTS + len(check.values)]]
        at = check.place_value(checks.GROUP)
        group = -1 if at is None else values[at]
        found.append(((group, int(row[FAIL_SLOTS - 1] >> np.uint64(32))), check, values))
    _, check, values = min(found, key=lambda f: f[0])
    return failure(check, values)


@dataclass
class DeviceArray:
    buffer: DeviceBuffer
    dtype: type[np.generic]
    length: int


class HostRun:
    def __init__(self, device: Device, kernels: dict[str, cl.Kernel], block_size: int,
                 out: Writer, err: Writer):
        self.device, self.kernels, self.block_size = device, kernels, block_size
        self.out, self.err = out, err
        self.env: dict[str, object] = {}
        self.fail_flags: dict[str, tuple[cl.Buffer, Kernel, int]] = {}  # with its groups
        # Everything allocated, released when the run ends.
        self.buffers: list[DeviceBuffer] = []
        # The program's arrays and their bytes.
        self.arrays: list[tuple[DeviceBuffer, int]] = []
        self.allocated = 0  # bytes in self.arrays, checked against the device's memory
        self.peak = 0  # the most bytes allocated at once, for trimming the pool (device.py)
        self.benchmarks: list[list[float]] = []  # each `benchmark`'s kernel ms per repetition
        self.result = None
        self.program: Compiled | None = None  # what runs: the program as shaped for the device
        self.abort: cl.Buffer | None = None
        self.abort_flag: np.ndarray | None = None
        self.probes: ReadProbes | None = None  # on Oclgrind, so that it checks host reads
        # Arrays already on the device that `readIntCSV PATH` gives instead of reading PATH
        # (the benchmarks' inputs, traced and timed without a file).
        self.csv_inputs: dict[str, DeviceArray] = {}
        # An entry point's arguments (fcl.python): device arrays and numpy scalars.
        self.arguments: list[DeviceArray | np.generic] = []
        # Whether the result's arrays stay on the device (as DeviceArrays): their buffers are
        # `kept` when the run releases its memory.
        self.results_on_device = False
        self.kept: list[DeviceBuffer] = []

    def array(self, var: ir.Var) -> DeviceArray:
        """The device array that the array variable `var` holds."""
        array = self.env[var.name]
        assert isinstance(array, DeviceArray)
        return array

    # ---- expressions
    def eval(self, e: ir.Expr, lanes: bool = False):
        """A host expression's value; with lanes=True variables may hold one value per
        iteration (numpy arrays) and conditionals select lane by lane."""
        if isinstance(e, ir.Const):
            return NP_TYPES[e.type](e.value)
        if isinstance(e, ir.Var):
            return self.env[e.name]
        if lanes:
            return self._eval_lanes(e)
        if isinstance(e, Special):
            if e.name in ("local_size",):
                return np.int32(self.block_size)
            raise AssertionError(e)
        if isinstance(e, ir.Index):
            array = self.array(e.array)
            i = int(self.eval(e.index))
            host = np.empty(1, dtype=array.dtype)
            self.read_back(array, host, i, e)
            return NP_TYPES[ir.elem_of(e.array)](host[0])
        if isinstance(e, ir.Bin):
            if e.op == "&&":
                return np.bool_(self.eval(e.left) and self.eval(e.right))
            if e.op == "||":
                return np.bool_(self.eval(e.left) or self.eval(e.right))
            a, b = self.eval(e.left), self.eval(e.right)
            if e.op in ("/", "%"):
                if e.type == ir.DOUBLE:
                    return np.float64(a / b if e.op == "/" else np.fmod(a, b))
                if b == 0:
                    return np.int32(0)  # undefined in C; kernels do not trap either
                return np.int32(c_div(a, b) if e.op == "/" else c_mod(a, b))
            with np.errstate(over="ignore"):  # int arithmetic wraps around, as numpy's does
                return BINARY[e.op](a, b)
        if isinstance(e, ir.Un):
            a = self.eval(e.arg)
            with np.errstate(over="ignore"):  # -INT_MIN and abs(INT_MIN) are INT_MIN
                unary: dict[str, Callable[[], Any]] = {
                    "neg": lambda: -a, "not": lambda: np.bool_(not a), "abs": lambda: abs(a),
                    "sign": lambda: np.int32(np.sign(a)),
                    "clz": lambda: clz(np.int32(a)), "i2d": lambda: np.float64(a),
                    "d2i": lambda: d2i(a), "b2i": lambda: np.int32(a),
                    "sqrt": lambda: np.sqrt(a)}
                return unary[e.op]()
        if isinstance(e, ir.Select):
            return self.eval(e.then) if self.eval(e.cond) else self.eval(e.else_)
        raise TypeError(e)

    def _eval_lanes(self, e: ir.Expr):
        if isinstance(e, ir.Bin):
            a, b = self.eval(e.left, True), self.eval(e.right, True)
            if e.op in ("&&", "||"):
                return (np.logical_and if e.op == "&&" else np.logical_or)(a, b)
            if e.op in ("/", "%") and e.type == ir.INT:
                b = np.where(b == 0, 1, b)  # undefined in C; only sizes are computed here
                return c_div(a, b) if e.op == "/" else c_mod(a, b)
            if e.op in BINARY:
                with np.errstate(over="ignore"):  # as in eval
                    return BINARY[e.op](a, b)
            return (np.divide if e.op == "/" else np.fmod)(a, b)
        if isinstance(e, ir.Un):
            a = self.eval(e.arg, True)
            with np.errstate(over="ignore"):
                lanes: dict[str, Callable[[Any], Any]] = {
                    "neg": np.negative, "not": np.logical_not, "abs": np.abs,
                    "sign": np.sign, "clz": clz, "i2d": lambda x: np.asarray(x, np.float64),
                    "d2i": d2i,
                    "b2i": lambda x: np.asarray(x, np.int32), "sqrt": np.sqrt}
                return lanes[e.op](a)
        if isinstance(e, ir.Select):
            return np.where(self.eval(e.cond, True), self.eval(e.then, True),
                            self.eval(e.else_, True))
        return self.eval(e)

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
        if isinstance(s, (ir.Declare, ir.Assign)):
            self.env[s.var.name] = self.eval(s.init if isinstance(s, ir.Declare) else s.value)
        elif isinstance(s, ir.Alloc):
            self.env[s.var.name] = self.allocate(s)
        elif isinstance(s, Launch):
            self.launch(s)
        elif isinstance(s, ir.SeqFor):
            for k in range(int(self.eval(s.bound))):
                self.env[s.var.name] = np.int32(k)
                self.run(s.body)
        elif isinstance(s, ir.While):
            while True:
                self.run(s.test)
                if not self.eval(s.cond):
                    break
                self.run(s.body)
        elif isinstance(s, ir.If):
            self.run(s.then if self.eval(s.cond) else s.else_)
        elif isinstance(s, ir.Fail):
            if self.eval(s.cond):
                raise failure(s, [int(self.eval(v)) for v in s.values])
        elif isinstance(s, ir.Print):
            self.print_array(s)
        elif isinstance(s, ir.Benchmark):
            self.benchmark(s)
        elif isinstance(s, ir.Input):
            self.read_input(s)
        elif isinstance(s, ir.Result):
            self.check_failures()
            self.result = self.fetch(s.value)
        elif isinstance(s, ir.Store):
            array = self.array(s.array)
            value = np.array([self.eval(s.value)], dtype=array.dtype)
            # PyOpenCL copies to any memory object; its stubs name only Buffer, not PooledBuffer.
            cl.enqueue_copy(self.device.queue, array.buffer, value,  # type: ignore[arg-type]
                            dst_offset=int(self.eval(s.index)) * value.itemsize)
        else:
            raise TypeError(s)

    def allocate(self, s: ir.Alloc) -> DeviceArray:
        return self.new_array(DTYPES[ir.elem_of(s.var)], int(self.eval(s.size)), s.span)

    def new_array(self, dtype: type[np.generic], length: int, span: Span | None) -> DeviceArray:
        nbytes = max(length, 1) * np.dtype(dtype).itemsize
        if length < 0:
            raise FCLError(f"cannot allocate an array of negative length {length}", span)
        if nbytes > self.device.max_alloc:
            raise FCLError(f"cannot allocate {length} elements ({nbytes} bytes): the device "
                           f"allows at most {self.device.max_alloc} bytes in one buffer", span)
        if self.allocated + nbytes > self.device.global_mem_size:
            raise FCLError(f"cannot allocate {length} elements ({nbytes} bytes): with the "
                           f"{self.allocated} bytes already allocated, that is more than the "
                           f"device's {self.device.global_mem_size} bytes of memory", span)
        if self.device.pool is None:
            buffer: DeviceBuffer = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, nbytes)
        else:
            buffer = self.device.pool.allocate(nbytes)
        self.buffers.append(buffer)
        self.arrays.append((buffer, nbytes))
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        return DeviceArray(buffer, dtype, length)

    def release_arrays_since(self, count: int) -> None:
        """Free the arrays allocated after the first `count` (a benchmark repetition's): back to
        the device's pool, for the next repetition to reuse."""
        for buffer, nbytes in self.arrays[count:]:
            # Oclgrind would give a freed buffer's address to the next one allocated, with what
            # it knew of the old one's initialized bytes: there, buffers live until the run ends.
            if not is_oclgrind(self.device.device):
                self.buffers.remove(buffer)
                buffer.release()
            self.allocated -= nbytes
        del self.arrays[count:]

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
            if isinstance(value, DeviceArray):
                args.append(value.buffer)
            else:
                assert isinstance(p.type, str)  # not an array: a scalar parameter
                scalar = cast(np.generic | int | float, value)
                args.append(np.int32(scalar) if p.type == ir.BOOL else NP_TYPES[p.type](scalar))
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
            args.append(self.fail_flag(kernel, groups))
        if kernel.abortable:
            args.append(self.abort_buffer())
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
        if kernel.abortable:
            self.wait_interruptibly(event)
        if kernel.fails:
            # A failed check stops the run at the kernel that failed: nothing after it runs on
            # values the failure made meaningless.
            self.check_failures()
        self.launched(kernel, groups, local_bytes, args)

    # Hooks for instrumented runs (fcl.analysis.trace).
    def extra_args(self, kernel: Kernel, groups: int) -> list:
        return []

    def launched(self, kernel: Kernel, groups: int, local_bytes: int, args: list) -> None:
        pass

    def abort_buffer(self) -> cl.Buffer:
        """A flag in host memory the kernels' loops read: set, they stop."""
        if self.abort is None:
            self.abort_flag = np.zeros(1, dtype=np.int32)
            # Oclgrind treats memory it does not own as uninitialized; a simulation need not
            # be interrupted, so it gets a copy instead.
            sharing = cl.mem_flags.COPY_HOST_PTR if is_oclgrind(self.device.device) else \
                cl.mem_flags.USE_HOST_PTR
            self.abort = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE | sharing,
                                   hostbuf=self.abort_flag)
            self.buffers.append(self.abort)
        return self.abort

    def wait_interruptibly(self, event: cl.Event) -> None:
        """Wait in Python, not in the OpenCL library, so that an interrupt is noticed; on one,
        tell the running kernel to stop and wait for it before giving up."""
        self.device.queue.flush()  # some devices (Oclgrind) only start work when flushed
        try:
            while event.command_execution_status != cl.command_execution_status.COMPLETE:
                time.sleep(0.002)
        except KeyboardInterrupt:
            assert self.abort_flag is not None  # only abortable kernels are waited for here
            self.abort_flag[0] = 1
            event.wait()
            raise

    def fetch(self, value):
        """A result as host values: numpy arrays, numpy scalars, tuples, None for unit."""
        if isinstance(value, ir.Expr):
            return self.eval(value)
        if isinstance(value, ir.ArrayResult):
            array = self.array(value.array)
            if self.results_on_device:
                self.kept.append(array.buffer)
                return DeviceArray(array.buffer, array.dtype, int(self.eval(value.length)))
            host = np.empty(int(self.eval(value.length)), dtype=array.dtype)
            if host.size:
                self.read_back(array, host, 0, value)
            return host.astype(np.bool_) if array.dtype == np.uint8 else host
        return None if value is None else tuple(self.fetch(v) for v in value)

    def release(self) -> None:
        """Give the device memory back now rather than whenever Python collects it: arrays to
        the device's pool, which keeps about as much as this run used."""
        self.device.queue.finish()
        for buffer in self.buffers:
            if not any(buffer is kept for kept in self.kept):
                buffer.release()
        self.buffers.clear()
        self.arrays.clear()
        self.allocated = 0
        self.env.clear()
        trim_pool(self.device, self.peak)

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

    def fail_flag(self, kernel: Kernel, groups: int) -> cl.Buffer:
        """The kernel's failure record (see emit.FAIL_REPORTER) for `groups` work-groups: a word
        saying whether a check failed, then each group's slots, all starting at their largest
        value. A record no check wrote to is as new: later launches reuse it."""
        known = self.fail_flags.get(kernel.name)
        if known is None or known[2] < groups:
            record = np.full(1 + groups * fail_slots(kernel), NO_FAILURE, dtype=np.uint64)
            flag = cl.Buffer(self.device.context, READ_WRITE_COPY, hostbuf=record)
            self.buffers.append(flag)
            self.fail_flags[kernel.name] = (flag, kernel, groups)
        return self.fail_flags[kernel.name][0]

    def check_failures(self) -> None:
        """Report the failed check of any kernel run so far: of its lowest failing work-group
        (by the index of the parallel loop the group ran), its lowest failing work-item."""
        for flag, kernel, groups in self.fail_flags.values():
            failed = np.empty(1, dtype=np.uint64)
            cl.enqueue_copy(self.device.queue, failed, flag)
            if failed[0] == NO_FAILURE:
                continue
            record = np.empty(1 + groups * fail_slots(kernel), dtype=np.uint64)
            cl.enqueue_copy(self.device.queue, record, flag)
            raise lowest_failure(kernel, record[1:].reshape(groups, fail_slots(kernel)))

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
        array = self.array(s.array)
        count = int(self.eval(s.count))
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
        kept = len(self.arrays)
        self.run(s.body)  # warm-up: builds caches and first-touch allocations, not timed
        self.device.queue.finish()
        self.release_arrays_since(kept)
        times = []
        for _ in range(count):
            with measuring() as clock:
                self.run(s.body)
                self.device.queue.finish()
            times.append(clock.total())
            self.release_arrays_since(kept)
        self.check_failures()
        self.benchmarks.append(times)
        self.err.write(benchmark_report(times, "kernel time"))

    def read_input(self, s: ir.Input) -> None:
        if isinstance(s.source, int):
            given = self.arguments[s.source]
        elif s.source in self.csv_inputs:
            given = self.csv_inputs[s.source]
        else:
            values = read_int_csv(s.source, s.span)
            given = self.new_array(np.int32, len(values), s.span)  # one of the program's arrays
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
                out: Writer, err: Writer, arguments: list | None = None) -> HostRun:
    """A host run of `compiled` on a device, its kernels built; `arguments` are an entry
    point's (see HostRun.arguments)."""
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
    if is_oclgrind(dev.device):
        run.probes = ReadProbes(dev, compiled.host, run.buffers)
    return run


def run_compiled(compiled: Compiled, device: str | None = None, block_size: int | None = None,
                 out: Writer | None = None, err: Writer | None = None,
                 arguments: list | None = None):
    """Run on a device; the program's result if it was compiled to keep it (see ir.Result)."""
    run = prepare_run(compiled, device, block_size, out or sys.stdout, err or sys.stderr,
                      arguments)
    dev = run.device
    try:
        run.run_program()
        dev.queue.finish()
        run.check_failures()
        return run.result
    finally:
        run.release()


def time_compiled(compiled: Compiled, device: str | None = None, block_size: int | None = None,
                  policy: Policy | None = None,
                  progress: Callable[[int, float], None] | None = None,
                  arguments: list | None = None) -> Timing:
    """Time a program's kernels: one warm-up run (building caches and filling the memory pool),
    then runs until `policy` says stop, each run's kernel time from profiling events and its wall
    time around it. What the program prints is dropped; its arrays go back to the pool after
    each run, so no run but the warm-up touches fresh memory."""
    with open(os.devnull, "w") as discard:
        run = prepare_run(compiled, device, block_size, discard, discard, arguments)
        dev = run.device

        def once() -> Sample:
            start = time.perf_counter()
            with measuring() as clock:
                run.run_program()
                dev.queue.finish()
            wall_ms = (time.perf_counter() - start) * 1000
            run.check_failures()
            run.release_arrays_since(0)
            return Sample(wall_ms, clock.per_kernel())

        try:
            once()
            return repeat(once, policy or Policy(), progress=progress)
        finally:
            run.release()
