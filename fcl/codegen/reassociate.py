"""A serial kernel's reduction or scan of a run of elements, regrouped into one loop in index
order.

A tree reduction, as the thesis and `reduceWarp` write it, combines a work-group's elements in
pairs through local or private arrays; `scanWarp`'s Hillis-Steele steps combine each lane with
one 1, 2, 4, ... before it. In a serial kernel (a CPU device) one work-item runs the whole tree:
the pairs' strided reads and the arrays between steps keep the C compiler from the loop it
vectorizes best, one accumulator over consecutive elements. On PoCL 3.1 the bench's warp
reduction took 2.9 times a work-item summing its 512 ints (bench/README.md, "Reassociation").

This step runs what one iteration of the group loop computes on symbols: loops of known bounds
unrolled, the scratch arrays (private, local) followed element by element, each value either
an int known while compiling (or over the group's variables) or a run of consecutive elements
of one global array combined by one operation. It regroups an iteration whose only effect is

- a reduction: one store of a run's combination, or
- an inclusive scan: stores to consecutive elements, the k-th the combination of the run's
  first k + 1 elements,

by an operation on ints that is associative and commutative (+ and * wrap; &, |, ^, min,
max), each element taken once (a padded array's element `i < n ? x[i] : identity` counts as
x[i] below n), into

    acc = identity; for t < L: { acc = acc op x[first + t]; (out[at + t] = acc) } (out[i] = acc)

which computes what the tree does for every input: wrapping arithmetic is arithmetic modulo
2^32. Anything else (a branch, a check that may fail, doubles, an element taken twice) leaves
the kernel as it is.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from fcl.codegen.kernel import Kernel, LocalArray, group_body
from fcl.il import ir
from fcl.il.simplify import linear, mk_bin, rebuild
from fcl.il.traverse import expr_reads, fresh_var, mentioned, stmt_exprs

IDENTITY = {"+": 0, "*": 1, "|": 0, "^": 0, "&": -1, "min": 2**31 - 1, "max": -2**31}
MAX_SIZE = 64
BUDGET = 20_000  # statements and runs followed before giving up: 0.2 s at most


class _GiveUp(Exception):
    """The iteration is not one reduction or scan of a run of elements."""


@dataclass(frozen=True)
class Known:
    """An int or bool known while compiling, or an expression over the group's variables (of
    at most MAX_SIZE parts: a value growing with each iteration is no index)."""
    expr: ir.Expr
    size: int = 1


Terms = tuple[tuple[str, int], ...]  # an index's terms over the group's variables
Run = tuple[int, int, bool]  # start, stop, guarded


@dataclass(frozen=True)
class Fold:
    """Elements of one global array combined by `op` (None: a single element): those whose
    index is `terms` plus a constant in one of `runs` (half-open, disjoint, in order, none
    next to another of the same kind). `first` is the element at the first run's start. A
    guarded run's elements count only below `limit`, `pad` in their place from there on (a
    padded array's reads, `i < n ? x[i] : pad`)."""
    op: str | None
    array: str
    terms: Terms
    runs: tuple[Run, ...]
    first: ir.Index
    limit: ir.Expr | None = None
    pad: int | None = None


Value = Known | Fold


@dataclass(frozen=True)
class Regrouped:
    op: str
    first: ir.Index       # the run's first element
    parts: tuple[tuple[int, int, bool], ...]  # (offset, length, guarded) in order
    limit: ir.Expr | None  # the guarded parts' (see Fold)
    out: ir.Var           # the global array stored to
    at: ir.Expr           # where: the reduction's one element, or the scan's first

    @property
    def length(self) -> int:
        return sum(length for _, length, _ in self.parts)


