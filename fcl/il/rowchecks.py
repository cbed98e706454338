"""What one irregular array brings to the kernels that combine it (fcl.il.rows): its rows, f
and z, and the checks made before those kernels, so that they read the elements unchecked
where they can and fail, where they fail, as the interpreter does (docs/compiler.md,
"Flattening irregular rows", item 2)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from fcl import checks
from fcl.errors import FCLError
from fcl.il import ir
from fcl.il.ir import show_expr
from fcl.il.lower import Lowerer, out_of_bounds
from fcl.il.simplify import difference, mk_bin, rebuild
from fcl.il.traverse import declared, mentioned, names
from fcl.il.values import Pull

I, B = ir.INT, ir.BOOL  # noqa: E741  # the code below reads as types


def _c(value: int) -> ir.Const:
    return ir.Const(value, I)


def row_at(rows: Pull, r: ir.Expr) -> Pull:
    row = rows.fn(r)
    if not isinstance(row, Pull):
        raise FCLError("internal: a row of an irregular array is not a pull array")
    return row


def fails(stmts: list[ir.Stmt]) -> bool:
    return any(isinstance(s, ir.Fail) for s in ir.walk(stmts))


@dataclass
class Part:
    """One irregular array to combine, and the checks made before the kernels that combine it."""
    rows: Pull
    f: object
    z: ir.Expr
    elem: str
    checks: list[ir.Stmt] = field(default_factory=list)  # kernels to run before the part's
    rows_checked: bool = False      # a kernel made each row's own checks
    elements_checked: bool = False  # a kernel made its elements' checks (see _hoisted)
    element_fails: bool = False     # the elements' code checks still
    mentions: set[str] = field(default_factory=set)  # the names its code reads


def part_of(lw: Lowerer, count: ir.Expr, said: str, rows: Pull, f, z: ir.Expr, elem: str
            ) -> Part:
    """The part, its check kernels made (captured in part.checks): `count` rows, whose shape
    the kernels' notes say in the words `said`."""
    part = Part(rows, f, z, elem)
    with lw.capture() as made:
        _check_rows(lw, count, said, part)
        _check_elements(lw, count, said, part)
    part.checks = made
    return part


def _check_rows(lw: Lowerer, count: ir.Expr, said: str, part: Part) -> None:
    """Each row made once, with its checks (a negative length, where offsets decrease),
    before any kernel relies on the rows' starts rising: a failure stops the program there,
    as in the interpreter, which makes every row first."""
    r = lw.fresh("r", I)
    with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
        row_at(part.rows, r)
    part.rows_checked = fails(body)
    if part.rows_checked:
        lw.emit(ir.ParFor("grid", r, count, body, note=(
            f"{said}: each row checked before they are combined")))


def _check_elements(lw: Lowerer, count: ir.Expr, said: str, part: Part) -> None:
    """The elements' checks made a row at a time, where each depends on the element's position
    in its row at most by adding it (`index xs (offsets[r] + j)`): the first element to fail
    is then known without making the others, and the kernels that read the elements side by
    side do so unchecked. Else (a gather's `index x (cols[...])`) the elements keep theirs."""
    r, j = lw.fresh("r", I), lw.fresh("j", I)
    with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
        row = made_row(lw, part, r, checked=True)
        with lw.capture() as element:
            value = row.fn(j)
        checking = fails(element)
        hoisted = _hoisted(element, j, row.length) if checking else None
        if hoisted:
            lw.emit(ir.If(mk_bin(">", row.length, _c(0), B), hoisted, []))
    part.mentions = mentioned(body) | mentioned(element) | names(value)
    part.element_fails = checking and hoisted is None
    part.elements_checked = bool(hoisted)
    if part.elements_checked:
        lw.emit(ir.ParFor("grid", r, count, body, note=(
            f"{said}: each row's elements checked before they are read side by side")))


def _hoisted(element: list[ir.Stmt], j: ir.Var, length: ir.Expr) -> list[ir.Stmt] | None:
    """The checks of a row's elements, for the whole row: each check at element 0, in their
    order, then where the one whose index steps with j (by 1 or -1) leaves its array later
    on, naming the first index outside, as the element that fails first would. None unless
    every check is of the element's own code at top level, at most one stepping with j."""
    count, row_checks = _hoisted_prefix(element, j, length)
    every = sum(isinstance(s, ir.Fail) for s in element)
    return row_checks if count == every and not _nested_fails(element) else None


def _nested_fails(element: list[ir.Stmt]) -> bool:
    return any(fails([s]) for s in element if not isinstance(s, ir.Fail))


