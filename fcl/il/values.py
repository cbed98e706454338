"""The values of FCL programs at compile time, while `lower` evaluates them.

Scalars are IL expressions; these are the rest. Arrays are delayed: a pull array is a length
and a function from an index to an element, the push arrays are descriptions of the loops that
will write them when forced. Functions are closures (every function is inlined) or builtins
waiting for their arguments, and programs run when bound, emitting statements.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fcl.env import Env
from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.mono import level_number
from fcl.syntax import ast
from fcl.types.types import TArrow, TCon, TPair, TProgram, TPull, TPush, Type, chase, is_warp


def il_type(t: Type) -> str:
    t = chase(t)
    if isinstance(t, TCon) and t.name in (ir.INT, ir.DOUBLE, ir.FLOAT, ir.BOOL):
        return t.name
    raise FCLError(f"internal: no IL type for {t}")


def _element(t: Type) -> Type:
    """The element type of an array type, looking through functions and programs."""
    t = chase(t)
    while isinstance(t, (TArrow, TProgram)):
        t = chase(t.res if isinstance(t, TArrow) else t.result)
    if not isinstance(t, (TPull, TPush)):
        raise FCLError(f"internal: {t} is not an array type")
    return t.elem


def elem_type(t: Type) -> str:
    """The IL type of an array type's elements, looking through functions and programs."""
    return il_type(_element(t))


def record_shape(t: Type):
    """A record type's IL types, nested as its pairs are (fcl.records): an IL base type, or a
    pair of shapes."""
    t = chase(t)
    if isinstance(t, TPair):
        return (record_shape(t.fst), record_shape(t.snd))
    return il_type(t)


def elem_shape(t: Type):
    """The record shape of an array type's elements, looking through functions and programs."""
    return record_shape(_element(t))


ZERO = {ir.INT: 0, ir.DOUBLE: 0.0, ir.FLOAT: 0.0, ir.BOOL: False}


@dataclass(eq=False)
class Pull:
    length: ir.Expr
    fn: Callable  # fn(index expr) -> value
    arrays: tuple[ir.Var, ...] = ()  # a forced array's memory: an array per field


@dataclass(eq=False)
class PushPull:
    level: int
    pull: Pull
    lanes: bool = False  # at warp level: one element per lane


@dataclass(eq=False)
class Interleave:
    level: int          # the level of the resulting array
    size: ir.Expr
    place: object       # the FCL function (int, int) -> int
    programs: Pull
    sequential: bool
    span: Span | None
    warp: int = 0       # parts at warp level: the lanes of the warp that runs each


@dataclass(eq=False)
class SeqForPush:
    size: ir.Expr
    iterations: ir.Expr
    step: object
    elem: object  # an IL type, or a record's shape (fcl.records)
    span: Span | None
    init: object = None  # the thesis's form: the thread-level push array it starts from


@dataclass(eq=False)
class MapPush:
    fn: object
    inner: object


@dataclass(eq=False)
class Prog:
    run: Callable  # run() -> value, emitting statements into the current block
    span: Span | None


@dataclass(eq=False)
class Closure:
    param: str
    body: ast.Expr
    env: Env | None


@dataclass(eq=False)
class Prim:
    name: str
    arity: int
    impl: Callable
    args: tuple = ()



def at_warp(t: Type) -> bool:
    """Whether a program or push array type is at the warp level."""
    t = chase(t)
    return isinstance(t, (TProgram, TPush)) and is_warp(t.level)


def level_of(t: Type) -> int:
    """The level number (0 thread, 1 block, 2 grid) of a program or push array type."""
    t = chase(t)
    if not isinstance(t, (TProgram, TPush)):
        raise FCLError(f"internal: {t} has no level")
    return level_number(t.level)
