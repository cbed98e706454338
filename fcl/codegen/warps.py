"""A warp's code with its lanes in parallel (an ir.Distribute with `warp`).

The lowering writes a warp's code as one work-item would run it: its lane loops (`lanes`
SeqFors) visit every lane's element in turn, and its arrays are thread-level. That is how a
serial kernel (a CPU device) runs it. In a work-group kernel the lanes are work-items instead:
warp w of the group is work-items [w W, (w + 1) W), lane l its l-th. The distribute's parts are
dealt to the warps in rounds, a lane loop is spread over the lanes and ends with a barrier, and
the warp's arrays are slices of one local array, warp w's at w × its length.

The devices here have no sub-groups, so that barrier is the work-group's: every work-item must
reach each one. That holds when the loops and branches around lane loops depend on nothing that
differs between warps (`uniform`): no part index, no memory read. Where they may, or where the
code writes outside a lane loop, keeps a value from one lane's element in a variable, swaps
arrays, or checks in a lane loop what may fail there, its lanes stay one work-item's loop
(`lanes_in_parallel` says why).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from fcl.codegen.kernel import Special
from fcl.il import ir
from fcl.il.simplify import mk_bin
from fcl.il.traverse import (
    assigned,
    declared,
    expr_reads,
    map_bodies,
    map_children,
    map_stmt_exprs,
    names,
)


@dataclass
class WarpCode:
    """How a warp distribute runs with its lanes in parallel."""

    arrays: dict[str, ir.Expr]  # the warp's arrays: name -> length (the same in every warp)


def lanes_in_parallel(s: ir.Distribute) -> WarpCode | str:
    """The warp's arrays, if the distribute's lanes can run in parallel (see the module), or
    why they cannot."""
    arrays: dict[str, ir.Expr] = {}
    uniform = _Uniform(declared(s.body) | {s.var.name})
    if not uniform.expr(s.bound):
        return "the number of parts is read from memory"
    for stmt in s.body:
        if isinstance(stmt, ir.Alloc):
            if stmt.level != "thread":
                return NESTED
            if not uniform.expr(stmt.size):
                return "an array's length depends on the part or on memory"
            arrays[stmt.var.name] = stmt.size
        else:
            why = _warp_statement(stmt, uniform)
            if why is not None:
                return why
    return WarpCode(arrays)


class _Uniform:
    """The variables whose values are the same in every work-item of the group: those from
    outside the warp's code, and those it computes from such alone."""

    def __init__(self, inside: set[str]):
        self.inside = inside  # declared in the warp's code (and its part index)
        self.known: set[str] = set()

    def expr(self, e: ir.Expr) -> bool:
        if next(expr_reads(e), None) is not None:
            return False
        return all(name not in self.inside or name in self.known for name in names(e))

    def define(self, var: ir.Var, value: ir.Expr) -> None:
        if self.expr(value):
            self.known.add(var.name)
        else:
            self.known.discard(var.name)


def _has_lane_loop(stmts: list[ir.Stmt]) -> bool:
    return any(isinstance(s, ir.SeqFor) and s.lanes for s in ir.walk(stmts))


# Why a warp's code cannot run with its lanes as work-items, by what it does.
DIVERGES = "a loop or branch around a lane loop depends on the part or on memory"
STORES = "it writes memory outside a lane loop"
SWAPS = "a loop's arrays swap (a `while` or `power` the compiler does not unroll)"
NESTED = "it has a parallel loop or memory of its own inside"
KEEPS = "a lane loop changes a variable from outside it"
# A check that may fail in several lanes: one work-item reports the first lane's failure in the
# lanes' order, as the interpreter does; lanes in parallel would report the lowest value.
CHECKS = "a run-time check in a lane loop may fail (`--unsafe` leaves it out)"


def _warp_statement(s: ir.Stmt, uniform: _Uniform) -> str | None:
    """Why a statement of a warp's code (outside its lane loops) cannot run in every lane, or
    None if it can."""
    if isinstance(s, (ir.Declare, ir.Assign)):
        if isinstance(s.var.type, ir.ArrayType):
            return SWAPS
        uniform.define(s.var, s.init if isinstance(s, ir.Declare) else s.value)
        return None
    if isinstance(s, ir.Fail):
        return None
    if isinstance(s, ir.SeqFor) and s.lanes:
        if not uniform.expr(s.bound):
            return DIVERGES
        return _lane_body(s.body)
    if isinstance(s, ir.SeqFor):
        nested, decides = s.body, s.bound
        if uniform.expr(s.bound):
            uniform.known.add(s.var.name)
    elif isinstance(s, ir.If):
        nested, decides = s.then + s.else_, s.cond
    elif isinstance(s, ir.While):
        nested, decides = s.test + s.body, s.cond
    elif isinstance(s, ir.Store):
        return STORES
    else:
        return NESTED
    if _has_lane_loop(nested) and not uniform.expr(decides) and not isinstance(s, ir.While):
        return DIVERGES
    why = next((w for t in nested if (w := _warp_statement(t, uniform)) is not None), None)
    if why is None and _has_lane_loop(nested) and not uniform.expr(decides):
        return DIVERGES  # a while's condition, known once its test has run
    if not uniform.expr(decides):
        # What only some work-items change, or change some number of times, differs.
        uniform.known -= assigned(nested)
    return why


