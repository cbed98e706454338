"""Layouts of arrays of records in global memory (Šinkarovs and Scholz's type-driven data
layouts, seed 000), chosen from how the kernels index them.

The lowering keeps a forced array of records as an array per field (SoA: fcl.records). This
step looks at each such group in global memory whose fields share a base type, and may store
it instead as one array of whole records (AoS: field f of record i at i * k + f), or of tiles
of 32 records, each field's 32 values side by side (AoSoA: (i / 32) * 32k + 32f + i % 32).

The choice is the layout whose accesses touch the fewest 32-byte sectors, counted per warp of
32 work-items for every site that reads or writes the group inside a parallel loop: how a site's
index moves from one work-item to the next (by a constant stride, not at all, or
unpredictably: a gather) decides which sectors the warp's 32 addresses fall in, and the fields a
kernel reads at one index share sectors where they lie together. A warp reading one field of
consecutive records wants SoA or AoSoA; a warp gathering whole records wants AoS. Ties keep SoA.
A group the host reads or hands back (a result, a print) stays SoA, as do groups whose fields
differ in type.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from fcl.il import ir
from fcl.il.simplify import difference, mk_bin, rebuild
from fcl.il.traverse import map_bodies, map_children, map_stmt_exprs, stmt_exprs

LAYOUTS = ("soa", "aos", "aosoa")
NAMES = {"soa": "SoA", "aos": "AoS", "aosoa": "AoSoA"}
WARP = 32       # the work-items whose addresses one request serves
SECTOR = 32     # bytes
TILE = 32       # AoSoA: records per tile
GATHER = None   # a site whose index the model cannot follow from one work-item to the next


@dataclass
class Group:
    """The fields of one array of records in global memory."""
    name: str
    fields: list[ir.Var]
    size: ir.Expr
    pinned: bool = False  # the host reads it whole, or it is a result: it stays SoA
    # (kernel, index key): (stride or GATHER, the fields read or written at that index)
    sites: dict[tuple[int, str], tuple[int | None, set[int]]] = field(default_factory=dict)

    @property
    def elem(self) -> str:
        return ir.elem_of(self.fields[0])


@dataclass(frozen=True)
class Choice:
    """A group's layout, with the sectors per warp each layout would touch (the reason)."""
    group: str
    fields: int
    layout: str
    sectors: dict[str, int]

    def text(self) -> str:
        each = ", ".join(f"{NAMES[name]} {count}" for name, count in self.sectors.items())
        k = self.fields
        where = {"soa": "field f of record i in array f at i",
                 "aos": f"field f of record i at i * {k} + f",
                 "aosoa": f"field f of record i at (i / {TILE}) * {TILE * k} + {TILE}f + "
                          f"i % {TILE}"}[self.layout]
        return (f"record array {self.group} ({k} fields) as {NAMES[self.layout]} ({where}): "
                f"the 32-byte sectors its warps touch, {each}")


def choose_layouts(stmts: list[ir.Stmt], forced: str = "auto"
                   ) -> tuple[list[ir.Stmt], list[Choice]]:
    """The program with each eligible record array in its layout (`forced`, or the one whose
    accesses touch the fewest sectors), and the choices made."""
    groups = _groups(stmts)
    if not groups:
        return stmts, []
    by_field = {v.name: g for g in groups.values() for v in g.fields}
    _survey(stmts, by_field, [], [0])
    choices, layouts = [], {}
    for group in groups.values():
        if group.pinned or len({ir.elem_of(v) for v in group.fields}) > 1:
            continue
        sectors = {layout: _sectors(group, layout) for layout in LAYOUTS}
        layout = forced if forced in LAYOUTS else min(LAYOUTS, key=lambda name: (
            sectors[name], LAYOUTS.index(name)))
        choices.append(Choice(group.name, len(group.fields), layout, sectors))
        if layout != "soa":
            layouts[group.name] = layout
    if not choices:
        return stmts, choices
    return _rewrite(stmts, groups, layouts, choices), choices


