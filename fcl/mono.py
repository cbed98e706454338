"""Monomorphization (reference §3.6, thesis Fig. 5.7).

Starting from a root expression, every polymorphic definition gets one copy per distinct
instantiation it is used at, named `name__<encoded use type>`; definitions that are never used
disappear. Every node of the result has a concrete type. Type variables that nothing constrains
default to int and levels to thread: such values are never inspected, so any choice is sound.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fcl.syntax import ast
from fcl.types.infer import substitute_level
from fcl.types.types import (
    INT,
    WARP,
    Level,
    Scheme,
    TArrow,
    TCon,
    TPair,
    TProgram,
    TPull,
    TPush,
    TSeq,
    Type,
    chase,
    is_warp,
    level_depth,
    level_of_depth,
    map_type,
)


@dataclass
class MonoProgram:
    """Monomorphic definitions in dependency order, then the root expression."""

    defs: list[tuple[str, ast.Expr]]
    root: ast.Expr


@dataclass
class _Record:
    name: str
    value: ast.Expr
    scheme: Scheme
    order: int
    outer: dict = field(default_factory=dict)  # substitution of the enclosing context (lets)
    instances: dict = field(default_factory=dict)  # key -> (name, mono expr or None while built)


class _Subst(dict):
    """An instance's substitution of concrete types and levels for variables, and the concrete
    types made under it so far, by the (chased) type they were made from: a node's type mostly
    shares its parts with its children's types, so each part is made once."""

    def __init__(self, *args):
        super().__init__(*args)
        self.made: dict[Type, Type] = {}


def monomorphize(decls: list[ast.Decl], root: ast.Expr) -> MonoProgram:
    mono = _Mono(decls)
    root_mono = mono.expr(root, _Subst())
    defs = []
    for record in sorted(mono.top.values(), key=lambda r: r.order):
        defs += [(name, body) for name, body in record.instances.values()]
    return MonoProgram(defs, root_mono)


class _Mono:
    def __init__(self, decls: list[ast.Decl]):
        self.top = {id(d.scheme): _Record(d.name, d.value, d.scheme, i)
                    for i, d in enumerate(decls)}
        # The record of each let (by its scheme) in the copy being made. All uses of a let are
        # in its body, which is copied right after the record is made, and no copy of a let can
        # start inside its own body (there is no recursion): so one record per let suffices,
        # where a dictionary of the lets in scope, copied at each let, was quadratic in depth.
        self.lets: dict[int, _Record] = {}

    def concrete(self, t: Type, subst: _Subst) -> Type:
        """t under the instance's substitution, defaulted (the substitution's types are concrete
        already)."""
        return map_type(t, lambda v: subst.get(v, INT),
                        lambda level: _default_level(substitute_level(level, subst)), subst.made)

    def instance(self, record: _Record, var: ast.Var, subst: _Subst) -> str:
        scheme = record.scheme
        types = [self.concrete(t, subst) for t in var.inst.types]
        levels = [_default_level(substitute_level(lv, subst)) for lv in var.inst.levels]
        key = tuple(encode(t) for t in types) + tuple(encode_level(lv) for lv in levels)
        if key not in record.instances:
            if not scheme.type_vars and not scheme.level_vars:
                name = record.name
            else:
                name = f"{record.name}__{encode(self.concrete(var.type, subst))}"
                taken = {n for n, _ in record.instances.values()}
                base, k = name, 1
                while name in taken:
                    name, k = f"{base}_{k}", k + 1
            record.instances[key] = (name, None)
            inner = _Subst(record.outer)
            inner.update(zip(scheme.type_vars, types))
            inner.update(zip(scheme.level_vars, levels))
            body = self.expr(record.value, inner)
            record.instances[key] = (name, body)
        return record.instances[key][0]

    def expr(self, e: ast.Expr, subst: _Subst) -> ast.Expr:
        out = self._expr(e, subst)
        out.type = self.concrete(e.type, subst)
        return out

    def _expr(self, e: ast.Expr, subst: _Subst) -> ast.Expr:
        if isinstance(e, (ast.Lit, ast.UnitLit)):
            return _copy(e)
        if isinstance(e, ast.Var):
            binding = e.inst.binding
            if binding.origin == "builtin":
                return ast.Var(e.span, e.name, None, builtin=True)
            record = self.lets.get(id(binding.scheme)) or self.top.get(id(binding.scheme))
            if record is None:  # a lambda-bound variable
                return ast.Var(e.span, e.name)
            return ast.Var(e.span, self.instance(record, e, subst))
        if isinstance(e, ast.App):
            return ast.App(e.span, self.expr(e.fn, subst), self.expr(e.arg, subst))
        if isinstance(e, ast.Lam):
            return ast.Lam(e.span, e.param, e.param_span, self.expr(e.body, subst))
        if isinstance(e, ast.If):
            return ast.If(e.span, self.expr(e.cond, subst), self.expr(e.then, subst),
                          self.expr(e.else_, subst))
        if isinstance(e, ast.Pair):
            return ast.Pair(e.span, self.expr(e.fst, subst), self.expr(e.snd, subst))
        if isinstance(e, ast.Let):
            record = _Record(e.name, e.value, e.scheme, 0, outer=dict(subst))
            self.lets[id(e.scheme)] = record
            body = self.expr(e.body, subst)
            for name, value in reversed(list(record.instances.values())):
                let = ast.Let(e.span, name, e.name_span, [], None, value, body)
                let.type = body.type
                body = let
            return body
        raise TypeError(e)  # pragma: no cover


def _copy(e: ast.Expr) -> ast.Expr:
    return ast.Lit(e.span, e.value, e.kind) if isinstance(e, ast.Lit) else ast.UnitLit(e.span)


def _default_level(level: Level) -> Level:
    """The concrete level: an unsolved variable defaults to thread."""
    return WARP if is_warp(level) else level_of_depth(level_depth(level)[0])


THREAD, BLOCK, GRID = 0, 1, 2  # level_number's numbers


def level_number(level: Level) -> int:
    """THREAD (0), BLOCK (1) or GRID (2): levels are concrete after monomorphization. The warp
    level's number is THREAD's: its lanes are run by one work-item, in turn (fcl.il.lower)."""
    return level_depth(level)[0]


def encode_level(level: Level) -> str:
    return "W" if is_warp(level) else "S" * level_number(level) + "Z"


def encode(t: Type) -> str:
    """The original compiler's instance-name encoding of a monomorphic type."""
    t = chase(t)
    if isinstance(t, TCon):
        return t.name
    if isinstance(t, TArrow):
        return f"_{encode(t.arg)}.{encode(t.res)}_"
    if isinstance(t, TPair):
        return f"_{encode(t.fst)}*{encode(t.snd)}_"
    if isinstance(t, TPull):
        return f"pull_{encode(t.elem)}_endpull"
    if isinstance(t, TSeq):
        return f"seq_{encode(t.elem)}_endseq"
    if isinstance(t, TPush):
        return f"push_{encode_level(t.level)}_{encode(t.elem)}_endpush"
    if isinstance(t, TProgram):
        return f"program_{encode_level(t.level)}_{encode(t.result)}_endprogram"
    raise TypeError(t)  # pragma: no cover
