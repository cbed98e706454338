"""FCL types, levels, kinds and type schemes, and how they print.

Type and level variables are mutable cells (`ref`), bound in place by unification. Printing
follows the original compiler's `--typecheck` format: quantified type variables are lettered
'a, 'b, ... in creation order, unit prints as `()`, levels after type variables.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# ---- kinds (thesis §5.3.1): base types ⊂ ground types ⊂ all types ----------------------------
# Kinds, narrowest first: base types; records (base types and pairs of records: what push
# arrays and memory hold); ground types (no functions); any type.
BT, RT, GT, TYP = 0, 1, 2, 3


# ---- levels ------------------------------------------------------------------------------------

class Level:
    pass


@dataclass(eq=False)
class LZero(Level):
    pass


@dataclass(eq=False)
class LWarp(Level):
    """The warp level, between thread and block: the lanes of a warp (or sub-group) run its
    code in step. It is no step of the original's chain: `1+warp` is `block`, as `1+thread`."""


@dataclass(eq=False)
class LStep(Level):
    inner: Level


@dataclass(eq=False)
class LVar(Level):
    id: int
    name: str | None = None      # source name, for printing
    rigid: bool = False          # a declared level parameter inside its definition
    ref: Level | None = None


THREAD: Level = LZero()
WARP: Level = LWarp()


def level_of_depth(steps: int, base: Level | None = None) -> Level:
    level = base if base is not None else LZero()
    for _ in range(steps):
        level = LStep(level)
    return level


BLOCK = level_of_depth(1)
GRID = level_of_depth(2)


def chase_level(level: Level) -> Level:
    while isinstance(level, LVar) and level.ref is not None:
        level = level.ref
    return level


def zonk_level(level: Level) -> Level:
    level = chase_level(level)
    if isinstance(level, LStep):
        return LStep(zonk_level(level.inner))
    return level


def is_warp(level: Level) -> bool:
    return isinstance(chase_level(level), LWarp)


def level_depth(level: Level) -> tuple[int, LVar | None]:
    """(number of `1+` steps, the variable underneath or None for a concrete level). The warp
    level counts as depth 0, as thread: one step above either is block (see is_warp)."""
    level = chase_level(level)
    steps = 0
    while isinstance(level, LStep):
        steps += 1
        level = chase_level(level.inner)
    return steps, level if isinstance(level, LVar) else None


# ---- types -------------------------------------------------------------------------------------

class Type:
    def __str__(self) -> str:
        return show_type(self)


@dataclass(eq=False)
class TCon(Type):
    name: str  # int, double, float, bool, string, unit


@dataclass(eq=False)
class TArrow(Type):
    arg: Type
    res: Type


@dataclass(eq=False)
class TPair(Type):
    fst: Type
    snd: Type


@dataclass(eq=False)
class TPull(Type):
    elem: Type


@dataclass(eq=False)
class TSeq(Type):
    """A sequence of elements streamed through the device in chunks (fcl.il.streams)."""
    elem: Type


@dataclass(eq=False)
class TPush(Type):
    level: Level
    elem: Type


@dataclass(eq=False)
class TProgram(Type):
    level: Level
    result: Type


@dataclass(eq=False)
class TVar(Type):
    id: int
    kind: int = TYP
    kind_reason: str | None = None  # why the kind was restricted, for error messages
    rigid: bool = False             # a signature's type variable while checking against it
    name: str | None = None
    ref: Type | None = None


INT, DOUBLE, FLOAT, BOOL, STRING, UNIT = (TCon(n) for n in ("int", "double", "float", "bool",
                                                              "string", "unit"))


def chase(t: Type) -> Type:
    while isinstance(t, TVar) and t.ref is not None:
        t = t.ref
    return t


def map_type(t: Type, on_var, on_level, made: dict | None = None) -> Type:
    """t rebuilt with each unbound type variable replaced by on_var(v) and each level by
    on_level(level); bound variables are followed first. With `made`, a cache the caller keeps
    for as long as on_var and on_level stay the same, each (chased) part is rebuilt only once:
    types share their parts widely."""
    t = chase(t)
    if made is not None and t in made:
        return made[t]
    if isinstance(t, TVar):
        result = on_var(t)
    elif isinstance(t, TArrow):
        result = TArrow(map_type(t.arg, on_var, on_level, made),
                        map_type(t.res, on_var, on_level, made))
    elif isinstance(t, TPair):
        result = TPair(map_type(t.fst, on_var, on_level, made),
                       map_type(t.snd, on_var, on_level, made))
    elif isinstance(t, TPull):
        result = TPull(map_type(t.elem, on_var, on_level, made))
    elif isinstance(t, TSeq):
        result = TSeq(map_type(t.elem, on_var, on_level, made))
    elif isinstance(t, TPush):
        result = TPush(on_level(t.level), map_type(t.elem, on_var, on_level, made))
    elif isinstance(t, TProgram):
        result = TProgram(on_level(t.level), map_type(t.result, on_var, on_level, made))
    else:
        result = t
    if made is not None:
        made[t] = result
    return result


def zonk(t: Type) -> Type:
    """t with every bound variable replaced by what it is bound to."""
    return map_type(t, lambda v: v, zonk_level)


