"""Questions every pass asks of IL code, answered once: which expressions a statement reads,
rewriting them, rebuilding an expression from its parts, the variables assigned after their
declaration and those defined once.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from fcl.il import ir

ExprFn = Callable[[ir.Expr], ir.Expr]


def map_children(e: ir.Expr, fn: ExprFn) -> ir.Expr:
    """e rebuilt with fn applied to each of its immediate sub-expressions (an array read keeps
    its array: a variable naming memory, not a value)."""
    changes = {name: fn(getattr(e, name)) for name in ir.field_names(e)
               if isinstance(getattr(e, name), ir.Expr)
               and not (isinstance(e, ir.Index) and name == "array")}
    return replace(e, **changes) if changes else e


def sub_exprs(e: ir.Expr) -> list[ir.Expr]:
    """The immediate sub-expressions of e (an array read's array variable included)."""
    return [getattr(e, name) for name in ir.field_names(e) if isinstance(getattr(e, name), ir.Expr)]


def array_reads(stmts: list[ir.Stmt], targets: bool = False) -> Iterator[ir.Index]:
    """Every array read in the statements, nested ones included (see expr_fields for
    `targets`)."""
    for s in ir.walk(stmts):
        for e in stmt_exprs(s, targets):
            yield from expr_reads(e)


def expr_reads(e: ir.Expr) -> Iterator[ir.Index]:
    """Every array read in e, those inside other reads' indices included."""
    if isinstance(e, ir.Index):
        yield e
    for part in sub_exprs(e):
        yield from expr_reads(part)


def reads_of(e: ir.Expr, array: str) -> list[ir.Index] | None:
    """e's reads of elements of `array`; None when e names the array otherwise (as a whole)."""
    found: list[ir.Index] = []

    def visit(x: ir.Expr) -> bool:
        if isinstance(x, ir.Var):
            return x.name != array
        if isinstance(x, ir.Index):
            if x.array.name == array:
                found.append(x)
            return visit(x.index)
        return all(visit(part) for part in sub_exprs(x))
    return found if visit(e) else None


def names(e: ir.Expr) -> set[str]:
    """The variables an expression mentions."""
    found: dict[str, ir.Var] = {}
    ir.expr_vars(e, found)
    return set(found)


def _targets(s: ir.Stmt) -> set[str]:
    """The fields naming what a statement defines rather than reads."""
    if isinstance(s, (ir.Declare, ir.Assign, ir.Alloc)):
        return {"var"}
    return {"length"} if isinstance(s, ir.Input) else set()


def expr_fields(s: ir.Stmt, targets: bool = False) -> list[str]:
    """The fields of s holding expressions (or lists of them) it reads; with `targets`, also
    those naming what it defines. Arrays stored to count as read."""
    skip = set() if targets else _targets(s)
    found = []
    for name in ir.field_names(s):
        value = getattr(s, name)
        if name in skip or name in ir.BODIES:
            continue
        if isinstance(value, ir.Expr) or (isinstance(value, list) and value
                                          and isinstance(value[0], ir.Expr)):
            found.append(name)
    return found


def stmt_exprs(s: ir.Stmt, targets: bool = False) -> list[ir.Expr]:
    """The expressions s reads, a program result's included (see expr_fields for `targets`)."""
    if isinstance(s, ir.Result):
        return _result_exprs(s.value)
    found: list[ir.Expr] = []
    for name in expr_fields(s, targets):
        value = getattr(s, name)
        found += value if isinstance(value, list) else [value]
    return found


def _result_exprs(value) -> list[ir.Expr]:
    if isinstance(value, ir.Expr):
        return [value]
    if isinstance(value, ir.ArrayResult):
        return [value.array, value.length]
    return [e for v in value or () for e in _result_exprs(v)]


def _map_result(value, fn: ExprFn):
    if isinstance(value, ir.Expr):
        return fn(value)
    if isinstance(value, ir.ArrayResult):
        return ir.ArrayResult(value.array, fn(value.length))
    return None if value is None else tuple(_map_result(v, fn) for v in value)


def map_exprs(stmts: list[ir.Stmt], fn: ExprFn) -> list[ir.Stmt]:
    """New statements with every expression they read rewritten by fn, at any depth."""
    return [map_bodies(map_stmt_exprs(s, fn), lambda body: map_exprs(body, fn)) for s in stmts]


def map_stmt_exprs(s: ir.Stmt, fn: ExprFn) -> ir.Stmt:
    """s with the expressions it reads itself (not those of nested statements) rewritten."""
    changes: dict[str, Any] = {}
    if isinstance(s, ir.Result):
        changes["value"] = _map_result(s.value, fn)
    for name in expr_fields(s):
        value = getattr(s, name)
        changes[name] = [fn(v) for v in value] if isinstance(value, list) else fn(value)
    if not changes:
        return s
    return replace(s, **changes)


def map_bodies(s: ir.Stmt, fn: Callable[[list[ir.Stmt]], list[ir.Stmt]]) -> ir.Stmt:
    """A new s with fn applied to each statement list nested in it."""
    bodies: dict[str, Any] = {name: fn(getattr(s, name)) for name in ir.BODIES
                              if isinstance(getattr(s, name, None), list)}
    if not bodies:
        return s
    return replace(s, **bodies)


def assigned(stmts: list[ir.Stmt]) -> set[str]:
    """Variables changed after their declaration."""
    return ({s.var.name for s in ir.walk(stmts) if isinstance(s, ir.Assign)} |
            {v.name for s in ir.walk(stmts) if isinstance(s, ir.Input) for v in ir.input_sets(s)})


def single_definitions(stmts: list[ir.Stmt]) -> dict[str, ir.Expr]:
    """Variables declared once and never assigned, with their initial values."""
    changed = assigned(stmts)
    return {s.var.name: s.init for s in ir.walk(stmts)
            if isinstance(s, ir.Declare) and s.var.name not in changed}


def mentioned(stmts: list[ir.Stmt]) -> set[str]:
    """Every name the statements read or write, nested ones included."""
    return {name for s in ir.walk(stmts) for e in stmt_exprs(s, targets=True)
            for name in names(e)}


def fresh_var(base: str, t: ir.ILType, taken: set[str]) -> ir.Var:
    """A variable named `base_N` for the first N whose name is not in `taken` (which gains
    it)."""
    n = 0
    while f"{base}_{n}" in taken:
        n += 1
    taken.add(f"{base}_{n}")
    return ir.Var(f"{base}_{n}", t)


def declared(stmts: list[ir.Stmt]) -> set[str]:
    """Every variable the statements declare, loop variables included."""
    return {s.var.name for s in ir.walk(stmts)
            if isinstance(s, ir.Declare) or (is_loop(s) and hasattr(s, "var"))}


def is_loop(s: ir.Stmt) -> bool:
    """Whether s runs its body repeatedly: a counted loop (a variable and a bound) or a while."""
    return isinstance(s, ir.While) or (hasattr(s, "var") and hasattr(s, "bound")
                                       and hasattr(s, "body"))
