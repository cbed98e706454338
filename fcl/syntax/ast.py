"""The FCL abstract syntax: a small core that every surface construct desugars to.

Operators, `|>` and `do` blocks become applications of builtins while parsing, so later stages
see only these nodes. Every node carries its source span; the type checker fills in `type`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fcl.errors import Span

# ---- levels and types as written in the source -----------------------------------------------

@dataclass
class LevelSyntax:
    """`thread`/`block`/`grid`/`Z`, a level variable name, or `1+` applied `steps` times."""

    name: str
    steps: int
    span: Span


@dataclass
class TypeSyntax:
    """A type as written: `con` is int/double/bool/string/unit/var/arrow/pair/pull/push/program."""

    con: str
    args: list[TypeSyntax]
    span: Span
    var: str | None = None            # for con == "var": the name without the quote
    level: LevelSyntax | None = None  # for push and program


@dataclass
class SchemeSyntax:
    level_vars: list[str]
    type_vars: list[str]
    body: TypeSyntax
    span: Span


# ---- expressions ---------------------------------------------------------------------------

@dataclass(eq=False)
class Expr:
    span: Span
    type: Any = field(default=None, init=False, repr=False)
    # On the statement of a `do<levels> { e }` that desugars to no `bind`: the levels and the
    # `do`, for the type checker to check as a `bind` would (`e` is then a program at them).
    do_levels: tuple[list[LevelSyntax], Span] | None = field(default=None, init=False,
                                                             repr=False)


@dataclass(eq=False)
class Lit(Expr):
    value: int | float | bool | str
    kind: str  # "int", "double", "float", "bool" or "string"


@dataclass(eq=False)
class UnitLit(Expr):
    pass


@dataclass(eq=False)
class Var(Expr):
    name: str
    levels: list[LevelSyntax] | None = None  # explicit level arguments, None when left out
    builtin: bool = False  # refers to the builtin even if a user definition shadows the name
    # Filled by the type checker: the instantiation, for monomorphization.
    inst: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class App(Expr):
    fn: Expr
    arg: Expr


@dataclass(eq=False)
class Lam(Expr):
    param: str
    param_span: Span
    body: Expr


@dataclass(eq=False)
class Let(Expr):
    name: str
    name_span: Span
    level_params: list[str]
    sig: SchemeSyntax | None
    value: Expr
    body: Expr
    scheme: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class If(Expr):
    cond: Expr
    then: Expr
    else_: Expr


@dataclass(eq=False)
class Pair(Expr):
    fst: Expr
    snd: Expr


# ---- top level -----------------------------------------------------------------------------

@dataclass(eq=False)
class Decl:
    """`[sig name : scheme] fun|val name<lvls> params = body`; `value` has the params as lambdas."""

    name: str
    name_span: Span
    level_params: list[str]
    sig: SchemeSyntax | None
    sig_name: tuple[str, Span] | None
    value: Expr
    span: Span
    scheme: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class Module:
    """A parsed file or cell: declarations, then optionally a final expression (cells only)."""

    decls: list[Decl]
    expr: Expr | None = None


def children(e: Expr) -> list[Expr]:
    """The direct subexpressions of e, in evaluation order."""
    if isinstance(e, App):
        return [e.fn, e.arg]
    if isinstance(e, Lam):
        return [e.body]
    if isinstance(e, Let):
        return [e.value, e.body]
    if isinstance(e, If):
        return [e.cond, e.then, e.else_]
    if isinstance(e, Pair):
        return [e.fst, e.snd]
    return []
