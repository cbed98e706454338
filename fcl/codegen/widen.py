"""Index arithmetic over local ids in size_t, recorded in the kernel as `WideInt` expressions.

`(int)get_local_id(0)` is the same value in every barrier interval of a kernel, so the C
compiler computes it once; PoCL then keeps it per work-item in memory across barriers and
reloads it, which hides that accesses are consecutive in the work-item loops it builds (a
tiled transpose ran 1.3 times slower). The ids themselves it recomputes in each interval.
Truncating each whole index expression instead gives the same int (these operations keep the
low 32 bits), from values that differ between intervals. Int variables defined by such
arithmetic are expanded, so that a whole index (`row * 2048 + col`) is one expression over the
ids: split into truncated parts, the transpose ran 10-15% slower.

An array index whose int value provably lies in [0, 2^31) is not truncated at all: an address
computed from `(int)(base + get_local_id(0))` sign-extends a truncation, so the C compiler
cannot tell that neighbouring work-items access neighbouring elements, and PoCL's loops over
work-items stay scalar (the tiled transpose took about 1.3 times as long as with size_t
indices). There the size_t value is the same number: ring operations agree modulo 2^64, and the
range check means no int operation wrapped.

In a 2-D work-group (a tile's), a global array's subscript also sees through copies of the ids
(`x = (int)get_local_id(0)`) and through a variable naming the whole subscript (`ix = y * 4096 +
x; xs[ix]`, the original FCL's style): the original's transpose then gets the size_t subscripts
above (1.21 to 1.10 of the reference). Not elsewhere: PoCL ran a reduction tree's `buf[i + 128]`
(1-D) 2.7 times slower over the id than over its int copy, and a tiled matmul whose local
tiles were indexed so (2-D) 1.17 times slower.

Not inside a loop of one work-item (no barrier in it): there the id's reload is hoisted out of
the loop, and int arithmetic (which cannot wrap) lets the compiler step the loop's indices.
"""
from __future__ import annotations

from dataclasses import replace
from typing import TypeGuard

from fcl.codegen.kernel import (
    LOCAL_IDS,
    MAX_GROUPS,
    Kernel,
    Special,
    StridedFor,
    WideInt,
)
from fcl.codegen.strides import StrideArguments
from fcl.il import ir
from fcl.il.ranges import Ranges, interval, note
from fcl.il.traverse import assigned, map_bodies, map_children, map_stmt_exprs, sub_exprs

# Integer operations whose result's low 32 bits depend only on their operands' low 32 bits.
RING_OPS = frozenset(("+", "-", "*", "&", "|", "^"))


def is_ring(e: ir.Expr) -> TypeGuard[ir.Bin]:
    if not isinstance(e, ir.Bin) or e.type != ir.INT:
        return False
    return e.op in RING_OPS or (e.op == "<<" and isinstance(e.right, ir.Const) and \
        0 <= e.right.value < 32)


def widen(kernel: Kernel) -> Kernel:
    """The kernel with its index arithmetic in size_t (see the module docstring), and a 2-D
    work-group's row strides of global subscripts as arguments (strides.py)."""
    widener = _Widener(kernel)
    body = widener.block(kernel.body, 0)
    return replace(kernel, body=body, constants=widener.strides.constants())


