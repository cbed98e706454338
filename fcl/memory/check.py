"""An independent check of a memory plan (fcl.memory.plan): no two arrays that are live at once
share memory, unless one is built inside the other.

The planner proves each decision on its own (a part's place against the destination's uses, a
merged block against the lifetimes of the arrays already in it). This check looks at the
outcome instead, from the program before planning: for every block, every pair of arrays placed
in it that are both written (an alias is a view: its copy is gone, and nothing writes it) and
whose lifetimes overlap must lie in disjoint places (the LMAD test), or one must have
been placed inside the other by the planner's decisions (a part of a concatenation in it, an
update of it), or the two must meet only in the statement that hands one's memory to the other
(a map written over its input, proven element by element). A pair it cannot decide (a place
of unknown size) is left. `--verify-il` runs it after the memory steps; a problem is a bug in
FCL's compiler.

Lifetimes are intervals of the statements in program order, nested ones included: an array
lives from the first statement that writes it to its last use, and an array used inside a loop
that does not write it first lives to the end of that loop (the next iteration uses it again).
An array a variable names (a loop's buffers), or the program returns, lives to the end.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from fcl.il import ir
from fcl.il.traverse import is_loop, names, stmt_exprs
from fcl.lmad.overlap import disjoint
from fcl.memory.plan import ALONE, MemoryPlan, Placed

HANDOVERS = ("in-place", "update")  # decisions building an array over another's last use


@dataclass(frozen=True)
class Lifetime:
    first: int  # the position of the first statement writing the array, in program order
    last: int   # the last position where the array is needed


def lifetimes(il: list[ir.Stmt]) -> dict[str, Lifetime]:
    """Each global array's lifetime in `il` (see the module docstring). A parallel loop is one
    moment: its work-items run in any order, so what any of them does happens at the loop."""
    grid: set[str] = set()
    written: dict[str, tuple[int, tuple[int, ...]]] = {}  # name -> (first write, loops around)
    uses: list[tuple[str, int, tuple[int, ...]]] = []     # (name, position, loops around)
    loop_ends: dict[int, int] = {}                         # a loop's position -> its last
    escaping: set[str] = set()
    position = 0

    def visit(stmts: list[ir.Stmt], loops: tuple[int, ...], moment: int | None) -> None:
        nonlocal position
        for s in stmts:
            here = position
            position += 1
            at = here if moment is None else moment
            if isinstance(s, ir.Alloc) and s.level == "grid":
                grid.add(s.var.name)
            if isinstance(s, ir.Store) and s.array.name not in written:
                written[s.array.name] = (at, loops)
            uses.extend((name, at, loops) for e in stmt_exprs(s, targets=True)
                        for name in names(e))
            if isinstance(s, ir.Result):
                escaping.update(name for e in stmt_exprs(s) for name in names(e))
            elif isinstance(s, (ir.Declare, ir.Assign)):
                escaping.update(e.name for e in stmt_exprs(s)
                                if isinstance(e, ir.Var) and isinstance(e.type, ir.ArrayType))
            parallel = isinstance(s, (ir.ParFor, ir.Distribute))
            repeats = is_loop(s) and not parallel and moment is None  # a loop of the host's
            for body in ir.children(s):
                visit(body, (*loops, here) if repeats else loops,
                      here if parallel and moment is None else moment)
            if repeats:
                loop_ends[here] = position - 1

    visit(il, (), None)
    end = position - 1
    found: dict[str, Lifetime] = {}
    for name, (first, home_loops) in written.items():
        if name not in grid:
            continue
        needed = first
        for used, at, loops in uses:
            if used == name:
                # In loops it is not first written in: needed to the outermost one's end.
                outside = [loop for loop in loops if loop not in home_loops]
                needed = max(needed, loop_ends[outside[0]] if outside else at)
        found[name] = Lifetime(first, end if name in escaping else needed)
    return found


def plan_problems(il: list[ir.Stmt], plan: MemoryPlan) -> list[str]:
    """What is wrong with `plan` for `il` (the program before planning): one line per pair of
    arrays live at once in memory that may overlap, neither placed inside the other."""
    lives = lifetimes(il)
    home = {d.array: d.block for d in plan.decisions if d.done and d.kind not in ALONE}

    def inside(inner: str, outer: str) -> bool:
        seen = set()
        while inner in home and inner not in seen:
            seen.add(inner)
            inner = home[inner]
            if inner == outer:
                return True
        return False

    handed = {d.array for d in plan.decisions if d.done and d.kind in HANDOVERS}
    views = {d.array for d in plan.decisions if d.done and d.kind == "alias"}

    def handover(a: str, b: str) -> bool:
        """b written over a in the one statement where a is last read and b first written."""
        return b in handed and lives[a].last == lives[b].first

    problems = []
    for block in plan.blocks:
        for a, b in combinations(block.arrays, 2):
            if not {a.array, b.array} <= lives.keys() or {a.array, b.array} & views:
                continue
            if not _overlap(lives[a.array], lives[b.array]) or _apart(a, b) in (True, None):
                continue
            if inside(a.array, b.array) or inside(b.array, a.array) or \
                    handover(a.array, b.array) or handover(b.array, a.array):
                continue
            problems.append(f"block {block.name}: {_shown(a)} and {_shown(b)} are live at once "
                            f"in memory that may overlap, and neither is built inside the other")
    return problems


def _overlap(a: Lifetime, b: Lifetime) -> bool:
    return a.first <= b.last and b.first <= a.last


def _apart(a: Placed, b: Placed) -> bool | None:
    """Whether their places are disjoint (None: a place of unknown size, not decided here)."""
    if a.place is None or b.place is None:
        return None
    return disjoint(a.place, b.place)


def _shown(p: Placed) -> str:
    where = f" at {p.place}" if p.place is not None else ""
    line = f" (line {p.span.line})" if p.span is not None else ""
    return f"{p.array}{where}{line}"
