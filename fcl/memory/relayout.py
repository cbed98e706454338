"""The program rewritten to the layouts fcl.memory.layouts chose: each group of record fields
in its layout (an array per field, or one array), and its copy in a second layout where one
pays, made by a transposition kernel after each kernel that writes the group and read by the
kernels it was made for. The kernels say in their notes which layout they touch, and why."""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from fcl.il import ir
from fcl.il.simplify import mk_bin
from fcl.il.traverse import map_bodies, map_children, map_stmt_exprs, stmt_exprs
from fcl.memory.layouts import NAMES, TILE, Choice, Group, choose_layouts, where


@dataclass(frozen=True)
class Storage:
    """A group's fields in one layout: an array per field (SoA) or one array."""
    layout: str
    arrays: tuple[ir.Var, ...]
    fields: int
    size: ir.Expr   # records

    def at(self, f: int, index: ir.Expr) -> tuple[ir.Var, ir.Expr]:
        """The array and position of field f of record `index`."""
        if self.layout == "soa":
            return self.arrays[f], index
        if self.layout == "aos":
            return self.arrays[0], _plus(mk_bin("*", index, _int(self.fields), ir.INT), f)
        first = mk_bin("*", mk_bin("/", index, _int(TILE), ir.INT), _int(TILE * self.fields),
                       ir.INT)
        return self.arrays[0], mk_bin("+", _plus(first, f * TILE),
                                      mk_bin("%", index, _int(TILE), ir.INT), ir.INT)

    def allocations(self, span, label: str | None) -> list[ir.Stmt]:
        """The arrays' allocations, labelled with the record array's FCL name."""
        if self.layout == "soa":
            return [ir.Alloc(v, self.size, "grid", span=span,
                             label=label and f"{label}.{k}")
                    for k, v in enumerate(self.arrays)]
        if self.layout == "aos":
            elements = mk_bin("*", self.size, _int(self.fields), ir.INT)
        else:
            tiles = mk_bin("/", _plus(self.size, TILE - 1), _int(TILE), ir.INT)
            elements = mk_bin("*", tiles, _int(TILE * self.fields), ir.INT)
        return [ir.Alloc(self.arrays[0], elements, "grid", span=span, label=label)]


@dataclass(frozen=True)
class RecordArray:
    """What a global array holds of a record array, for the views: the fields of its
    elements."""
    group: str
    layout: str
    fields: int
    field: int | None = None   # SoA: the one field this array holds
    copy: bool = False

    def field_at(self, element: int) -> int:
        if self.field is not None:
            return self.field
        if self.layout == "aos":
            return element % self.fields
        return element % (TILE * self.fields) // TILE

    def record_at(self, element: int) -> int:
        if self.layout == "aos" and self.field is None:
            return element // self.fields
        if self.layout == "aosoa":
            return element // (TILE * self.fields) * TILE + element % TILE
        return element

    def describe(self) -> str:
        what = (f"{'a copy of ' if self.copy else ''}record array {self.group} "
                f"({self.fields} fields) as {NAMES[self.layout]}")
        if self.field is not None:
            return f"field {self.field} of {what}"
        return f"{what}: {where(self.layout, self.fields)}"


def record_arrays(groups: dict[str, Group], choices: list[Choice]) -> dict[str, RecordArray]:
    """Each global array that holds record fields, by name, as `relayout` names them."""
    by_name = {c.group: c for c in choices}
    found: dict[str, RecordArray] = {}
    for name, group in groups.items():
        choice = by_name.get(name)
        plans = [(choice.layout if choice else "soa", False)] + \
            ([(choice.copy, True)] if choice is not None and choice.copy is not None else [])
        for layout, copy in plans:
            storage = _storage(group, layout, copy)
            for f, array in enumerate(storage.arrays):
                found[array.name] = RecordArray(name, layout, len(group.fields),
                                                f if layout == "soa" else None, copy)
    return found


def _int(value: int) -> ir.Const:
    return ir.Const(value, ir.INT)


def _plus(e: ir.Expr, value: int) -> ir.Expr:
    return mk_bin("+", e, _int(value), ir.INT)


def _storage(group: Group, layout: str, copy: bool) -> Storage:
    k = len(group.fields)
    if layout == "soa":
        arrays = tuple(ir.Var(f"{v.name}_copy", v.type) for v in group.fields) if copy \
            else tuple(group.fields)
    else:
        arrays = (ir.Var(f"{group.name}_{layout}{'_copy' if copy else ''}",
                         ir.ArrayType(group.elem)),)
    return Storage(layout, arrays, k, group.size)