def _lane_body(body: list[ir.Stmt]) -> str | None:
    """Why a lane loop's body does not keep to its lane (None if it does): something
    allocated, a loop over lanes or work-items inside, a variable from outside it changed, a
    check that may fail."""
    own = declared(body)
    for s in ir.walk(body):
        if isinstance(s, (ir.Alloc, ir.ParFor, ir.Distribute, ir.Barrier)) or \
                (isinstance(s, ir.SeqFor) and s.lanes):
            return NESTED
        if isinstance(s, ir.Assign) and s.var.name not in own:
            return KEEPS
        if isinstance(s, ir.Fail):
            return CHECKS
    return None


@dataclass
class LanesAsWorkItems:
    """A warp distribute rewritten for a work-group kernel (block-level statements whose lane
    loops are still to be spread over the lanes, see kernelize.KernelBody.lane_loop)."""

    stmts: list[ir.Stmt]
    lane: ir.Var                # this work-item's lane in its warp
    active: ir.Expr | None      # whether its warp has a part this round (None: every warp has)


def lanes_as_work_items(s: ir.Distribute, code: WarpCode, block_size: int) -> LanesAsWorkItems:
    """The warps' arrays as local memory, and the parts dealt to the warps in rounds."""
    warps = block_size // s.warp
    width = ir.Const(s.warp, ir.INT)
    number = s.var.name.rpartition("_")[2]
    warp_id, lane = ir.Var(f"warp_{number}", ir.INT), ir.Var(f"lane_{number}", ir.INT)
    ids = [ir.Declare(warp_id, ir.Bin("/", Special("local_id"), width, ir.INT), span=s.span),
           ir.Declare(lane, ir.Bin("%", Special("local_id"), width, ir.INT), span=s.span)]
    allocs = [ir.Alloc(a.var, mk_bin("*", ir.Const(warps, ir.INT), a.size, ir.INT), "block",
                       span=a.span)
              for a in s.body if isinstance(a, ir.Alloc)]
    body = shift_to_slices([t for t in s.body if not isinstance(t, ir.Alloc)], code, warp_id)
    every = isinstance(s.bound, ir.Const) and s.bound.value % warps == 0
    active = None if every else mk_bin("<", s.var, s.bound, ir.BOOL)
    if isinstance(s.bound, ir.Const) and s.bound.value <= warps:
        parts: list[ir.Stmt] = [ir.Declare(s.var, warp_id, span=s.span), *body]
    else:
        round_ = ir.Var(f"round_{s.var.name}", ir.INT)
        first = mk_bin("*", round_, ir.Const(warps, ir.INT), ir.INT)
        rounds = mk_bin("/", mk_bin("+", s.bound, ir.Const(warps - 1, ir.INT), ir.INT),
                        ir.Const(warps, ir.INT), ir.INT)
        parts = [ir.SeqFor(round_, rounds, [
            ir.Declare(s.var, mk_bin("+", first, warp_id, ir.INT), span=s.span), *body],
            span=s.span)]
    return LanesAsWorkItems([*allocs, *ids, *parts], lane, active)


def shift_to_slices(stmts: list[ir.Stmt], code: WarpCode, warp_id: ir.Expr) -> list[ir.Stmt]:
    """The statements with every element of a warp array moved into its warp's slice."""
    def shift(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Index) and e.array.name in code.arrays:
            return ir.Index(e.array, _in_slice(e.array, shift(e.index), code, warp_id))
        return map_children(e, shift)

    def statement(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Store):
            index = shift(s.index)
            if s.array.name in code.arrays:
                index = _in_slice(s.array, index, code, warp_id)
            s = replace(s, index=index, value=shift(s.value))
        else:
            s = map_stmt_exprs(s, shift)
        return map_bodies(s, lambda body: [statement(t) for t in body])
    return [statement(s) for s in stmts]


def _in_slice(array: ir.Var, index: ir.Expr, code: WarpCode, warp_id: ir.Expr) -> ir.Expr:
    start = mk_bin("*", warp_id, code.arrays[array.name], ir.INT)
    return mk_bin("+", start, index, ir.INT)
