"""Kernels that update an array in place instead of writing a fresh one.

A grid-level loop (a kernel) that writes a freshly allocated array `out` element by element,
each element computed from the element at the same index of an array `inp` that nothing reads
afterwards, can write into `inp` instead: `out[e] = f(inp[e])` becomes `inp[e] = f(inp[e])`, and
`out` is not allocated; a kernel that only copied (`out[e] = inp[e]`) is then left out. Writing
a fresh array costs more than the stores on a CPU: each of its
cache lines is read before it is written (the scan's final adjustment took twice the time of
the hand-written in-place kernel on PoCL). Like local arrays sharing memory (sharing.py), this
is the back end's choice of buffers: the IL, and the structure drawn from it, keep both arrays.

The rewrite is safe when every element is written by one statement instance that has read the
old value first, and no other instance reads it:

* the kernel has exactly one store to `out`, at index e, and mentions `inp` only as reads
  `inp[e]` inside the stored value (in a branch of a select on `v == c`, an index equal to e
  with c for v); it does not read `out`;
* e is a linear function of the loops around the store (constant bounds), with coefficients
  that give every iteration its own element (as the digits of a mixed-radix number);
* `inp` and `out` are allocated in global memory in the same statement list as the kernel,
  with the same element type, `out` no larger than `inp`; `inp` is not used after the kernel nor
  copied into a variable, and `out` is not used between its allocation and the kernel.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TypeAlias

from fcl.il import ir
from fcl.il.simplify import linear, rebuild
from fcl.il.traverse import assigned, map_bodies, names, stmt_exprs, sub_exprs
from fcl.memory.copies import is_kernel, rebuild_stmt
from fcl.memory.decisions import Notes, note

LOOPS = (ir.SeqFor, ir.ParFor, ir.Distribute)
Loop: TypeAlias = ir.SeqFor | ir.ParFor | ir.Distribute


def in_place(stmts: list[ir.Stmt], notes: Notes = None) -> list[ir.Stmt]:
    return _block(stmts, assigned(stmts), notes)


def _block(stmts: list[ir.Stmt], changed: set[str], notes: Notes) -> list[ir.Stmt]:
    # New statements throughout: the IL given is also drawn as the program's structure.
    stmts = [s if is_kernel(s) else map_bodies(s, lambda body: _block(body, changed, notes))
             for s in stmts]
    p = 0
    while p < len(stmts):
        found = _candidate(stmts, p, changed) if is_kernel(stmts[p]) else None
        if found is not None:
            out_alloc, inp = found
            note(notes, "in-place", True, out_alloc.var.name, inp.name, None,
                 f"each element of {inp.name} is read once, by the work-item that writes "
                 f"{out_alloc.var.name} there, and {inp.name} is not used after",
                 out_alloc.span)
            stmts.remove(out_alloc)
            _absorb_label(stmts, inp.name, out_alloc.label)
            p -= 1
            stmts[p:] = _rename(stmts[p:], out_alloc.var.name, inp)
            if _copies_onto_itself(stmts[p]):  # `inp[e] = inp[e]`: a copy that is no longer one
                del stmts[p]
                p -= 1
        p += 1
    return stmts


def _copies_onto_itself(kernel: ir.Stmt) -> bool:
    """Whether all the kernel does is store each element it reads back where it was."""
    quiet = LOOPS + (ir.Declare, ir.Barrier)
    for s in ir.walk([kernel]):
        if isinstance(s, ir.Store):
            value = s.value
            if not (isinstance(value, ir.Index) and value.array.name == s.array.name
                    and ir.expr_key(value.index) == ir.expr_key(s.index)):
                return False
        elif not isinstance(s, quiet):
            return False
    return True


def _candidate(stmts: list[ir.Stmt], p: int, changed: set[str]):
    """(the allocation of the kernel's output, the input array it can be written into)."""
    kernel = stmts[p]
    assert isinstance(kernel, (ir.ParFor, ir.Distribute))  # _block asks only of kernels
    allocs = {s.var.name: s for s in stmts[:p]
              if isinstance(s, ir.Alloc) and s.level == "grid"}
    stores = [(s, loops) for s, loops in _stores(kernel.body, [kernel]) if s.array.name in allocs]
    if len(stores) != 1 or stores[0][0].combine is not None:  # a histogram's bins combine
        return None
    store, loops = stores[0]
    out = allocs[store.array.name]
    if out.var.name in changed or out.var.name in names(store.index) | names(store.value) \
            or _elsewhere(kernel.body, out.var.name, store) \
            or any(_mentions(s, out.var.name) for s in stmts[stmts.index(out) + 1:p]) \
            or not _injective(store.index, loops, kernel):
        return None
    for name, inp in allocs.items():
        if name == out.var.name or name in changed or inp.var.type != out.var.type \
                or not _fits(out.size, inp.size, changed):
            continue
        if _own_reads(store.value, name, store.index) and name not in names(store.index) \
                and not _elsewhere(kernel.body, name, store) \
                and not any(_mentions(s, name) for s in stmts[p + 1:]) \
                and not _copied(stmts, name):
            return out, inp.var
    return None


def _stores(stmts: list[ir.Stmt], loops: list[Loop | None]
            ) -> Iterator[tuple[ir.Store, list[Loop | None]]]:
    """Every store in stmts with the loops around it (None for a `while`: unknown count)."""
    for s in stmts:
        if isinstance(s, ir.Store):
            yield s, loops
        inner = loops + [s if isinstance(s, LOOPS) else None] \
            if isinstance(s, LOOPS + (ir.While,)) else loops
        for child in ir.children(s):
            yield from _stores(child, inner)


def _injective(index: ir.Expr, around: list[Loop | None],
               kernel: ir.ParFor | ir.Distribute) -> bool:
    """Whether distinct iterations of the loops around the store write distinct elements."""
    loops = [loop for loop in around if loop is not None]
    if len(loops) < len(around):
        return False
    loop_vars = {loop.var.name for loop in loops}
    inside = {s.var.name for s in ir.walk(kernel.body) if isinstance(s, (ir.Declare, ir.Assign))}
    terms, _ = linear(index)
    coefs: dict[str, int] = {}
    for atom, coef in terms.values():
        if not isinstance(atom, ir.Var) or atom.name in inside:
            return False  # not linear in the loops, or varying in another way
        if atom.name in loop_vars:
            coefs[atom.name] = abs(coef)
    span = 0  # the largest difference of the index over the loops taken so far
    for loop in sorted(loops, key=lambda lp: coefs.get(lp.var.name, 0)):
        if not isinstance(loop.bound, ir.Const):
            return False
        if loop.bound.value <= 1:
            continue
        coef = coefs.get(loop.var.name, 0)
        if coef <= span:
            return False
        span += coef * (int(loop.bound.value) - 1)
    return True


def _fits(size: ir.Expr, capacity: ir.Expr, changed: set[str]) -> bool:
    if isinstance(size, ir.Const) and isinstance(capacity, ir.Const):
        return size.value <= capacity.value
    return ir.expr_key(size) == ir.expr_key(capacity) and not names(size) & changed


def _own_reads(e: ir.Expr, name: str, own: ir.Expr) -> bool:
    """Whether e reads array `name`, and only at index `own`, and uses it no other way. Inside
    the branch of a select on `v == c`, both indices are compared with c for v (the scan's
    last kernel reads `inp[j]` when its chunk `c == 0`, writing `out[c * chunk + j]`)."""
    reads = 0

    def walk(x: ir.Expr, known: dict[str, ir.Expr]) -> bool:
        nonlocal reads
        if isinstance(x, ir.Select):
            fixed = _fixed_by(x.cond)
            return walk(x.cond, known) and walk(x.else_, known) and \
                walk(x.then, {**known, **fixed})
        if isinstance(x, ir.Index) and x.array.name == name:
            reads += 1
            return name not in names(x.index) and ir.expr_key(rebuild(x.index, known)) == \
                ir.expr_key(rebuild(own, known))
        if isinstance(x, ir.Var):
            return x.name != name
        return all(walk(part, known) for part in sub_exprs(x))
    return walk(e, {}) and reads > 0


def _fixed_by(cond: ir.Expr) -> dict[str, ir.Expr]:
    """{v: c} when cond is `v == c` for an int variable v and constant c."""
    if isinstance(cond, ir.Bin) and cond.op == "==":
        for var, const in ((cond.left, cond.right), (cond.right, cond.left)):
            if isinstance(var, ir.Var) and var.type == ir.INT and isinstance(const, ir.Const):
                return {var.name: const}
    return {}


def _mentions(s: ir.Stmt, name: str) -> bool:
    """Whether s, or a statement nested in it, uses the variable or array `name`."""
    return any(name in names(e) for t in ir.walk([s]) for e in stmt_exprs(t))


def _elsewhere(stmts: list[ir.Stmt], name: str, store: ir.Store) -> bool:
    """Whether a statement other than `store` uses `name`."""
    return any(t is not store and any(name in names(e) for e in stmt_exprs(t))
               for t in ir.walk(stmts))


def _copied(stmts: list[ir.Stmt], name: str) -> bool:
    """Whether some variable is made to refer to the array (it would live on under that name)."""
    return any(isinstance(s, (ir.Declare, ir.Assign)) and
               name in names(s.init if isinstance(s, ir.Declare) else s.value)
               for s in ir.walk(stmts))


def _absorb_label(stmts: list[ir.Stmt], array: str, label: str | None) -> None:
    """The allocation of `array` (in `stmts`) named also by `label`: it now holds that array
    too, after its own (the views show `xs / ys`)."""
    for at, s in enumerate(stmts):
        if isinstance(s, ir.Alloc) and s.var.name == array and label:
            stmts[at] = replace(s, label=ir.joined_label(s.label, label))


def _rename(stmts: list[ir.Stmt], old: str, new: ir.Var) -> list[ir.Stmt]:
    return [rebuild_stmt(s, {old: new}) for s in stmts]
