"""The `short-circuit` step: each copy kernel of the host program, in order, is made an alias or a
view of its source, has its parts built in its place (copies.py), or, a loop step changing a few
elements, writes them in place (updates.py, masked.py), the array it gathers them from built
where they go (scatter.py); where none applies, it stays as it is. Then a kernel that maps an
array nothing reads afterwards has its result built in that array's memory (inplace.py): the
short-circuit of a map. Inside kernels, a work-group's step changing some elements of a local
array writes them in place (local.py), as do the steps of a work-group's loop that each change a
moving band of one (waves.py)."""
from __future__ import annotations

from fcl.il import ir
from fcl.il.traverse import map_bodies
from fcl.memory.copies import alias, copy_kernel, is_kernel, short_circuit
from fcl.memory.decisions import Decision, Notes
from fcl.memory.inplace import in_place
from fcl.memory.local import local_updates
from fcl.memory.masked import masked_parts, update_masked
from fcl.memory.updates import update_in_place, update_loop_in_place
from fcl.memory.waves import wavefront_updates


def short_circuit_all(stmts: list[ir.Stmt], notes: Notes = None) -> list[ir.Stmt]:
    """The statements with each array that can be built in another's memory built there."""
    return in_place(remove_copies(wavefront_updates(local_updates(stmts)), notes), notes)


def remove_copies(stmts: list[ir.Stmt], notes: Notes = None) -> list[ir.Stmt]:
    """The statements with the copies that can go removed."""
    stmts = [s if is_kernel(s) else map_bodies(s, lambda body: remove_copies(body, notes))
             for s in stmts]
    p = 0
    while p < len(stmts):
        if copy_kernel(stmts[p]) is not None:
            tried: list[Decision] = []
            changed = alias(stmts, p, tried) or short_circuit(stmts, p, tried)
            if changed is not None:
                _keep(notes, tried)
                stmts = changed
                continue  # the same position holds the next statement
            attempts = len(tried)
            updated = update_in_place(stmts, p, tried)
            if updated is None and not any(d.kind == "update" for d in tried):
                updated = update_masked(stmts, p, tried)  # the elements changed are no range
            # A step updated in place was no copy to short-circuit: only what the update
            # decided is noted.
            _keep(notes, [d for d in tried[:attempts] if d.done or updated is None]
                  + tried[attempts:])
            if updated is not None:
                p += len(updated) - len(stmts)  # past the kernels writing in place
                stmts = updated
        elif masked_parts(stmts[p]) is not None:
            updated = update_masked(stmts, p, notes)
            if updated is not None:
                stmts = updated
        else:
            looped = update_loop_in_place(stmts, p, notes)
            if looped is not None:
                p += len(looped) - len(stmts)  # a declaration before the loop may have gone
                stmts = looped
        p += 1
    return stmts


def _keep(notes: Notes, decisions: list[Decision]) -> None:
    if notes is not None:
        notes.extend(decisions)
