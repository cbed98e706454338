"""A loop step that changes a few elements of an array, written in place (Munksgaard's thesis,
ch. 6: the update `xs with [slice] = ...` inside a loop).

FCL has no update: a `power` or `while` step that changes a block of its array builds a whole
new array, `out[e] = e in W ? g(inp, e) : inp[e]`, into the loop's other buffer; every element
outside W is copied. When

* the elements changed, W, are a range of e (a union of the update cases' ranges);
* each update reads `inp` either at its own element or where no element changes (each read's
  elements, an LMAD over the update's range, proven apart from W's with the LMAD test);
* nothing reads `inp`'s old elements after the step: its next use writes all of it (the loop's
  next step) or there is none,

the step writes W's elements into `inp` itself and copies nothing; the statements after it read
`inp` where they read `out` and write `out` where they wrote `inp` (the buffers swap roles).
"""
from __future__ import annotations

from dataclasses import replace

from fcl.il import ir
from fcl.il.ranges import interval
from fcl.il.simplify import difference, mk_bin
from fcl.il.traverse import expr_reads, names
from fcl.lmad.core import LMAD
from fcl.lmad.overlap import disjoint
from fcl.memory.copies import (
    Case,
    allocs,
    bounds,
    cases,
    copy_kernel,
    first_statement_using,
    over_range,
    paths,
    rebuild_stmt,
    shift,
)
from fcl.memory.decisions import Decision, Notes, at_line, copied_bytes, note
from fcl.memory.masked import own_element, reads_before, step_kernel, update_loop_masked

INT = ir.INT


def update_in_place(stmts: list[ir.Stmt], p: int, notes: Notes) -> list[ir.Stmt] | None:
    """stmts with the kernel at p writing its changes into its input, or None."""
    found = copy_kernel(stmts[p])
    assert found is not None
    kernel, store = found
    out, e = store.array, kernel.var.name
    assert isinstance(kernel.bound, ir.Const)
    bound = int(kernel.bound.value)
    every = cases(store.value, e, bound)
    same = [c for c in every if own_element(c.value, e) and c.value.array.name != out.name]
    if not same or len({c.value.array.name for c in same}) != 1:  # type: ignore[attr-defined]
        return None
    inp = same[0].value.array  # type: ignore[attr-defined]
    changed = [c for c in every if c not in same]
    known = allocs(stmts[:p])
    if not changed or inp.name not in known or out.name not in known:
        return None
    if any(c.interval is None for c in changed):
        return None  # no range of elements: masked.py writes them under a mask if it may
    inp_alloc, out_alloc = stmts[known[inp.name]], stmts[known[out.name]]
    assert isinstance(inp_alloc, ir.Alloc) and isinstance(out_alloc, ir.Alloc)
    why = _cannot_update(stmts, p, kernel, store, inp, out, changed, inp_alloc, out_alloc)
    if why is not None:
        note(notes, "update", False, out.name, inp.name, None, why, kernel.span)
        return None
    ranges = [c.interval for c in changed]
    shown = ", ".join(f"{lo}..{hi - 1}" for lo, hi in ranges)  # type: ignore[misc]
    note(notes, "update", True, out.name, inp.name, LMAD(0, ((bound, 1),)),
         f"only elements {shown} change, and each reads {inp.name} only at its own element "
         f"or where nothing changes; {inp.name}'s old elements are not read afterwards",
         kernel.span, copied_bytes(bound - sum(hi - lo for lo, hi in ranges), out))  # type: ignore[misc]
    steps = [over_range(kernel, store, inp, case.value, ir.Const(case.interval[0], INT),  # type: ignore[index]
                        ir.Const(case.interval[1] - case.interval[0], INT))  # type: ignore[index]
             for case in changed]
    rest = [rebuild_stmt(s, {out.name: inp, inp.name: out}) for s in stmts[p + 1:]]
    return stmts[:p] + steps + rest


