"""The global memory plan of a program, for people: each block, the arrays that live in it and
where (their index functions into it, as LMADs), every decision with its proof or the reason it
was not taken, and the memory and copying saved (`fcl memory --blocks`, `%%memory --blocks`)."""
from __future__ import annotations

from dataclasses import dataclass

from fcl.errors import Span
from fcl.il import ir
from fcl.lmad.core import LMAD
from fcl.memory.blocks import share_blocks
from fcl.memory.decisions import Decision
from fcl.memory.shortcircuit import short_circuit_all

COPIES = ("short-circuit", "alias", "update")  # the decisions that remove a copy kernel
ALONE = ("hoist", "unused")  # the decisions about an array alone, placing it nowhere else


@dataclass(frozen=True)
class Placed:
    array: str
    place: LMAD | None  # its elements in the block; None where the length is not known
    span: Span | None


@dataclass(frozen=True)
class Block:
    name: str
    elem: str
    length: int | None  # elements, if known when compiling
    times: int | None   # how many times it is allocated (None: a `while` decides)
    arrays: tuple[Placed, ...]

    @property
    def bytes(self) -> int | None:
        if self.length is None or self.times is None:
            return None
        return self.length * ir.ITEM_BYTES[self.elem] * self.times


@dataclass(frozen=True)
class Footprint:
    """What a program allocates: bytes known when compiling, and allocations of unknown length
    or number (`while` loops, lengths from the input)."""
    bytes: int
    unknown: int

    def __str__(self) -> str:
        known = f"{self.bytes:,} bytes"
        return known if not self.unknown else \
            f"{known} and {self.unknown} allocation{'s' * (self.unknown > 1)} of unknown size"


@dataclass(frozen=True)
class MemoryPlan:
    blocks: list[Block]
    decisions: list[Decision]
    planned: Footprint
    unplanned: Footprint
    copy_bytes_saved: int  # read and written by the copy kernels removed
    unknown_savings: int   # copies removed whose bytes are not known (updates under a mask)

    def text(self) -> str:
        return plan_text(self)


def memory_plan(il: list[ir.Stmt], merge_blocks: bool = True) -> MemoryPlan:
    """The plan the memory steps (fcl.steps: short-circuit, then blocks unless `merge_blocks`
    is off, as on Oclgrind) make of `il`."""
    notes: list[Decision] = []
    with ir.key_scope():
        planned = short_circuit_all(il, notes)
        if merge_blocks:
            planned = share_blocks(planned, notes)
    sizes = {s.var.name: s for s in ir.walk(il) if isinstance(s, ir.Alloc) and s.level == "grid"}
    return MemoryPlan(_blocks(planned, sizes, notes), notes, _footprint(planned),
                      _footprint(il), _copy_bytes(notes),
                      sum(d.saved is None for d in notes if d.done and d.kind in COPIES))


def _blocks(planned: list[ir.Stmt], allocs: dict[str, ir.Alloc],
            notes: list[Decision]) -> list[Block]:
    home: dict[str, tuple[str, LMAD | None]] = {}  # array -> (where it went, its place there)
    for d in notes:
        if d.done and d.kind not in ALONE:
            home[d.array] = (d.block, d.place)
    counts = _allocation_counts(planned)
    where = {name: _resolve(name, home) for name in allocs}
    blocks = []
    for s in ir.walk(planned):
        if not (isinstance(s, ir.Alloc) and s.level == "grid"):
            continue
        length = int(s.size.value) if isinstance(s.size, ir.Const) else None
        placed = tuple(Placed(name, place or _whole(allocs[name]), allocs[name].span)
                       for name, (block, place) in where.items() if block == s.var.name)
        blocks.append(Block(s.var.name, ir.elem_of(s.var), length, counts.get(s.var.name),
                            placed))
    return blocks


