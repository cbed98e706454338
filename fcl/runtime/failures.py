"""Run-time checks that failed in kernels: each kernel's failure record on the device, and the
one failure to report from it (docs/language.md, "Run-time checks").

A kernel with checks gets a record (see emit.FAIL_REPORTER): a word saying whether a check failed,
then one row of slots per work-group. The host reads the word after each launch, and the rows
only after a failure."""
from __future__ import annotations

import numpy as np
import pyopencl as cl

from fcl import checks
from fcl.codegen.emit import FAIL_SLOTS, fail_slots
from fcl.codegen.kernel import Kernel
from fcl.errors import FCLError
from fcl.il import ir
from fcl.runtime.buffers import DeviceMemory

NO_FAILURE = np.uint64(2**64 - 1)
READ_WRITE_COPY = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR  # a buffer from host data


def failure(check: ir.Fail, values: list[int]) -> FCLError:
    """The failed check's error, as the interpreter raises it (fcl.interp.faults)."""
    err = FCLError(check.message.format(*values), check.span, [check.hint] if check.hint else [])
    if check.inside is not None:
        err.notes.insert(0, (check.inside, checks.INSIDE_PRELUDE))
    return err


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


class FailureRecords:
    """The failure records of a run's kernels, one per kernel, reused by its later launches."""

    def __init__(self, queue: cl.CommandQueue, context: cl.Context, memory: DeviceMemory):
        self.queue, self.context, self.memory = queue, context, memory
        self.records: dict[str, tuple[cl.Buffer, Kernel, int]] = {}  # with its groups

    def record(self, kernel: Kernel, groups: int) -> cl.Buffer:
        """The kernel's record for `groups` work-groups, every slot at its largest value. A
        record no check wrote to is as new: later launches reuse it."""
        known = self.records.get(kernel.name)
        if known is None or known[2] < groups:
            slots = np.full(1 + groups * fail_slots(kernel), NO_FAILURE, dtype=np.uint64)
            buffer = cl.Buffer(self.context, READ_WRITE_COPY, hostbuf=slots)
            self.memory.own(buffer)
            self.records[kernel.name] = (buffer, kernel, groups)
        return self.records[kernel.name][0]

    def check(self) -> None:
        """Raise the failed check of any kernel run so far: of its lowest failing work-group
        (by the index of the parallel loop the group ran), its lowest failing work-item."""
        for buffer, kernel, groups in self.records.values():
            failed = np.empty(1, dtype=np.uint64)
            cl.enqueue_copy(self.queue, failed, buffer)
            if failed[0] == NO_FAILURE:
                continue
            slots = np.empty(1 + groups * fail_slots(kernel), dtype=np.uint64)
            cl.enqueue_copy(self.queue, slots, buffer)
            raise lowest_failure(kernel, slots[1:].reshape(groups, fail_slots(kernel)))
