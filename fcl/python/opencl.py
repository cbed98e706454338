"""Entry points on the OpenCL back end: arguments moved to the device, results fetched or left
there.

numpy arguments are copied into buffers from the device's memory pool, given back after the
call; pyopencl arrays of the library's context are used in place (a copy only when they are not
contiguous from offset 0). With out="device", result arrays come back as pyopencl arrays that own
their buffers, so calls can be chained without copies through the host.
"""
from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from fcl.analysis.gpu import GPU
from fcl.explain import Explanation
from fcl.python.arguments import Parameter, is_device_array
from fcl.runtime.buffers import DeviceArray
from fcl.runtime.device import Device, open_device
from fcl.runtime.host import prepare_run, time_compiled
from fcl.timing import Policy, Timing
from fcl.viz.timeline import Timeline


def call(entry, instance, values: list, out: str,
         on_timeline: Callable[[Timeline], None] | None = None):
    library = entry.library
    compiled = instance.compiled()
    device = open_device(library.device)
    arguments, uploaded, given = _to_device(entry, device, values)
    run = prepare_run(compiled, library.device, library.block_size, sys.stdout, sys.stderr,
                      arguments, library.streaming)
    run.results_on_device = out == "device"
    try:
        run.run_program()
        device.queue.finish()
        run.check_failures()
        result = run.result
        if on_timeline is not None and run._streams is not None:
            on_timeline(run._streams.timeline())
    finally:
        run.release()
        for buffer in uploaded:
            if not any(buffer is kept for kept in run.memory.kept):
                buffer.release()
    return _on_device(device, result, given) if out == "device" else result


def bench(entry, instance, values: list, policy: Policy) -> Timing:
    library = entry.library
    device = open_device(library.device)
    arguments, uploaded, _ = _to_device(entry, device, values)
    try:
        return time_compiled(instance.compiled(), library.device, library.block_size, policy,
                             arguments=arguments, streaming=library.streaming)
    finally:
        for buffer in uploaded:
            buffer.release()


def explain_call(entry, instance, values: list, gpu: GPU) -> Explanation:
    """The call's Explanation; the arguments' buffers live as long as it does."""
    library = entry.library
    arguments, _, _ = _to_device(entry, open_device(library.device), values)
    return Explanation(instance.compiled(), library.block_size, library.device, gpu,
                       arguments=arguments, streaming=library.streaming)


def _to_device(entry, device: Device, values: list,
               params: list | None = None) -> tuple[list, list, list]:
    """(the HostRun arguments, the buffers uploaded for them, the callers' own buffers)."""
    arguments: list = []
    uploaded: list = []
    given: list = []
    for param, value in zip(params or entry.params, values):
        if param.sequence:  # streamed from the host by the run (fcl.runtime.streams)
            arguments.append(value)
        elif param.record is not None:  # an array of records: an array per field
            fields, up, mine = _to_device(entry, device, list(value),
                                          [Parameter(param.name, "", True)] * len(value))
            arguments.append(tuple(fields))
            uploaded += up
            given += mine
        elif isinstance(value, np.ndarray):
            data = value.view(np.uint8) if value.dtype == np.bool_ else value
            buffer = _allocate(device, max(data.nbytes, 1))
            if data.size:
                cl.enqueue_copy(device.queue, buffer, data)
            uploaded.append(buffer)
            arguments.append(DeviceArray(buffer, data.dtype.type, len(data)))
        elif is_device_array(value):
            if value.context != device.context:
                raise ValueError(f"{entry.name}: parameter `{param.name}` is a pyopencl array "
                                 f"of another context; the library runs on "
                                 f"{device.name} (make arrays with the library's `queue`)")
            if value.offset or not value.flags.forc:
                value = value.copy()
            given.append(value.base_data)
            dtype = np.uint8 if value.dtype == np.bool_ else value.dtype.type
            arguments.append(DeviceArray(value.base_data, dtype, value.size))
        else:
            arguments.append(value)
    return arguments, uploaded, given


def _allocate(device: Device, nbytes: int):
    if device.pool is None:  # Oclgrind
        return cl.Buffer(device.context, cl.mem_flags.READ_WRITE, nbytes)
    return device.pool.allocate(nbytes)


def _on_device(device: Device, result, given: list):
    """A result with its arrays as pyopencl arrays (copies where they are the caller's own)."""
    if isinstance(result, DeviceArray):
        dtype = np.bool_ if result.dtype == np.uint8 else result.dtype
        array = cl_array.Array(device.queue, (result.length,), dtype, data=result.buffer)
        return array.copy() if any(result.buffer is b for b in given) else array
    if isinstance(result, tuple):
        return tuple(_on_device(device, v, given) for v in result)
    return result
