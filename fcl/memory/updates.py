"""A loop step that changes a few elements of an array, written in place (Munksgaard's thesis,
ch. 6: the update `xs with [slice] = ...` inside a loop).

FCL has no update: a `power` or `while` step that changes a block of its array builds a whole
new array, `out[e] = e in W ? g(inp, e) : inp[e]`, into the loop's other buffer; every element
outside W is copied. When

* the elements changed, W, are a range of e (a union of the update cases' ranges);
* each update reads `inp` either at its own element or where no element changes (each read's
  elements, an LMAD over the update's range, proven apart from W's with the LMAD test);
* nothing reads `inp`'s old elements after the step: its next use writes all of it (the loop's
  next step) or there is none,

the step writes W's elements into `inp` itself and copies nothing; the statements after it read
`inp` where they read `out` and write `out` where they wrote `inp` (the buffers swap roles).
"""
from __future__ import annotations

from dataclasses import replace

from fcl.il import ir
from fcl.il.simplify import mk_bin, rebuild
from fcl.il.traverse import names, stmt_exprs
from fcl.lmad.core import LMAD
from fcl.lmad.overlap import disjoint
from fcl.memory.copies import Case, allocs, cases, copy_kernel, rebuild_stmt, shift
from fcl.memory.decisions import Notes, note

INT = ir.INT


def update_in_place(stmts: list[ir.Stmt], p: int, notes: Notes) -> list[ir.Stmt] | None:
    """stmts with the kernel at p writing its changes into its input, or None."""
    found = copy_kernel(stmts[p])
    assert found is not None
    kernel, store = found
    out, e = store.array, kernel.var.name
    assert isinstance(kernel.bound, ir.Const)
    bound = int(kernel.bound.value)
    every = cases(store.value, e, bound)
    same = [c for c in every if isinstance(c.value, ir.Index) and c.value.array.name != out.name
            and isinstance(c.value.index, ir.Var) and c.value.index.name == e]
    if not same or len({c.value.array.name for c in same}) != 1:  # type: ignore[attr-defined]
        return None
    inp = same[0].value.array  # type: ignore[attr-defined]
    changed = [c for c in every if c not in same]
    known = allocs(stmts[:p])
    if not changed or inp.name not in known or out.name not in known:
        return None
    inp_alloc, out_alloc = stmts[known[inp.name]], stmts[known[out.name]]
    assert isinstance(inp_alloc, ir.Alloc) and isinstance(out_alloc, ir.Alloc)
    why = _cannot_update(stmts, p, kernel, store, inp, out, changed, inp_alloc, out_alloc)
    if why is not None:
        note(notes, "update", False, out.name, inp.name, None, why, kernel.span)
        return None
    ranges = [c.interval for c in changed]
    shown = ", ".join(f"{lo}..{hi - 1}" for lo, hi in ranges)  # type: ignore[misc]
    note(notes, "update", True, out.name, inp.name, LMAD(0, ((bound, 1),)),
         f"only elements {shown} change, and each reads {inp.name} only at its own element "
         f"or where nothing changes; {inp.name}'s old elements are not read afterwards",
         kernel.span)
    steps = [_write_range(kernel, store, inp, case) for case in changed]
    rest = [rebuild_stmt(s, {out.name: inp, inp.name: out}) for s in stmts[p + 1:]]
    return stmts[:p] + steps + rest


def _cannot_update(stmts: list[ir.Stmt], p: int, kernel: ir.ParFor, store: ir.Store,
                   inp: ir.Var, out: ir.Var, changed: list[Case], inp_alloc: ir.Alloc,
                   out_alloc: ir.Alloc) -> str | None:
    e = kernel.var.name
    if inp.type != out.type or not (isinstance(inp_alloc.size, ir.Const)
                                     and isinstance(out_alloc.size, ir.Const)
                                     and inp_alloc.size.value == out_alloc.size.value
                                     == kernel.bound.value):  # type: ignore[attr-defined]
        return f"{inp.name} and {out.name} are not arrays of the same length as the step"
    if any(c.interval is None for c in changed):
        return f"the elements changed are not a range of the step's index {e}"
    written = [LMAD(lo, ((hi - lo, 1),)) for lo, hi in (c.interval for c in changed)  # type: ignore[misc]
               if hi > lo]
    for case in changed:
        for read in _reads(case.value, inp.name):
            moved = shift(read.index, e) if names(read.index) - {e} == set() else None
            if moved is None and names(read.index):
                return f"an update reads {inp.name} at {ir.show_expr(read.index)}, not at a " \
                       f"fixed distance from its own element"
            if moved == (1, 0):
                continue  # its own element, read before it writes it
            lo, hi = case.interval  # type: ignore[misc]
            if hi <= lo:
                continue
            if moved is None:  # a constant index
                place = LMAD(int(read.index.value), ())  # type: ignore[attr-defined]
            else:
                a, c = moved
                place = LMAD(a * lo + c, ((hi - lo, a),))
            clash = next((w for w in written if not disjoint(place, w)), None)
            if clash is not None:
                return f"an update reads {inp.name} at {place}, which may overlap the " \
                       f"elements changed, {clash}"
    if _condition_reads(store.value, inp.name):
        return f"which elements change depends on {inp.name}"
    following = _first_use(stmts[p + 1:], inp.name)
    if following is not None and not _overwrites(following, inp, out_alloc):
        return f"{inp.name}'s old elements are read after the step{_at_line(following)}"
    return None


def _reads(x: ir.Expr, name: str) -> list[ir.Index]:
    found = []
    if isinstance(x, ir.Index) and x.array.name == name:
        found.append(x)
    for part in ir.field_names(x):
        value = getattr(x, part)
        if isinstance(value, ir.Expr) and not (isinstance(x, ir.Index) and part == "array"):
            found += _reads(value, name)
    return found


def _condition_reads(value: ir.Expr, name: str) -> bool:
    if isinstance(value, ir.Select):
        return name in names(value.cond) or _condition_reads(value.then, name) \
            or _condition_reads(value.else_, name)
    return False


def _first_use(stmts: list[ir.Stmt], name: str) -> ir.Stmt | None:
    """The first top-level statement that mentions `name`."""
    return next((s for s in stmts if any(name in names(x) for t in ir.walk([s])
                                          for x in stmt_exprs(t, targets=True))), None)


def _overwrites(s: ir.Stmt, array: ir.Var, alloc: ir.Alloc) -> bool:
    """Whether s is a kernel writing every element of `array` without reading it."""
    found = copy_kernel(s)
    if found is None:
        return False
    kernel, store = found
    return store.array.name == array.name and array.name not in names(store.value) \
        and ir.expr_key(kernel.bound) == ir.expr_key(alloc.size)


def _write_range(kernel: ir.ParFor, store: ir.Store, inp: ir.Var, case: Case) -> ir.Stmt:
    """A kernel writing the case's elements into inp: `inp[e' + lo] = value`."""
    lo, hi = case.interval  # type: ignore[misc]
    e = kernel.var
    moved = mk_bin("+", e, ir.Const(lo, INT), INT) if lo else e
    return replace(kernel, bound=ir.Const(hi - lo, INT),
                   body=[replace(store, array=inp, index=moved,
                                 value=rebuild(case.value, {e.name: moved}))])


def _at_line(s: ir.Stmt) -> str:
    return f" (line {s.span.line})" if s.span is not None else ""
