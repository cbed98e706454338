"""Interrupting a kernel that may never end (a `while`): a flag in host memory that its loops
read, set when the user interrupts, and a wait in Python that notices the interrupt."""
from __future__ import annotations

import time

import numpy as np
import pyopencl as cl

from fcl.runtime.buffers import DeviceMemory
from fcl.runtime.device import Device, is_oclgrind


class AbortFlag:
    def __init__(self, device: Device, memory: DeviceMemory):
        self.device, self.memory = device, memory
        self.flag: np.ndarray | None = None
        self.buffer: cl.Buffer | None = None

    def argument(self) -> cl.Buffer:
        """The flag, as the kernel argument of an abortable kernel (made once per run)."""
        if self.buffer is None:
            self.flag = np.zeros(1, dtype=np.int32)
            # Oclgrind treats memory it does not own as uninitialized; a simulation need not
            # be interrupted, so it gets a copy instead.
            sharing = cl.mem_flags.COPY_HOST_PTR if is_oclgrind(self.device.device) else \
                cl.mem_flags.USE_HOST_PTR
            self.buffer = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE | sharing,
                                    hostbuf=self.flag)
            self.memory.own(self.buffer)
        return self.buffer

    def wait(self, event: cl.Event) -> None:
        """Wait in Python, not in the OpenCL library, so that an interrupt is noticed; on one,
        tell the running kernel to stop and wait for it before giving up."""
        self.device.queue.flush()  # some devices (Oclgrind) only start work when flushed
        try:
            while event.command_execution_status != cl.command_execution_status.COMPLETE:
                time.sleep(0.002)
        except KeyboardInterrupt:
            assert self.flag is not None  # only abortable kernels are waited for here
            self.flag[0] = 1
            event.wait()
            raise
