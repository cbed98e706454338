"""Occupancy: how many work-groups, and so warps, an SM of a GPU holds at once, and which of its
limits binds; and an estimate of the registers a kernel's work-items need, which is one of them.

An SM holds a work-group only if it has room for all of it: its threads, a block slot, its local
memory and its registers. The smallest of those limits is the number resident, as NVIDIA's
occupancy calculator (now in Nsight Compute) computes it. Occupancy, resident warps over the
most an SM can hold, says how much work there is to switch to while some warps wait for memory
(fcl/analysis/predict.py turns that into time).

Registers are chosen by the vendor's compiler, which we do not run, so they are estimated from
the kernel's IL: the most scalar variables live at once (a double counts 2, as it takes two
32-bit registers), plus the kernel's arrays held in registers, plus BASE_REGISTERS for what
every kernel keeps (work-item and group ids, 64-bit addresses, loop bookkeeping). The estimate
ignores what the vendor's compiler adds (temporaries of long expressions, unrolled loops,
values kept to avoid recomputing them) and what it saves (variables it folds away), so it is a
guide to when registers start to bind, not the figure `nvcc -Xptxas -v` would print.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from fcl.analysis.gpu import GPU
from fcl.codegen.kernel import Kernel, StridedFor
from fcl.il import ir
from fcl.il.traverse import names, stmt_exprs

# nvcc gives a grid-stride copy kernel 10 to 16 registers; this is that kernel with no variables.
BASE_REGISTERS = 12
# The order in which a tie between limits is reported: the first is the one to change.
LIMITS = ("threads", "blocks", "local memory", "registers", "warps")
COUNTED_LOOPS = (ir.SeqFor, ir.ParFor, ir.Distribute, StridedFor)  # a counter, then a body


@dataclass(frozen=True)
class Occupancy:
    groups_per_sm: int      # work-groups resident on an SM at once (0: the kernel cannot run)
    warps_per_sm: int
    occupancy: float        # resident warps / the most an SM holds
    limit: str              # the limit that binds (one of LIMITS, or why none fits)
    registers: int          # per work-item, as allocated (the estimate, capped)
    spills: bool            # the estimate did not fit: the compiler would spill to memory
    limits: dict[str, int]  # work-groups per SM that each limit allows


def occupancy(gpu: GPU, block_size: int, local_bytes: int, registers: int) -> Occupancy:
    """Resident work-groups of `block_size` work-items, each using `local_bytes` of local memory
    and `registers` registers per work-item, on one SM of `gpu`."""
    warps = math.ceil(block_size / gpu.warp_size)
    per_thread = gpu.register_allocation_unit // gpu.warp_size
    # The compiler caps registers so that one work-group fits, spilling the rest to memory.
    fitting = gpu.registers_per_sm // (warps * gpu.warp_size) // per_thread * per_thread
    allocated = min(_round_up(registers, per_thread), gpu.registers_per_thread, fitting)
    if block_size > gpu.max_threads_per_block:
        return _none(f"work-groups of at most {gpu.max_threads_per_block} work-items",
                     allocated, registers)
    if local_bytes > gpu.shared_memory_per_block:
        return _none(f"local memory: at most {gpu.shared_memory_per_block} B per work-group",
                     allocated, registers)
    limits = {
        "threads": gpu.max_threads_per_sm // block_size,
        "blocks": gpu.max_blocks_per_sm,
        "local memory": gpu.shared_memory_per_sm
        // (local_bytes + gpu.shared_memory_reserved_per_block)
        if local_bytes + gpu.shared_memory_reserved_per_block else gpu.max_blocks_per_sm,
        "registers": gpu.registers_per_sm // (allocated * gpu.warp_size) // warps,
        "warps": gpu.max_warps_per_sm // warps,
    }
    groups = min(limits.values())
    limit = next(name for name in LIMITS if limits[name] == groups)
    return Occupancy(groups, groups * warps, groups * warps / gpu.max_warps_per_sm, limit,
                     allocated, allocated < registers, limits)


def _none(limit: str, allocated: int, registers: int) -> Occupancy:
    return Occupancy(0, 0, 0.0, limit, allocated, allocated < registers, {})


def _round_up(n: int, step: int) -> int:
    return max(step, -(-n // step) * step)


def estimate_registers(kernel: Kernel) -> int:
    """32-bit registers per work-item of `kernel`, estimated as the module docstring says."""
    weights = {}
    for s in ir.walk(kernel.body):
        var = s.var if isinstance(s, (ir.Declare, *COUNTED_LOOPS)) else None
        if var is not None and not isinstance(var.type, ir.ArrayType):
            weights[var.name] = 2 if var.type == ir.DOUBLE else 1
    in_registers = sum(size * (2 if ir.elem_of(var) == ir.DOUBLE else 1)
                       for var, size in kernel.private)
    return BASE_REGISTERS + _Liveness(weights).peak_of(kernel.body) + in_registers


class _Liveness:
    """The most registers the live variables take at any point of a statement list, found by
    the usual backward walk (a variable is live from its definition to its last use; a loop's
    body runs again, so what its start needs is live at its end too)."""

    def __init__(self, weights: dict[str, int]):
        self.weights = weights
        self.peak = 0

    def peak_of(self, stmts: list[ir.Stmt]) -> int:
        self.block(stmts, frozenset())
        return self.peak

    def note(self, live: frozenset[str]) -> frozenset[str]:
        self.peak = max(self.peak, sum(self.weights.get(name, 0) for name in live))
        return live

    def block(self, stmts: list[ir.Stmt], live: frozenset[str]) -> frozenset[str]:
        for s in reversed(stmts):
            live = self.note(self.stmt(s, live))
        return live

    def stmt(self, s: ir.Stmt, after: frozenset[str]) -> frozenset[str]:
        reads = frozenset().union(*(names(e) for e in stmt_exprs(s)))
        if isinstance(s, (ir.Declare, ir.Assign)):
            return after - {s.var.name} | reads
        if isinstance(s, ir.If):
            return self.block(s.then, after) | self.block(s.else_, after) | reads
        if isinstance(s, ir.While):
            # test; while cond { body; test }
            head = self.block(s.test, after | reads)
            while True:
                again = self.block(s.test, after | reads | self.block(s.body, head))
                if again == head:
                    return head
                head = again
        if isinstance(s, COUNTED_LOOPS):
            counter = frozenset({s.var.name})
            end = after | counter
            while True:
                start = self.block(s.body, end)
                if start <= end:  # (a loop's `reads` include its counter, which it defines)
                    return (end | reads) - counter
                end |= start
        return after | reads
