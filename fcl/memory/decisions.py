"""What the memory planner decided, and why: one record per copy removed or kept and per array
given another's block, for the views (fcl.memory.plan) to show."""
from __future__ import annotations

from dataclasses import dataclass

from fcl.errors import Span
from fcl.il import ir
from fcl.lmad.core import LMAD


@dataclass(frozen=True)
class Decision:
    kind: str          # one of KINDS
    done: bool         # False: the copy stays, or the array keeps its own block
    array: str         # the array placed
    block: str         # the array (or block) it is placed in
    place: LMAD | None  # where its elements lie in `block`, in elements
    why: str           # the proof, or the first reason it failed
    span: Span | None  # the FCL that made `array`
    saved: int | None = None  # bytes a removed copy would have read and written (None: unknown)


KINDS = {
    "short-circuit": "a part copied into a larger array is built in its place",
    "alias": "a copy of an array, or of a slice of it, that nothing changes afterwards is a "
             "view of it",
    "update": "a loop step that changes a few elements of an array writes them in place",
    "in-place": "a kernel that maps an array writes over it when nothing reads it after",
    "merge": "an array made after another's last use takes its block",
    "unused": "an array nothing uses is not allocated",
    "hoist": "an array a loop makes afresh in every iteration is made once, before it",
}

Notes = list[Decision] | None

def copied_bytes(elements: int, array: ir.Var) -> int:
    """The bytes a copy of `elements` elements of the array's type reads and writes."""
    return 2 * elements * ir.ITEM_BYTES[ir.elem_of(array)]


def note(notes: Notes, *args, **kwargs) -> None:
    if notes is not None:
        notes.append(Decision(*args, **kwargs))


def at_line(s: ir.Stmt) -> str:
    """` (line N)` of the FCL a statement came from, or nothing."""
    return f" (line {s.span.line})" if s.span is not None else ""