def kernel_ranges(kernel: Kernel) -> Ranges:
    """Bounds on a kernel's work-item ids (named `<local_x>` etc., see inline_ints) and on the
    int variables computed from them."""
    ranges: Ranges = {"<group_id>": (0, MAX_GROUPS - 1)}  # see kernelize
    if isinstance(kernel.group_bound, ir.Const) and kernel.group_bound.value >= 1:
        ranges["<group_id>"] = (0, min(int(kernel.group_bound.value), MAX_GROUPS) - 1)
    if kernel.block_size:
        ranges["<local_id>"] = (0, kernel.block_size - 1)
        ranges["<global_id>"] = (0, MAX_GROUPS * kernel.block_size - 1)
        if kernel.width:
            ranges["<local_x>"] = (0, kernel.width - 1)
            ranges["<local_y>"] = (0, kernel.block_size // kernel.width - 1)
    changed = assigned(kernel.body)
    for s in ir.walk(kernel.body):
        note(s, ranges, changed, lambda e: interval(e, ranges))
    return ranges


def _wide_definitions(body: list[ir.Stmt], copies: bool) -> dict[str, ir.Expr]:
    """Int variables defined once by arithmetic over local ids, from values that never change
    (no assigned variable, no memory), so that their definition may stand for them; with
    `copies`, also variables holding an id itself."""
    changed = assigned(body)

    def fixed(e: ir.Expr) -> bool:
        if isinstance(e, ir.Index):
            return False
        if isinstance(e, ir.Var):
            return e.name not in changed
        return all(fixed(part) for part in sub_exprs(e))

    defs: dict[str, ir.Expr] = {}
    for s in ir.walk(body):
        if not isinstance(s, ir.Declare) or s.var.type != ir.INT or s.var.name in changed:
            continue
        arithmetic = is_ring(s.init) and _uses_local_id(s.init, defs) and fixed(s.init)
        copy = copies and isinstance(s.init, Special) and s.init.name in LOCAL_IDS
        if arithmetic or copy:
            defs[s.var.name] = s.init
    return defs


def _global_arrays(kernel: Kernel) -> set[str]:
    """The kernel's global arrays: its array parameters, and variables only ever set to global
    arrays (local arrays are swapped through such variables too; a swap's cycle of variables
    is global when what enters it is)."""
    sources: dict[str, list[ir.Expr]] = {}
    for s in ir.walk(kernel.body):
        if isinstance(s, ir.Declare) and isinstance(s.var.type, ir.ArrayType):
            sources.setdefault(s.var.name, []).append(s.init)
        elif isinstance(s, ir.Assign) and isinstance(s.var.type, ir.ArrayType):
            sources.setdefault(s.var.name, []).append(s.value)
    found = {p.name for p in kernel.params if isinstance(p.type, ir.ArrayType)} | set(sources)
    changed = True
    while changed:  # drop variables set to anything else, until none is
        changed = False
        for name, values in sources.items():
            if name in found and not all(isinstance(v, ir.Var) and v.name in found
                                         for v in values):
                found.discard(name)
                changed = True
    return found


def _uses_local_id(e: ir.Expr, defs: dict[str, ir.Expr]) -> bool:
    if isinstance(e, Special):
        return e.name in LOCAL_IDS
    if isinstance(e, ir.Var):
        return e.name in defs
    return is_ring(e) and (_uses_local_id(e.left, defs) or _uses_local_id(e.right, defs))


def _barrier_free(stmts: list[ir.Stmt]) -> bool:
    return not any(isinstance(s, ir.Barrier) for s in ir.walk(stmts))


class _Widener:
    def __init__(self, kernel: Kernel):
        self.defs = _wide_definitions(kernel.body, copies=False)
        # A 2-D work-group's global subscripts also see through copies of the ids and variables
        # naming a whole subscript (see the module docstring).
        self.global_defs = _wide_definitions(kernel.body, copies=True) if kernel.width else None
        self.in_global = _global_arrays(kernel) if kernel.width else set()
        self.strides = StrideArguments()
        self.ranges = kernel_ranges(kernel)

    def block(self, stmts: list[ir.Stmt], loops: int) -> list[ir.Stmt]:
        """`loops`: how many loops of one work-item are around the statements."""
        return [self.stmt(s, loops) for s in stmts]

    def stmt(self, s: ir.Stmt, loops: int) -> ir.Stmt:
        inner = loops
        if isinstance(s, (StridedFor, ir.SeqFor)):
            inner = loops + _barrier_free(s.body)
        elif isinstance(s, ir.While):
            # The header's test runs in the loop, as its body does.
            inner = loops + (s.level != "block" and _barrier_free(s.test + s.body))
        if loops == 0 and isinstance(s, ir.Store):
            new: ir.Stmt = replace(s, index=self.subscript(s.array, s.index),
                                   value=self.expr(s.value))
        elif loops == 0:
            header = inner if isinstance(s, ir.While) else loops
            new = map_stmt_exprs(s, self.expr) if header == 0 else s
        else:
            new = s
        return map_bodies(new, lambda body: self.block(body, inner))

    def expr(self, e: ir.Expr) -> ir.Expr:
        """e as it is computed outside loops of one work-item."""
        if isinstance(e, ir.Index):
            return ir.Index(e.array, self.subscript(e.array, e.index))
        if is_ring(e) and _uses_local_id(e, self.defs):
            return WideInt(e, self.wide(e, self.defs), truncate=True)
        if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
            return map_children(e, self.expr)
        return e

    def wide(self, e: ir.Expr, defs: dict[str, ir.Expr]) -> ir.Expr:
        """What is computed in size_t: ring operations over the ids, definitions expanded."""
        if isinstance(e, Special) and e.name in LOCAL_IDS:
            return e
        if is_ring(e):
            return map_children(e, lambda part: self.wide(part, defs))
        if isinstance(e, ir.Var) and e.name in defs:
            return self.wide(defs[e.name], defs)
        return self.expr(e)

    def subscript(self, array: ir.Var, index: ir.Expr) -> ir.Expr:
        defs = self.defs
        whole = is_ring(index)
        tile_global = False
        if self.global_defs is not None and array.name in self.in_global:
            tile_global = True
            defs = self.global_defs
            whole = whole or isinstance(index, ir.Var)
        if whole and _uses_local_id(index, defs):
            found = interval(index, self.ranges)
            if found is not None and found[0] >= 0:
                wide = self.wide(index, defs)
                return WideInt(index, self.strides.rewrite(wide) if tile_global else wide,
                               truncate=False)
        return self.expr(index)


def plain(e: ir.Expr) -> ir.Expr:
    """e as it was before widening: each WideInt replaced by the expression it computes."""
    if isinstance(e, WideInt):
        return e.expr
    return map_children(e, plain)
