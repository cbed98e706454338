"""A serial kernel's reduction of a run of elements, regrouped into one loop in index order.

A tree reduction, as the thesis and `reduceWarp` write it, combines a work-group's elements in
pairs through local or private arrays. In a serial kernel (a CPU device) one work-item runs the
whole tree: the pairs' strided reads and the arrays between steps keep the C compiler from the
loop it vectorizes best, one accumulator over consecutive elements. On PoCL 3.1 the bench's
warp reduction took 2.9 times a work-item summing its 512 ints (bench/README.md,
"Reassociation").

This step runs what one iteration of the group loop computes on symbols: loops of known bounds
unrolled, the scratch arrays (private, local) followed element by element, each value either
an int known while compiling (or over the group's variables) or the combination of global
elements by one operation. When the iteration's only effect is to store, once, the combination
of a run of consecutive elements of one array, each taken once, by an operation on ints that is
associative and commutative (+ and * wrap; &, |, ^, min, max), the iteration becomes

    acc = identity; for t < L: acc = acc op x[first + t]; out[i] = acc

which equals the tree's result for every input: wrapping arithmetic is arithmetic modulo 2^32.
Anything else (a branch, a check that may fail, doubles, an element read twice) leaves the
kernel as it is.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from fcl.codegen.kernel import Kernel, LocalArray, group_body
from fcl.il import ir
from fcl.il.simplify import linear, mk_bin, rebuild
from fcl.il.traverse import expr_reads, stmt_exprs

IDENTITY = {"+": 0, "*": 1, "|": 0, "^": 0, "&": -1, "min": 2**31 - 1, "max": -2**31}
BUDGET = 50_000  # statements and leaves followed before giving up: compile time stays small


class _GiveUp(Exception):
    """The iteration is not one reduction of a run of elements."""


@dataclass(frozen=True)
class Known:
    """An int or bool known while compiling, or an expression over the group's variables."""
    expr: ir.Expr


Leaf = tuple[str, tuple[tuple[str, int], ...], int]


@dataclass
class Fold:
    """Global elements combined by `op` (None: a single element). An element is (array,
    the index's terms over the group's variables, its constant)."""
    op: str | None
    leaves: Counter[Leaf]
    where: dict[Leaf, ir.Index] = field(default_factory=dict)  # an element -> its index expression


Value = Known | Fold


def reassociate(kernel: Kernel) -> Kernel:
    """The serial kernel with its group iteration regrouped (see the module docstring); other
    kernels, and iterations that are not such a reduction, as they are."""
    if not kernel.serial or kernel.group_var is None:
        return kernel
    body, rewrap = group_body(kernel)
    scratch = {var.name for var, _ in kernel.private} | {a.var.name for a in kernel.locals} | {
        s.var.name for s in ir.walk(body) if isinstance(s, ir.Alloc)}
    if not _worth_following(body, scratch):
        return kernel
    try:
        found = _Follow(scratch).iteration(body)
    except _GiveUp:
        return kernel
    loop = _loop(found, _taken(kernel))
    used = {x.array.name for s in ir.walk(loop) for e in stmt_exprs(s) for x in expr_reads(e)}
    return replace(
        kernel, body=rewrap(loop),
        private=[(v, n) for v, n in kernel.private if v.name in used],
        locals=[a for a in kernel.locals if a.var.name in used],
        slots=[kept for slot in kernel.slots if (kept := _kept(slot, used))],
        notes=(*kernel.notes, f"each work-group's {found.op} of {found.length} elements is one "
                              "loop in index order (the operation is regrouped)"))


def _kept(slot: list[LocalArray], used: set[str]) -> list[LocalArray]:
    return [a for a in slot if a.var.name in used]


def _worth_following(body: list[ir.Stmt], scratch: set[str]) -> bool:
    """A cheap look first: one store outside the scratch arrays, some inside them, and only
    loops, stores and declarations."""
    outside = inside = 0
    for s in ir.walk(body):
        if isinstance(s, ir.Store):
            if s.array.name in scratch:
                inside += 1
            else:
                outside += 1
        elif not isinstance(s, (ir.SeqFor, ir.Declare, ir.Assign, ir.Alloc)):
            return False
    return outside == 1 and inside > 0


