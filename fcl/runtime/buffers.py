"""A run's device memory: its arrays, taken from the device's pool and given back to it, within
the device's limits (one buffer, all of its memory)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from fcl.errors import FCLError, Span
from fcl.runtime.device import Device, DeviceBuffer, is_oclgrind, trim_pool


@dataclass
class DeviceArray:
    buffer: DeviceBuffer
    dtype: type[np.generic]
    length: int


@dataclass
class HostArray:
    """An array that the host holds (a stream's collected elements, as the device stores them:
    bools as bytes), moved to the device only when a kernel reads it."""
    data: np.ndarray


class DeviceMemory:
    def __init__(self, device: Device):
        self.device = device
        # Everything allocated, released when the run ends.
        self.buffers: list[DeviceBuffer] = []
        # The program's arrays and their bytes.
        self.arrays: list[tuple[DeviceBuffer, int]] = []
        self.allocated = 0  # bytes in self.arrays, checked against the device's memory
        self.peak = 0  # the most bytes allocated at once, for trimming the pool (device.py)
        # Buffers of the result that stay on the device after the run (fcl.python).
        self.kept: list[DeviceBuffer] = []
        # The bytes the run may allocate: the device's memory, or a budget (fcl.runtime.streams).
        self.limit = device.global_mem_size

    def new_array(self, dtype: type[np.generic], length: int, span: Span | None) -> DeviceArray:
        nbytes = max(length, 1) * np.dtype(dtype).itemsize
        device = self.device
        if length < 0:
            raise FCLError(f"cannot allocate an array of negative length {length}", span)
        if nbytes > device.max_alloc:
            raise FCLError(f"cannot allocate {length} elements ({nbytes} bytes): the device "
                           f"allows at most {device.max_alloc} bytes in one buffer", span)
        if self.allocated + nbytes > self.limit:
            what = "device's" if self.limit == device.global_mem_size else "run's budget of"
            raise FCLError(f"cannot allocate {length} elements ({nbytes} bytes): with the "
                           f"{self.allocated} bytes already allocated, that is more than the "
                           f"{what} {self.limit} bytes of memory", span)
        if device.pool is None:
            buffer: DeviceBuffer = cl.Buffer(device.context, cl.mem_flags.READ_WRITE, nbytes)
        else:
            buffer = device.pool.allocate(nbytes)
        self.buffers.append(buffer)
        self.arrays.append((buffer, nbytes))
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        return DeviceArray(buffer, dtype, length)

    def own(self, buffer: DeviceBuffer) -> None:
        """Release `buffer` with the run's arrays (a failure record, an abort flag)."""
        self.buffers.append(buffer)

    def keep(self, buffer: DeviceBuffer) -> None:
        """Leave `buffer` on the device when the run releases its memory."""
        self.kept.append(buffer)

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
        trim_pool(self.device, self.peak)