def free_vars(t: Type, tvs: dict[int, TVar], lvs: dict[int, LVar]) -> None:
    """Collect the unbound type and level variables of t (by id, in first-seen order)."""
    t = chase(t)
    if isinstance(t, TVar):
        tvs.setdefault(t.id, t)
    elif isinstance(t, (TArrow, TPair)):
        a, b = (t.arg, t.res) if isinstance(t, TArrow) else (t.fst, t.snd)
        free_vars(a, tvs, lvs)
        free_vars(b, tvs, lvs)
    elif isinstance(t, (TPull, TSeq)):
        free_vars(t.elem, tvs, lvs)
    elif isinstance(t, (TPush, TProgram)):
        _, var = level_depth(t.level)
        if var is not None:
            lvs.setdefault(var.id, var)
        free_vars(t.elem if isinstance(t, TPush) else t.result, tvs, lvs)


def arg_type(t: Type, k: int) -> Type:
    """The k-th (from 0) argument type of a function type."""
    arrow = _arrow(t)
    for _ in range(k):
        arrow = _arrow(arrow.res)
    return chase(arrow.arg)


def _arrow(t: Type) -> TArrow:
    t = chase(t)
    if not isinstance(t, TArrow):
        raise TypeError(f"`{show_type(t)}` is not a function type")
    return t


def result_type(t: Type) -> Type:
    """What a function type returns once given all its arguments."""
    t = chase(t)
    while isinstance(t, TArrow):
        t = chase(t.res)
    return t


def kind_of(t: Type) -> int:
    """The most restrictive kind t belongs to (variables: their own kind)."""
    t = chase(t)
    if isinstance(t, TVar):
        return t.kind
    if isinstance(t, TCon):
        return BT if t.name in ("int", "double", "float", "bool") else GT
    if isinstance(t, TArrow):
        return TYP
    if isinstance(t, TPair):
        return max(RT, kind_of(t.fst), kind_of(t.snd))
    return GT


@dataclass(eq=False)
class Scheme:
    """forall <level_vars> type_vars. body. The first `declared` level vars are the definition's
    explicit level parameters (they can be applied with `f<...>`); the rest were inferred."""

    level_vars: list[LVar]
    type_vars: list[TVar]
    body: Type
    declared: int = 0
    doc: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return show_scheme(self)


# ---- printing ----------------------------------------------------------------------------------

def _letter(i: int) -> str:
    return chr(ord("a") + i) if i < 26 else f"a{i - 26}"


class Namer:
    """Names variables for printing: letters for type variables in id order, and source names
    (or l, l1, l2, ...) for level variables."""

    def __init__(self, tvars=(), lvars=()):
        ordered = sorted(tvars, key=lambda v: v.id)
        self.tnames = {v.id: "'" + _letter(i) for i, v in enumerate(ordered)}
        self.lnames: dict[int, str] = {}
        for v in lvars:
            self._name_level(v)

    def _name_level(self, v: LVar) -> str:
        if v.id not in self.lnames:
            used = set(self.lnames.values())
            name = v.name if v.name and v.name not in used else None
            k = 0
            while name is None or name in used:
                name = "l" if k == 0 else f"l{k}"
                k += 1
            self.lnames[v.id] = name
        return self.lnames[v.id]

    def tvar(self, v: TVar) -> str:
        if v.id not in self.tnames:
            self.tnames[v.id] = "'" + (v.name or _letter(len(self.tnames)))
        return self.tnames[v.id]

    def level(self, level: Level) -> str:
        steps, var = level_depth(level)
        if var is None:
            if steps == 0 and is_warp(level):
                return "warp"
            if steps <= 2:
                return ("thread", "block", "grid")[steps]
            return "1+" * (steps - 2) + "grid"
        return "1+" * steps + self._name_level(var)


def show_type(t: Type, namer: Namer | None = None) -> str:
    namer = namer or Namer()
    t = chase(t)
    if isinstance(t, TCon):
        return "()" if t.name == "unit" else t.name
    if isinstance(t, TVar):
        return namer.tvar(t)
    if isinstance(t, TArrow):
        arg = show_type(t.arg, namer)
        if isinstance(chase(t.arg), TArrow):
            arg = f"({arg})"
        return f"{arg} -> {show_type(t.res, namer)}"
    if isinstance(t, TPair):
        return f"({show_type(t.fst, namer)}, {show_type(t.snd, namer)})"
    if isinstance(t, TPull):
        return f"[{show_type(t.elem, namer)}]"
    if isinstance(t, TSeq):
        elem = show_type(t.elem, namer)
        return f"Seq ({elem})" if isinstance(chase(t.elem), TArrow) else f"Seq {elem}"
    if isinstance(t, TPush):
        return f"[{show_type(t.elem, namer)}]<{namer.level(t.level)}>"
    if isinstance(t, TProgram):
        res = show_type(t.result, namer)
        if isinstance(chase(t.result), TArrow):
            res = f"({res})"
        return f"Program <{namer.level(t.level)}> {res}"
    raise TypeError(t)


def show_scheme(s: Scheme) -> str:
    namer = Namer(s.type_vars, s.level_vars)
    body = show_type(s.body, namer)
    if not s.type_vars and not s.level_vars:
        return body
    head = "forall" + "".join(" " + namer.tvar(v) for v in sorted(s.type_vars, key=lambda v: v.id))
    if s.level_vars:
        head += " <" + ",".join(namer.level(v) for v in s.level_vars) + ">"
    return f"{head}. {body}"


def show_types(*types: Type) -> list[str]:
    """Print several types with one consistent naming of their free variables."""
    tvs: dict[int, TVar] = {}
    lvs: dict[int, LVar] = {}
    for t in types:
        free_vars(t, tvs, lvs)
    namer = Namer(tvs.values(), lvs.values())
    return [show_type(t, namer) for t in types]
