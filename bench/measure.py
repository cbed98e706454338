"""FCL against the reference on one device: kernel times from profiling events, taking turns, the
results checked against each other and numpy, and each program's time predicted for a GPU."""
from __future__ import annotations

import io
import re
import statistics
from collections.abc import Callable
from functools import partial

import numpy as np
import pyopencl as cl

from bench.reference import Enqueue, Reference, kernel_ms
from bench.sizes import Sizes
from bench.tasks import Task, compile_task, renumbered, tasks
from fcl.analysis.costs import program_costs
from fcl.analysis.gpu import GPU, gpu_names
from fcl.analysis.trace import trace_program
from fcl.backend import for_device
from fcl.explain import predict_costs
from fcl.runtime.device import (
    Device,
    build,
    serial_groups,
)
from fcl.runtime.host import DeviceArray, HostRun
from fcl.timing import measuring

Measured = tuple[float, object, int]  # one run of a side: kernel ms, result, kernel launches


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
        self.memory.release_arrays_since(0)
        return clock.total(), self.result, clock.launches


def measured(enqueue: Enqueue) -> Callable[[], Measured]:
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
        same = renumbered(unchecked.source) == renumbered(compiled.source)
        run = BenchRun(device, build(device, compiled.source), s.block, inputs)
        bare = BenchRun(device, build(device, unchecked.source), s.block, inputs)
        try:
            sides: list[Callable[[], Measured]] = [
                measured(partial(task.reference, reference, inputs)),
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
                     "reference_kernel": reference.chosen.get(task.reference.__name__,
                                                              reference.last_chosen),
                     "reference_candidates_ms": dict(reference.last_candidates),
                     "reference_left_out": list(reference.left_out)})
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


# Run-time checks the compiler cannot prove away may cost at most this (checked / unchecked).
CHECKED_GOAL = 1.02
