"""Copies removed from the host program: array short-circuiting (Munksgaard's thesis, ch. 6).

A copy kernel is a grid loop `parfor (e < N) { out[e] = v }` whose value `v` picks, by
conditions on `e`, a read of some array at a shifted or reversed index in each case: a
concatenation of forced parts (`e < 1000 ? a[e] : b[e - 1000]`), a reversal, a slice. Two ways
to make it cheaper:

* **short-circuit**: a part `src` read in one case, over a range of `e` that covers `src`
  exactly, is built directly in `out`'s memory: every read and write of `src[x]` between its
  allocation and the copy becomes one of `out[p(x)]`, where `p` inverts the copy's index; the
  case then copies `out[e]` onto itself, and a kernel left copying only onto itself goes.
  `p([0, size))` is the part's place in `out`, an LMAD; it is proven not to overlap the
  places of the other parts with the LMAD test (fcl.lmad.overlap). It needs `out` unused
  before the copy (its allocation moves before `src`'s), and `src` used only element by
  element and nowhere after the copy.
* **alias**: a copy of a whole array (`out[e] = src[e]`) that nothing writes afterwards leaves
  `out` the same as `src`: later uses of `out` read `src`, and the copy goes (the print of a
  loop's result, which the loop left in one of its two buffers). A copy of a slice
  (`out[e] = src[e + c]`) read only element by element afterwards is a view of `src`: its
  reads `out[x]` become `src[x + c]`, an index function instead of data moved.

Either way each element holds what it held before in every run, so the program prints the
same; `fcl.memory.plan` shows what was done and what was not, and why.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from fcl.il import ir
from fcl.il.simplify import linear, mk_bin, rebuild
from fcl.il.traverse import (
    map_bodies,
    map_children,
    map_exprs,
    map_stmt_exprs,
    names,
    reads_of,
    stmt_exprs,
)
from fcl.lmad.core import LMAD
from fcl.lmad.overlap import disjoint
from fcl.memory.decisions import Notes, at_line, copied_bytes, note

INT = ir.INT


# ---- the copy kernel and its cases ---------------------------------------------------------

@dataclass(frozen=True)
class Case:
    value: ir.Expr                     # what the kernel stores where this case holds
    interval: tuple[int, int] | None  # the indices e where it does, if a range [lo, hi)


def is_kernel(s: ir.Stmt) -> bool:
    return isinstance(s, (ir.ParFor, ir.Distribute)) and s.level == "grid"


def copy_kernel(s: ir.Stmt) -> tuple[ir.ParFor, ir.Store] | None:
    """(kernel, its one store `out[e] = v`) if s is a one-dimensional kernel that stores each
    element at its own index and does nothing else."""
    if not (isinstance(s, ir.ParFor) and s.level == "grid" and len(s.body) == 1):
        return None
    store = s.body[0]
    if not (isinstance(store, ir.Store) and isinstance(store.index, ir.Var)
            and store.index.name == s.var.name and isinstance(s.bound, ir.Const)
            and store.combine is None):
        return None
    return s, store


def cases(value: ir.Expr, e: str, bound: int) -> list[Case]:
    """The leaves of value's choices by condition, each with the range of e it holds in."""
    return [Case(leaf, _interval(conds, e, bound)) for leaf, conds in paths(value)]


Conditions = list[tuple[ir.Expr, bool]]  # conditions, each with whether it holds


def paths(value: ir.Expr) -> list[tuple[ir.Expr, Conditions]]:
    """Each leaf of value's choices by condition, with the conditions on the way to it."""
    if isinstance(value, ir.Select):
        return [(leaf, [(value.cond, True), *conds]) for leaf, conds in paths(value.then)] + \
            [(leaf, [(value.cond, False), *conds]) for leaf, conds in paths(value.else_)]
    return [(value, [])]


def bounds(conds: Conditions, e: str) -> tuple[list[ir.Expr], list[ir.Expr]] | None:
    """The bounds the conditions put on e, (lows, highs) for `low <= e < high`, over values
    other than e; None when one of them is not a conjunction of such bounds."""
    lows: list[ir.Expr] = []
    highs: list[ir.Expr] = []
    for cond, holds in conds:
        found = _comparisons(cond, holds)
        if found is None:
            return None
        for comparison, truth in found:
            bound = _bound(comparison, truth, e)
            if bound is None:
                return None
            (lows if bound[0] == "low" else highs).append(bound[1])
    return lows, highs


