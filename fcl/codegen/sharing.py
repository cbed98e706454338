"""Local arrays whose lifetimes do not overlap share local memory.

A local array lives from its allocation to its last use; a use inside a loop that does not
also contain the allocation keeps the array alive to the end of that loop (the next iteration
reads it again). Pointer variables (the double buffers of `while`/`power`) count as uses of every
array they may point to. Arrays are then packed greedily into slots: one `__local` buffer per
slot, as large as its largest member.
"""
from __future__ import annotations

from fcl.il import ir
from fcl.il.traverse import is_loop, names, stmt_exprs


def lifetimes(body: list[ir.Stmt], arrays: set[str]) -> dict[str, tuple[int, int]]:
    """(first, last) statement positions, in pre-order, during which each array is live."""
    pointers = aliases(body, arrays)
    allocs: dict[str, int] = {}
    uses: list[tuple[int, set[str]]] = []
    loops: list[tuple[int, int]] = []
    counter = [0]

    def visit(stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            counter[0] += 1
            position = counter[0]
            if isinstance(s, ir.Alloc) and s.var.name in arrays:
                allocs[s.var.name] = position
            # A statement's own variable counts: assigning a pointer uses what it pointed to.
            mentioned = set().union(*(names(e) for e in stmt_exprs(s, targets=True)))
            used = set().union(*(pointers.get(n, set()) for n in mentioned))
            if used:
                uses.append((position, used))
            for child in ir.children(s):
                visit(child)
            if is_loop(s):
                loops.append((position, counter[0]))

    visit(body)
    spans = {name: [start, start] for name, start in allocs.items()}
    for position, used in uses:
        for name in used & spans.keys():
            start = spans[name][0]
            end = position
            for loop_start, loop_end in loops:
                if loop_start < position <= loop_end and not loop_start < start <= loop_end:
                    end = max(end, loop_end)
            spans[name][1] = max(spans[name][1], end)
    return {name: (a, b) for name, (a, b) in spans.items()}


def pack(spans: dict[str, tuple[int, int]]) -> list[list[str]]:
    """Greedy interval packing: arrays in one slot are never live at the same time."""
    slots: list[list[str]] = []
    ends: list[int] = []
    for name, (start, end) in sorted(spans.items(), key=lambda item: item[1]):
        for k, slot_end in enumerate(ends):
            if slot_end < start:
                slots[k].append(name)
                ends[k] = end
                break
        else:
            slots.append([name])
            ends.append(end)
    return slots


def aliases(body: list[ir.Stmt], arrays: set[str]) -> dict[str, set[str]]:
    """For every variable: the local arrays it may refer to (an array refers to itself)."""
    aliases: dict[str, set[str]] = {name: {name} for name in arrays}
    pointer_sources: list[tuple[str, str]] = []

    def collect(stmts):
        for s in stmts:
            if isinstance(s, (ir.Declare, ir.Assign)) and isinstance(s.var.type, ir.ArrayType):
                value = s.init if isinstance(s, ir.Declare) else s.value
                if isinstance(value, ir.Var):
                    pointer_sources.append((s.var.name, value.name))
            for child in ir.children(s):
                collect(child)
    collect(body)
    changed = True
    while changed:
        changed = False
        for target, source in pointer_sources:
            before = len(aliases.setdefault(target, set()))
            aliases[target] |= aliases.get(source, set())
            changed |= len(aliases[target]) != before
    return aliases
