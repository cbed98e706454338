"""Unification of types and levels, with kinds.

Mirrors the original compiler's order of work (arrows and pairs unify their right component
first; a variable on the left is bound before one on the right), because the letters of printed
type schemes follow variable creation and binding order. Unlike the original it chases bound
level variables everywhere, binds rigid (declared) level parameters to nothing but themselves,
and has a unit case.
"""
from __future__ import annotations

from fcl.types.types import (
    GT,
    RT,
    TYP,
    Level,
    LStep,
    LVar,
    LWarp,
    LZero,
    TArrow,
    TCon,
    TPair,
    TProgram,
    TPull,
    TPush,
    TSeq,
    TVar,
    Type,
    chase,
    chase_level,
    kind_of,
)


class UnifyError(Exception):
    """Two types (or levels) that cannot be made equal; `detail` says why in one sentence."""

    def __init__(self, left, right, detail: str):
        super().__init__(detail)
        self.left, self.right, self.detail = left, right, detail


class KindError(UnifyError):
    def __init__(self, var: TVar, t: Type, kind: int):
        super().__init__(var, t, "kind")
        self.var, self.type, self.kind = var, t, kind


def unify(t1: Type, t2: Type) -> None:
    t1, t2 = chase(t1), chase(t2)
    if t1 is t2:
        return
    if isinstance(t1, TCon) and isinstance(t2, TCon) and t1.name == t2.name:
        return
    if isinstance(t1, TArrow) and isinstance(t2, TArrow):
        unify(t1.res, t2.res)
        unify(t1.arg, t2.arg)
    elif isinstance(t1, TPair) and isinstance(t2, TPair):
        unify(t1.snd, t2.snd)
        unify(t1.fst, t2.fst)
    elif (isinstance(t1, TPull) and isinstance(t2, TPull)) \
            or (isinstance(t1, TSeq) and isinstance(t2, TSeq)):
        unify(t1.elem, t2.elem)
    elif isinstance(t1, TPush) and isinstance(t2, TPush):
        unify_levels(t1.level, t2.level)
        unify(t1.elem, t2.elem)
    elif isinstance(t1, TProgram) and isinstance(t2, TProgram):
        unify_levels(t1.level, t2.level)
        unify(t1.result, t2.result)
    elif isinstance(t1, TVar) and not t1.rigid:
        bind_var(t1, t2)
    elif isinstance(t2, TVar) and not t2.rigid:
        bind_var(t2, t1)
    else:
        raise UnifyError(t1, t2, "mismatch")


def bind_var(v: TVar, t: Type) -> None:
    if occurs(v, t):
        raise UnifyError(v, t, "occurs")
    restrict_kind(t, v.kind, v.kind_reason, v)
    v.ref = t


def unify_fresh(t: Type, v: TVar) -> None:
    """unify(t, v) for a variable v made just now, which occurs nowhere yet: so t cannot contain
    it, and the occurs check, which walks all of t, is left out (a chain of n applications of
    one function would otherwise take time quadratic in n)."""
    t = chase(t)
    if isinstance(t, TVar) and not t.rigid:
        bind_var(t, v)
    else:
        v.ref = t


def restrict_kind(t: Type, kind: int, reason: str | None, origin: TVar | None = None) -> None:
    """Require t to have `kind`, narrowing the kinds of its variables as needed."""
    if kind == TYP:
        return
    t = chase(t)
    if isinstance(t, TVar):
        if kind < t.kind:
            t.kind, t.kind_reason = kind, reason
        return
    if isinstance(t, TPair) and kind in (RT, GT):
        restrict_kind(t.fst, kind, reason, origin)
        restrict_kind(t.snd, kind, reason, origin)
        return
    if kind_of(t) > kind:
        raise KindError(origin, t, kind) if origin else KindError(TVar(-1, kind, reason), t, kind)


def occurs(v: TVar, t: Type) -> bool:
    t = chase(t)
    if t is v:
        return True
    if isinstance(t, TArrow):
        return occurs(v, t.arg) or occurs(v, t.res)
    if isinstance(t, TPair):
        return occurs(v, t.fst) or occurs(v, t.snd)
    if isinstance(t, (TPull, TSeq)):
        return occurs(v, t.elem)
    if isinstance(t, TPush):
        return occurs(v, t.elem)
    if isinstance(t, TProgram):
        return occurs(v, t.result)
    return False


class LevelError(UnifyError):
    """Two levels that differ. left/right are the levels as a whole (`grid` and `block`);
    `rigid` is a declared level parameter that would have had to be bound to `other`."""

    def __init__(self, left: Level, right: Level, rigid: LVar | None, other: Level | None):
        super().__init__(left, right, "level")
        self.rigid, self.other = rigid, other


def unify_levels(l1: Level, l2: Level) -> None:
    try:
        _unify_levels(l1, l2)
    except LevelError as err:
        raise LevelError(l1, l2, err.rigid, err.other) from None


def _step_over_warp(level: Level) -> Level:
    """`1+warp` as the level it is, `1+thread` (block)."""
    if isinstance(level, LStep) and isinstance(chase_level(level.inner), LWarp):
        return LStep(LZero())
    return level


def _unify_levels(l1: Level, l2: Level) -> None:
    l1, l2 = _step_over_warp(chase_level(l1)), _step_over_warp(chase_level(l2))
    if l1 is l2 or (isinstance(l1, LZero) and isinstance(l2, LZero)) or \
            (isinstance(l1, LWarp) and isinstance(l2, LWarp)):
        return
    if isinstance(l1, LStep) and isinstance(l2, LStep):
        _unify_levels(l1.inner, l2.inner)
    elif isinstance(l1, LVar) and not l1.rigid:
        _bind_level(l1, l2)
    elif isinstance(l2, LVar) and not l2.rigid:
        _bind_level(l2, l1)
    elif isinstance(l1, LVar):
        raise LevelError(l1, l2, l1, l2)
    elif isinstance(l2, LVar):
        raise LevelError(l1, l2, l2, l1)
    else:
        raise LevelError(l1, l2, None, None)


def _bind_level(v: LVar, level: Level) -> None:
    probe = chase_level(level)
    while isinstance(probe, LStep):
        probe = chase_level(probe.inner)
        if probe is v:
            raise UnifyError(v, level, "level-occurs")
    v.ref = level