def _comparisons(cond: ir.Expr, holds: bool) -> list[tuple[ir.Bin, bool]] | None:
    """cond being `holds`, as order comparisons that must each have their truth; None if it is
    not a conjunction of them (`&&`, a negated `||`, and their lowered forms as selects)."""
    if isinstance(cond, ir.Un) and cond.op == "not":
        return _comparisons(cond.arg, not holds)
    parts: list[tuple[ir.Expr, bool]] | None = None
    if isinstance(cond, ir.Bin) and cond.op == ("&&" if holds else "||"):
        parts = [(cond.left, holds), (cond.right, holds)]
    elif isinstance(cond, ir.Select) and isinstance(cond.then, ir.Const) \
            and isinstance(cond.else_, ir.Const):  # cond ? true : false, or its negation
        if cond.then.value == cond.else_.value:
            return None
        parts = [(cond.cond, holds == bool(cond.then.value))]
    elif isinstance(cond, ir.Select) and isinstance(cond.else_, ir.Const) and holds \
            and not cond.else_.value:  # a ? b : false, as `&&` is lowered
        parts = [(cond.cond, True), (cond.then, True)]
    elif isinstance(cond, ir.Select) and isinstance(cond.then, ir.Const) and not holds \
            and cond.then.value:  # a ? true : b, as `||` is lowered
        parts = [(cond.cond, False), (cond.else_, False)]
    if parts is None:
        return [(cond, holds)] if isinstance(cond, ir.Bin) \
            and cond.op in ("<", "<=", ">", ">=") else None
    found: list[tuple[ir.Bin, bool]] = []
    for part, truth in parts:
        more = _comparisons(part, truth)
        if more is None:
            return None
        found += more
    return found


FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}  # a op b as b op' a
NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _bound(comparison: ir.Bin, truth: bool, e: str) -> tuple[str, ir.Expr] | None:
    """("low", x) for e >= x, ("high", x) for e < x; None if the comparison is not of e."""
    op, left, right = comparison.op, comparison.left, comparison.right
    if not (isinstance(left, ir.Var) and left.name == e):
        op, left, right = FLIPPED[op], right, left
    if not (isinstance(left, ir.Var) and left.name == e) or e in names(right):
        return None
    if not truth:
        op = NEGATED[op]
    one = ir.Const(1, INT)
    if op in ("<", "<="):
        return "high", right if op == "<" else mk_bin("+", right, one, INT)
    return "low", right if op == ">=" else mk_bin("+", right, one, INT)


def _interval(conds: Conditions, e: str, bound: int) -> tuple[int, int] | None:
    """The range [lo, hi) of e in [0, bound) where the conditions hold, when their bounds are
    numbers."""
    found = bounds(conds, e)
    if found is None or not all(isinstance(x, ir.Const) for x in [*found[0], *found[1]]):
        return None
    lo = max([0, *(int(x.value) for x in found[0])])  # type: ignore[attr-defined]
    hi = min([bound, *(int(x.value) for x in found[1])])  # type: ignore[attr-defined]
    return lo, max(lo, hi)


def shift(index: ir.Expr, e: str) -> tuple[int, int] | None:
    """(a, c) when index is a * e + c with a = 1 or -1."""
    terms, const = linear(index)
    if len(terms) != 1:
        return None
    ((atom, coef),) = terms.values()
    if not (isinstance(atom, ir.Var) and atom.name == e and coef in (1, -1)):
        return None
    return coef, const


# ---- short-circuiting ------------------------------------------------------------------------

