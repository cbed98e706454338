"""Layouts of arrays of records in global memory (Šinkarovs and Scholz's type-driven data
layouts, seed 000), chosen from how the kernels index them.

The lowering keeps a forced array of records as an array per field (SoA: fcl.records). This
step looks at each such group in global memory whose fields share a base type, and may store
it instead as one array of whole records (AoS: field f of record i at i * k + f), or of tiles
of 32 records, each field's 32 values side by side (AoSoA: (i / 32) * 32k + 32f + i % 32).

The choice is the layout whose accesses touch the fewest 32-byte sectors in a run. Each site
that reads or writes the group inside a kernel is counted per warp of 32 work-items: how its
index moves from one work-item to the next (by a constant stride, not at all, or unpredictably:
a gather) decides which sectors the warp's 32 addresses fall in, and the fields a kernel reads
at one index share sectors where they lie together. A site weighs as many warp requests as it
makes in a run (its kernel's work-items over 32, times the trips of the loops around it; a size
the compiler cannot know counts as UNKNOWN). A warp reading one field of consecutive records
wants SoA or AoSoA; a warp gathering whole records wants AoS. Ties keep SoA.

Where the kernels disagree, a copy in a second layout may pay: a transposition after each
kernel that writes the group (reading it whole, writing the copy whole), and the kernels that
touch fewer sectors in the copy's layout read the copy (the paper's representation change).
It is made when the sectors it saves outweigh the sectors it moves and its launch (LAUNCH).
A group the host reads or hands back (a result, a print) keeps SoA, with a copy if one pays;
groups whose fields differ in type, or that an array variable aliases, keep SoA alone.
fcl.memory.relayout rewrites the program to the choices (`lay_out`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from fcl.il import ir
from fcl.il.simplify import difference, mk_bin, rebuild
from fcl.il.traverse import stmt_exprs

LAYOUTS = ("soa", "aos", "aosoa")
NAMES = {"soa": "SoA", "aos": "AoS", "aosoa": "AoSoA"}
WARP = 32       # the work-items whose addresses one request serves
SECTOR = 32     # bytes
TILE = 32       # AoSoA: records per tile
GATHER = None   # a site whose index the model cannot follow from one work-item to the next
UNKNOWN = 1 << 20  # the trips of a loop, or the records of an array, the compiler cannot know
# A kernel launch, in the sectors DRAM moves meanwhile: about 3 µs at an H100's 3.35 TB/s.
LAUNCH = 300_000


@dataclass
class Site:
    stride: int | None       # records between neighbouring work-items' indices, or GATHER
    fields: set[int]         # the fields read or written at that index
    requests: float          # warp requests it makes in a run


@dataclass
class Group:
    """The fields of one array of records in global memory."""
    name: str
    fields: list[ir.Var]
    size: ir.Expr
    pinned: bool = False  # the host reads it: its own layout stays SoA
    fixed: bool = False   # aliased, written by the host or ragged: no copy either
    # (kernel, index key): where the kernel touches the group
    sites: dict[tuple[int, str], Site] = field(default_factory=dict)
    writers: set[int] = field(default_factory=set)  # the kernels that store into it

    @property
    def elem(self) -> str:
        return ir.elem_of(self.fields[0])


@dataclass(frozen=True)
class Choice:
    """A group's layout (and its copy's, where one pays), with the sectors each plan touches in
    a run (the reason)."""
    group: str
    fields: int
    layout: str
    sectors: dict[str, int]                        # one layout for every kernel
    kernels: tuple[tuple[int | None, dict[str, int]], ...] = ()  # each kernel: line, sectors
    copy: str | None = None                        # the copy's layout ...
    readers: frozenset[int] = frozenset()          # ... the kernels that read it ...
    reader_lines: tuple[int, ...] = ()
    moved: int = 0                                 # ... the sectors its transpositions cost ...
    with_copy: int = 0                             # ... and the plan's sectors in all
    writers: frozenset[int] = frozenset()
    pinned: bool = False                           # the host reads the group: SoA

    def text(self) -> str:
        each = ", ".join(f"{NAMES[name]} {count:,}" for name, count in self.sectors.items())
        host = ", as the host reads it" if self.pinned else ""
        said = (f"record array {self.group} ({self.fields} fields) as {NAMES[self.layout]} "
                f"({where(self.layout, self.fields)}{host}): the 32-byte sectors its kernels' "
                f"warps touch in a run, {each}")
        if self.copy is None:
            return said
        lines = ", ".join(str(line) for line in self.reader_lines)
        readers = f"the kernels at lines {lines} read" if len(self.reader_lines) > 1 else \
            f"the kernel at line {lines} reads"
        return (said + f"; with an {NAMES[self.copy]} copy ({where(self.copy, self.fields)}) "
                f"that {readers}, {self.with_copy:,}, the {self.moved:,} of its transposition "
                f"included (a launch counts as {LAUNCH:,})")


def where(layout: str, k: int) -> str:
    """Where field f of record i lies in `layout`, for records of k fields."""
    return {"soa": "field f of record i in array f at i",
            "aos": f"field f of record i at i * {k} + f",
            "aosoa": f"field f of record i at (i / {TILE}) * {TILE * k} + {TILE}f + "
                     f"i % {TILE}"}[layout]


def choose_layouts(stmts: list[ir.Stmt], forced: str = "auto"
                   ) -> tuple[dict[str, Group], list[Choice]]:
    """The program's record arrays in global memory, and the layout of each eligible one
    (`forced`, or the plan whose accesses touch the fewest sectors)."""
    groups = _groups(stmts)
    if not groups:
        return groups, []
    by_field = {v.name: g for g in groups.values() for v in g.fields}
    lines: list[int | None] = []
    _survey(stmts, by_field, [], None, 1.0, lines)
    return groups, [c for c in (_choose(g, forced, lines) for g in groups.values())
                    if c is not None]


def _choose(group: Group, forced: str, lines: list[int | None]) -> Choice | None:
    if len({ir.elem_of(v) for v in group.fields}) > 1 or (group.pinned and forced != "auto"):
        return None
    per_kernel = {layout: _kernel_sectors(group, layout) for layout in LAYOUTS}
    totals = {layout: round(sum(per_kernel[layout].values())) for layout in LAYOUTS}
    kernels = tuple((lines[k], {layout: round(per_kernel[layout][k]) for layout in LAYOUTS})
                    for k in sorted(per_kernel["soa"]))
    if forced in LAYOUTS:
        return Choice(group.name, len(group.fields), forced, totals, kernels)
    own = ("soa",) if group.pinned else LAYOUTS
    layout = min(own, key=lambda name: (totals[name], LAYOUTS.index(name)))
    best = Choice(group.name, len(group.fields), layout, totals, kernels)
    if group.fixed:
        return None if group.pinned else best
    for primary in own:
        for copy in LAYOUTS:
            plan = _with_copy(group, primary, copy, per_kernel, lines, best)
            if plan is not None and plan.with_copy < (best.with_copy or totals[best.layout]):
                best = plan
    return None if group.pinned and best.copy is None else best


def _with_copy(group: Group, primary: str, copy: str, per_kernel: dict[str, dict[int, float]],
               lines: list[int | None], best: Choice) -> Choice | None:
    """The plan keeping the group in `primary`, with a `copy` for the kernels that read it
    touching fewer sectors there; None where no kernel would read it."""
    if copy == primary or not group.writers:
        return None
    readers = frozenset(k for k in per_kernel[primary] if k not in group.writers
                        and per_kernel[copy][k] < per_kernel[primary][k])
    if not readers:
        return None
    moved = (_transposition(group, primary, copy) + LAUNCH) * len(group.writers)
    total = moved + sum(per_kernel[copy if k in readers else primary][k]
                        for k in per_kernel[primary])
    return Choice(group.name, len(group.fields), primary, best.sectors, best.kernels, copy,
                  readers, tuple(sorted({lines[k] or 0 for k in readers})), round(moved),
                  round(total), frozenset(group.writers), group.pinned)


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
                group.pinned = group.fixed = True
    return {name: g for name, g in found.items() if len(g.fields) == counts[name]}


def _survey(stmts: list[ir.Stmt], by_field: dict[str, Group], lanes: list[ir.Var],
            kernel: int | None, requests: float, lines: list[int | None]) -> None:
    """Note every access of a group's fields: its kernel (numbered in program order, each
    kernel's line in `lines`), its stride across the work-items of the innermost parallel loop
    around it and the warp requests it makes; and whether the host touches the group."""
    for s in stmts:
        inside, weight = kernel, requests
        if kernel is None and isinstance(s, (ir.ParFor, ir.Distribute)):
            inside, weight = len(lines), 1.0 / WARP
            lines.append(s.span.line if s.span is not None else None)
        # A parallel loop's variable tells work-items apart; a grid distribute's, work-groups.
        spread = isinstance(s, ir.ParFor) or (isinstance(s, ir.Distribute) and s.level != "grid")
        inner = lanes + [s.var] if spread and isinstance(s, (ir.ParFor, ir.Distribute)) \
            else lanes
        if isinstance(s, ir.Store) and s.array.name in by_field:
            group = by_field[s.array.name]
            if inside is None:
                group.pinned = group.fixed = True
            else:
                group.writers.add(inside)
            _site(group, s.array, s.index, lanes, inside, weight)
            exprs = [s.index, s.value]
        elif isinstance(s, ir.Alloc):
            exprs = [s.size]
        else:
            exprs = stmt_exprs(s, targets=True)
        # Named whole by a print or a result, the host reads it; elsewhere, an alias.
        alias = not isinstance(s, (ir.Print, ir.Result))
        for e in exprs:
            _survey_expr(e, by_field, lanes, inside, weight, alias)
        if isinstance(s, (ir.ParFor, ir.Distribute, ir.SeqFor)):
            weight *= _estimate(s.bound)
        for body in ir.children(s):
            _survey(body, by_field, inner, inside, weight, lines)


def _survey_expr(e: ir.Expr, by_field: dict[str, Group], lanes: list[ir.Var],
                 kernel: int | None, requests: float, alias: bool) -> None:
    if isinstance(e, ir.Index) and e.array.name in by_field:
        _site(by_field[e.array.name], e.array, e.index, lanes, kernel, requests)
        _survey_expr(e.index, by_field, lanes, kernel, requests, alias)
        return
    if isinstance(e, ir.Var) and e.name in by_field:
        group = by_field[e.name]
        group.pinned = True
        group.fixed = group.fixed or alias
        return
    for name in ir.field_names(e):
        value = getattr(e, name)
        if isinstance(value, ir.Expr):
            _survey_expr(value, by_field, lanes, kernel, requests, alias)


def _site(group: Group, array: ir.Var, index: ir.Expr, lanes: list[ir.Var],
          kernel: int | None, requests: float) -> None:
    if kernel is None or not lanes:  # the host reads an element
        group.pinned = True
        return
    lane = lanes[-1]
    stride = difference(rebuild(index, {lane.name: mk_bin("+", lane, ir.Const(1, ir.INT),
                                                            ir.INT)}), index)
    site = group.sites.setdefault((kernel, ir.expr_key(index)), Site(stride, set(), requests))
    site.fields.add(next(k for k, v in enumerate(group.fields) if v.name == array.name))


def _estimate(bound: ir.Expr) -> float:
    """A loop's trips: its bound with every size the compiler cannot know taken as UNKNOWN."""
    free: dict[str, ir.Var] = {}
    ir.expr_vars(bound, free)
    value = rebuild(bound, {name: ir.Const(UNKNOWN, ir.INT) for name in free})
    return float(max(value.value, 0)) if isinstance(value, ir.Const) else float(UNKNOWN)


