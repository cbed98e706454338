"""The steps that complete a kernel's interface with the host: its parameters and local memory
sizes (interface), which local arrays share memory (slots), and the failure code of each run-time
check (number_checks). With the steps that shape a work-group (order.py, tiles.py, registers.py,
widen.py) they are listed, in order, in fcl.steps. The results live on the kernel (width, locals,
private, params, constants, slots, fails) and in its statements (WideInt, FailFlag), so that
`emit` only prints them.
"""
from __future__ import annotations

from dataclasses import replace

from fcl import checks
from fcl.codegen.kernel import (
    FailFlag,
    Kernel,
    LocalArray,
    Special,
    StridedFor,
)
from fcl.codegen.sharing import lifetimes, pack
from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.il.traverse import declared, map_bodies, single_definitions


def slots(kernel: Kernel) -> Kernel:
    """The kernel with its shared local arrays grouped into slots: arrays never live at once
    share memory (per-work-item slices stay apart)."""
    shared = {local.var.name: local for local in kernel.locals if not local.per_item}
    return replace(kernel, slots=[[shared[name] for name in slot]
                                  for slot in pack(lifetimes(kernel.body, set(shared)))])


def interface(kernel: Kernel) -> Kernel:
    """Kernel parameters: the host variables the body uses. Local memory is sized on the host at
    launch, so each size is rewritten over host values (and the group's iteration variable)."""
    bound = {a.var.name for a in kernel.locals} | {v.name for v, _ in kernel.private}
    used: dict[str, ir.Var] = {}
    _free_vars(kernel.body, bound, used)
    inside = declared(kernel.body)
    definitions = single_definitions(kernel.body)
    allowed = {kernel.group_var.name} if kernel.group_var is not None else set()
    return replace(kernel, params=sorted(used.values(), key=lambda v: v.name),
                   locals=[LocalArray(local.var,
                                      _host_value(local.size, definitions, inside - allowed,
                                                  local.span), local.per_item, local.span)
                           for local in kernel.locals])


def _host_value(e: ir.Expr, definitions: dict[str, ir.Expr], inside: set[str],
                span: Span | None) -> ir.Expr:
    """e with kernel-local variables replaced by their definitions, so the host can evaluate it."""
    if isinstance(e, ir.Var) and e.name in inside:
        if e.name not in definitions:
            raise FCLError("the size of this array depends on values computed inside the "
                           "kernel, but local memory must be sized before the kernel starts", span)
        return _host_value(definitions[e.name], definitions, inside, span)
    if isinstance(e, (ir.Index, Special)):
        raise FCLError("the size of this array depends on values computed inside the kernel, "
                       "but local memory must be sized before the kernel starts", span)
    if isinstance(e, ir.Bin):
        return ir.Bin(e.op, _host_value(e.left, definitions, inside, span),
                      _host_value(e.right, definitions, inside, span), e.type)
    if isinstance(e, ir.Un):
        return ir.Un(e.op, _host_value(e.arg, definitions, inside, span), e.type)
    if isinstance(e, ir.Select):
        return ir.Select(_host_value(e.cond, definitions, inside, span),
                         _host_value(e.then, definitions, inside, span),
                         _host_value(e.else_, definitions, inside, span), e.type)
    return e


def _free_vars(stmts: list[ir.Stmt], bound: set[str], used: dict[str, ir.Var]) -> None:
    """The variables the statements use that they do not declare (an array's allocation is
    no use: local memory is a kernel argument of its own)."""
    bound = set(bound)
    for s in stmts:
        exprs: list[ir.Expr] = []
        if isinstance(s, ir.Declare):
            exprs = [s.init]
        elif isinstance(s, ir.Assign):
            exprs = [s.var, s.value]
        elif isinstance(s, ir.Store):
            exprs = [s.array, s.index, s.value]
        elif isinstance(s, StridedFor):
            exprs = [s.start, s.bound, s.step]
        elif isinstance(s, ir.SeqFor):
            exprs = [s.bound]
        elif isinstance(s, ir.Fail):  # the values its message shows are used too
            exprs = [s.cond, *s.values]
        elif isinstance(s, (ir.While, ir.If)):
            exprs = [s.cond]
        found: dict[str, ir.Var] = {}
        for e in exprs:
            ir.expr_vars(e, found)
        for name, var in found.items():
            if name not in bound:
                used.setdefault(name, var)
        if isinstance(s, (StridedFor, ir.SeqFor)):
            _free_vars(s.body, bound | {s.var.name}, used)
        else:
            for child in ir.children(s):
                _free_vars(child, bound, used)
        if isinstance(s, ir.Declare):
            bound.add(s.var.name)


def failing_item(check: ir.Fail) -> ir.Expr:
    """The index of the work-item a check runs in (0 in a work-group's shared code)."""
    kinds = [kind for kind in check.places if kind != checks.GROUP]
    if not kinds:
        return ir.Const(0, ir.INT)
    at = check.place_value(kinds[-1])
    assert at is not None  # kinds are among the check's places
    return check.values[at]


def number_checks(kernel: Kernel) -> Kernel:
    """Each run-time check becomes a FailFlag whose code is its place in kernel.fails, in the
    order the checks run (a while's test before its body)."""
    fails: list[ir.Fail] = []

    def number(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            if isinstance(s, ir.Fail):
                fails.append(s)
                out.append(FailFlag(s.cond, len(fails), s.values, failing_item(s), span=s.span))
            elif isinstance(s, ir.While):
                test = number(s.test)
                out.append(ir.While(test, s.cond, number(s.body), span=s.span, level=s.level))
            else:
                out.append(map_bodies(s, number))
        return out
    body = number(kernel.body)
    return replace(kernel, body=body, fails=fails)