def _hoisted_prefix(element: list[ir.Stmt], j: ir.Var, length: ir.Expr
                    ) -> tuple[int, list[ir.Stmt]]:
    """How many of the element's first checks _hoisted's rules make for the whole row, and
    those checks so made (see _hoisted); the first check they cannot make ends the prefix."""
    local = declared(element)
    stepping: ir.Fail | None = None
    step: int | None = None
    at_first: list[ir.Stmt] = []
    count = 0
    for s in element:
        if not isinstance(s, ir.Fail):
            if fails([s]):
                break
            continue
        if local & (names(s.cond) | {n for v in s.values for n in names(v)}):
            break
        if j.name in names(s.cond):
            if stepping is not None or _step(s, j) is None:
                break
            stepping, step = s, _step(s, j)
        zero: dict[str, ir.Expr] = {j.name: _c(0)}
        at_first.append(ir.Fail(rebuild(s.cond, zero), s.message,
                                [rebuild(v, zero) for v in s.values], s.hint, s.places,
                                span=s.span, inside=s.inside))
        count += 1
    if stepping is None:
        return count, at_first
    where, bound = stepping.values[0], stepping.values[1]
    last = rebuild(where, {j.name: mk_bin("-", length, _c(1), I)})
    outside, first_out = (mk_bin(">=", last, bound, B), bound) if step == 1 \
        else (mk_bin("<", last, _c(0), B), _c(-1))
    later = ir.Fail(mk_bin("&&", mk_bin(">", length, _c(1), B), outside, B), stepping.message,
                    [first_out, bound, *stepping.values[2:]], stepping.hint, stepping.places,
                    span=stepping.span, inside=stepping.inside)
    return count, [*at_first, later]


def _step(check: ir.Fail, j: ir.Var) -> int | None:
    """1 or -1: how much an index check's index grows with j, where only it depends on j."""
    if not check.message.startswith(checks.INDEX) or len(check.values) < 2:
        return None
    where, bound = check.values[0], check.values[1]
    if j.name in names(bound) or show_expr(out_of_bounds(where, bound)) != show_expr(check.cond):
        return None
    step = difference(rebuild(where, {j.name: mk_bin("+", j, _c(1), I)}), where)
    return step if step in (1, -1) else None


def made_row(lw: Lowerer, part: Part, r: ir.Expr, checked: bool) -> Pull:
    """Row r, made by the work-item that reads it, with its checks unless `checked` says that a
    kernel made them before (the elements' own checks are made with each element)."""
    with lw.capture() as made:
        row = row_at(part.rows, r)
    _emit_unchecked(lw, made, checked and part.rows_checked)
    return row


def made_element(lw: Lowerer, part: Part, row: Pull, k: ir.Expr,
                 side_by_side: bool = False) -> ir.Expr:
    """Element k of a row, without the checks a kernel made before (_check_elements). Made
    side by side with the other rows' elements (flattened), not in a loop over its row that
    checks in the interpreter's order (fcl.il.stops), the checks the row's first checks come
    before are preceded by those (_row_checks_first)."""
    with lw.capture() as made:
        value = row.fn(k)
    if part.element_fails and side_by_side:
        made = _row_checks_first(lw, row, made)
    _emit_unchecked(lw, made, part.elements_checked)
    return value


def _row_checks_first(lw: Lowerer, row: Pull, made: list[ir.Stmt]) -> list[ir.Stmt]:
    """The element's code, each check it keeps after the first checks that can be made for
    the whole row (_hoisted_prefix) preceded by those, made for the whole row, where it fails:
    the interpreter makes every element's first checks before any element's later ones (a
    gather's), so a row that fails both reports the first, whichever element fails first."""
    j = lw.fresh("j", I)
    with lw.capture() as element:
        row.fn(j)
    count, row_checks = _hoisted_prefix(element, j, row.length)
    if not count or _nested_fails(made):
        return made
    out: list[ir.Stmt] = []
    seen = 0
    for s in made:
        if isinstance(s, ir.Fail):
            if seen >= count:
                out += [replace(c, cond=mk_bin("&&", s.cond, c.cond, B)) for c in row_checks
                        if isinstance(c, ir.Fail)]
            seen += 1
        out.append(s)
    return out


def _emit_unchecked(lw: Lowerer, made: list[ir.Stmt], checked: bool) -> None:
    """The code made, less its top-level checks where a kernel made them before."""
    lw.emit_all([s for s in made if not (checked and isinstance(s, ir.Fail))])


def canonical(kernel: ir.Stmt) -> str:
    """The kernel as text, with the names it binds numbered in order of appearance."""
    text = ir.show_stmts([kernel])
    bound = declared([kernel]) | {s.var.name for s in ir.walk([kernel])
                                  if isinstance(s, ir.Alloc)}
    order: dict[str, str] = {}
    return re.sub(r"\b\w+_\d+\b", lambda m: order.setdefault(m[0], f"v{len(order)}")
                  if m[0] in bound else m[0], text)