def short_circuit(stmts: list[ir.Stmt], p: int, notes: Notes) -> list[ir.Stmt] | None:
    found = copy_kernel(stmts[p])
    assert found is not None
    kernel, store = found
    out, e = store.array, kernel.var.name
    known = allocs(stmts[:p])
    out_at = known.get(out.name)
    if out_at is None:
        return None
    out_alloc = stmts[out_at]
    assert isinstance(out_alloc, ir.Alloc)
    if not isinstance(out_alloc.size, ir.Const):
        return None
    assert isinstance(kernel.bound, ir.Const)
    every = cases(store.value, e, int(kernel.bound.value))
    read_by_case = [names(_without_parts(store.value, case.value, ir.Const(0, INT)))
                    for case in every]  # what the copy reads outside each case
    placed: dict[str, tuple[LMAD, int]] = {}  # src -> (its place in out, its allocation)
    for number, case in enumerate(every):
        if not (isinstance(case.value, ir.Index) and case.value.array.name in known
                and case.value.array.name != out.name):
            continue
        src = case.value.array.name
        at = known[src]
        src_alloc = stmts[at]
        assert isinstance(src_alloc, ir.Alloc)
        why = _cannot_place(stmts, p, at, out_at, case, e, number, read_by_case, src_alloc,
                            out_alloc)
        place = None
        if why is None:
            place = _place(case, e, src_alloc)
            why = place if isinstance(place, str) else None
        if why is None:
            assert isinstance(place, LMAD)
            ((size, stride),) = place.dims
            ends = (place.offset, place.offset + (size - 1) * stride)
            if min(ends) < 0 or max(ends) >= out_alloc.size.value:
                why = f"its place {place} is not inside {out.name}"
            elif _whole_permutation(place, out_alloc):
                why = f"the copy reorders all of {src}: a layout the program forces, kept"
            for other, (other_place, _) in placed.items():
                if why is None and not disjoint(place, other_place):
                    why = f"its place {place} may overlap {other}'s place {other_place}"
        if why is not None:
            note(notes, "short-circuit", False, src, out.name, None, why, src_alloc.span)
            continue
        assert isinstance(place, LMAD)
        placed[src] = (place, at)
        proof = (f"elements {case.interval[0]}..{case.interval[1] - 1} of {out.name} "  # type: ignore[index]
                 f"copy all of {src}, each once; its place {place} overlaps no other part's")
        note(notes, "short-circuit", True, src, out.name, place, proof, src_alloc.span,
             copied_bytes(place.shape[0], out))
    if not placed:
        return None
    return _build_in_place(stmts, p, out_at, placed, every, kernel, store)


def allocs(stmts: list[ir.Stmt]) -> dict[str, int]:
    """The global arrays allocated in stmts, with their positions."""
    return {s.var.name: at for at, s in enumerate(stmts)
            if isinstance(s, ir.Alloc) and s.level == "grid"}


def _cannot_place(stmts: list[ir.Stmt], p: int, at: int, out_at: int, case: Case, e: str,
                  number: int, read_by_case: list[set[str]], src_alloc: ir.Alloc,
                  out_alloc: ir.Alloc) -> str | None:
    """Why `src` (allocated at `at`) cannot be built in `out`, or None if nothing stops it."""
    src, out = src_alloc.var.name, out_alloc.var.name
    if ir.elem_of(src_alloc.var) != ir.elem_of(out_alloc.var):
        return f"{src} and {out} hold different types"
    if src in read_by_case[number]:
        return f"the copy reads {src} in more than one place"
    used_after = _first_use(stmts[p + 1:], src)
    if used_after is not None:
        return f"{src} is used after the copy{at_line(used_after)}"
    between = stmts[at + 1:p]
    other = _other_use(between, src)
    if other is not None:
        return f"{src} is used other than element by element{at_line(other)}"
    users = [s for s in stmts[min(at, out_at) + 1:p] if s is not out_alloc]
    out_use = _first_use(users, out)
    if out_use is not None:
        return f"{out} is used before the copy{at_line(out_use)}"
    if case.interval is None:
        return f"the condition choosing {src} is not a range of the copy's index {e}"
    return None


def _place(case: Case, e: str, src_alloc: ir.Alloc) -> LMAD | str:
    """The LMAD of src's elements in out, or why there is none."""
    src = src_alloc.var.name
    assert isinstance(case.value, ir.Index) and case.interval is not None
    moved = shift(case.value.index, e)
    if moved is None:
        return f"the copy's index into {src} is not {e} plus a constant, nor a constant minus {e}"
    if not isinstance(src_alloc.size, ir.Const):
        return f"the length of {src} is not known when compiling"
    a, c = moved
    lo, hi = case.interval
    first, last = sorted((a * lo + c, a * (hi - 1) + c))
    size = int(src_alloc.size.value)
    if hi <= lo or (first, last) != (0, size - 1):
        shown = "no element" if hi <= lo else f"elements {first}..{last}"
        return f"the copy reads {shown} of {src}, not all {size} once each"
    return LMAD(-a * c, ((size, a),))  # p(x) = a * (x - c), as a = 1 / a


def _whole_permutation(place: LMAD, out_alloc: ir.Alloc) -> bool:
    """Whether the part is all of out (a reversal of the whole array): the layout the program
    forced on purpose, whose kernel the views and lessons show as written."""
    return place.shape[0] >= out_alloc.size.value  # type: ignore[attr-defined]