def reassociate(kernel: Kernel) -> Kernel:
    """The serial kernel with its group iteration regrouped (see the module docstring); other
    kernels, and iterations that are neither a reduction nor a scan of a run, as they are."""
    if not kernel.serial or kernel.group_var is None:
        return kernel
    body, rewrap = group_body(kernel)
    scratch = {var.name for var, _ in kernel.private} | {a.var.name for a in kernel.locals} | {
        s.var.name for s in ir.walk(body) if isinstance(s, ir.Alloc)}
    if not _worth_following(body, scratch):
        return kernel
    follow = _Follow(scratch)
    try:
        follow.run(body)
        found, scan = follow.regrouped()
    except _GiveUp:
        return kernel
    loop = _loop(found, scan, mentioned(kernel.body))
    used = {x.array.name for s in ir.walk(loop) for e in stmt_exprs(s) for x in expr_reads(e)}
    what = "scan" if scan else "combination"
    return replace(
        kernel, body=rewrap(loop),
        private=[(v, n) for v, n in kernel.private if v.name in used],
        locals=[a for a in kernel.locals if a.var.name in used],
        slots=[kept for slot in kernel.slots if (kept := _kept(slot, used))],
        notes=(*kernel.notes, f"each work-group's {what} by {found.op} of {found.length} "
                              f"elements runs in index order, {_loops(found)} (the operation "
                              "regrouped)"))


def _loops(found: Regrouped) -> str:
    if len(found.parts) == 1:
        return "one loop"
    padded = sum(guarded for _, _, guarded in found.parts)
    return f"{len(found.parts)} loops ({padded} over a padded array's end)"


def _kept(slot: list[LocalArray], used: set[str]) -> list[LocalArray]:
    return [a for a in slot if a.var.name in used]


def _worth_following(body: list[ir.Stmt], scratch: set[str]) -> bool:
    """A cheap look first: stores inside the scratch arrays and outside, and only loops,
    stores and declarations."""
    outside = inside = 0
    for s in ir.walk(body):
        if isinstance(s, ir.Store):
            if s.array.name in scratch:
                inside += 1
            else:
                outside += 1
        elif not isinstance(s, (ir.SeqFor, ir.Declare, ir.Assign, ir.Alloc)):
            return False
    return outside > 0 and inside > 0


