"""A serial kernel's loop computed inside the next one when the next reads each of its elements
once (the `fuse` step): a reduction tree's steps then add in registers instead of storing each
step's partial sums to local memory and loading them back.

In a serial kernel (see kernelize) each block-level loop is a plain loop of the work-group's one
work-item. When loop 1 only stores `A[i] = f(i)` and the loop after it only stores `B[j] = g(j)`,
reading A at `A[j + c]` within loop 1's range, `g` can compute `f(j + c)` itself: the same
operations, in the same order, for each element of B (so a sum of doubles is the same to the
last bit). Loop 1 then goes when nothing reads what it stored: the next statement to touch A is
a loop writing A from 0 on, and every later read of A lies below where that loop wrote. Fused
loops stop growing at MAX_LEAVES reads per element. On the bench's partial reduction, the tree's
first six steps become one loop of 8 iterations, each adding 64 elements of the input in the
tree's order (bench/README.md has the measurements).
"""
from __future__ import annotations

from dataclasses import replace

from fcl.codegen.kernel import Kernel, SerialFor, group_body
from fcl.il import ir
from fcl.il.simplify import difference, linear, rebuild
from fcl.il.traverse import expr_reads, map_children, names, reads_of, stmt_exprs

MAX_LEAVES = 64  # array reads per element of a fused loop


def fuse(kernel: Kernel) -> Kernel:
    """The serial kernel with loops fused (see the module docstring); other kernels as they are."""
    if not kernel.serial or kernel.group_var is None:
        return kernel
    body, rewrap = group_body(kernel)
    local = {a.var.name for a in kernel.locals} | {
        s.var.name for s in ir.walk(body) if isinstance(s, ir.Alloc) and s.level == "block"}
    fused = _fused(body, local)
    return kernel if fused is body else replace(kernel, body=rewrap(fused))


def _fused(stmts: list[ir.Stmt], local: set[str]) -> list[ir.Stmt]:
    out = stmts
    p = 0
    while p + 1 < len(out):
        merged = _merge(out[p], out[p + 1], out[p + 2:], local)
        if merged is None:
            p += 1
            continue
        out = [*out[:p], merged, *out[p + 2:]]
    return out


def _store_loop(s: ir.Stmt) -> tuple[SerialFor, ir.Store, int] | None:
    """(loop, its one store `X[i] = v`, its count) for a serial loop that only stores."""
    if not (isinstance(s, SerialFor) and isinstance(s.bound, ir.Const) and len(s.body) == 1):
        return None
    store = s.body[0]
    if not (isinstance(store, ir.Store) and isinstance(store.index, ir.Var)
            and store.index.name == s.var.name):
        return None
    return s, store, int(s.bound.value)


def _merge(first: ir.Stmt, second: ir.Stmt, rest: list[ir.Stmt], local: set[str]
           ) -> ir.Stmt | None:
    one, two = _store_loop(first), _store_loop(second)
    if one is None or two is None:
        return None
    (loop1, store1, n1), (loop2, store2, n2) = one, two
    a, b = store1.array.name, store2.array.name
    if a == b or a not in local or a in _read_arrays(store1.value):
        return None
    j = loop2.var
    reads = _reads_of(store2.value, a)
    if reads is None or not reads:
        return None
    for index in reads:
        shift = _offset(index, j.name)
        if shift is None or shift < 0 or shift + n2 > n1:
            return None

    def inline(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Index) and e.array.name == a:
            return rebuild(store1.value, {loop1.var.name: e.index})
        return map_children(e, inline)
    value = inline(store2.value)
    if sum(1 for _ in expr_reads(value)) > MAX_LEAVES:
        return None
    # Iteration j writes B[j]: it may read B only at j or later, which no iteration wrote yet.
    later = _reads_of(value, b)
    if later is None or any(_behind(i, j.name) for i in later):
        return None
    if not _dead_after(a, rest):
        return None
    return replace(loop2, body=[replace(store2, value=value)])


def _behind(index: ir.Expr, var: str) -> bool:
    """Whether index may be below var (not var + c for a c >= 0)."""
    shift = _offset(index, var)
    return shift is None or shift < 0


def _offset(index: ir.Expr, var: str) -> int | None:
    """c when index is var + c."""
    return difference(index, ir.Var(var, ir.INT))


def _reads_of(e: ir.Expr, array: str) -> list[ir.Expr] | None:
    """The indices at which e reads `array`; None if it names the array otherwise."""
    found = reads_of(e, array)
    return None if found is None else [x.index for x in found]


def _read_arrays(e: ir.Expr) -> set[str]:
    return {x.array.name for x in expr_reads(e)}


def _dead_after(array: str, rest: list[ir.Stmt]) -> bool:
    """Whether no statement of `rest` reads what the array holds now: the first to touch it
    writes it from 0 on, and later reads lie below what the latest such write covered."""
    written: int | None = None  # A[0 .. written) rewritten since
    for s in rest:
        if not any(array in names(x) for t in ir.walk([s]) for x in stmt_exprs(t)):
            continue
        loop = _store_loop(s)
        if loop is not None and loop[1].array.name == array \
                and array not in _read_arrays(loop[1].value) \
                and array not in names(loop[1].index):
            written = loop[2]
            continue
        if isinstance(s, ir.Store) and s.array.name == array and isinstance(s.index, ir.Const) \
                and s.index.value == 0 and array not in _read_arrays(s.value):
            written = 1  # A[0] alone, as a reduction's last step writes it
            continue
        if written is None or not _reads_below(s, array, written):
            return False
    return True


def _reads_below(s: ir.Stmt, array: str, limit: int) -> bool:
    """Whether s only reads `array`, and only at indices below `limit`."""
    bounds: dict[str, int] = {}
    for t in ir.walk([s]):
        if isinstance(t, ir.Store) and t.array.name == array:
            return False
        if isinstance(t, ir.SeqFor) and isinstance(t.bound, ir.Const):
            bounds[t.var.name] = int(t.bound.value)
    for t in ir.walk([s]):
        exprs = [t.index, t.value] if isinstance(t, ir.Store) else stmt_exprs(t)
        for x in exprs:
            indices = _reads_of(x, array)
            if indices is None:
                return False
            for index in indices:
                if isinstance(index, ir.Const):
                    if not 0 <= index.value < limit:
                        return False
                    continue
                terms, const = linear(index)
                if len(terms) != 1:
                    return False
                ((atom, coef),) = terms.values()
                if not (isinstance(atom, ir.Var) and atom.name in bounds and coef == 1
                        and const >= 0 and const + bounds[atom.name] <= limit):
                    return False
    return True
