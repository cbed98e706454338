"""Global memory blocks shared by arrays that never live at once (Munksgaard's thesis, ch. 5).

The host keeps every array it allocates until the run ends, so the device memory a program
needs is the sum of its allocations, and an array allocated inside a loop counts once per
iteration. Two steps lower that:

* **hoist**: an array allocated in a loop's body, of a size known when compiling, that nothing
  outside the iteration can refer to (no variable names it, it is not the result) is allocated
  once before the loop; each iteration overwrites it as it filled a fresh one before.
* **merge**: in one statement list, an array allocated after every array of an earlier block
  was last used takes that block (of the same element type; the block grows to the larger
  size). A block stays live to the end once a variable names one of its arrays (a loop's
  buffers) or the program returns it: the interference is decided statement by statement,
  a loop counting as one statement.

An element is never read before the program writes it (the checks and the interpreter
agree on that), so what a block held before does not matter.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from fcl.il import ir
from fcl.il.traverse import map_bodies, names, stmt_exprs
from fcl.memory.copies import is_kernel, rebuild_stmt
from fcl.memory.decisions import Notes, at_line, note

LOOPS = (ir.SeqFor, ir.While)


def share_blocks(stmts: list[ir.Stmt], notes: Notes = None) -> list[ir.Stmt]:
    return _merge(_hoist(stmts, notes), notes)


# ---- hoisting out of loops -------------------------------------------------------------------

def _hoist(stmts: list[ir.Stmt], notes: Notes) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        if is_kernel(s):
            out.append(s)
            continue
        s = map_bodies(s, lambda body: _hoist(body, notes))
        if isinstance(s, LOOPS):
            lifted = [a for a in s.body if _can_hoist(a, s, notes)]
            if lifted:
                s = replace(s, body=[t for t in s.body if not any(t is a for a in lifted)])
                out += lifted
        out.append(s)
    return out


def _can_hoist(s: ir.Stmt, loop: ir.SeqFor | ir.While, notes: Notes) -> bool:
    if not (isinstance(s, ir.Alloc) and s.level == "grid"):
        return False
    name = s.var.name
    why = None
    if not isinstance(s.size, ir.Const):
        why = "its length is not known when compiling"
    elif _named_whole(loop.body, name):
        why = "a variable names it, or the program returns it, so it may outlive the iteration"
    note(notes, "hoist", why is None, name, name, None,
         why or "each iteration is done with it before the next allocates it", s.span)
    return why is None


# ---- merging blocks ---------------------------------------------------------------------------

@dataclass
class Block:
    alloc: ir.Alloc         # the allocation kept (its size grows to the largest member's)
    size: int
    last_use: int           # the position of the statement that last uses a member
    members: list[str] = field(default_factory=list)


def _merge(stmts: list[ir.Stmt], notes: Notes) -> list[ir.Stmt]:
    stmts = [s if is_kernel(s) else map_bodies(s, lambda body: _merge(body, notes))
             for s in stmts]
    end = len(stmts)
    last_uses = _last_uses(stmts)
    blocks: list[Block] = []
    renamed: dict[str, ir.Expr] = {}
    removed: set[int] = set()
    for at, s in enumerate(stmts):
        if not (isinstance(s, ir.Alloc) and s.level == "grid" and isinstance(s.size, ir.Const)):
            continue
        if s.var.name not in last_uses:  # nothing uses it (its kernels now write elsewhere)
            note(notes, "unused", True, s.var.name, s.var.name, None,
                 "nothing uses it, so it is not allocated", s.span)
            removed.add(at)
            continue
        last = end if _named_whole(stmts, s.var.name) else last_uses[s.var.name]
        free = [b for b in blocks if b.last_use < at and b.alloc.var.type == s.var.type]
        if not free:
            blocks.append(Block(s, int(s.size.value), last, [s.var.name]))
            continue
        size = int(s.size.value)
        fitting = [b for b in free if b.size >= size]
        block = min(fitting, key=lambda b: b.size) if fitting else max(free, key=lambda b: b.size)
        note(notes, "merge", True, s.var.name, block.alloc.var.name, None,
             f"{', '.join(block.members)} last used before {s.var.name} is allocated"
             + at_line(stmts[block.last_use]), s.span)
        if block.size < size:
            block.alloc, block.size = replace(block.alloc, size=ir.Const(size, ir.INT)), size
        # The block holds each member in turn: the views name it by all of them.
        block.alloc = replace(block.alloc, label=ir.joined_label(block.alloc.label, s.label))
        block.members.append(s.var.name)
        block.last_use = last
        renamed[s.var.name] = block.alloc.var
        removed.add(at)
    if not removed:
        return stmts
    grown = {b.alloc.var.name: b.alloc for b in blocks}
    out = []
    for at, s in enumerate(stmts):
        if at in removed:
            continue
        if isinstance(s, ir.Alloc) and s.var.name in grown:
            s = grown[s.var.name]
        out.append(rebuild_stmt(s, renamed))
    return out


def _last_uses(stmts: list[ir.Stmt]) -> dict[str, int]:
    """The position of the last statement that mentions each variable."""
    last: dict[str, int] = {}
    for at, s in enumerate(stmts):
        for t in ir.walk([s]):
            for x in stmt_exprs(t):
                for name in names(x):
                    last[name] = at
    return last


def _named_whole(stmts: list[ir.Stmt], name: str) -> bool:
    """Whether a variable is made to name the array, or the program returns it."""
    for s in ir.walk(stmts):
        if isinstance(s, ir.Declare | ir.Assign) and isinstance(s.var.type, ir.ArrayType):
            named = s.init if isinstance(s, ir.Declare) else s.value
            if name in names(named):
                return True
        elif isinstance(s, ir.Result) and any(name in names(x) for x in stmt_exprs(s)):
            return True
    return False