def _build_in_place(stmts: list[ir.Stmt], p: int, out_at: int,
                    placed: dict[str, tuple[LMAD, int]], every: list[Case],
                    kernel: ir.ParFor, store: ir.Store) -> list[ir.Stmt]:
    out = store.array
    first = min(min(at for _, at in placed.values()), out_at)
    out_alloc = stmts[out_at]
    before, between, after = stmts[:first], stmts[first:p], stmts[p + 1:]
    moved: list[ir.Stmt] = [out_alloc]
    for s in between:
        if s is out_alloc or (isinstance(s, ir.Alloc) and s.var.name in placed):
            continue
        moved.append(_relocate(s, {src: place for src, (place, _) in placed.items()}, out))
    e = kernel.var
    self_read = ir.Index(out, e)
    left = [case for case in every if not (isinstance(case.value, ir.Index)
                                           and case.value.array.name in placed)]
    if left:
        value = store.value
        for case in every:
            if isinstance(case.value, ir.Index) and case.value.array.name in placed:
                value = _without_parts(value, case.value, self_read)
        copy: ir.Stmt = replace(kernel, body=[replace(store, value=value)])
        if len(left) == 1 and left[0].interval is not None:
            copy = _narrowed(kernel, store, left[0])
        moved.append(copy)
    return before + moved + after


def _without_parts(value: ir.Expr, leaf: ir.Expr, instead: ir.Expr) -> ir.Expr:
    """value with the case `leaf` (that very expression) replaced by `instead`."""
    if value is leaf:
        return instead
    if isinstance(value, ir.Select):
        return replace(value, then=_without_parts(value.then, leaf, instead),
                       else_=_without_parts(value.else_, leaf, instead))
    return value


def over_range(kernel: ir.ParFor, store: ir.Store, array: ir.Var, value: ir.Expr,
               first: ir.Expr, count: ir.Expr) -> ir.ParFor:
    """The kernel over `count` of its indices from `first` on: `array[e + first] = value`, with
    value's e shifted alike."""
    e = kernel.var
    shifted = mk_bin("+", e, first, INT)
    return replace(kernel, bound=count, body=[replace(store, array=array, index=shifted,
                                                      value=rebuild(value, {e.name: shifted}))])


def _narrowed(kernel: ir.ParFor, store: ir.Store, case: Case) -> ir.Stmt:
    """The copy over the one range of indices still copied: `out[e' + lo] = case`."""
    assert case.interval is not None
    lo, hi = case.interval
    return over_range(kernel, store, store.array, case.value, ir.Const(lo, INT),
                      ir.Const(hi - lo, INT))


def _relocate(s: ir.Stmt, places: dict[str, LMAD], out: ir.Var) -> ir.Stmt:
    """s with each element x of a placed array read and written at its place in out."""
    def at(index: ir.Expr, place: LMAD) -> ir.Expr:
        ((_, stride),) = place.dims
        scaled = index if stride == 1 else mk_bin("*", index, ir.Const(stride, INT), INT)
        return mk_bin("+", scaled, ir.Const(place.offset, INT), INT) if place.offset else scaled

    def expr(x: ir.Expr) -> ir.Expr:
        x = map_children(x, expr)
        if isinstance(x, ir.Index) and x.array.name in places:
            return ir.Index(out, at(x.index, places[x.array.name]))
        return x

    if isinstance(s, ir.Store) and s.array.name in places:
        index, value = expr(s.index), expr(s.value)
        return replace(s, array=out, index=at(index, places[s.array.name]), value=value)
    s = map_stmt_exprs(s, expr)
    return map_bodies(s, lambda body: [_relocate(t, places, out) for t in body])


# ---- aliasing a whole copy -------------------------------------------------------------------

