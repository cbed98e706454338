"""An element of global memory read again and again is read once, into a variable.

Generated code names a value by the expression that computes it: a row of an irregular array
reads its bounds, `starts[r]` and `starts[r + 1]`, for its length, its loop's bound, each
element's position and each check, some twenty times per element. A GPU compiler may keep them
in registers; the OpenCL a reader sees, and the accesses `%%costs` counts, do not. Here a read
becomes a variable declared just before the first statement that makes it whatever happens
(not in a branch of `?:`, `&&` or `||`), when it is made again later in that statement or
after it, and when its value cannot change there: the kernel never stores to the array, and no
variable of its index is assigned anywhere in the kernel. Reading it there moves no read
earlier than the program makes it.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

from fcl.codegen.kernel import FailFlag, Kernel
from fcl.il import ir
from fcl.il.traverse import (
    array_reads,
    assigned,
    expr_reads,
    map_bodies,
    map_children,
    map_stmt_exprs,
    mentioned,
    names,
)

Known = dict[str, ir.Var]  # a read's expr_key -> the variable holding its value


def read_once(kernel: Kernel) -> Kernel:
    stored = {s.array.name for s in ir.walk(kernel.body) if isinstance(s, ir.Store)}
    aliased = set()  # an array another name may store to
    for s in ir.walk(kernel.body):
        if isinstance(s, (ir.Declare, ir.Assign)) and isinstance(s.var.type, ir.ArrayType):
            aliased |= {s.var.name} | names(s.init if isinstance(s, ir.Declare) else s.value)
    constant = {p.name for p in kernel.params if isinstance(p.type, ir.ArrayType)} \
        - stored - aliased
    if not constant:
        return kernel
    reading = _Reads(constant, assigned(kernel.body), mentioned(kernel.body))
    body = reading.stmts(kernel.body, {})
    return replace(kernel, body=body) if reading.made else kernel


class _Reads:
    def __init__(self, constant: set[str], changed: set[str], taken: set[str]):
        self.constant, self.changed, self.taken = constant, changed, taken
        self.made = 0

    def stmts(self, stmts: list[ir.Stmt], known: Known) -> list[ir.Stmt]:
        known = dict(known)  # a variable declared in this list serves the rest of it
        out: list[ir.Stmt] = []
        each = [Counter(ir.expr_key(read) for read in array_reads([s])) for s in stmts]
        remaining = sum(each, Counter())  # the reads of the statements from the k-th on
        for k, s in enumerate(stmts):
            s = map_stmt_exprs(s, lambda e: _replaced(e, known))
            for read in self._candidates(s):
                key = ir.expr_key(read)
                if key in known or remaining[key] < 2:
                    continue
                var = self._fresh(read)
                out.append(ir.Declare(var, read, span=s.span))
                known[key] = var
                s = map_stmt_exprs(s, lambda e: _replaced(e, known))
            out.append(map_bodies(s, lambda body: self.stmts(body, known)))
            remaining -= each[k]
        return out

    def _candidates(self, s: ir.Stmt) -> Iterator[ir.Index]:
        for e in _unconditional_exprs(s):
            for read in _unconditional_reads(e):
                if read.array.name in self.constant and not names(read.index) & self.changed \
                        and next(expr_reads(read.index), None) is None:
                    yield read

    def _fresh(self, read: ir.Index) -> ir.Var:
        while True:
            name = f"{read.array.name}_read{self.made}"
            self.made += 1
            if name not in self.taken:
                return ir.Var(name, ir.elem_of(read.array))


def _unconditional_exprs(s: ir.Stmt) -> list[ir.Expr]:
    """The expressions s evaluates whenever it runs, before any of its nested statements (a
    while's condition comes after its test statements, a failure's values only on failure)."""
    if isinstance(s, ir.Declare):
        return [s.init]
    if isinstance(s, ir.Assign):
        return [s.value]
    if isinstance(s, ir.Store):
        return [s.index, s.value]
    if isinstance(s, (ir.If, FailFlag)):
        return [s.cond]
    if isinstance(s, (ir.ParFor, ir.SeqFor, ir.Distribute)):
        return [s.bound]
    return []


def _unconditional_reads(e: ir.Expr) -> Iterator[ir.Index]:
    if isinstance(e, ir.Index):
        yield e
        yield from _unconditional_reads(e.index)
    elif isinstance(e, ir.Select):
        yield from _unconditional_reads(e.cond)
    elif isinstance(e, ir.Bin) and e.op in ("&&", "||"):
        yield from _unconditional_reads(e.left)
    else:
        for part in (getattr(e, name) for name in ir.field_names(e)):
            if isinstance(part, ir.Expr):
                yield from _unconditional_reads(part)


def _replaced(e: ir.Expr, known: Known) -> ir.Expr:
    if isinstance(e, ir.Index) and known:
        var = known.get(ir.expr_key(e))
        if var is not None:
            return var
    return map_children(e, lambda part: _replaced(part, known))