def _groups(stmts: list[ir.Stmt]) -> dict[str, Group]:
    found: dict[str, Group] = {}
    counts: dict[str, int] = {}
    for s in ir.walk(stmts):
        if isinstance(s, ir.Alloc) and s.record is not None and s.level == "grid":
            name, _, count = s.record
            group = found.setdefault(name, Group(name, [], s.size))
            group.fields.append(s.var)
            counts[name] = count
            if ir.expr_key(s.size) != ir.expr_key(group.size):
                group.pinned = True
    return {name: g for name, g in found.items() if len(g.fields) == counts[name]}


def _survey(stmts: list[ir.Stmt], by_field: dict[str, Group], lanes: list[ir.Var],
            kernel: list[int]) -> None:
    """Note every access of a group's fields: its stride across the work-items of the innermost
    parallel loop around it, or that the host or an unfollowed use touches the group."""
    for s in stmts:
        if isinstance(s, (ir.ParFor, ir.Distribute)) and not lanes:
            kernel[0] += 1
        # A parallel loop's variable tells work-items apart; a grid distribute's, work-groups.
        spread = isinstance(s, ir.ParFor) or (isinstance(s, ir.Distribute) and s.level != "grid")
        inner = lanes + [s.var] if spread and isinstance(s, (ir.ParFor, ir.Distribute)) \
            else lanes
        if isinstance(s, ir.Store) and s.array.name in by_field:
            _site(by_field[s.array.name], s.array, s.index, lanes, kernel[0])
            exprs = [s.index, s.value]
        elif isinstance(s, ir.Alloc):
            exprs = [s.size]
        else:
            exprs = stmt_exprs(s, targets=True)
        for e in exprs:
            _survey_expr(e, by_field, lanes, kernel[0])
        for body in ir.children(s):
            _survey(body, by_field, inner, kernel)


def _survey_expr(e: ir.Expr, by_field: dict[str, Group], lanes: list[ir.Var],
                 kernel: int) -> None:
    if isinstance(e, ir.Index) and e.array.name in by_field:
        _site(by_field[e.array.name], e.array, e.index, lanes, kernel)
        _survey_expr(e.index, by_field, lanes, kernel)
        return
    if isinstance(e, ir.Var) and e.name in by_field:
        by_field[e.name].pinned = True  # named whole: a result, a print, a copy
        return
    for name in ir.field_names(e):
        value = getattr(e, name)
        if isinstance(value, ir.Expr):
            _survey_expr(value, by_field, lanes, kernel)


def _site(group: Group, array: ir.Var, index: ir.Expr, lanes: list[ir.Var], kernel: int) -> None:
    if not lanes:  # the host reads an element
        group.pinned = True
        return
    lane = lanes[-1]
    stride = difference(rebuild(index, {lane.name: mk_bin("+", lane, ir.Const(1, ir.INT),
                                                            ir.INT)}), index)
    key = (kernel, ir.expr_key(index))
    old_stride, fields = group.sites.get(key, (stride, set()))
    fields.add(next(k for k, v in enumerate(group.fields) if v.name == array.name))
    group.sites[key] = (old_stride, fields)