def _cannot_update(stmts: list[ir.Stmt], p: int, kernel: ir.ParFor, store: ir.Store,
                   inp: ir.Var, out: ir.Var, changed: list[Case], inp_alloc: ir.Alloc,
                   out_alloc: ir.Alloc) -> str | None:
    e = kernel.var.name
    if inp.type != out.type or not (isinstance(inp_alloc.size, ir.Const)
                                     and isinstance(out_alloc.size, ir.Const)
                                     and inp_alloc.size.value == out_alloc.size.value
                                     == kernel.bound.value):  # type: ignore[attr-defined]
        return f"{inp.name} and {out.name} are not arrays of the same length as the step"
    written = [LMAD(lo, ((hi - lo, 1),)) for lo, hi in (c.interval for c in changed)  # type: ignore[misc]
               if hi > lo]
    for case in changed:
        for read in _reads_of(case.value, inp.name):
            moved = shift(read.index, e) if names(read.index) - {e} == set() else None
            if moved is None and names(read.index):
                return f"an update reads {inp.name} at {ir.show_expr(read.index)}, not at a " \
                       f"fixed distance from its own element"
            if moved == (1, 0):
                continue  # its own element, read before it writes it
            lo, hi = case.interval  # type: ignore[misc]
            if hi <= lo:
                continue
            if moved is None:  # a constant index
                place = LMAD(int(read.index.value), ())  # type: ignore[attr-defined]
            else:
                a, c = moved
                place = LMAD(a * lo + c, ((hi - lo, a),))
            clash = next((w for w in written if not disjoint(place, w)), None)
            if clash is not None:
                return f"an update reads {inp.name} at {place}, which may overlap the " \
                       f"elements changed, {clash}"
    if _condition_reads(store.value, inp.name):
        return f"which elements change depends on {inp.name}"
    following = first_statement_using(stmts[p + 1:], inp.name)
    if following is not None and not _overwrites(following, inp, out_alloc):
        return f"{inp.name}'s old elements are read after the step{at_line(following)}"
    return None


def _reads_of(x: ir.Expr, array: str) -> list[ir.Index]:
    return [read for read in expr_reads(x) if read.array.name == array]


def _condition_reads(value: ir.Expr, name: str) -> bool:
    if isinstance(value, ir.Select):
        return name in names(value.cond) or _condition_reads(value.then, name) \
            or _condition_reads(value.else_, name)
    return False


def _overwrites(s: ir.Stmt, array: ir.Var, alloc: ir.Alloc) -> bool:
    """Whether s is a kernel writing every element of `array` without reading it."""
    found = copy_kernel(s)
    if found is None:
        return False
    kernel, store = found
    return store.array.name == array.name and array.name not in names(store.value) \
        and ir.expr_key(kernel.bound) == ir.expr_key(alloc.size)


# ---- a loop whose two buffers take turns ------------------------------------------------------
# A `power` or `while` whose count is not known when compiling is a loop over two variables:
# `next[e] = e in W ? g(cur, e) : cur[e]; swap = cur; cur = next; next = swap`. Writing W's
# elements into `cur` makes the swap unneeded: cur holds the new array, as it did after it.

def update_loop_in_place(stmts: list[ir.Stmt], p: int, notes: Notes) -> list[ir.Stmt] | None:
    loop = stmts[p]
    if not isinstance(loop, (ir.SeqFor, ir.While)) or len(loop.body) < 4:
        return None
    *before, step, swap, to_cur, to_next = loop.body
    stepping = step_kernel(step)
    if stepping is None or not _swaps(swap, to_cur, to_next, stepping[2].array):
        return None
    assert isinstance(swap, ir.Declare) and isinstance(swap.init, ir.Var)
    cur, nxt = swap.init, stepping[2].array
    if first_statement_using(stmts[p + 1:], nxt.name) is not None:
        note(notes, "update", False, nxt.name, cur.name, None,
             f"{nxt.name} is used after the loop", step.span)
        return None
    found, tried = copy_kernel(step), list[Decision]()
    new_loop = _update_range(loop, before, found, cur, nxt, tried) if found is not None \
        else None
    if new_loop is None and not tried:  # no range of elements changed: perhaps under a mask
        new_loop = update_loop_masked(loop, before, step, cur, nxt, stmts[p + 1:], notes)
    elif notes is not None:
        notes.extend(tried)
    if new_loop is None:
        return None
    # `next` names the other buffer only for the loop, which no longer uses it.
    named = [s for s in stmts[:p] if isinstance(s, ir.Declare) and s.var.name == nxt.name]
    others = [s for s in stmts[:p] if not any(s is d for d in named)]
    if first_statement_using(others, nxt.name) is None:
        return others + [new_loop] + stmts[p + 1:]
    return stmts[:p] + [new_loop] + stmts[p + 1:]