@dataclass(frozen=True)
class Reduction:
    array: ir.Var        # the global array stored to
    index: ir.Expr       # where
    op: str
    source: ir.Var       # the array whose run is combined
    first: ir.Expr       # the run's first element's index
    length: int


class _Follow:
    def __init__(self, scratch: set[str]):
        self.scratch = scratch
        self.env: dict[str, Value] = {}
        self.memory: dict[tuple[str, int], Value] = {}
        self.stored: list[tuple[ir.Var, ir.Expr, Value]] = []
        self.written: set[str] = set()
        self.spent = 0

    def iteration(self, body: list[ir.Stmt]) -> Reduction:
        self.run(body)
        if len(self.stored) != 1:
            raise _GiveUp
        ((array, index, value),) = self.stored
        if not isinstance(value, Fold) or value.op not in IDENTITY \
                or ir.elem_of(array) != ir.INT:
            raise _GiveUp
        sources = {leaf[:2] for leaf in value.leaves}
        if len(sources) != 1 or any(count != 1 for count in value.leaves.values()):
            raise _GiveUp
        ((source, _),) = sources
        if source in self.written:
            raise _GiveUp
        consts = sorted(leaf[2] for leaf in value.leaves)
        if consts != list(range(consts[0], consts[0] + len(consts))) or len(consts) < 2:
            raise _GiveUp
        first = min(value.leaves, key=lambda leaf: leaf[2])
        read = value.where[first]
        return Reduction(array, index, value.op, read.array, read.index, len(consts))

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
                value = s.init if isinstance(s, ir.Declare) else s.value
                self.env[s.var.name] = self.value(value)
            elif isinstance(s, ir.SeqFor):
                bound = self.known_int(s.bound)
                for k in range(bound):
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
        if not isinstance(index, Known) or self.stored:
            raise _GiveUp
        self.written.add(s.array.name)
        self.stored.append((s.array, index.expr, value))

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
            if not (isinstance(cond, Known) and isinstance(cond.expr, ir.Const)):
                raise _GiveUp
            return self.value(e.then if cond.expr.value else e.else_)
        if isinstance(e, ir.Bin):
            left, right = self.value(e.left), self.value(e.right)
            if isinstance(left, Known) and isinstance(right, Known):
                return Known(mk_bin(e.op, left.expr, right.expr, e.type))
            if e.type != ir.INT or e.op not in IDENTITY:
                raise _GiveUp
            return self.combine(e.op, left, right)
        if isinstance(e, ir.Un):
            arg = self.value(e.arg)
            if isinstance(arg, Known):
                return Known(rebuild(ir.Un(e.op, arg.expr, e.type), {}))
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
        terms, const = linear(index.expr)
        symbolic = tuple(sorted((key, coef) for key, (_, coef) in terms.items() if coef))
        leaf = (name, symbolic, const)
        self.spend()
        return Fold(None, Counter([leaf]), {leaf: ir.Index(e.array, index.expr)})

    def combine(self, op: str, left: Value, right: Value) -> Value:
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
            return parts[0]
        a, b = parts
        self.spend(len(a.leaves) + len(b.leaves))
        return Fold(op, a.leaves + b.leaves, {**a.where, **b.where})


def _taken(kernel: Kernel) -> set[str]:
    found: dict[str, ir.Var] = {}
    for s in ir.walk(kernel.body):
        for e in stmt_exprs(s, targets=True):
            ir.expr_vars(e, found)
    return set(found)


def _fresh(base: str, taken: set[str]) -> ir.Var:
    n = 0
    while f"{base}_{n}" in taken:
        n += 1
    taken.add(f"{base}_{n}")
    return ir.Var(f"{base}_{n}", ir.INT)


def _loop(found: Reduction, taken: set[str]) -> list[ir.Stmt]:
    acc, t = _fresh("folded", taken), _fresh("at", taken)
    element = ir.Index(found.source, mk_bin("+", found.first, t, ir.INT))
    return [ir.Declare(acc, ir.Const(IDENTITY[found.op], ir.INT)),
            ir.SeqFor(t, ir.Const(found.length, ir.INT),
                      [ir.Assign(acc, ir.Bin(found.op, acc, element, ir.INT))]),
            ir.Store(found.array, found.index, acc)]
