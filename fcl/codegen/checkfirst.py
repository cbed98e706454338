"""A loop's checks made first, in a loop of their own, on a CPU (the `checks-first` step).

A check inside a loop ends with a branch out of the kernel when it fails, which keeps the C
compiler from vectorizing the loop: the sparse product's loop over a row checks each element's
column against the vector's length, and on PoCL 3.1 it took 1.3-1.6 times the unchecked loop
(bench/README.md, "Checks first"). Where the checks lead the loop's body, the loop becomes

    failing = n < MIN_TRIPS;
    if (!failing) for k < n: { declarations; failing |= (check 1 || check 2 ...); }
    if (failing) { the loop as it was } else { the loop without its checks }

The first loop has no exit, so it vectorizes; when a check fails the loop runs as before and
fails where it failed, reporting the same values, and when none does the loop without checks
computes what the loop computed. The first loop evaluates each iteration's checks whatever the
earlier ones found, which is safe when they read only arrays the kernel never writes and use no
variable the loop changes: a read before a loop's first check happens in every iteration, so
the compiler has already proven its index for all of them (checks guard the rest, and `||`
keeps a later check behind an earlier one as in the loop).
"""
from __future__ import annotations

from dataclasses import replace

from fcl.codegen.kernel import FailFlag, Kernel
from fcl.codegen.serial import renamed
from fcl.il import ir
from fcl.il.traverse import assigned, expr_reads, fresh_var, map_bodies, mentioned, names

MIN_TRIPS = 32  # shorter loops keep their checks (16 and 64 measured no better)


def checks_first(kernel: Kernel) -> Kernel:
    """The kernel with each loop whose checks lead its body split as above."""
    written = {s.array.name for s in ir.walk(kernel.body) if isinstance(s, ir.Store)}
    taken = mentioned(kernel.body)
    split_any = False

    def block(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        nonlocal split_any
        out: list[ir.Stmt] = []
        for s in stmts:
            split = _split(s, written, taken) if isinstance(s, ir.SeqFor) else None
            split_any |= split is not None
            out += split if split is not None else [map_bodies(s, block)]
        return out
    body = block(kernel.body)
    return replace(kernel, body=body) if split_any else kernel


def _split(loop: ir.SeqFor, written: set[str], taken: set[str]) -> list[ir.Stmt] | None:
    body = loop.body
    if not all(isinstance(s, (ir.Declare, ir.Assign, ir.Store, FailFlag)) for s in body):
        return None  # nested loops or branches: left as they are
    first = next((k for k, s in enumerate(body) if not isinstance(s, ir.Declare)), len(body))
    last = first
    while last < len(body) and isinstance(body[last], FailFlag):
        last += 1
    if last == first or any(isinstance(s, FailFlag) for s in body[last:]):
        return None
    leading, checks = body[:first], body[first:last]
    changed = assigned(body) | {s.var.name for s in body[first:] if isinstance(s, ir.Declare)}
    conds = [s.cond for s in checks if isinstance(s, FailFlag)]
    inits = [s.init for s in leading if isinstance(s, ir.Declare)]
    changed -= {s.var.name for s in leading if isinstance(s, ir.Declare)}
    for e in inits + conds:
        if names(e) & changed or any(read.array.name in written for read in expr_reads(e)):
            return None
    failing = fresh_var("failing", ir.INT, taken)
    any_fails = conds[0]
    for cond in conds[1:]:
        any_fails = ir.Bin("||", any_fails, cond, ir.BOOL)
    flag = ir.Select(any_fails, ir.Const(1, ir.INT), ir.Const(0, ir.INT), ir.INT)
    # The copies declare names of their own (the IL declares each name once).
    (first_pass,) = renamed([replace(loop, body=[*leading, ir.Assign(failing, ir.Bin(
        "|", failing, flag, ir.INT))])], "_first")
    (unchecked,) = renamed([replace(loop, body=[*leading, *body[last:]])], "_unchecked")
    # A short loop keeps its checks: its first pass would cost more than it saves.
    short = ir.Bin("<", loop.bound, ir.Const(MIN_TRIPS, ir.INT), ir.BOOL)
    return [ir.Declare(failing, ir.Select(short, ir.Const(1, ir.INT), ir.Const(0, ir.INT),
                                          ir.INT), span=loop.span),
            ir.If(ir.Bin("==", failing, ir.Const(0, ir.INT), ir.BOOL), [first_pass], [],
                  span=loop.span),
            ir.If(ir.Bin("!=", failing, ir.Const(0, ir.INT), ir.BOOL), [loop], [unchecked],
                  span=loop.span)]