class _Follow:
    def __init__(self, scratch: set[str]):
        self.scratch = scratch
        self.env: dict[str, Value] = {}
        self.memory: dict[tuple[str, int], Value] = {}
        self.stored: dict[tuple[str, Terms, int], tuple[ir.Var, ir.Expr, Value]] = {}
        self.spent = 0

    def regrouped(self) -> tuple[Regrouped, bool]:
        """What the iteration stored, as a reduction (False) or a scan (True)."""
        stores = sorted(self.stored.items(), key=lambda item: item[0][2])
        folds = [value for _, (_, _, value) in stores if isinstance(value, Fold)]
        if len(folds) != len(stores) or len({key[:2] for key, _ in stores}) != 1:
            raise _GiveUp  # a value known, several arrays, or indices apart by a variable
        out, at, _ = stores[0][1]
        first, last = folds[0], folds[-1]
        op = next((f.op for f in folds if f.op is not None), None)
        start = first.runs[0][0]
        if op not in IDENTITY or ir.elem_of(out) != ir.INT or out.name == first.array or any(
                f.op not in (None, op) or (f.array, f.terms) != (first.array, first.terms)
                or _span(f.runs) != (start, f.runs[-1][1])
                or f.runs != _cut(last.runs, f.runs[-1][1])  # guarded alike in every fold
                or (f.pad is not None and f.pad != IDENTITY[op])
                for f in folds):
            raise _GiveUp
        parts = tuple((a - start, b - a, guarded) for a, b, guarded in last.runs)
        if len({ir.expr_key(f.limit) for f in folds if f.limit is not None}) > 1:
            raise _GiveUp
        found = Regrouped(op, first.first, parts, last.limit, out, at)
        if len(folds) == 1:
            if found.length < 2:
                raise _GiveUp
            return found, False
        # A scan: the k-th of consecutive elements holds the run's first k + 1.
        base = stores[0][0][2]
        for k, (((_, _, const), _), fold) in enumerate(zip(stores, folds)):
            if const != base + k or fold.runs[-1][1] != start + k + 1:
                raise _GiveUp
        return found, True

    def spend(self, amount: int = 1) -> None:
        self.spent += amount
        if self.spent > BUDGET:
            raise _GiveUp

    def run(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.spend()
            if isinstance(s, ir.Alloc):
                self.memory = {k: v for k, v in self.memory.items() if k[0] != s.var.name}
            elif isinstance(s, (ir.Declare, ir.Assign)):
                if isinstance(s.var.type, ir.ArrayType):
                    raise _GiveUp  # an alias: its reads would pass for a global array's
                self.env[s.var.name] = self.value(s.init if isinstance(s, ir.Declare)
                                                  else s.value)
            elif isinstance(s, ir.SeqFor):
                for k in range(self.known_int(s.bound)):
                    self.env[s.var.name] = Known(ir.Const(k, ir.INT))
                    self.run(s.body)
                self.env.pop(s.var.name, None)
            elif isinstance(s, ir.Store) and s.combine is None:
                self.store(s)
            else:
                raise _GiveUp

    def store(self, s: ir.Store) -> None:
        value = self.value(s.value)
        if s.array.name in self.scratch:
            self.memory[(s.array.name, self.known_int(s.index))] = value
            return
        index = self.value(s.index)
        if not isinstance(index, Known):
            raise _GiveUp
        terms, const = _split(index.expr)
        key = (s.array.name, terms, const)
        if key in self.stored:
            raise _GiveUp  # stored twice: only the last would count
        self.stored[key] = (s.array, index.expr, value)

    def known_int(self, e: ir.Expr) -> int:
        value = self.value(e)
        if not (isinstance(value, Known) and isinstance(value.expr, ir.Const)):
            raise _GiveUp
        return int(value.expr.value)

    def value(self, e: ir.Expr) -> Value:
        if isinstance(e, ir.Var):
            return self.env.get(e.name, Known(e))
        if isinstance(e, ir.Const):
            return Known(e)
        if isinstance(e, ir.Index):
            return self.element(e)
        if isinstance(e, ir.Select):
            cond = self.value(e.cond)
            if isinstance(cond, Known) and isinstance(cond.expr, ir.Const):
                return self.value(e.then if cond.expr.value else e.else_)
            return self.guarded(cond, self.value(e.then), self.value(e.else_))
        if isinstance(e, ir.Bin):
            left, right = self.value(e.left), self.value(e.right)
            if isinstance(left, Known) and isinstance(right, Known):
                made = mk_bin(e.op, left.expr, right.expr, e.type)
                if isinstance(made, ir.Const):
                    return Known(made)
                size = left.size + right.size + 1
                if size > MAX_SIZE:
                    raise _GiveUp
                return Known(made, size)
            if e.type != ir.INT or e.op not in IDENTITY:
                raise _GiveUp
            combined = _combine(e.op, left, right)
            if isinstance(combined, Fold):
                self.spend(len(combined.runs))
            return combined
        if isinstance(e, ir.Un):
            arg = self.value(e.arg)
            if isinstance(arg, Known):
                return Known(rebuild(ir.Un(e.op, arg.expr, e.type), {}), arg.size + 1)
        raise _GiveUp

    def element(self, e: ir.Index) -> Value:
        name = e.array.name
        if name in self.scratch:
            found = self.memory.get((name, self.known_int(e.index)))
            if found is None:
                raise _GiveUp
            return found
        index = self.value(e.index)
        if not isinstance(index, Known):
            raise _GiveUp
        terms, const = _split(index.expr)
        return Fold(None, name, terms, ((const, const + 1, False),),
                    ir.Index(e.array, index.expr))

    def guarded(self, cond: Value, then: Value, else_: Value) -> Fold:
        """`i < n ? x[i] : pad`, one element of a padded array."""
        if not (isinstance(cond, Known) and isinstance(cond.expr, ir.Bin)
                and cond.expr.op == "<" and isinstance(then, Fold) and then.op is None
                and isinstance(else_, Known) and isinstance(else_.expr, ir.Const)):
            raise _GiveUp
        index, limit = cond.expr.left, cond.expr.right
        if _split(index) != (then.terms, then.runs[0][0]) or next(expr_reads(limit), None):
            raise _GiveUp
        (start, stop, _), = then.runs
        return replace(then, runs=((start, stop, True),), limit=limit,
                       pad=int(else_.expr.value))


def _split(index: ir.Expr) -> tuple[Terms, int]:
    terms, const = linear(index)
    return tuple(sorted((key, coef) for key, (_, coef) in terms.items() if coef)), const


def _combine(op: str, left: Value, right: Value) -> Value:
    """Two runs of the same array, next to each other, combined by op."""
    parts = []
    for part in (left, right):
        if isinstance(part, Known):
            # The identity drops out (a padded run's neutral elements); nothing else may.
            if not (isinstance(part.expr, ir.Const) and part.expr.value == IDENTITY[op]):
                raise _GiveUp
            continue
        if part.op not in (None, op):
            raise _GiveUp
        parts.append(part)
    if len(parts) == 1:
        return replace(parts[0], op=op)
    a, b = sorted(parts, key=lambda f: f.runs[0])  # op is commutative
    if (a.array, a.terms) != (b.array, b.terms) or _differ(a.limit, b.limit, ir.expr_key) \
            or _differ(a.pad, b.pad, int):
        raise _GiveUp
    return Fold(op, a.array, a.terms, _merged(a.runs, b.runs), a.first,
                a.limit if a.limit is not None else b.limit, a.pad if a.pad is not None else b.pad)


def _differ(a, b, key) -> bool:
    """Whether both are given and differ (by key)."""
    return a is not None and b is not None and key(a) != key(b)


def _merged(a: tuple[Run, ...], b: tuple[Run, ...]) -> tuple[Run, ...]:
    """The runs of both, those of a kind next to each other joined; an element in both gives
    up."""
    out: list[Run] = []
    for start, stop, guarded in sorted(a + b):
        if out and start < out[-1][1]:
            raise _GiveUp  # an element taken twice
        if out and start == out[-1][1] and guarded == out[-1][2]:
            out[-1] = (out[-1][0], stop, guarded)
        else:
            out.append((start, stop, guarded))
    return tuple(out)


def _cut(runs: tuple[Run, ...], stop: int) -> tuple[Run, ...]:
    """The runs up to `stop`."""
    return tuple((a, min(b, stop), guarded) for a, b, guarded in runs if a < stop)


def _span(runs: tuple[Run, ...]) -> tuple[int, int] | None:
    """(start, stop) of runs that follow each other with no gap; None if there is one."""
    for (_, stop, _), (start, _, _) in itertools.pairwise(runs):
        if stop != start:
            return None
    return runs[0][0], runs[-1][1]


def _loop(found: Regrouped, scan: bool, taken: set[str]) -> list[ir.Stmt]:
    """One loop per part of the run (guarded or not), in order, into one accumulator."""
    acc = fresh_var("folded", ir.INT, taken)
    identity = ir.Const(IDENTITY[found.op], ir.INT)
    loops: list[ir.Stmt] = []
    for offset, length, guarded in found.parts:
        t = fresh_var("at", ir.INT, taken)
        at = mk_bin("+", t, ir.Const(offset, ir.INT), ir.INT)
        index = mk_bin("+", found.first.index, at, ir.INT)
        element: ir.Expr = ir.Index(found.first.array, index)
        if guarded:
            assert found.limit is not None
            element = ir.Select(ir.Bin("<", index, found.limit, ir.BOOL), element, identity,
                                ir.INT)
        step: list[ir.Stmt] = [ir.Assign(acc, ir.Bin(found.op, acc, element, ir.INT))]
        if scan:
            step.append(ir.Store(found.out, mk_bin("+", found.at, at, ir.INT), acc))
        loops.append(ir.SeqFor(t, ir.Const(length, ir.INT), step))
    return [ir.Declare(acc, identity), *loops,
            *([] if scan else [ir.Store(found.out, found.at, acc)])]
