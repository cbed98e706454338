"""Check that the host IL is well formed, so a pass that breaks it is caught where it does.

The checks are the invariants every later stage relies on: each variable is declared once;
it is used only where its declaration is visible; operators get operands of the types they
take; statements appear only where they can run (no barrier on the host, no host operation
inside parallel code); and a store into a global array of known length stays inside its memory
block where the indices it can take are known (the memory planner places arrays inside others:
a part at an offset, an update over a range). `Verifier` is extended by the kernel verifier
(fcl.codegen.verify) with the back end's own nodes, which this module does not know.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.il.dispatch import StmtVisitor
from fcl.il.ir import BOOL, DOUBLE, FLOAT, INT
from fcl.il.ranges import Ranges, interval
from fcl.il.simplify import linear, mk_bin, rebuild
from fcl.il.traverse import assigned, map_bodies, names

SCALARS = (INT, DOUBLE, FLOAT, BOOL)
NUMBERS = (INT, DOUBLE, FLOAT)
ARITHMETIC = frozenset(("+", "-", "*", "/", "min", "max"))  # on ints, doubles or floats
INT_ONLY = frozenset(("%", "&", "|", "^", "<<", ">>"))
LOGICAL = frozenset(("&&", "||"))
# Unary operator: {operand type: result type}, as fcl.il.builtins.UNARY and its FCL types say.
UNARY: dict[str, dict[ir.ILType, str]] = {
    "neg": {INT: INT, DOUBLE: DOUBLE, FLOAT: FLOAT},
    "abs": {INT: INT, DOUBLE: DOUBLE, FLOAT: FLOAT}, "not": {BOOL: BOOL}, "sign": {INT: INT},
    "clz": {INT: INT}, "i2d": {INT: DOUBLE},
    "d2i": {DOUBLE: INT}, "i2f": {INT: FLOAT}, "f2i": {FLOAT: INT}, "d2f": {DOUBLE: FLOAT},
    "f2d": {FLOAT: DOUBLE}, "b2i": {BOOL: INT}, "sqrt": {DOUBLE: DOUBLE, FLOAT: FLOAT}}
HINT = "this is a bug in FCL's compiler, not in your program: please report it"


def binary_type(op: str, left: ir.ILType, right: ir.ILType) -> ir.ILType | None:
    """The type of `left op right`, None if the operator does not take such operands (every
    operator's operands have one type: the builtins convert explicitly)."""
    if left != right:
        return None
    if (op in ARITHMETIC and left in NUMBERS) or (op in INT_ONLY and left == INT):
        return left
    if (op in ir.COMPARISONS and left in NUMBERS) or (op in LOGICAL and left == BOOL):
        return BOOL
    return None


@dataclass(frozen=True)
class Where:
    """What may run at a point of the program."""

    host: bool  # host code: printing, benchmarks, files and results may be here
    no_barrier: str | None  # why a barrier here would not be reached by a whole work-group


HOST = Where(True, "on the host")
BLOCK = Where(False, None)  # a work-group's code: its work-items run it in step
THREAD = Where(False, "in code each work-item runs on its own (a parallel loop's body)")


def verify(stage: str, stmts: list[ir.Stmt]) -> None:
    """Raise an internal FCLError at the first statement of the host IL that is not well formed
    after the stage `stage` (a pass's name)."""
    verifier = Verifier(stage)
    verifier.assigned = assigned(stmts)
    verifier.stmts(stmts, HOST)


class Verifier(StmtVisitor):
    """One walk in program order, keeping the declarations in scope."""

    def __init__(self, stage: str):
        self.stage = stage
        self.declared: set[str] = set()  # every name declared so far, in any scope
        self.visible: dict[str, ir.ILType] = {}  # the declarations in scope, with their types
        self.current: ir.Stmt | None = None  # the statement checked, for the error's location
        self.lengths: dict[str, int] = {}  # global arrays of known length
        self.ranges: Ranges = {}  # what the int variables declared so far can hold, if known
        # Int variables declared once and never assigned, with their values, and the bounds of
        # loops: a store's index bounded through them (see stored_range).
        self.values: dict[str, ir.Expr] = {}
        self.bounds: dict[str, ir.Expr] = {}
        self.guarded = False  # whether a check or a condition may stop a store running
        # Variables assigned after their declaration, whose ranges are not their initial
        # values'; None: not known, and stores are not checked.
        self.assigned: set[str] | None = None

    def fail(self, message: str, span: Span | None = None) -> NoReturn:
        """Stop at the statement being checked (else at `span`)."""
        s = self.current
        where = f" (in `{describe(s)}`)" if s is not None else ""
        raise FCLError(f"internal: the IL after {self.stage} is not well formed: {message}{where}",
                       s.span if s is not None else span, [HINT])

    # ---- scopes
    def declare(self, var: ir.Var) -> None:
        self.check_type(var.type, var.name)
        if var.name in self.declared:
            self.fail(f"`{var.name}` is declared twice")
        self.declared.add(var.name)
        self.visible[var.name] = var.type

    def block(self, stmts: list[ir.Stmt], where: Where, *loop_vars: ir.Var,
              guarded: bool = False) -> None:
        """A nested statement list (with a loop's variables): its declarations end with it, as
        does a check's guard inside it."""
        outer, outer_guard = dict(self.visible), self.guarded
        self.guarded = self.guarded or guarded
        for var in loop_vars:
            self.declare(var)
        self.stmts(stmts, where)
        self.visible, self.guarded = outer, outer_guard

    def use(self, var: ir.Var) -> ir.ILType:
        if var.name not in self.visible:
            if var.name in self.declared:
                self.fail(f"`{var.name}` is used outside the block that declares it")
            self.fail(f"`{var.name}` is used before it is declared (or never declared)")
        if self.visible[var.name] != var.type:
            self.fail(f"`{var.name}` is used as {ir.show_type(var.type)} but declared as "
                      f"{ir.show_type(self.visible[var.name])}")
        return var.type

    def check_type(self, t: object, what: str) -> None:
        if not (t in SCALARS or (isinstance(t, ir.ArrayType) and t.elem in SCALARS)):
            self.fail(f"{what} has no IL type: {t!r}")

    # ---- expressions
    def type_of(self, e: ir.Expr) -> ir.ILType:
        """e's type, once its variables are known to be visible and its operands to fit."""
        if isinstance(e, ir.Const):
            self.check_type(e.type, f"the constant {e.value!r}")
            return e.type
        if isinstance(e, ir.Var):
            return self.use(e)
        if isinstance(e, ir.Index):
            self.array(e.array)
            self.expect(e.index, INT, "an array index")
            return e.array.type.elem  # type: ignore[union-attr]
        if isinstance(e, ir.Bin):
            left, right = self.type_of(e.left), self.type_of(e.right)
            if binary_type(e.op, left, right) != e.type:
                self.fail(f"`{shown(e)}` applies `{e.op}` to {ir.show_type(left)} and "
                          f"{ir.show_type(right)} with result {e.type}")
            return e.type
        if isinstance(e, ir.Un):
            arg = self.type_of(e.arg)
            if UNARY.get(e.op, {}).get(arg) != e.type:
                self.fail(f"`{shown(e)}` applies `{e.op}` to {ir.show_type(arg)} with result "
                          f"{e.type}")
            return e.type
        if isinstance(e, ir.Select):
            self.expect(e.cond, BOOL, "a selection's condition")
            self.expect(e.then, e.type, "a selection's branch")
            self.expect(e.else_, e.type, "a selection's branch")
            return e.type
        return self.other_expr(e)

    def other_expr(self, e: ir.Expr) -> ir.ILType:
        """An expression of a later stage: none belongs in the IL (see the kernel verifier)."""
        self.fail(f"a {type(e).__name__} expression, which only kernels may contain")

    def expect(self, e: ir.Expr, t: ir.ILType, what: str) -> None:
        found = self.type_of(e)
        if found != t:
            self.fail(f"{what} (`{shown(e)}`) has type {ir.show_type(found)}, not "
                      f"{ir.show_type(t)}")

    def array(self, var: ir.Var) -> ir.ArrayType:
        if not isinstance(self.use(var), ir.ArrayType):
            self.fail(f"`{var.name}` is used as an array but has type {ir.show_type(var.type)}")
        return var.type  # type: ignore[return-value]

    # ---- statements
    def stmts(self, stmts: list[ir.Stmt], where: Where) -> None:
        for s in stmts:
            self.current = s
            self.stmt(s, where)

    def stmt(self, s: ir.Stmt, where: Where) -> None:
        self.visit(s, where)

    def visit_Declare(self, s: ir.Declare, where: Where) -> None:
        self.expect(s.init, s.var.type, f"the value of `{s.var.name}`")
        self.declare(s.var)
        self.known(s.var, s.init)

    def known(self, var: ir.Var, value: ir.Expr) -> None:
        """What a variable declared once can hold: its value's range, if known (an assigned
        variable is never recorded: its range is not its first value's)."""
        if self.assigned is None or var.name in self.assigned or var.type != INT:
            return
        self.values[var.name] = value
        found = interval(value, self.ranges)
        if found is not None:
            self.ranges[var.name] = found

    def visit_Assign(self, s: ir.Assign, where: Where) -> None:
        self.expect(s.value, self.use(s.var), f"the value assigned to `{s.var.name}`")

    def visit_Alloc(self, s: ir.Alloc, where: Where) -> None:
        self.expect(s.size, INT, "an allocation's size")
        if not isinstance(s.var.type, ir.ArrayType) or s.level not in ir.LEVELS:
            self.fail(f"`{s.var.name}` is allocated with type {ir.show_type(s.var.type)} "
                      f"at level {s.level}")
        self.allocate(s, where)

    def visit_Store(self, s: ir.Store, where: Where) -> None:
        elem = self.array(s.array).elem
        self.expect(s.index, INT, "an array index")
        self.expect(s.value, elem, f"a value stored into `{s.array.name}`")
        length = self.lengths.get(s.array.name)
        stored = self.stored_range(s.index, length) \
            if length is not None and not self.guarded and self.assigned is not None else None
        if stored is not None and length is not None \
                and (stored[0] < 0 or stored[1] >= length):
            self.fail(f"a store into `{s.array.name}` at indices {stored[0]}..{stored[1]}, "
                      f"outside its memory block of {length} elements")

    def stored_range(self, index: ir.Expr, length: int) -> tuple[int, int] | None:
        """Bounds on a store's index: its interval, narrowed where that leaves [0, length)
        through each loop variable it adds (`at = first + k` in `k < end - first`: below
        `end`), its value at the loop's first and last iteration with the declarations it
        depends on expanded."""
        found = interval(index, self.ranges)
        if found is None or not self.bounds or (found[0] >= 0 and found[1] < length):
            return found
        low, high = found
        expanded = self.expanded(index)
        terms, _ = linear(expanded)
        for atom, coef in terms.values():
            if coef <= 0 or not isinstance(atom, ir.Var) or atom.name not in self.bounds:
                continue
            first = interval(rebuild(expanded, {atom.name: ir.Const(0, INT)}), self.ranges)
            if first is not None:
                low = max(low, first[0])
            # The bound is one of its choices (a max's, a min's, a select's): the index is
            # below the highest of its values at each choice's last iteration.
            lasts = [interval(rebuild(expanded, {atom.name: mk_bin("-", choice, ir.Const(1, INT),
                                                                   INT)}), self.ranges)
                     for choice in _choices(self.expanded(self.bounds[atom.name]))]
            if all(last is not None for last in lasts):
                high = min(high, max(last[1] for last in lasts))  # type: ignore[index]
        return low, high

    def expanded(self, e: ir.Expr) -> ir.Expr:
        """e with the values of the declarations it depends on, a few deep."""
        for _ in range(8):
            again = rebuild(e, self.values)
            if ir.expr_key(again) == ir.expr_key(e):
                break
            e = again
        return e

    def visit_SeqFor(self, s: ir.SeqFor | ir.ParFor | ir.Distribute, where: Where) -> None:
        self.expect(s.bound, INT, "a loop's bound")
        self.expect_var(s.var, INT, "a loop's variable")
        bound = interval(s.bound, self.ranges)
        if bound is not None and bound[1] >= 1 and self.assigned is not None:
            self.ranges[s.var.name] = (0, bound[1] - 1)
        if self.assigned is not None and not names(s.bound) & self.assigned:
            self.bounds[s.var.name] = s.bound
        # A loop that never runs (a bound the optimizer found to be 0) has no stores to check.
        self.block(s.body, self.inside(s, where), s.var,
                   guarded=bound is not None and bound[1] < 1)

    visit_ParFor = visit_Distribute = visit_SeqFor

    def visit_While(self, s: ir.While, where: Where) -> None:
        # The test runs before each check of the condition, in the body's scope.
        outer = dict(self.visible)
        self.stmts(s.test, self.inside(s, where))
        self.current = s
        self.expect(s.cond, BOOL, "a while loop's condition")
        self.stmts(s.body, self.inside(s, where))
        self.visible = outer

    def visit_If(self, s: ir.If, where: Where) -> None:
        self.expect(s.cond, BOOL, "a condition")
        self.block(s.then, self.inside(s, where), guarded=True)
        self.block(s.else_, self.inside(s, where), guarded=True)

    def visit_Barrier(self, s: ir.Barrier, where: Where) -> None:
        if where.no_barrier is not None:
            self.fail(f"a barrier {where.no_barrier}")

    def visit_Fail(self, s: ir.Fail, where: Where) -> None:
        self.expect(s.cond, BOOL, "a check's condition")
        for value in s.values:
            self.type_of(value)
        self.guarded = True  # a store after it may run only where its condition fails

    def on_host(self, s: ir.Stmt, where: Where) -> None:
        if not where.host:
            self.fail(f"a host operation ({type(s).__name__}) inside parallel code")

    def visit_Print(self, s: ir.Print, where: Where) -> None:
        self.on_host(s, where)
        self.expect(s.count, INT, "the count of elements printed")
        self.array(s.array)

    def visit_Benchmark(self, s: ir.Benchmark, where: Where) -> None:
        self.on_host(s, where)
        self.expect(s.count, INT, "the count of benchmark runs")
        self.block(s.body, where)

    def visit_Input(self, s: ir.Input, where: Where) -> None:
        self.on_host(s, where)
        # The lowering declares an array's length, or a scalar, (0) first: the input sets it.
        if s.length is None:
            if isinstance(self.use(s.var), ir.ArrayType):
                self.fail(f"the array argument `{s.var.name}` has no length")
            return
        self.expect(s.length, INT, "the length of an input array")
        if not isinstance(s.var.type, ir.ArrayType):
            self.fail(f"`{s.var.name}` is an input array but has type "
                      f"{ir.show_type(s.var.type)}")
        if isinstance(s.source, str) and s.var.type != ir.ArrayType(INT):
            self.fail(f"`{s.var.name}` holds a CSV file's ints but has type "
                      f"{ir.show_type(s.var.type)}")
        self.declare(s.var)

    def visit_Result(self, s: ir.Result, where: Where) -> None:
        self.on_host(s, where)
        self.result(s.value)

    def expect_var(self, var: ir.Var, t: ir.ILType, what: str) -> None:
        if var.type != t:
            self.fail(f"{what} `{var.name}` has type {ir.show_type(var.type)}, not {t}")

    def allocate(self, s: ir.Alloc, where: Where) -> None:
        self.declare(s.var)
        if s.level == "grid" and isinstance(s.size, ir.Const):
            self.lengths[s.var.name] = int(s.size.value)

    def inside(self, s: ir.Stmt, where: Where) -> Where:
        """Where the statements nested in s run: a grid-level distribute gives each work-group
        an iteration (block code); other parallel loops give each work-item one."""
        if not isinstance(s, (ir.ParFor, ir.Distribute)):
            return where
        if s.level not in ir.LEVELS:
            self.fail(f"a parallel loop at level {s.level}")
        return BLOCK if isinstance(s, ir.Distribute) and s.level == "grid" else THREAD

    def result(self, value: object) -> None:
        if isinstance(value, ir.Expr):
            self.type_of(value)
        elif isinstance(value, ir.ArrayResult):
            self.array(value.array)
            self.expect(value.length, INT, "the length of a result array")
        elif isinstance(value, tuple):
            for part in value:
                self.result(part)
        elif value is not None:
            self.fail(f"a program result holds {value!r}")

    def visit_other(self, s: ir.Stmt, where: Where) -> None:
        """A statement of a later stage: none belongs in the IL (see the kernel verifier)."""
        self.fail(f"a {type(s).__name__} statement, which the IL does not have")


def shown(e: ir.Expr, limit: int = 80) -> str:
    text = ir.show_expr(e)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def describe(s: ir.Stmt, limit: int = 80) -> str:
    """The statement's first line (its head, for one with a body)."""
    try:
        text = ir.show_stmts([map_bodies(s, lambda _: [])]).strip().splitlines()[0]
    except (TypeError, AttributeError):  # a later stage's statement that does not print itself
        text = type(s).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _choices(e: ir.Expr) -> list[ir.Expr]:
    """The values e may take: a max's, a min's or a select's leaves."""
    if isinstance(e, ir.Bin) and e.op in ("max", "min"):
        return _choices(e.left) + _choices(e.right)
    if isinstance(e, ir.Select):
        return _choices(e.then) + _choices(e.else_)
    return [e]