def _address(layout: str, record: int, f: int, k: int) -> int:
    if layout == "aos":
        return record * k + f
    if layout == "aosoa":
        return (record // TILE) * TILE * k + f * TILE + record % TILE
    return f * (1 << 24) + record


def _sectors(group: Group, layout: str) -> int:
    """The 32-byte sectors a warp's requests touch at every site of the group, in `layout`."""
    k, size = len(group.fields), ir.ITEM_BYTES[group.elem]
    total = 0
    for stride, fields in group.sites.values():
        if stride is GATHER:  # records far apart: each work-item's its own
            records = [lane * 4099 for lane in range(WARP)]
        else:
            records = [lane * abs(stride) for lane in range(WARP)]
        total += len({_address(layout, r, f, k) * size // SECTOR
                      for r in records for f in fields})
    return total


def _rewrite(stmts: list[ir.Stmt], groups: dict[str, Group], layouts: dict[str, str],
             choices: list[Choice]) -> list[ir.Stmt]:
    """Each laid-out group's fields as one array: its allocation, reads and writes; the kernels
    that touch a group chosen for say which layout it has, and why, in their notes."""
    merged = {name: ir.Var(f"{name}_{layouts[name]}", ir.ArrayType(groups[name].elem))
              for name in layouts}
    where = {v.name: (name, k) for name in layouts for k, v in enumerate(groups[name].fields)}
    owner = {v.name: c.group for c in choices for v in groups[c.group].fields}
    said = {c.group: c.text() for c in choices}

    def position(name: str, index: ir.Expr) -> ir.Expr:
        group, f = where[name]
        k = ir.Const(len(groups[group].fields), ir.INT)
        if layouts[group] == "aos":
            return mk_bin("+", mk_bin("*", index, k, ir.INT), ir.Const(f, ir.INT), ir.INT)
        tile = ir.Const(TILE, ir.INT)
        first = mk_bin("*", mk_bin("/", index, tile, ir.INT),
                       ir.Const(TILE * k.value, ir.INT), ir.INT)
        return mk_bin("+", mk_bin("+", first, ir.Const(f * TILE, ir.INT), ir.INT),
                      mk_bin("%", index, tile, ir.INT), ir.INT)

    def expr(e: ir.Expr) -> ir.Expr:
        e = map_children(e, expr)
        if isinstance(e, ir.Index) and e.array.name in where:
            return ir.Index(merged[where[e.array.name][0]], position(e.array.name, e.index))
        return e

    def size(group: Group) -> ir.Expr:
        k = ir.Const(len(group.fields), ir.INT)
        if layouts[group.name] == "aos":
            return mk_bin("*", group.size, k, ir.INT)
        tiles = mk_bin("/", mk_bin("+", group.size, ir.Const(TILE - 1, ir.INT), ir.INT),
                       ir.Const(TILE, ir.INT), ir.INT)
        return mk_bin("*", tiles, ir.Const(TILE * k.value, ir.INT), ir.INT)

    def block(body: list[ir.Stmt], top: bool) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            if isinstance(s, ir.Alloc) and s.var.name in where:
                group, f = where[s.var.name]
                if f == 0:
                    out.append(ir.Alloc(merged[group], size(groups[group]), "grid", span=s.span))
                continue
            s = map_stmt_exprs(s, expr)
            if isinstance(s, ir.Store) and s.array.name in where:
                s = replace(s, array=merged[where[s.array.name][0]],
                            index=position(s.array.name, s.index))
            if top and isinstance(s, (ir.ParFor, ir.Distribute)):
                touched = sorted({owner[v] for v in _mentioned_fields(s, owner)})
                notes = [said[g] for g in touched]
                if notes:
                    s = replace(s, note="; ".join(([s.note] if s.note else []) + notes))
            out.append(map_bodies(s, lambda inner: block(inner, False)))
        return out

    return block(stmts, True)


def _mentioned_fields(s: ir.Stmt, where: dict) -> set[str]:
    found = set()
    for inner in ir.walk([s]):
        if isinstance(inner, ir.Store) and inner.array.name in where:
            found.add(inner.array.name)
        for e in stmt_exprs(inner, targets=True):
            found |= _fields_in(e, where)
    return found


def _fields_in(e: ir.Expr, where: dict) -> set[str]:
    found = {e.array.name} if isinstance(e, ir.Index) and e.array.name in where else set()
    for name in ir.field_names(e):
        value = getattr(e, name)
        if isinstance(value, ir.Expr):
            found |= _fields_in(value, where)
    return found