def _address(layout: str, record: int, f: int, k: int) -> int:
    if layout == "aos":
        return record * k + f
    if layout == "aosoa":
        return (record // TILE) * TILE * k + f * TILE + record % TILE
    return f * (1 << 24) + record


def _per_warp(group: Group, layout: str, stride: int | None, fields: set[int]) -> int:
    """The 32-byte sectors one warp request touches at a site, in `layout`."""
    k, size = len(group.fields), ir.ITEM_BYTES[group.elem]
    if stride is GATHER:  # records far apart: each work-item's its own
        records = [lane * 4099 for lane in range(WARP)]
    else:
        records = [lane * abs(stride) for lane in range(WARP)]
    return len({_address(layout, r, f, k) * size // SECTOR for r in records for f in fields})


def _kernel_sectors(group: Group, layout: str) -> dict[int, float]:
    """The sectors each kernel's warps touch in a run at the group's sites, in `layout`."""
    out: dict[int, float] = {}
    for (kernel, _), site in group.sites.items():
        out[kernel] = out.get(kernel, 0.0) + site.requests * _per_warp(
            group, layout, site.stride, site.fields)
    return out


def _transposition(group: Group, source: str, target: str) -> float:
    """The sectors a copy of the whole group from `source` into `target` touches."""
    every = set(range(len(group.fields)))
    warps = _estimate(group.size) / WARP
    return warps * (_per_warp(group, source, 1, every) + _per_warp(group, target, 1, every))
