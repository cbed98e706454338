"""Indices clamped for a failed check, read unclamped where the check has returned.

A checked index `i` becomes `outside ? 0 : i` (fcl.il.lower, `within`): a work-item whose check
fails goes on with position 0 rather than touch memory it may not. In a kernel with no barrier
a failed check returns (emit, FailFlag), so past the check the condition is known false and the
clamp is `i` again. Dropping it leaves one comparison per check instead of one per use, and
OpenCL that reads as the program does (the sparse matrix-vector product's kernels had each
index clamped up to four times over). A kernel with barriers keeps its clamps: there a failing
work-item runs on to the end of its round. On a CPU the checks cost their branches, not the
clamps (bench/README.md, "Checks that return").
"""
from __future__ import annotations

from dataclasses import replace

from fcl.codegen.kernel import FailFlag, Kernel, stops_group
from fcl.il import ir
from fcl.il.lower import clamp_parts
from fcl.il.traverse import assigned, map_bodies, map_children, map_stmt_exprs, names

Known = dict[str, set[str]]  # a failed check's condition (its expr_key) -> the names it reads


def unclamp(kernel: Kernel) -> Kernel:
    if not kernel.fails or stops_group(kernel):
        return kernel
    return replace(kernel, body=_unclamped(kernel.body, {}))


def _unclamped(stmts: list[ir.Stmt], known: Known) -> list[ir.Stmt]:
    known = dict(known)  # what holds after a statement holds in the rest of this list only
    out: list[ir.Stmt] = []
    for s in stmts:
        changed = _written([s])
        for key in [key for key, read in known.items() if read & changed]:
            del known[key]
        s = map_stmt_exprs(s, lambda e: _drop_clamps(e, known))
        s = map_bodies(s, lambda body: _unclamped(body, known))
        if isinstance(s, FailFlag):
            known[ir.expr_key(s.cond)] = names(s.cond)
        out.append(s)
    return out


def _written(stmts: list[ir.Stmt]) -> set[str]:
    """The variables assigned and the arrays stored to, at any depth."""
    return assigned(stmts) | {s.array.name for s in ir.walk(stmts) if isinstance(s, ir.Store)}


def _drop_clamps(e: ir.Expr, known: Known) -> ir.Expr:
    e = map_children(e, lambda x: _drop_clamps(x, known))
    parts = clamp_parts(e)
    return parts[1] if parts is not None and ir.expr_key(parts[0]) in known else e
