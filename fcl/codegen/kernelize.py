"""Cut a lowered host program into host statements and OpenCL kernels.

Grid-level `Distribute` (one work-group per iteration) and grid-level `ParFor` (one work-item
per iteration) become kernels launched from the host; everything else stays on the host. Inside
a kernel, block-level loops become strided loops over the work-items of the group followed by a
barrier, and memory allocated at block level becomes local memory (thread-level arrays of a
few elements, private memory).

When the work-group size is known, a block-level loop over at most one iteration per work-item
is no loop (CPU OpenCL compilers vectorize across work-items only over straight-line code), and
a kernel with at most MAX_GROUPS iterations gets one work-group each instead of work-groups
looping with a barrier at the end of each iteration; a grid-level loop of at most MAX_GROUPS
work-groups' worth of iterations gets one work-item each. Everything else about a kernel's shape is
decided afterwards, by `shape`.

With `serial` (a CPU device, see fcl.backend), a work-group kernel that runs better so
(runs_better_serial) is launched with one work-item per group, and its block-level loops are
plain loops (SerialFor) with no barriers; at most SERIAL_GROUPS work-groups each run a run of
consecutive iterations of the grid loop. A grid loop with no loop in its body gives each
work-item a run of ITEM_RUN consecutive iterations, a loop the OpenCL compiler vectorizes. A
thread-level array whose length depends on the work-item is sized for the largest length the
loops' ranges allow.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace

from fcl.codegen.kernel import (
    MAX_GROUPS,
    Kernel,
    Launch,
    LocalArray,
    SerialFor,
    Special,
    StridedFor,
)
from fcl.codegen.warps import lanes_as_work_items, lanes_in_parallel
from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.il.dispatch import StmtVisitor
from fcl.il.ranges import Ranges, interval, note
from fcl.il.simplify import mk_bin
from fcl.il.traverse import assigned, is_loop

PRIVATE_ARRAY_LIMIT = 64  # thread-level arrays up to this size live in registers
SERIAL_GROUPS = 256  # work-groups of a serial kernel at most, each running consecutive iterations
ITEM_RUN = 16  # on a CPU, the consecutive iterations of a grid loop each work-item runs


def source_tag(name: str) -> str:
    """A file's or cell's name as part of a C identifier: `<cell 3>` cell3, `lib/common.fcl`
    common."""
    return re.sub(r"\W", "", os.path.splitext(os.path.basename(name))[0]) or "source"


class Kernelizer(StmtVisitor):
    def __init__(self, block_size: int | None = None, serial: bool = False,
                 home: str | None = None):
        self.kernels: list[Kernel] = []
        self.block_size = block_size
        self.serial = serial and block_size is not None
        self.home = home  # the source the program's root is in (see _kernel_name)

    def host(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        return [self.visit(s) for s in stmts]

    def visit_Distribute(self, s: ir.Distribute) -> ir.Stmt:
        if s.level != "grid":
            raise FCLError(f"a {s.level}-level parallel loop cannot run on the host", s.span)
        return self.distribute_kernel(s)

    def visit_ParFor(self, s: ir.ParFor) -> ir.Stmt:
        if s.level != "grid":
            raise FCLError(f"a {s.level}-level parallel loop cannot run on the host", s.span)
        return self.parfor_kernel(s)

    def visit_SeqFor(self, s: ir.SeqFor) -> ir.Stmt:
        return ir.SeqFor(s.var, s.bound, self.host(s.body), span=s.span)

    def visit_While(self, s: ir.While) -> ir.Stmt:
        return ir.While(self.host(s.test), s.cond, self.host(s.body), span=s.span)

    def visit_If(self, s: ir.If) -> ir.Stmt:
        return ir.If(s.cond, self.host(s.then), self.host(s.else_), span=s.span)

    def visit_Benchmark(self, s: ir.Benchmark) -> ir.Stmt:
        return ir.Benchmark(s.count, self.host(s.body), span=s.span)

    def visit_Alloc(self, s: ir.Alloc) -> ir.Stmt:
        if s.level != "grid":
            raise FCLError(f"{s.level}-level memory cannot be allocated on the host", s.span)
        return s

    def visit_other(self, s: ir.Stmt) -> ir.Stmt:
        return s  # host statements stay as they are

    def _kernel_name(self, span: Span | None) -> str:
        """kernelN_lineL after the line its loop comes from, with the file or cell it is in
        when that is not the program's own (`kernel1_cell3_line2`, a function of cell 3)."""
        if span is None:
            return f"kernel{len(self.kernels)}"
        where = "" if self.home in (None, span.source.name) else f"_{source_tag(span.source.name)}"
        return f"kernel{len(self.kernels)}{where}_line{span.line}"

    def _add(self, name: str, made: KernelBody, body: list[ir.Stmt], span: Span | None,
             **decided) -> Kernel:
        kernel = Kernel(name, body, locals=made.locals, private=made.private, span=span,
                        abortable=made.abortable, block_size=self.block_size,
                        notes=tuple(made.notes), **decided)
        self.kernels.append(kernel)
        return kernel

    def distribute_kernel(self, s: ir.Distribute) -> Launch:
        name = self._kernel_name(s.span)
        serial = self.serial and runs_better_serial(s.body, self.block_size)
        made = KernelBody(self.block_size, serial)
        if s.note:
            made.notes.append(s.note)
        body = made.iteration(s.var, s.bound, s.body, "block")
        group = {"group_var": s.var, "group_bound": s.bound, "serial": serial}
        if serial and not (isinstance(s.bound, ir.Const) and s.bound.value <= SERIAL_GROUPS):
            return self.serial_runs(name, made, body, s, group)
        if isinstance(s.bound, ir.Const) and s.bound.value <= MAX_GROUPS:
            # One work-group per iteration; nothing follows the last barrier, so it goes.
            while body and isinstance(body[-1], ir.Barrier):
                body.pop()
            kernel = self._add(name, made, [ir.Declare(s.var, Special("group_id"), span=s.span),
                                            *body], s.span, **group)
            return Launch(kernel, s.bound, span=s.span)
        kernel = self._add(name, made, [StridedFor(s.var, Special("group_id"), s.bound,
                                                   Special("num_groups"), body, span=s.span)],
                           s.span, **group)
        groups = ir.Bin("min", s.bound, ir.Const(MAX_GROUPS, ir.INT), ir.INT)
        return Launch(kernel, groups, span=s.span)

    def serial_runs(self, name: str, made: KernelBody, body: list[ir.Stmt], s: ir.Distribute,
                    group: dict) -> Launch:
        """A serial kernel whose work-groups each run a run of consecutive iterations: PoCL
        pays for each work-group it starts, and one iteration per group made the bench's partial
        reduction (8192 groups) 1.3 times slower than 256 groups of 32 iterations (bench/README)."""
        if isinstance(s.bound, ir.Const):
            groups: ir.Expr = ir.Const(min(int(s.bound.value), SERIAL_GROUPS), ir.INT)
        else:
            groups = ir.Bin("min", s.bound, ir.Const(SERIAL_GROUPS, ir.INT), ir.INT)
        loop, groups = _runs(s.var, s.bound, groups, Special("group_id"), Special("num_groups"),
                             1, body, s.span)
        kernel = self._add(name, made, [loop], s.span, **group)
        return Launch(kernel, groups, span=s.span)

    def parfor_kernel(self, s: ir.ParFor) -> Launch:
        name = self._kernel_name(s.span)
        made = KernelBody(self.block_size)
        if s.note:
            made.notes.append(s.note)
        body = made.iteration(s.var, s.bound, s.body, "thread")
        size = self.block_size
        if self.serial and size is not None and not any(is_loop(t) for t in ir.walk(body)):
            # On a CPU each work-item runs ITEM_RUN consecutive iterations: LLVM vectorizes the
            # loop along them. One per work-item (PoCL vectorizing across work-items, where it
            # does) made a reverse 3.3 (LLVM 15) and a copy 2.9 (LLVM 14) times slower.
            if isinstance(s.bound, ir.Const):
                items = -(-int(s.bound.value) // ITEM_RUN)
                groups: ir.Expr = ir.Const(min(-(-items // size), MAX_GROUPS), ir.INT)
            else:
                run = ir.Const(ITEM_RUN * size, ir.INT)
                groups = ir.Bin("min", ir.Bin("/", mk_bin("-", mk_bin("+", s.bound, run, ir.INT),
                                                          ir.Const(1, ir.INT), ir.INT),
                                              run, ir.INT), ir.Const(MAX_GROUPS, ir.INT), ir.INT)
            loop, groups = _runs(s.var, s.bound, groups, Special("global_id"),
                                 Special("global_size"), size, body, s.span)
            return Launch(self._add(name, made, [loop], s.span), groups, span=s.span)
        # One work-item per iteration where one launch has enough, no loop: PoCL ran a copy in
        # a loop (of one iteration) at half the speed of straight-line code.
        once = size is not None and isinstance(s.bound, ir.Const) \
            and 0 < s.bound.value <= MAX_GROUPS * size
        kernel = self._add(name, made, [StridedFor(s.var, Special("global_id"), s.bound,
                                                   Special("global_size"), body, span=s.span,
                                                   once=once)], s.span)
        if once:
            assert size is not None and isinstance(s.bound, ir.Const)
            return Launch(kernel, ir.Const(-(-int(s.bound.value) // size), ir.INT), span=s.span)
        per_group = Special("local_size")
        rounded_up = ir.Bin("+", s.bound, ir.Bin("-", per_group, ir.Const(1, ir.INT), ir.INT),
                            ir.INT)
        groups = ir.Bin("/", rounded_up, per_group, ir.INT)
        groups = ir.Bin("min", groups, ir.Const(MAX_GROUPS, ir.INT), ir.INT)
        return Launch(kernel, groups, span=s.span)


def _runs(var: ir.Var, bound: ir.Expr, groups: ir.Expr, worker: Special, workers: Special,
          group_size: int, body: list[ir.Stmt], span: Span | None
          ) -> tuple[StridedFor, ir.Expr]:
    """A loop giving each of `groups` work-groups' workers (a work-group's id or a work-item's)
    its run of consecutive iterations of a loop of `bound` iterations, and the groups launched
    (fewer where the runs of fewer cover it)."""
    one = ir.Const(1, ir.INT)
    if isinstance(bound, ir.Const) and isinstance(groups, ir.Const):
        n, count = int(bound.value), max(int(groups.value), 1)
        each = max(-(-n // (count * group_size)), 1)
        launched = -(-n // (each * group_size))
        per: ir.Expr = ir.Const(each, ir.INT)
        groups = ir.Const(launched, ir.INT)
        whole = n == each * launched * group_size
    else:  # each worker's share of the iterations, the last one's cut short
        per = ir.Bin("/", mk_bin("-", mk_bin("+", bound, workers, ir.INT), one, ir.INT),
                     workers, ir.INT)
        whole = False
    start = mk_bin("*", worker, per, ir.INT)
    end = mk_bin("+", start, per, ir.INT)
    if not whole:
        end = ir.Bin("min", bound, end, ir.INT)
    return StridedFor(var, start, end, one, body, span=span), groups


def _at(s: ir.Stmt) -> str:
    return f"warp code of line {s.span.line}" if s.span is not None else "warp code"


def runs_better_serial(group_body: list[ir.Stmt], block_size: int | None) -> bool:
    """Whether a work-group's body runs faster on a CPU device as one work-item's loops (see
    fcl.backend): unless it is at most two steps of one iteration per work-item (a tile
    copied through local memory, which PoCL vectorizes across work-items), each barrier-separated
    step costs PoCL a pass over all work-items, idle ones included, and values kept across it."""
    steps = 0

    def visit(stmts: list[ir.Stmt], in_loop: bool) -> bool:
        nonlocal steps
        for s in stmts:
            if isinstance(s, (ir.ParFor, ir.Distribute)):
                steps += 1
                whole = isinstance(s.bound, ir.Const) and s.bound.value == block_size
                if in_loop or not whole or steps > 2:
                    return True
            elif isinstance(s, (ir.SeqFor, ir.While)):
                if any(visit(child, True) for child in ir.children(s)):
                    return True
            elif any(visit(child, in_loop) for child in ir.children(s)):
                return True
        return False
    return visit(group_body, False)


class KernelBody(StmtVisitor):
    """Rewrites the body of one kernel: block-level loops, local and private memory (collected
    here for the kernel made of the body)."""

    def __init__(self, block_size: int | None = None, serial: bool = False):
        self.block_size = block_size
        self.serial = serial
        self.locals: list[LocalArray] = []
        self.private: list[tuple[ir.Var, int]] = []
        self.abortable = False  # a `while` may never end (see Kernel.abortable)
        # Bounds on the int variables seen so far: a thread-level array whose length depends on
        # its work-item is sized for the largest length they allow.
        self.ranges: Ranges = {}
        self.changed: set[str] = set()
        # Inside a warp's code run with its lanes in parallel: (lanes per warp, this work-item's
        # lane, whether its warp has a part this round, None when every warp has one).
        self.lanes: tuple[int, ir.Expr, ir.Expr | None] | None = None
        self.notes: list[str] = []  # how each warp distribute runs (Kernel.notes)

    def iteration(self, var: ir.Var, bound: ir.Expr, stmts: list[ir.Stmt], level: str
                  ) -> list[ir.Stmt]:
        """The body of a kernel's loop: one iteration `var` < `bound`, run by a work-group
        (level block) or a work-item (thread)."""
        self.changed = assigned(stmts)
        note(ir.SeqFor(var, bound, []), self.ranges, self.changed,
             lambda e: interval(e, self.ranges))
        return self.block(stmts, level)

    def block(self, stmts: list[ir.Stmt], level: str) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            note(s, self.ranges, self.changed, lambda e: interval(e, self.ranges))
            out += self.stmt(s, level)
        return out

    def stmt(self, s: ir.Stmt, level: str) -> list[ir.Stmt]:
        return self.visit(s, level)

    def visit_ParFor(self, s: ir.ParFor | ir.Distribute, level: str) -> list[ir.Stmt]:
        if s.level != "block" or level != "block":
            raise FCLError(f"a {s.level}-level parallel loop cannot appear inside "
                           f"{level}-level code", s.span)
        # Either way each iteration is run by one work-item: thread-level code.
        if self.serial:
            body = self.block(s.body, "thread")
            if isinstance(s.bound, ir.Const) and s.bound.value == 1:
                return [ir.Declare(s.var, ir.Const(0, ir.INT), span=s.span), *body]
            return [SerialFor(s.var, s.bound, body, span=s.span)]
        return [*self.items_loop(s, self.block(s.body, "thread")),
                ir.Barrier("block", span=s.span)]

    def visit_Distribute(self, s: ir.Distribute, level: str) -> list[ir.Stmt]:
        if s.warp and level == "block":
            made = self.warp_distribute(s)
            if isinstance(made, list):
                _end_block_phase(made)
                self.notes.append(f"{_at(s)}: warp w's {s.warp} lanes are work-items {s.warp}w "
                                  f"to {s.warp}w + {s.warp - 1}, its arrays in local memory")
                return made
            self.notes.append(f"{_at(s)}: one work-item runs each warp's {s.warp} lanes in turn, "
                              f"since {made}")
        return self.visit_ParFor(s, level)

    def warp_distribute(self, s: ir.Distribute) -> list[ir.Stmt] | str:
        """A warp distribute with its lanes as work-items (fcl.codegen.warps), or why not."""
        if self.serial:
            return "the kernel is shaped for a CPU (a serial work-group)"
        if self.block_size is None:
            return "the work-group's size is not known when compiling"
        if self.block_size % s.warp:
            return f"a work-group of {self.block_size} is no whole number of warps"
        code = lanes_in_parallel(s)
        if isinstance(code, str):
            return code
        made = lanes_as_work_items(s, code, self.block_size)
        self.lanes = (s.warp, made.lane, made.active)
        try:
            return self.block(made.stmts, "block")
        finally:
            self.lanes = None

    def lane_loop(self, s: ir.SeqFor) -> list[ir.Stmt]:
        """A warp's loop over its lanes' elements, spread over its lanes; then a barrier."""
        assert self.lanes is not None
        width, lane, active = self.lanes
        body = self.block(s.body, "thread")
        if isinstance(s.bound, ir.Const) and s.bound.value <= width:
            own = [ir.Declare(s.var, lane, span=s.span), *body]
            guards = [] if active is None else [active]
            if s.bound.value < width:
                guards.append(mk_bin("<", lane, s.bound, ir.BOOL))
            loop: list[ir.Stmt] = own
            for guard in reversed(guards):
                loop = [ir.If(guard, loop, [], span=s.span)]
        else:
            loop = [StridedFor(s.var, lane, s.bound, ir.Const(width, ir.INT), body, span=s.span)]
            if active is not None:
                loop = [ir.If(active, loop, [], span=s.span)]
        # A warp's barrier: the work-group's here, since no device has sub-groups (the costs
        # count them apart, and price them as sub-group barriers too).
        return [*loop, ir.Barrier("warp", span=s.span)]

    def visit_Alloc(self, s: ir.Alloc, level: str) -> list[ir.Stmt]:
        return self.alloc(s, level)

    def visit_SeqFor(self, s: ir.SeqFor, level: str) -> list[ir.Stmt]:
        if s.lanes and self.lanes is not None:
            return self.lane_loop(s)
        return [ir.SeqFor(s.var, s.bound, self.block(s.body, level), span=s.span)]

    def visit_While(self, s: ir.While, level: str) -> list[ir.Stmt]:
        self.abortable = True
        return [ir.While(self.block(s.test, level), s.cond, self.block(s.body, level),
                         span=s.span, level=level)]

    def visit_If(self, s: ir.If, level: str) -> list[ir.Stmt]:
        return [ir.If(s.cond, self.block(s.then, level), self.block(s.else_, level),
                      span=s.span)]

    def visit_Print(self, s: ir.Stmt, level: str) -> list[ir.Stmt]:
        raise FCLError("host operations (printing, benchmarking, reading inputs) cannot "
                       "run inside a kernel", s.span)

    visit_Benchmark = visit_Input = visit_Print

    def visit_other(self, s: ir.Stmt, level: str) -> list[ir.Stmt]:
        return [s]

    def items_loop(self, s: ir.ParFor | ir.Distribute, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """Iterations [0, bound) spread over the work-items of the group."""
        size = self.block_size
        if size is None:
            return [StridedFor(s.var, Special("local_id"), s.bound, Special("local_size"), body,
                               span=s.span)]
        if isinstance(s.bound, ir.Const) and s.bound.value <= size:
            # Names are unique within a kernel, so the body can share the enclosing C scope.
            first = [ir.Declare(s.var, Special("local_id"), span=s.span), *body]
            if s.bound.value == size:
                return first
            return [ir.If(ir.Bin("<", Special("local_id"), s.bound, ir.BOOL), first, [],
                          span=s.span)]
        return [StridedFor(s.var, Special("local_id"), s.bound, ir.Const(size, ir.INT), body,
                           span=s.span)]

    def alloc(self, s: ir.Alloc, level: str) -> list[ir.Stmt]:
        if s.level == "grid":
            raise FCLError("global memory cannot be allocated inside a kernel", s.span)
        thread_level = s.level == "thread" and level == "thread"
        size = s.size
        if thread_level and not isinstance(size, ir.Const):
            # Its length depends on the work-item: room for the largest it can be.
            largest = interval(size, self.ranges)
            if largest is None:
                raise FCLError("the length of this thread-level array depends on the work-item "
                               "and has no bound the compiler can see; give it one, e.g. "
                               "`generate (min n 64) ...` (private and local memory are sized "
                               "before a kernel runs)", s.span)
            size = ir.Const(max(largest[1], 0), ir.INT)
        if thread_level and isinstance(size, ir.Const) and size.value <= PRIVATE_ARRAY_LIMIT:
            self.private.append((s.var, max(int(size.value), 1)))
            return []
        # A serial kernel's work-item runs one iteration at a time: one slice serves them all.
        per_item = thread_level and not self.serial
        self.locals.append(LocalArray(s.var, size, per_item, s.span))
        # Shared arrays keep their allocation in the body: it is where their lifetime starts.
        return [] if per_item else [s]


def kernelize(host_program: list[ir.Stmt], block_size: int | None = None, serial: bool = False,
              home: str | None = None) -> tuple[list[ir.Stmt], list[Kernel]]:
    """Host statements and kernels; with the work-group size the kernels will be launched with,
    loops are shaped for it, and `serial` makes work-group kernels serial (for CPU devices).
    `home` is the name of the source the program's root is in: kernels from others say theirs."""
    k = Kernelizer(block_size, serial, home)
    host = k.host(host_program)
    return host, k.kernels


def _end_block_phase(stmts: list[ir.Stmt]) -> None:
    """The last barrier of a warp distribute (its last lane loop's, in place) is the
    work-group's even with sub-groups: what the warps wrote, the block reads after it."""
    while stmts:
        last = stmts[-1]
        if isinstance(last, ir.Barrier):
            stmts[-1] = replace(last, level="block")
            return
        if not isinstance(last, (ir.SeqFor, ir.If)):
            return
        stmts = last.else_ if isinstance(last, ir.If) and last.else_ else \
            last.then if isinstance(last, ir.If) else last.body
