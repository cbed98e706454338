"""Local arrays that hold nothing shared become registers.

A block-level array that every work-item reads and writes only at its own position (its index
in the work-group) is never seen by another work-item: one private element per work-item can
hold it. `power` and `while` at block level double-buffer their array (two arrays, a pointer to
the current one and one to the next, swapped after each step); such arrays then all become the
same element, which keeps every value read when each read goes through a pointer to the array
written last: checked below, for each step reads its element before writing the next. The
thesis's tiled matmul keeps its accumulator so; in local memory it cost the H100 5%.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from fcl.codegen.kernel import (
    Kernel,
    LocalArray,
    StridedFor,
    group_body,
    inline_ints,
    own_index,
)
from fcl.codegen.sharing import aliases as pointer_aliases
from fcl.il import ir
from fcl.il.traverse import (
    array_reads,
    map_bodies,
    map_children,
    single_definitions,
    stmt_exprs,
    sub_exprs,
)


def registers(kernel: Kernel) -> Kernel:
    """The kernel with its own-position local arrays in registers (a work-group kernel's of a
    known group size; others are returned as they are)."""
    if kernel.group_var is None or kernel.serial or kernel.block_size is None:
        return kernel
    body, rewrap = group_body(kernel)
    definitions = single_definitions(body)
    locals_, private = list(kernel.locals), list(kernel.private)
    body = _in_registers(locals_, private, body, own_index(kernel),
                         lambda e: inline_ints(e, definitions))
    return replace(kernel, body=rewrap(body), locals=locals_, private=private)


def _in_registers(locals_: list[LocalArray], private: list[tuple[ir.Var, int]],
                  body: list[ir.Stmt], own: ir.Expr, inline: Callable[[ir.Expr], ir.Expr]
                  ) -> list[ir.Stmt]:
    """`body` with the own-position arrays of `locals_` moved to `private`. `own` is the
    work-item's index in its group; `inline(e)` expands e's int variables (to compare
    indices)."""
    shared = [a.var.name for a in locals_ if not a.per_item]
    if not shared:
        return body
    aliases = pointer_aliases(body, set(shared))
    root = {name: name for name in shared}

    def find(name: str) -> str:
        while root[name] != name:
            name = root[name]
        return name
    for arrays in aliases.values():
        if not arrays:  # a pointer to thread-level arrays only (a thread's `while` state)
            continue
        first, *rest = sorted(arrays)
        for other in rest:
            root[find(other)] = find(first)

    target = ir.show_expr(inline(own))
    bad: set[str] = set()

    def access(name: str, index: ir.Expr) -> None:
        arrays = aliases.get(name)
        if arrays and ir.show_expr(inline(index)) != target:
            bad.update(find(a) for a in arrays)

    for read in array_reads(body, targets=True):
        access(read.array.name, read.index)
    for s in ir.walk(body):
        if isinstance(s, ir.Store):
            access(s.array.name, s.index)

    for group in sorted({find(a) for a in shared} - bad):
        members = [a for a in shared if find(a) == group]
        names = {v for v, targets in aliases.items() if targets & set(members)}
        if len(members) > 1 and _last_written(body, frozenset(), names) is None:
            continue
        body = _privatize(locals_, private, body, members, names)
    return body


def _last_written(stmts: list[ir.Stmt], fresh: frozenset[str], names: set[str]
                  ) -> frozenset[str] | None:
    """The variables (of `names`) sure to point to the array written last, after `stmts` run
    from `fresh`; None if a read may go through any other."""
    for s in stmts:
        for e in stmt_exprs(s, targets=True):
            if not _reads_through(e, fresh, names):
                return None
        if isinstance(s, ir.Store) and s.array.name in names:
            fresh = frozenset({s.array.name})
        elif isinstance(s, (ir.Declare, ir.Assign)) and s.var.name in names:
            value = s.init if isinstance(s, ir.Declare) else s.value
            same = isinstance(value, ir.Var) and value.name in fresh
            fresh = fresh | {s.var.name} if same else fresh - {s.var.name}
        elif isinstance(s, ir.If):
            then = _last_written(s.then, fresh, names)
            else_ = _last_written(s.else_, fresh, names)
            if then is None or else_ is None:
                return None
            fresh = then & else_
        elif ir.children(s):  # a loop: its body runs from what holds before it and after a step
            assert isinstance(s, (ir.While, ir.SeqFor, ir.ParFor, ir.Distribute, ir.Benchmark,
                                  StridedFor))  # the statements with a body
            parts = s.test + s.body if isinstance(s, ir.While) else s.body
            entry = fresh
            while True:
                end = _last_written(parts, entry, names)
                if end is None:
                    return None
                if entry & end == entry:
                    break
                entry = entry & end
            runs = isinstance(s, ir.SeqFor) and isinstance(s.bound, ir.Const) and s.bound.value > 0
            fresh = end if runs else entry
    return fresh


def _reads_through(e: ir.Expr, fresh: frozenset[str], names: set[str]) -> bool:
    if isinstance(e, ir.Index) and e.array.name in names and e.array.name not in fresh:
        return False
    return all(_reads_through(part, fresh, names) for part in sub_exprs(e))


def _privatize(locals_: list[LocalArray], private: list[tuple[ir.Var, int]],
               body: list[ir.Stmt], arrays: list[str], names: set[str]) -> list[ir.Stmt]:
    """One private element for `arrays`; the pointers among `names` go."""
    keep = next(a.var for a in locals_ if a.var.name == arrays[0])
    locals_[:] = [a for a in locals_ if a.var.name not in arrays]
    private.append((keep, 1))
    zero = ir.Const(0, ir.INT)

    def expr(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Index) and e.array.name in names:
            return ir.Index(keep, zero)
        return map_children(e, expr)

    def stmts(block: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in block:
            if (isinstance(s, ir.Alloc) and s.var.name in arrays) or \
                    (isinstance(s, (ir.Declare, ir.Assign)) and s.var.name in names):
                continue
            # Every expression field but a store's array (a variable naming memory).
            changes: dict[str, Any] = {name: expr(getattr(s, name))
                                       for name in ir.field_names(s)
                                       if isinstance(getattr(s, name), ir.Expr)
                                       and name != "array"}
            if isinstance(s, ir.Store) and s.array.name in names:
                changes["array"], changes["index"] = keep, zero
            out.append(map_bodies(replace(s, **changes), stmts))
        return out
    return stmts(body)