def _resolve(name: str, home: dict[str, tuple[str, LMAD | None]]) -> tuple[str, LMAD | None]:
    """The block an array ended in, and its place there (composed along the decisions)."""
    place: LMAD | None = None
    seen = set()
    while name in home and name not in seen:
        seen.add(name)
        name, step = home[name]
        if step is not None:
            place = step if place is None else _compose(place, step)
    return name, place


def _compose(inner: LMAD, outer: LMAD) -> LMAD:
    """The place of inner's elements when the array they are placed in is placed at outer."""
    ((size, stride),), ((_, outer_stride),) = inner.dims, outer.dims
    return LMAD(outer.offset + outer_stride * inner.offset, ((size, outer_stride * stride),))


def _whole(alloc: ir.Alloc) -> LMAD | None:
    return LMAD(0, ((int(alloc.size.value), 1),)) \
        if isinstance(alloc.size, ir.Const) and alloc.size.value > 0 else None


def _allocation_counts(stmts: list[ir.Stmt], times: int | None = 1) -> dict[str, int | None]:
    """How many times each global array is allocated: once per iteration of the loops around."""
    counts: dict[str, int | None] = {}
    for s in stmts:
        if isinstance(s, ir.Alloc) and s.level == "grid":
            counts[s.var.name] = times
        inner = times
        if isinstance(s, ir.While):
            inner = None
        elif isinstance(s, ir.SeqFor):
            inner = times * int(s.bound.value) \
                if times is not None and isinstance(s.bound, ir.Const) else None
        for body in ir.children(s):
            counts.update(_allocation_counts(body, inner))
    return counts


def _footprint(stmts: list[ir.Stmt]) -> Footprint:
    known = unknown = 0
    counts = _allocation_counts(stmts)
    for s in ir.walk(stmts):
        if isinstance(s, ir.Alloc) and s.level == "grid":
            times = counts.get(s.var.name)
            if isinstance(s.size, ir.Const) and times is not None:
                known += int(s.size.value) * ir.ITEM_BYTES[ir.elem_of(s.var)] * times
            else:
                unknown += 1
    return Footprint(known, unknown)


def _copy_bytes(notes: list[Decision]) -> int:
    return sum(d.saved or 0 for d in notes if d.done and d.kind in COPIES)


# ---- text ------------------------------------------------------------------------------------

def unknown_savings(plan: MemoryPlan) -> str:
    """What the text of the bytes not moved leaves out, if anything."""
    k = plan.unknown_savings
    return f", and more by {k} removed cop{'ies' if k > 1 else 'y'} of unknown size" if k else ""


def plan_text(plan: MemoryPlan) -> str:
    lines = [f"global memory: {plan.planned} in {len(plan.blocks)} "
             f"block{'s' * (len(plan.blocks) != 1)} "
             f"(without planning: {plan.unplanned}); copies removed: "
             f"{sum(d.done for d in plan.decisions if d.kind in COPIES)}, "
             f"{plan.copy_bytes_saved:,} bytes not moved{unknown_savings(plan)}"]
    for block in plan.blocks:
        length = "?" if block.length is None else f"{block.length}"
        times = "" if block.times == 1 else \
            (" per iteration of a while" if block.times is None else f" x {block.times}")
        size = "" if block.bytes is None else f", {block.bytes:,} bytes"
        lines.append(f"block {block.name}: {block.elem}[{length}]{times}{size}")
        for placed in block.arrays:
            where = str(placed.place) if placed.place is not None else "all of it"
            lines.append(f"  {placed.array:<10} at {where}{_line(placed.span)}")
    if plan.decisions:
        lines.append("decisions:")
    for d in plan.decisions:
        mark = "done" if d.done else "not done"
        where = f" at {d.place}" if d.place is not None else ""
        target = "" if d.kind in ALONE else f" into {d.block}{where}"
        lines.append(f"  {d.kind} {d.array}{target}{_line(d.span)}: {mark}: {d.why}")
    return "\n".join(lines)


def _line(span: Span | None) -> str:
    return f" (line {span.line})" if span is not None else ""

