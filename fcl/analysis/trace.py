"""Run a compiled program with instrumented kernels and read back one work-group's accesses.

The first launch of every kernel is traced, for the chosen work-group (clamped to the groups
launched). Each work-item logs (site, index) pairs in order, up to `cap` of them: its memory
accesses, barriers and branches taken; a work-item that did more is marked truncated.
"""
from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from fcl.codegen.emit import Site, traced_source
from fcl.codegen.kernel import Compiled, Kernel
from fcl.errors import FCLError
from fcl.runtime.buffers import DeviceArray
from fcl.runtime.device import build, open_device
from fcl.runtime.host import HostRun, launch_size
from fcl.runtime.streams import StreamOptions

DEFAULT_CAP = 2048  # logged accesses per work-item


@dataclass
class KernelTrace:
    kernel: Kernel
    group: int           # the traced work-group
    groups: int          # work-groups launched
    block_size: int
    local_bytes: int     # local memory per work-group
    groups_per_launch: list[int]  # the work-groups of every launch of this kernel, in order
    lane: np.ndarray     # for each logged access: the work-item (local id) ...
    order: np.ndarray    # ... its position in that work-item's log ...
    site: np.ndarray     # ... the site (an index into Trace.sites) ...
    index: np.ndarray    # ... and the element index (pool position for per-item local slices)
    truncated: bool      # some work-item did more than `cap` accesses
    # The entries each work-item made, logged or not: more than it logged where cut short.
    made: np.ndarray | None = None

    @property
    def launches(self) -> int:
        return len(self.groups_per_launch)


@dataclass
class Trace:
    sites: list[Site]
    kernels: list[KernelTrace]  # in the order of their first launch
    source: str                 # the instrumented OpenCL
    # A streaming run's (chunks, bytes moved to the device, bytes moved back), else None.
    streamed: tuple[int, int, int] | None = None
    labels: dict[str, str] = field(default_factory=dict)  # array -> its FCL name (array_labels)

    def kernel(self, name: str) -> KernelTrace:
        for k in self.kernels:
            if k.kernel.name == name:
                return k
        raise FCLError(f"no kernel named {name} was launched; launched: "
                       f"{', '.join(k.kernel.name for k in self.kernels) or 'none'}")


class TracingRun(HostRun):
    def __init__(self, *args, group: int, cap: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.group, self.cap = group, cap
        self.traced: list[KernelTrace] = []
        self.pending: dict[str, tuple[cl.Buffer, cl.Buffer, np.ndarray, int]] = {}
        self.seen: set[str] = set()
        self.groups_per_launch: dict[str, list[int]] = {}

    def extra_args(self, kernel: Kernel, groups: int) -> list:
        if kernel.name in self.seen:  # only the first launch is traced
            dummy = self._buffer(np.zeros(1, np.int32))
            return [dummy, dummy, np.int32(-1), np.int32(0)]
        self.seen.add(kernel.name)
        group = min(self.group, groups - 1)
        log = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE,
                        self.block_size * 2 * self.cap * 4)
        self.memory.own(log)
        counts = np.zeros(self.block_size, np.int32)
        count_buffer = self._buffer(counts)
        self.pending[kernel.name] = (log, count_buffer, counts, group)
        return [log, count_buffer, np.int32(group), np.int32(self.cap)]

    def _buffer(self, host: np.ndarray) -> cl.Buffer:
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        buffer = cl.Buffer(self.device.context, flags,
                           hostbuf=host)
        self.memory.own(buffer)
        return buffer

    def launched(self, kernel: Kernel, groups: int, local_bytes: int, args: list) -> None:
        self.groups_per_launch.setdefault(kernel.name, []).append(groups)
        if kernel.name not in self.pending:
            return
        log_buffer, count_buffer, counts, group = self.pending.pop(kernel.name)
        cl.enqueue_copy(self.device.queue, counts, count_buffer)
        log = np.empty((self.block_size, self.cap, 2), np.int32)
        cl.enqueue_copy(self.device.queue, log, log_buffer)
        kept = np.minimum(counts, self.cap)
        lanes = np.repeat(np.arange(self.block_size, dtype=np.int32), kept)
        order = np.concatenate([np.arange(n, dtype=np.int32) for n in kept]) if kept.sum() else \
            np.zeros(0, np.int32)
        entries = log[lanes, order]
        self.traced.append(KernelTrace(kernel, group, groups, self.block_size, local_bytes, [],
                                       lanes, order, entries[:, 0].copy(), entries[:, 1].copy(),
                                       bool((counts > self.cap).any()), counts.copy()))


def trace_program(compiled: Compiled, group: int = 0, device: str | None = None,
                  block_size: int | None = None, cap: int = DEFAULT_CAP,
                  inputs: dict[str, DeviceArray] | None = None,
                  arguments: list | None = None,
                  streaming: StreamOptions | None = None) -> Trace:
    """Run `compiled` with traced kernels (its output discarded) and return the trace;
    `inputs` are device arrays that `readIntCSV` gives by path (see HostRun.csv_inputs),
    `arguments` an entry point's (HostRun.arguments), `streaming` how its sequences stream
    (default: the environment's FCL_DEVICE_MEMORY)."""
    block_size = launch_size(compiled, block_size)
    if group < 0:
        raise FCLError(f"the work-group to trace must be 0 or more, not {group}")
    source, sites = traced_source(compiled.kernels)
    dev = open_device(device)
    kernels = build(dev, source) if compiled.kernels else {}
    run = TracingRun(dev, kernels, block_size, io.StringIO(), io.StringIO(), group=group, cap=cap)
    run.csv_inputs = inputs or {}
    run.arguments = arguments or []
    run.stream_options = streaming or StreamOptions.from_environment()
    if run.stream_options.budget is not None:
        run.memory.limit = min(run.stream_options.budget, dev.global_mem_size)
    try:
        run.run(compiled.host)
        dev.queue.finish()
    finally:
        run.release()
    for k in run.traced:
        k.groups_per_launch = run.groups_per_launch[k.kernel.name]
    streams = run._streams
    streamed = None if streams is None else \
        (streams.labels, streams.moved["to device"], streams.moved["to host"])
    return Trace(sites, run.traced, source, streamed, compiled.labels)