def alias(stmts: list[ir.Stmt], p: int, notes: Notes) -> list[ir.Stmt] | None:
    found = copy_kernel(stmts[p])
    assert found is not None
    kernel, store = found
    value, out = store.value, store.array
    moved = shift(value.index, kernel.var.name) if isinstance(value, ir.Index) else None
    if not (isinstance(value, ir.Index) and moved is not None and moved[0] == 1
            and value.array.name != out.name):
        return None
    src, offset = value.array, moved[1]
    known = allocs(stmts[:p])
    out_at = known.get(out.name)
    if out_at is None or src.type != out.type:
        return None
    rest = stmts[p + 1:]
    if _first_use(rest, out.name) is None:
        return None  # a copy nothing reads: the program's own kernel (a lesson's), as written
    why = None
    made_after = set(allocs(rest))
    later_store = next((s for s in ir.walk(rest) if isinstance(s, ir.Store)
                        and s.array.name not in made_after), None)
    if _first_use(stmts[out_at + 1:p], out.name) is not None:
        why = f"{out.name} is used before the copy"
    elif later_store is not None:
        why = (f"{later_store.array.name} is written after the copy{at_line(later_store)}, "
               f"which may be {src.name}'s memory")
    elif offset == 0 and _other_use(rest, out.name, allowed=_whole_uses(src, known)) \
            is not None:
        why = f"{out.name} is named by another variable, or returned, and {src.name} is " \
              f"not an array this program allocates"
    elif any(isinstance(s, ir.Result) and src.name in names(x)
             for s in ir.walk(rest) for x in stmt_exprs(s)):
        why = f"{src.name} is returned too: the two results must not share memory"
    elif offset != 0 and _other_use(rest, out.name) is not None:
        why = f"{out.name} is printed, returned or named by another variable, not only read " \
              f"element by element"
    assert isinstance(kernel.bound, ir.Const)
    place = LMAD(offset, ((int(kernel.bound.value), 1),))
    if why is not None:
        note(notes, "alias", False, out.name, src.name, place, why, stmts[out_at].span)
        return None
    whole = "whole" if offset == 0 else f"from element {offset} on"
    note(notes, "alias", True, out.name, src.name, place,
         f"{out.name} copies {src.name} {whole}, and nothing writes after the copy",
         stmts[out_at].span, copied_bytes(place.shape[0], out))
    if offset == 0:
        later = [rebuild_stmt(s, {out.name: src}) for s in rest]
    else:
        later = [_relocate(s, {out.name: place}, src) for s in rest]
    return stmts[:out_at] + stmts[out_at + 1:p] + later


def _whole_uses(src: ir.Var, known: dict[str, int]) -> tuple[type, ...]:
    """The statements that may use a whole alias of src: a print; and the program's result when
    src is an array of the program's own (never an argument's memory, which the caller owns)."""
    return (ir.Print, ir.Result) if src.name in known else (ir.Print,)


def rebuild_stmt(s: ir.Stmt, substitute: dict[str, ir.Expr]) -> ir.Stmt:
    """s, nested statements included, with variables (arrays too, a result's included)
    substituted."""
    (s,) = map_exprs([s], lambda x: rebuild(x, substitute))
    for t in ir.walk([s]):
        if isinstance(t, ir.Result):
            t.value = _rename_result(t.value, substitute)
    return s


def _rename_result(value, substitute: dict[str, ir.Expr]):
    if isinstance(value, ir.ArrayResult):
        new = substitute.get(value.array.name)
        return ir.ArrayResult(new, value.length) if isinstance(new, ir.Var) else value
    if isinstance(value, tuple):
        return tuple(_rename_result(v, substitute) for v in value)
    return value


# ---- uses ------------------------------------------------------------------------------------

def mentions(s: ir.Stmt, name: str) -> bool:
    """Whether the statement itself (not one nested in it) mentions `name`, what it defines
    included."""
    return any(name in names(x) for x in stmt_exprs(s, targets=True))


def first_statement_using(stmts: list[ir.Stmt], name: str) -> ir.Stmt | None:
    """The first top-level statement that mentions `name` (itself or nested in it)."""
    return next((s for s in stmts if any(mentions(t, name) for t in ir.walk([s]))), None)


def _first_use(stmts: list[ir.Stmt], name: str) -> ir.Stmt | None:
    """The first statement in stmts (nested ones included) that mentions `name`."""
    return next((s for s in ir.walk(stmts) if mentions(s, name)), None)


def _other_use(stmts: list[ir.Stmt], name: str,
               allowed: tuple[type, ...] = ()) -> ir.Stmt | None:
    """The first statement that mentions the array `name` other than to read or write one of its
    elements (or in a statement of the `allowed` kinds)."""
    for s in ir.walk(stmts):
        if isinstance(s, allowed):
            continue
        exprs = stmt_exprs(s, targets=True)
        if isinstance(s, ir.Store):
            exprs = [s.index, s.value]
        if any(reads_of(x, name) is None for x in exprs):
            return s
    return None

