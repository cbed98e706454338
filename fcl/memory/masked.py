"""Updates whose elements are no range, written in place under a mask.

A step of a blocked algorithm (the thesis's NW and LUD, ch. 6.8) changes blocks of a matrix:
`out[e] = P(e) ? g(e) : inp[e]`, where P picks the blocks on an anti-diagonal or the trailing
submatrix, conditions on `e / w` and `e % w` that are no range of e. When every read of `inp`
in the kernel is at e itself, each work-item touches only its own element, so the kernel may
store into `inp` instead, and only where P holds: `if (P(e)) inp[e] = g(e)`. The elements where
P fails keep their values instead of being copied. The other conditions are updates.py's: the
two arrays are alike, and nothing reads `inp`'s old elements afterwards.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TypeGuard

from fcl.il import ir
from fcl.il.simplify import rebuild
from fcl.il.traverse import expr_reads, names, stmt_exprs
from fcl.memory.copies import allocs, first_statement_using, mentions, paths, rebuild_stmt
from fcl.memory.decisions import Notes, at_line, copied_bytes, note
from fcl.memory.scatter import inlined, mask_counts, scattered

BOOL = ir.BOOL


def step_kernel(s: ir.Stmt, level: str = "grid"
                ) -> tuple[ir.ParFor, list[ir.Stmt], ir.Store] | None:
    """(kernel, its declarations and checks, its last statement `out[e] = v`) if s is a
    parallel loop of that shape at `level` (a grid kernel; a work-group's step, local.py)."""
    if not (isinstance(s, ir.ParFor) and s.level == level and s.body):
        return None
    *prefix, store = s.body
    if not (isinstance(store, ir.Store) and isinstance(store.index, ir.Var)
            and store.index.name == s.var.name and store.combine is None
            and all(isinstance(t, (ir.Declare, ir.Fail)) for t in prefix)):
        return None
    return s, prefix, store


def masked_parts(s: ir.Stmt) -> tuple[ir.ParFor, list[ir.Stmt], ir.Store, ir.Var] | None:
    """The step kernel, with the one array whose own element its unchanged cases keep; None
    if no case keeps an element or several arrays are kept from."""
    found = step_kernel(s)
    if found is None:
        return None
    kernel, prefix, store = found
    e = kernel.var.name
    kept = {leaf.array.name: leaf.array for leaf, _ in paths(store.value)
            if own_element(leaf, e)}
    kept.pop(store.array.name, None)
    if len(kept) != 1:
        return None
    inp = next(iter(kept.values()))
    if all(own_element(leaf, e) and leaf.array.name == inp.name
           for leaf, _ in paths(store.value)):
        return None  # a copy, no update
    return kernel, prefix, store, inp


def own_element(leaf: ir.Expr, e: str) -> TypeGuard[ir.Index]:
    """Whether leaf reads an array at the kernel's own index e."""
    return isinstance(leaf, ir.Index) and isinstance(leaf.index, ir.Var) \
        and leaf.index.name == e


def why_not_masked(kernel: ir.ParFor, prefix: list[ir.Stmt], store: ir.Store,
                   inp: ir.Var) -> str | None:
    """Why the kernel may not store into inp under its mask; None when it may."""
    out, e = store.array, kernel.var.name
    if inp.type != out.type:
        return f"{inp.name} and {out.name} are not arrays of the same type"
    exprs = [x for t in prefix for x in stmt_exprs(t)] + [store.value]
    for x in exprs:
        for read in expr_reads(x):
            if read.array.name == out.name:
                return f"the step reads {out.name}, which it writes"
            if read.array.name == inp.name and not own_element(read, e):
                return f"an update reads {inp.name}[{ir.show_expr(read.index)}], not only " \
                       f"its own element, and the elements changed are no range to prove " \
                       f"it apart from"
    return None


def mask(value: ir.Expr, inp: str, e: str) -> ir.Expr:
    """Where value is not inp's own element e: its selects' conditions, leaves as truths."""
    if isinstance(value, ir.Select):
        then, else_ = mask(value.then, inp, e), mask(value.else_, inp, e)
        if isinstance(then, ir.Const) and isinstance(else_, ir.Const):
            if then.value == else_.value:
                return then
            return value.cond if then.value else ir.Un("not", value.cond, BOOL)
        return ir.Select(value.cond, then, else_, BOOL)
    kept = own_element(value, e) and value.array.name == inp
    return ir.Const(not kept, BOOL)


def masked_bytes(kernel: ir.ParFor, prefix: list[ir.Stmt], store: ir.Store, inp: ir.Var,
                 loop: ir.SeqFor | None = None) -> int | None:
    """The bytes the copy of the unchanged elements would have read and written, over the
    loop's iterations: the mask evaluated at every element (and iteration), where the sizes
    are known when compiling; None where they are not, or the mask is not plain arithmetic."""
    steps = ir.Const(1, ir.INT) if loop is None else loop.bound
    if not (isinstance(kernel.bound, ir.Const) and isinstance(steps, ir.Const)):
        return None
    n, e = int(kernel.bound.value), kernel.var.name
    where = rebuild(mask(store.value, inp.name, e), inlined(prefix))
    counts = mask_counts(where, e, n, None if loop is None else loop.var.name,
                         int(steps.value), [], limit=None)
    return None if counts is None else copied_bytes(sum(n - c for c in counts), inp)


def masked_kernel(kernel: ir.ParFor, prefix: list[ir.Stmt], store: ir.Store,
                  inp: ir.Var) -> ir.ParFor:
    """`if (P(e)) inp[e] = v`: the kernel storing into inp only where it changes an element."""
    where = mask(store.value, inp.name, kernel.var.name)
    write = ir.If(where, [replace(store, array=inp)], [], span=store.span)
    return replace(kernel, body=[*prefix, write])


def update_masked(stmts: list[ir.Stmt], p: int, notes: Notes) -> list[ir.Stmt] | None:
    """stmts with the kernel at p (an unrolled loop's step) storing its changes into its input
    under a mask, or None."""
    found = masked_parts(stmts[p])
    if found is None:
        return None
    kernel, prefix, store, inp = found
    out = store.array
    known = allocs(stmts[:p])
    if inp.name not in known or out.name not in known:
        return None
    inp_alloc, out_alloc = stmts[known[inp.name]], stmts[known[out.name]]
    assert isinstance(inp_alloc, ir.Alloc) and isinstance(out_alloc, ir.Alloc)
    why = why_not_masked(kernel, prefix, store, inp)
    if why is None and ir.expr_key(inp_alloc.size) != ir.expr_key(out_alloc.size):
        why = f"{inp.name} and {out.name} are not arrays of the same length"
    if why is None:
        following = first_statement_using(stmts[p + 1:], inp.name)
        if following is not None and not overwrites(following, inp.name):
            why = f"{inp.name}'s old elements are read after the step{at_line(following)}"
    if why is not None:
        note(notes, "update", False, out.name, inp.name, None, why, kernel.span)
        return None
    note(notes, "update", True, out.name, inp.name, None, _done(kernel, store, inp),
         kernel.span, masked_bytes(kernel, prefix, store, inp))
    rest = [rebuild_stmt(s, {out.name: inp, inp.name: out}) for s in stmts[p + 1:]]
    update = masked_kernel(kernel, prefix, store, inp)
    built = scattered(None, stmts[:p], update, stmts[p + 1:], inp, out, notes)
    if built is not None:  # the array the update gathers from is built in inp: no update
        return built + rest
    return stmts[:p] + [update] + rest


def _done(kernel: ir.ParFor, store: ir.Store, inp: ir.Var) -> str:
    where = _shown(mask(store.value, inp.name, kernel.var.name))
    return f"only the elements where {where} change, and each reads {inp.name} only at its " \
           f"own element; {inp.name}'s old elements are not read afterwards"


def _shown(x: ir.Expr, within_or: bool = False) -> str:
    """x as FCL writes it, `&&` and `||` for the selects they are lowered to."""
    if isinstance(x, ir.Select) and isinstance(x.else_, ir.Const) and x.else_.value is False:
        both = f"{_shown(x.cond)} && {_shown(x.then)}"
        return f"({both})" if within_or else both
    if isinstance(x, ir.Select) and isinstance(x.then, ir.Const) and x.then.value is True:
        return f"{_shown(x.cond, True)} || {_shown(x.else_, True)}"
    return ir.show_expr(x)


def overwrites(s: ir.Stmt, array: str, level: str = "grid") -> bool:
    """Whether s is a step kernel (at `level`) writing every element of `array` before reading
    any: the next step of an unrolled loop, reading only its own elements of it."""
    found = step_kernel(s, level)
    if found is None:
        return False
    _, prefix, store = found
    if store.array.name != array:
        return False
    exprs = [x for t in prefix for x in stmt_exprs(t)] + [store.value]
    return all(read.array.name != array for x in exprs for read in expr_reads(x))


def update_loop_masked(loop: ir.SeqFor | ir.While, before: list[ir.Stmt], step: ir.Stmt,
                       cur: ir.Var, nxt: ir.Var, after: list[ir.Stmt], notes: Notes
                       ) -> ir.Stmt | None:
    """The loop, its step storing into cur under a mask and its buffers no longer swapping; None
    if it may not. `after`: the statements after the loop."""
    found = masked_parts(step)
    if found is None or found[3].name != cur.name or found[2].array.name != nxt.name:
        return None
    kernel, prefix, store, _ = found
    why = why_not_masked(kernel, prefix, store, cur)
    if why is None:
        why = reads_before(before, cur, nxt)
    if why is not None:
        note(notes, "update", False, nxt.name, cur.name, None, why, kernel.span)
        return None
    note(notes, "update", True, nxt.name, cur.name, None,
         _done(kernel, store, cur) + "; the buffers no longer swap", kernel.span,
         masked_bytes(kernel, prefix, store, cur, loop) if isinstance(loop, ir.SeqFor) else None)
    update = masked_kernel(kernel, prefix, store, cur)
    built = scattered(loop, before, update, after, cur, nxt, notes)
    if built is not None:  # the array the update gathers from is built in cur: no update
        return replace(loop, body=built)
    return replace(loop, body=[*before, update])


def reads_before(before: list[ir.Stmt], cur: ir.Var, nxt: ir.Var) -> str | None:
    """Why the statements before a loop's step stop it from updating cur in place: they may read
    cur (its elements are the loop's current array either way) but not write it, nor use nxt."""
    if any(mentions(t, nxt.name) for t in ir.walk(before)):
        return f"the loop's body uses {nxt.name} before its step"
    if any((isinstance(t, ir.Store) and t.array.name == cur.name)
           or (isinstance(t, ir.Declare | ir.Assign) and cur.name in names(stmt_exprs(t)[0]))
           for t in ir.walk(before)):
        return f"the loop's body changes or renames {cur.name} before its step"
    return None