def _update_range(loop: ir.SeqFor | ir.While, before: list[ir.Stmt],
                  found: tuple[ir.ParFor, ir.Store], cur: ir.Var, nxt: ir.Var,
                  notes: Notes) -> ir.Stmt | None:
    """The loop with its step writing one range of cur, or None (noted) if it may not."""
    kernel, store = found
    e = kernel.var.name
    leaves = paths(store.value)
    changed = [(leaf, conds) for leaf, conds in leaves
               if not (own_element(leaf, e) and leaf.array.name == cur.name)]
    if len(changed) != 1 or len(changed) == len(leaves):
        return None
    leaf, conds = changed[0]
    limits = bounds(conds, e)
    # One bound of each kind: the range [lo, hi) of the elements changed.
    ranged = (limits[0][0], limits[1][0]) \
        if limits is not None and len(limits[0]) == len(limits[1]) == 1 else None
    why = reads_before(before, cur, nxt)
    if why is None and ranged is None:
        return None  # perhaps under a mask
    if why is None and _condition_reads(store.value, cur.name):
        why = f"which elements change depends on {cur.name}"
    if why is None:
        why = _clash(leaf, cur.name, e, ranged)  # type: ignore[arg-type]
    if why is not None:
        note(notes, "update", False, nxt.name, cur.name, None, why, kernel.span)
        return None
    assert ranged is not None
    lo, hi = ranged
    note(notes, "update", True, nxt.name, cur.name, None,
         f"each step changes only elements {ir.show_expr(lo)}..{ir.show_expr(hi)} - 1, each "
         f"reading {cur.name} only at its own element or outside them; the buffers no longer "
         f"swap", kernel.span, _loop_saving(loop, kernel, difference(hi, lo), nxt))
    assert isinstance(kernel.bound, ir.Const)
    # [lo, hi) within [0, N): clamped, unless the loop counter's range proves it is
    known = {loop.var.name: (0, int(loop.bound.value) - 1)} \
        if isinstance(loop, ir.SeqFor) and isinstance(loop.bound, ir.Const) else {}
    low, high = interval(lo, known), interval(hi, known)
    first = lo if low is not None and low[0] >= 0 else mk_bin("max", lo, ir.Const(0, INT), INT)
    last = hi if high is not None and high[1] <= kernel.bound.value \
        else mk_bin("min", hi, kernel.bound, INT)
    count = mk_bin("-", last, first, INT)
    width = interval(count, known)
    if width is None or width[0] < 0:
        count = mk_bin("max", count, ir.Const(0, INT), INT)
    write = over_range(kernel, store, cur, leaf, first, count)
    return replace(loop, body=[*before, write])


def _loop_saving(loop: ir.SeqFor | ir.While, kernel: ir.ParFor, width: int | None,
                 array: ir.Var) -> int | None:
    """The bytes the loop's copies of unchanged elements moved in all, if known."""
    if not (isinstance(loop, ir.SeqFor) and isinstance(loop.bound, ir.Const)
            and isinstance(kernel.bound, ir.Const) and width is not None):
        return None
    return int(loop.bound.value) * copied_bytes(int(kernel.bound.value) - width, array)


def _swaps(swap: ir.Stmt, to_cur: ir.Stmt, to_next: ir.Stmt, nxt: ir.Var) -> bool:
    """Whether the three statements are `swap = cur; cur = next; next = swap`."""
    return (isinstance(swap, ir.Declare) and isinstance(swap.init, ir.Var)
            and isinstance(to_cur, ir.Assign) and to_cur.var.name == swap.init.name
            and isinstance(to_cur.value, ir.Var) and to_cur.value.name == nxt.name
            and isinstance(to_next, ir.Assign) and to_next.var.name == nxt.name
            and isinstance(to_next.value, ir.Var) and to_next.value.name == swap.var.name)


def _clash(leaf: ir.Expr, cur: str, e: str, bounds: tuple[ir.Expr, ir.Expr]) -> str | None:
    """Why a read of cur in the update may see an element another work-item changes."""
    lo, hi = bounds
    width = difference(hi, lo)
    for read in _reads_of(leaf, cur):
        if e not in names(read.index):  # one element: it must lie outside [lo, hi)
            below, above = difference(read.index, lo), difference(read.index, hi)
            if not ((below is not None and below < 0) or (above is not None and above >= 0)):
                return f"an update reads {cur}[{ir.show_expr(read.index)}], which may be " \
                       f"among the elements changed"
            continue
        moved = shift(read.index, e)
        if moved == (1, 0):
            continue  # its own element
        if moved is None or moved[0] != 1 or width is None or abs(moved[1]) < width:
            return f"an update reads {cur}[{ir.show_expr(read.index)}], which may be among " \
                   f"the elements changed"
    return None