def lay_out(stmts: list[ir.Stmt], forced: str = "auto") -> tuple[list[ir.Stmt], list[Choice]]:
    """The program with each eligible record array in its layout (`forced`, or the plan whose
    accesses touch the fewest sectors), and the choices made."""
    groups, choices = choose_layouts(stmts, forced)
    return (relayout(stmts, groups, choices) if choices else stmts), choices


def relayout(stmts: list[ir.Stmt], groups: dict[str, Group], choices: list[Choice]
             ) -> list[ir.Stmt]:
    """The program with each chosen group in its layout, its copy where one pays."""
    own = {c.group: _storage(groups[c.group], c.layout, False) for c in choices}
    copies = {c.group: _storage(groups[c.group], c.copy, True) for c in choices
              if c.copy is not None}
    by_name = {c.group: c for c in choices}
    field_of = {v.name: (c.group, f) for c in choices
                for f, v in enumerate(groups[c.group].fields)}
    kernels = [0]  # numbered as fcl.memory.layouts numbered them: in program order

    def expr(e: ir.Expr, kernel: int | None) -> ir.Expr:
        e = map_children(e, lambda inner: expr(inner, kernel))
        if isinstance(e, ir.Index) and e.array.name in field_of:
            group, f = field_of[e.array.name]
            array, index = reading(group, kernel).at(f, e.index)
            return ir.Index(array, index)
        return e

    def reading(group: str, kernel: int | None) -> Storage:
        return copies[group] if kernel in by_name[group].readers else own[group]

    def transpositions(kernel: int, span) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for c in choices:
            if c.copy is None or kernel not in c.writers:
                continue
            item = ir.Var(f"{c.group}_record{kernel}", ir.INT)
            body: list[ir.Stmt] = []
            for f in range(c.fields):
                source, at = own[c.group].at(f, item)
                target, to = copies[c.group].at(f, item)
                body.append(ir.Store(target, to, ir.Index(source, at), span=span))
            out.append(ir.ParFor("grid", item, own[c.group].size, body, span=span,
                                 note=f"record array {c.group}: its {NAMES[c.copy]} copy, "
                                      f"made after the kernel that writes it"))
        return out

    def block(body: list[ir.Stmt], kernel: int | None) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, ir.Alloc) and s.var.name in field_of:
                group, f = field_of[s.var.name]
                if f == 0:
                    label = s.label and s.label.rpartition(".")[0]
                    if own[group].layout != "soa":
                        out += own[group].allocations(s.span, label)
                    if group in copies:
                        out += copies[group].allocations(s.span, label and f"{label} (copy)")
                if own[group].layout == "soa":
                    out.append(s)
                continue
            inside = kernel
            if kernel is None and isinstance(s, (ir.ParFor, ir.Distribute)):
                inside = kernels[0]
                kernels[0] += 1
            touched = _touched(s, field_of) if kernel is None else set()
            s = map_stmt_exprs(s, partial(expr, kernel=inside))
            if isinstance(s, ir.Store) and s.array.name in field_of:
                group, f = field_of[s.array.name]
                array, index = own[group].at(f, s.index)
                s = replace(s, array=array, index=index)
            s = map_bodies(s, partial(block, kernel=inside))
            if inside is not None and isinstance(s, (ir.ParFor, ir.Distribute)) and kernel is None:
                notes = [by_name[g].text() + _reads(by_name[g], inside)
                         for g in sorted(touched)]
                if notes:
                    s = replace(s, note="; ".join(([s.note] if s.note else []) + notes))
                out.append(s)
                out += transpositions(inside, s.span)
                continue
            out.append(s)
        return out

    return block(stmts, None)


def _reads(choice: Choice, kernel: int) -> str:
    if choice.copy is None:
        return ""
    return (f" (this kernel reads the {NAMES[choice.copy]} copy)" if kernel in choice.readers
            else "")


def _touched(s: ir.Stmt, field_of: dict[str, tuple[str, int]]) -> set[str]:
    """The groups whose fields a statement reads or writes."""
    found: set[str] = set()
    for inner in ir.walk([s]):
        if isinstance(inner, ir.Store) and inner.array.name in field_of:
            found.add(field_of[inner.array.name][0])
        for e in stmt_exprs(inner, targets=True):
            found |= {field_of[i.array.name][0] for i in _indexes(e) if i.array.name in field_of}
    return found


def _indexes(e: ir.Expr) -> list[ir.Index]:
    found = [e] if isinstance(e, ir.Index) else []
    for name in ir.field_names(e):
        value = getattr(e, name)
        if isinstance(value, ir.Expr):
            found += _indexes(value)
    return found
