"""Cut a host program into host statements and OpenCL kernels (the original's compHost/mkKernel).

A grid-level `Distribute` becomes a kernel with one work-group per iteration and a grid-level
`ParFor` a kernel with one work-item per iteration; on the host each is replaced by a `Launch`.
When there are more iterations than launched work-groups (or work-items), each loops over
several: the kernel's outer loop is strided by the number of groups (or work-items) launched.
Inside a kernel, block-level loops become loops strided over the work-items of the group and end
with a barrier; block-level memory becomes local memory sized exactly by the host at launch;
thread-level memory becomes a private array, or a per-work-item slice of local memory.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterator

from fcl.errors import FCLError, Span
from fcl.il import ir

MAX_PRIVATE_ELEMENTS = 64  # larger thread-level arrays go to local memory, not registers
MAX_GROUPS = 65536         # the original's virtualization width


@dataclass(frozen=True, eq=False)
class WorkItemQuery(ir.Expr):
    """An OpenCL work-item function `get_<name>(0)`: local_id, local_size, group_id, ..."""

    name: str
    type: str = ir.INT


@dataclass(eq=False)
class StridedFor(ir.Stmt):
    """for (var = start; var < bound; var += step): iterations spread over work-items or groups."""

    var: ir.Var
    start: ir.Expr
    bound: ir.Expr
    step: ir.Expr
    body: list[ir.Stmt]


@dataclass(eq=False)
class LocalAlloc(ir.Stmt):
    """An array in local memory, a `__local` kernel argument sized by the host at launch:
    `host_size` elements, times the work-group size when each work-item has its own slice."""

    var: ir.Var
    size: ir.Expr       # as the kernel computes it
    host_size: ir.Expr  # the same size over host values only
    per_work_item: bool

    @property
    def param_name(self) -> str:
        return f"{self.var.name}_pool" if self.per_work_item else self.var.name


@dataclass(eq=False)
class FlagFailure(ir.Stmt):
    """A `Fail` inside a kernel: when `cond` holds, record `code` in the failure flag (the first
    failure wins); the host reports it at its next look at device memory."""

    cond: ir.Expr
    code: int


@dataclass(eq=False)
class Kernel:
    name: str
    params: list[ir.Var]  # the host values the body reads, sorted by name
    body: list[ir.Stmt]
    local_allocs: list[LocalAlloc]
    group_per_iteration: bool  # Distribute: one work-group per iteration; ParFor: one work-item
    flags_failures: bool       # takes the failure flag as its last argument
    span: Span | None = None


@dataclass(eq=False)
class Launch(ir.Stmt):
    """Run `kernel` on the host values `args` (its params) for `iterations` iterations."""

    kernel: Kernel
    args: list[ir.Var]
    iterations: ir.Expr

    def show_il(self) -> str:
        unit = "work-group" if self.kernel.group_per_iteration else "work-item"
        args = ", ".join(a.name for a in self.args)
        return (f"launch {self.kernel.name}({args}), {ir.show_expr(self.iterations)} iterations "
                f"of a {unit} each;")


@dataclass
class SplitProgram:
    host: list[ir.Stmt]
    kernels: list[Kernel]
    failures: list[ir.Fail]  # failure code k + 1 in the flag means failures[k] held


def split_program(host_program: list[ir.Stmt]) -> SplitProgram:
    splitter = _Splitter()
    host = splitter.host(host_program)
    return SplitProgram(host, splitter.kernels, splitter.failures)


def launch_groups(launch: Launch, iterations: int, block_size: int,
                  max_groups: int = MAX_GROUPS) -> int:
    """How many work-groups of `block_size` work-items to launch: enough for one unit per
    iteration, but at most `max_groups` (the kernel loops over the rest)."""
    if launch.kernel.group_per_iteration:
        wanted = iterations
    else:
        wanted = -(-iterations // block_size)
    return max(0, min(wanted, max_groups))


# ---- splitting ---------------------------------------------------------------------------------

class _Splitter:
    def __init__(self):
        self.kernels: list[Kernel] = []
        self.failures: list[ir.Fail] = []

    def host(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        return [self.host_stmt(s) for s in stmts]

    def host_stmt(self, s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, (ir.Distribute, ir.ParFor)):
            if s.level != "grid":
                raise FCLError(f"a {s.level}-level parallel loop cannot run on the host: it "
                               "must be inside a grid-level one", s.span)
            return self.kernel_launch(s)
        if isinstance(s, ir.Alloc) and s.level != "grid":
            raise FCLError(f"{s.level}-level memory cannot be allocated on the host: only "
                           "global memory can", s.span)
        if isinstance(s, ir.SeqFor):
            return ir.SeqFor(s.var, s.bound, self.host(s.body), span=s.span)
        if isinstance(s, ir.While):
            return ir.While(self.host(s.test), s.cond, self.host(s.body), span=s.span)
        if isinstance(s, ir.If):
            return ir.If(s.cond, self.host(s.then), self.host(s.else_), span=s.span)
        if isinstance(s, ir.Benchmark):
            return ir.Benchmark(s.count, self.host(s.body), span=s.span)
        return s

    def kernel_launch(self, s: ir.Distribute | ir.ParFor) -> Launch:
        builder = _KernelBuilder(s, self.failures)
        if isinstance(s, ir.Distribute):
            body = StridedFor(s.var, WorkItemQuery("group_id"), s.bound,
                              WorkItemQuery("num_groups"), builder.lower(s.body, "block"),
                              span=s.span)
        else:
            body = StridedFor(s.var, WorkItemQuery("global_id"), s.bound,
                              WorkItemQuery("global_size"), builder.lower(s.body, "thread"),
                              span=s.span)
        params = _free_variables([body])
        kernel = Kernel(self.kernel_name(s.span), params, [body], builder.local_allocs,
                        isinstance(s, ir.Distribute), builder.flags_failures, s.span)
        self.kernels.append(kernel)
        return Launch(kernel, params, s.bound, span=s.span)

    def kernel_name(self, span: Span | None) -> str:
        """kernel_<n>, with the first word of the FCL source that made it when there is one."""
        name = f"kernel_{len(self.kernels)}"
        word = re.match(r"[A-Za-z][A-Za-z0-9]*", span.text) if span is not None else None
        return f"{name}_{word.group()[:24]}" if word else name


class _KernelBuilder:
    """Rewrites one kernel body by level: `block` code is run by every work-item of a group
    alike, `thread` code by one work-item for one iteration."""

    def __init__(self, loop: ir.Distribute | ir.ParFor, failures: list[ir.Fail]):
        self.failures = failures
        self.local_allocs: list[LocalAlloc] = []
        self.flags_failures = False
        # Kernel variables the host can recompute for local memory sizes: declared once and
        # never assigned. Names are unique, so a name means the same variable everywhere.
        assigned = {s.var.name for s in _walk([loop]) if isinstance(s, ir.Assign)}
        self.kernel_names = _bound_names([loop])
        self.single_definitions = {s.var.name: s.init for s in _walk([loop])
                                   if isinstance(s, ir.Declare) and s.var.name not in assigned}

    def lower(self, stmts: list[ir.Stmt], level: str) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            out += self.lower_stmt(s, level)
        return out

    def lower_stmt(self, s: ir.Stmt, level: str) -> list[ir.Stmt]:
        if isinstance(s, (ir.ParFor, ir.Distribute)):
            if s.level != "block" or level != "block":
                where = "one work-item" if level == "thread" else "a work-group"
                raise FCLError(f"a {s.level}-level parallel loop cannot run inside code run by "
                               f"{where}", s.span)
            loop = StridedFor(s.var, WorkItemQuery("local_id"), s.bound,
                              WorkItemQuery("local_size"), self.lower(s.body, "thread"),
                              span=s.span)
            return [loop, ir.Barrier("block", span=s.span)]
        if isinstance(s, ir.Alloc):
            return [self.alloc(s, level)]
        if isinstance(s, ir.Barrier):
            if s.level != "block" or level != "block":
                raise FCLError(f"a {s.level}-level barrier cannot appear in code run by "
                               f"{'one work-item' if level == 'thread' else 'a work-group'}",
                               s.span)
            return [s]
        if isinstance(s, ir.Fail):
            self.failures.append(s)
            self.flags_failures = True
            return [FlagFailure(s.cond, len(self.failures), span=s.span)]
        if isinstance(s, ir.SeqFor):
            return [ir.SeqFor(s.var, s.bound, self.lower(s.body, level), span=s.span)]
        if isinstance(s, ir.While):
            return [ir.While(self.lower(s.test, level), s.cond, self.lower(s.body, level),
                             span=s.span)]
        if isinstance(s, ir.If):
            return [ir.If(s.cond, self.lower(s.then, level), self.lower(s.else_, level),
                          span=s.span)]
        if isinstance(s, (ir.Print, ir.Benchmark, ir.ReadCSV)):
            raise FCLError("printing, benchmarking and reading files can only be done by the "
                           "host, not inside a kernel", s.span)
        return [s]

    def alloc(self, s: ir.Alloc, level: str) -> ir.Stmt:
        if s.level == "grid":
            raise FCLError("global memory cannot be allocated inside a kernel", s.span)
        if s.level == "block" and level == "thread":
            raise FCLError("block-level memory cannot be allocated by one work-item", s.span)
        if s.level == "thread" and isinstance(s.size, ir.Const) \
                and s.size.value <= MAX_PRIVATE_ELEMENTS:
            return s  # a private array
        local = LocalAlloc(s.var, s.size, self.host_expr(s.size, s), s.level == "thread",
                           span=s.span)
        self.local_allocs.append(local)
        return local

    def host_expr(self, e: ir.Expr, alloc: ir.Alloc) -> ir.Expr:
        """`e` over host values only, or a located error when the kernel computes it."""
        if isinstance(e, ir.Var) and e.name in self.kernel_names:
            if e.name in self.single_definitions:
                return self.host_expr(self.single_definitions[e.name], alloc)
            raise FCLError(f"the size of this array depends on `{e.name}`, which is computed "
                           "inside the kernel, but local memory is sized by the host before "
                           "the kernel starts", alloc.span,
                           ["make the size depend only on values known outside the parallel "
                            "loop (e.g. not on the work-group's index)"])
        if isinstance(e, ir.Index):
            raise FCLError("the size of this array is read from memory inside the kernel, but "
                           "local memory is sized by the host before the kernel starts",
                           alloc.span)
        if isinstance(e, ir.Bin):
            return ir.Bin(e.op, self.host_expr(e.left, alloc), self.host_expr(e.right, alloc),
                          e.type)
        if isinstance(e, ir.Un):
            return ir.Un(e.op, self.host_expr(e.arg, alloc), e.type)
        if isinstance(e, ir.Select):
            return ir.Select(self.host_expr(e.cond, alloc), self.host_expr(e.then, alloc),
                             self.host_expr(e.else_, alloc), e.type)
        return e


# ---- variables ---------------------------------------------------------------------------------

def _free_variables(body: list[ir.Stmt]) -> list[ir.Var]:
    """The host variables a kernel body uses, sorted by name; the kernel may not assign them,
    since its copy is an argument the host never sees again."""
    bound = _bound_names(body)
    used: dict[str, ir.Var] = {}
    for s in _walk(body):
        if isinstance(s, ir.Assign) and s.var.name not in bound:
            raise FCLError(f"a kernel cannot change `{s.var.name}`, a variable of the host",
                           s.span)
        for e in _stmt_exprs(s):
            for var in _expr_vars(e):
                if var.name not in bound:
                    used.setdefault(var.name, var)
    return sorted(used.values(), key=lambda v: v.name)


def _bound_names(body: list[ir.Stmt]) -> set[str]:
    names = set()
    for s in _walk(body):
        if isinstance(s, (ir.Declare, ir.Alloc, LocalAlloc, ir.SeqFor, ir.ParFor, ir.Distribute,
                          StridedFor)):
            names.add(s.var.name)
    return names


def _walk(stmts: list[ir.Stmt]) -> Iterator[ir.Stmt]:
    for s in stmts:
        yield s
        for child in _children(s):
            yield from _walk(child)


def _children(s: ir.Stmt) -> list[list[ir.Stmt]]:
    if isinstance(s, (ir.SeqFor, ir.ParFor, ir.Distribute, ir.Benchmark, StridedFor)):
        return [s.body]
    if isinstance(s, ir.While):
        return [s.test, s.body]
    if isinstance(s, ir.If):
        return [s.then, s.else_]
    return []


def _stmt_exprs(s: ir.Stmt) -> list[ir.Expr]:
    """The expressions a statement reads (its own loop variable included, harmlessly)."""
    if isinstance(s, ir.Declare):
        return [s.init]
    if isinstance(s, ir.Assign):
        return [s.value]
    if isinstance(s, ir.Alloc) or isinstance(s, LocalAlloc) and s.per_work_item:
        return [s.size]  # a whole-group local array is sized by the host alone
    if isinstance(s, ir.Store):
        return [s.array, s.index, s.value]
    if isinstance(s, StridedFor):
        return [s.start, s.bound, s.step]
    if isinstance(s, (ir.SeqFor, ir.ParFor, ir.Distribute)):
        return [s.bound]
    if isinstance(s, (ir.While, ir.If, ir.Fail, FlagFailure)):
        return [s.cond]
    return []


def _expr_vars(e: ir.Expr) -> Iterator[ir.Var]:
    if isinstance(e, ir.Var):
        yield e
    elif isinstance(e, ir.Index):
        yield e.array
        yield from _expr_vars(e.index)
    elif isinstance(e, ir.Bin):
        yield from _expr_vars(e.left)
        yield from _expr_vars(e.right)
    elif isinstance(e, ir.Un):
        yield from _expr_vars(e.arg)
    elif isinstance(e, ir.Select):
        yield from _expr_vars(e.cond)
        yield from _expr_vars(e.then)
        yield from _expr_vars(e.else_)
