"""Lowering: compile-time evaluation of a monomorphic FCL program into IL statements.

As in the original compiler, the program is *evaluated* at compile time over symbolic values:
scalars are IL expressions, functions are Python closures (so every function is inlined), pairs
and pull arrays exist only at compile time, and running a `Program` value emits statements.
Materialization points are exactly the `force`s (and loops and host builtins, which force).
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from fcl import checks, records
from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.env import Env
from fcl.errors import FCLError, Span
from fcl.il import ir, streams
from fcl.il.ranges import INT_MAX
from fcl.il.simplify import is_atomic, mk_bin, mk_un
from fcl.il.traverse import map_bodies, mentioned
from fcl.il.values import (
    ZERO,
    Closure,
    Interleave,
    MapPush,
    Prim,
    Prog,
    Pull,
    PushPull,
    SeqForPush,
    il_type,
    record_shape,
)
from fcl.mono import GRID, THREAD, MonoProgram
from fcl.prelude import PRELUDE_NAME
from fcl.syntax import ast
from fcl.types.types import (
    RT,
    TArrow,
    TCon,
    TPair,
    TProgram,
    TPull,
    TPush,
    TSeq,
    Type,
    chase,
    kind_of,
)

LEVELS = ir.LEVELS
UNROLL_LIMIT = 16  # loops known to stop within this many steps are unrolled


# What a builtin means at compile time: (lowerer, name, type, span) -> its value (fcl.il.builtins).
PrimitiveMaker = Callable[["Lowerer", str, Type, "Span | None"], object]


@dataclass
class Deferred:
    """Code whose making waits, so that later code of the same kind can join it (reductions
    over rows of one shape share their kernels: fcl.il.rows). It is made, at the end of the
    statements it belongs to (`home`), before the first statement there that is not a
    declaration or an allocation, before any statement naming one of the arrays it makes
    (`names`), and at the latest when `home` is complete."""
    make: Callable[[], None]
    names: set[str] = field(default_factory=set)
    owner: object = None  # what makes it, for code that would join it to recognise
    home: list[ir.Stmt] = field(default_factory=list)
    spans: list[Span | None] = field(default_factory=list)
    places: list[tuple[str, ir.Expr]] = field(default_factory=list)


class Lowerer:
    def __init__(self, primitive: PrimitiveMaker, block_size: int = BLOCK_SIZE,
                 checks: bool = True, warp_size: int = WARP_SIZE, flatten: bool = True):
        self.make_primitive = primitive
        # Irregular arrays flattened, their work shared out by elements (fcl.il.rows); off:
        # a work-item per row (`--no-flatten`, to compare).
        self.flatten = flatten
        self.irregular = False  # whether rows were lowered, flattened or not (fcl.il.rows)
        self.block_size, self.warp_size = block_size, warp_size
        self.checks = checks
        # The parallel loops around the code being lowered, innermost last, as (kind, index
        # variable): a failing check names where it happened by them (fcl.checks).
        self.places: list[tuple[str, ir.Expr]] = []
        self.blocks: list[list[ir.Stmt]] = [[]]
        self.spans: list[Span | None] = [None]
        self.globals: dict[str, object] = {}
        self.counter = 0
        # Positions `within` has checked, by identity: the position (kept alive) and the length.
        self.checked: dict[int, tuple[ir.Expr, ir.Expr]] = {}
        self.deferred: Deferred | None = None
        self.labels: dict[str, str] = {}  # array -> the FCL name bound to it (ir.Alloc.label)

    # ---- statements and names
    def fresh(self, base: str, t: ir.ILType) -> ir.Var:
        self.counter += 1
        base = "".join(ch if ch.isalnum() else "_" for ch in base).strip("_") or "v"
        return ir.Var(f"{base}_{self.counter}", t)

    def emit(self, stmt: ir.Stmt) -> None:
        if isinstance(stmt, ir.Fail) and isinstance(stmt.cond, ir.Const) and not stmt.cond.value:
            return
        if stmt.span is None:
            stmt.span = self.user_span()
            if isinstance(stmt, ir.Fail) and self.spans[-1] is not None \
                    and self.spans[-1].source.name == PRELUDE_NAME and stmt.span is not None \
                    and stmt.span.source.name != PRELUDE_NAME:
                stmt.inside = self.spans[-1]
        if self.deferred is not None and self._must_follow(stmt, self.deferred):
            self.make_deferred()
        self.blocks[-1].append(stmt)

    def emit_all(self, stmts: list[ir.Stmt]) -> None:
        for stmt in stmts:
            self.emit(stmt)

    def defer(self, deferred: Deferred) -> None:
        """Make `deferred` later (see Deferred), in the statements being written now; any code
        deferred before is made first."""
        if self.deferred is not None:
            self.make_deferred()
        deferred.home = self.blocks[-1]
        deferred.spans, deferred.places = list(self.spans), list(self.places)
        self.deferred = deferred

    def waiting(self) -> Deferred | None:
        """The deferred code that code written now could join: deferred in these statements."""
        d = self.deferred
        return d if d is not None and d.home is self.blocks[-1] else None

    def make_deferred(self) -> None:
        d, self.deferred = self.deferred, None
        if d is None:
            return
        spans, places = self.spans, self.places
        self.blocks.append(d.home)
        self.spans, self.places = d.spans, d.places
        try:
            d.make()
        finally:
            self.blocks.pop()
            self.spans, self.places = spans, places

    def _must_follow(self, stmt: ir.Stmt, d: Deferred) -> bool:
        return (self.blocks[-1] is d.home and not isinstance(stmt, (ir.Declare, ir.Alloc))) \
            or bool(mentioned([stmt]) & d.names)

    def user_span(self) -> Span | None:
        """The innermost source location in the user's code (not the prelude): generated code
        is attributed to the line the user wrote, e.g. the call of `concat`, not its body."""
        for span in reversed(self.spans):
            if span is not None and span.source.name != PRELUDE_NAME:
                return span
        return self.spans[-1]

    @contextmanager
    def capture(self):
        body: list[ir.Stmt] = []
        self.blocks.append(body)
        try:
            yield body
            if self.deferred is not None and self.deferred.home is body:
                self.make_deferred()
        finally:
            self.blocks.pop()

    @contextmanager
    def at(self, span: Span | None):
        self.spans.append(span if span is not None else self.spans[-1])
        try:
            yield
        finally:
            self.spans.pop()

    def declare(self, base: str, value: ir.Expr) -> ir.Expr:
        """value in a variable, unless it is cheap enough to repeat."""
        if is_atomic(value):
            return value
        var = self.fresh(base, ir.type_of(value))
        self.emit(ir.Declare(var, value))
        return var

    # ---- programs
    def lower(self, program: MonoProgram, keep_result: bool = False,
              entry: bool = False) -> list[ir.Stmt]:
        """The host program for the root (a `Program <grid>` value); with keep_result, it ends by
        handing the program's result to the host. An `entry` root is a function of arrays and
        scalars (fcl.python): it is applied to arguments the host gives (ir.Input), and its
        result, a program's or a pure value, is handed to the host."""
        for name, expr in program.defs:
            self.globals[name] = self.eval(expr, None)
        root = self.eval(program.root, None)
        result_type = chase(program.root.type)
        if entry:
            with self.at(program.root.span):
                position = 0
                while isinstance(result_type, TArrow):
                    argument = self.argument(position, result_type.arg)
                    if isinstance(root, Closure):  # the entry point's parameter names it
                        self.name_arrays(argument, root.param, root.body.span)
                    root = self.apply(root, argument)
                    result_type, position = chase(result_type.res), position + 1
        if isinstance(root, Prog):
            root = self.run(root)
            assert isinstance(result_type, TProgram)
            result_type = chase(result_type.result)
        elif not entry:
            self.make_deferred()
            return self.blocks[0]
        if keep_result or entry:
            with self.at(program.root.span):
                self.emit(ir.Result(self.result(root, result_type, forcing=entry)))
        self.make_deferred()
        return self.labelled(self.blocks[0])

    def labelled(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """The program with each array a `do` binds to a name labelled with it."""
        if not self.labels:
            return stmts
        def label(s: ir.Stmt) -> ir.Stmt:
            if isinstance(s, (ir.Alloc, ir.Input)) and s.var.name in self.labels:
                s = replace(s, label=self.labels[s.var.name])
            return map_bodies(s, lambda body: [label(t) for t in body])
        return [label(s) for s in stmts]

    def name_arrays(self, value, name: str, span: Span | None) -> None:
        """A forced array bound to `name` in the user's code (not the prelude's) takes it, as
        does an entry point's scalar argument."""
        if name == "_" or span is None or span.source.name == PRELUDE_NAME:
            return
        if isinstance(value, ir.Var):
            self.labels.setdefault(value.name, name)
        if not isinstance(value, Pull) or not value.arrays:
            return
        for k, array in enumerate(value.arrays):
            self.labels.setdefault(array.name, name if len(value.arrays) == 1 else f"{name}.{k}")

    def argument(self, position: int, t: Type):
        """The entry point's argument at `position`, set by the host: an array in global memory
        (its length too) or a scalar."""
        t = chase(t)
        if isinstance(t, TSeq):
            return streams.argument(position, il_type(t.elem))
        if isinstance(t, TPull) and isinstance(chase(t.elem), TPair):
            # An array of records: an array per field, of one length (fcl.python checks).
            shape = record_shape(t.elem)
            arrays = []
            for leaf, field in enumerate(records.leaves(shape, shape)):
                array = self.fresh("arg", ir.ArrayType(field))
                length = self.fresh("arglen", ir.INT)
                self.emit(ir.Declare(length, ir.Const(0, ir.INT)))
                self.emit(ir.Input(array, length, position, leaf=leaf))
                arrays.append((array, length))
            return Pull(arrays[0][1], lambda index: records.rebuild(
                shape, [ir.Index(array, index) for array, _ in arrays]),
                tuple(array for array, _ in arrays))
        if isinstance(t, TPull):
            array = self.fresh("arg", ir.ArrayType(il_type(t.elem)))
            length = self.fresh("arglen", ir.INT)
            self.emit(ir.Declare(length, ir.Const(0, ir.INT)))
            self.emit(ir.Input(array, length, position))
            return Pull(length, lambda index: ir.Index(array, index), (array,))
        kind = il_type(t)
        scalar = self.fresh("arg", kind)
        self.emit(ir.Declare(scalar, ir.Const(ZERO[kind], kind)))
        self.emit(ir.Input(scalar, None, position))
        return scalar

    def result(self, value, t: Type, forcing: bool = False):
        """A program result in a form the host can read: arrays in global memory. With
        `forcing` (an entry point's result) push arrays are forced there too."""
        t = chase(t)
        if forcing and isinstance(t, TPush):
            value, t = self.force(value, 2, record_shape(t.elem)), TPull(t.elem)
        if isinstance(value, ir.Expr):
            return self.declare("result", value)
        if isinstance(value, tuple) and value:
            assert isinstance(t, TPair)
            return tuple(self.result(v, u, forcing) for v, u in zip(value, (t.fst, t.snd)))
        if isinstance(value, Pull):
            assert isinstance(t, TPull)
            elem = chase(t.elem)
            if not isinstance(elem, (TCon, TPair)) or kind_of(elem) > RT:
                raise FCLError("only arrays of int, double, float or bool, or of records of them, "
                               f"can be shown; this array holds `{t.elem}`")
            shape = record_shape(elem)
            # An array already in memory is shown where it is: each field an array's elements.
            probe = records.leaves(shape, value.fn(ir.Var("probe", ir.INT)))
            if not all(isinstance(p, ir.Index) and isinstance(p.index, ir.Var)
                       and p.index.name == "probe" and isinstance(p.array.type, ir.ArrayType)
                       for p in probe):
                value = self.force(PushPull(2, value), 2, shape)
                probe = records.leaves(shape, value.fn(ir.Var("probe", ir.INT)))
            length = self.declare("len", value.length)
            return records.rebuild(shape, [ir.ArrayResult(p.array, length) for p in probe])
        if isinstance(value, (PushPull, Interleave, SeqForPush, MapPush)):
            raise FCLError("a push array cannot be shown before it is forced; bind the result of "
                           "`force` (or use forceAndPrint)")
        return None

    def run(self, prog: Prog):
        with self.at(prog.span):
            return prog.run()

    # ---- expressions
    def eval(self, e: ast.Expr, env: Env | None):
        if isinstance(e, ast.Lit):
            if isinstance(e.value, str):  # a string literal: a file name for readIntCSV
                return e.value
            return ir.Const(e.value, e.kind)
        if isinstance(e, ast.Var):
            if e.builtin:
                return self.primitive(e)
            if env is not None:
                try:
                    return env.lookup(e.name)
                except KeyError:
                    pass
            return self.globals[e.name]
        if isinstance(e, ast.App):
            fn = self.eval(e.fn, env)
            arg = self.eval(e.arg, env)
            with self.at(e.span):
                return self.apply(fn, arg)
        if isinstance(e, ast.Lam):
            return Closure(e.param, e.body, env)
        if isinstance(e, ast.Let):
            value = self.eval(e.value, env)
            if isinstance(value, ir.Expr):
                with self.at(e.span):
                    value = self.declare(e.name, value)
            return self.eval(e.body, Env(e.name, value, env))
        if isinstance(e, ast.Pair):
            return (self.eval(e.fst, env), self.eval(e.snd, env))
        if isinstance(e, ast.UnitLit):
            return ()
        if isinstance(e, ast.If):
            return self.eval_if(e, env)
        raise TypeError(e)  # pragma: no cover

    def apply(self, fn, arg):
        if isinstance(fn, Closure):
            return self.eval(fn.body, Env(fn.param, arg, fn.env))
        args = fn.args + (arg,)
        if len(args) == fn.arity:
            return fn.impl(*args)
        return Prim(fn.name, fn.arity, fn.impl, args)

    def eval_if(self, e: ast.If, env):
        cond = self.eval(e.cond, env)
        if isinstance(cond, ir.Const):
            return self.eval(e.then if cond.value else e.else_, env)
        with self.capture() as then_stmts:
            then_value = self.eval(e.then, env)
        with self.capture() as else_stmts:
            else_value = self.eval(e.else_, env)
        shape = record_shape(e.type)  # a base type, or a record's: a choice per field
        fields = records.leaves(shape, shape)
        thens, elses = records.leaves(shape, then_value), records.leaves(shape, else_value)
        if all(isinstance(s, ir.Fail) for s in then_stmts + else_stmts):
            # Only checks: each applies where its branch is taken, and the value is a
            # conditional expression, as without checks (the range analysis then sees the
            # condition next to what it guards: `if i >= 1 then index a (i - 1)`).
            not_cond = mk_un("not", cond, ir.BOOL)
            for guard, stmts in ((cond, then_stmts), (not_cond, else_stmts)):
                for s in stmts:
                    self.emit(replace(s, cond=mk_bin("&&", guard, s.cond, ir.BOOL)))
            if len(fields) > 1:
                cond = self.declare("cond", cond)
            return records.rebuild(shape, [ir.Select(cond, a, b, t)
                                           for a, b, t in zip(thens, elses, fields)])
        # A branch needed statements: run only the chosen one, as the source says.
        results = [self.fresh("branch", t) for t in fields]
        with self.at(e.span):
            for result, t in zip(results, fields):
                self.emit(ir.Declare(result, ir.Const(ZERO[t], t)))
            then_stmts += [ir.Assign(r, v, span=e.then.span) for r, v in zip(results, thens)]
            else_stmts += [ir.Assign(r, v, span=e.else_.span) for r, v in zip(results, elses)]
            self.emit(ir.If(cond, then_stmts, else_stmts))
        return records.rebuild(shape, list(results))

    # ---- run-time checks
    def fail(self, cond: ir.Expr, template: str, values: list[ir.Expr], hint: str = "") -> None:
        """A run-time check: fail with the message `template` filled with `values`, and with
        where it happened, when `cond` holds."""
        places = checks.innermost(self.places)
        kinds = tuple(kind for kind, _ in places)
        self.emit(ir.Fail(cond, template + checks.where(list(kinds)),
                          [*values, *(index for _, index in places)], hint=hint, places=kinds))

    @contextmanager
    def parallel(self, kind: str | None, index: ir.Var):
        """Code lowered inside runs in the parallel loop over `index` (of `kind`, None for a
        sequential loop)."""
        if kind is not None:
            self.places.append((kind, index))
        try:
            yield
        finally:
            if kind is not None:
                self.places.pop()

    def within(self, where: ir.Expr, length: ir.Expr, template: str, hint: str = "") -> ir.Expr:
        """`where`, checked to lie in [0, length) when checks are on. The failing work-item goes
        on (the host reports the failure after the kernel) with position 0 instead, rather than
        touch memory it may not (a crash on a CPU device)."""
        if not self.checks:
            return where
        checked = self.checked.get(id(where))
        if checked is not None and checked[0] is where and _within_length(checked[1], length):
            # Checked already against a length no longer than this one (`zipWith` indexes its
            # arrays at a position checked against the shorter one's length): were that check
            # to fail, its work-item would report that failure first, and only that.
            return where
        outside = out_of_bounds(where, length)
        self.fail(outside, template, [where, length], hint)
        if isinstance(outside, ir.Const):
            return ir.Const(0, ir.INT) if outside.value else where
        clamped = clamp(outside, where)
        self.checked[id(clamped)] = (clamped, length)
        return clamped

    # ---- arrays
    def index(self, array: Pull, i: ir.Expr):
        return array.fn(self.within(i, array.length, checks.INDEX))

    def length(self, array) -> ir.Expr:
        if isinstance(array, Pull):
            return array.length
        if isinstance(array, PushPull):
            return array.pull.length
        if isinstance(array, Interleave):
            size, count = array.size, array.programs.length
            if self.checks:
                # Without where it happened: the interpreter computes lengths anywhere.
                too_long = mk_bin("&&", mk_bin(">", size, ir.Const(0, ir.INT), ir.BOOL),
                                  mk_bin(">", count, mk_bin("/", ir.Const(INT_MAX, ir.INT), size,
                                                            ir.INT), ir.BOOL), ir.BOOL)
                with self.at(array.span):
                    self.emit(ir.Fail(too_long, checks.TOO_LONG, [count, size]))
            return mk_bin("*", size, count, ir.INT)
        if isinstance(array, SeqForPush):
            return array.size
        if isinstance(array, MapPush):
            return self.length(array.inner)
        raise TypeError(array)  # pragma: no cover

    def force(self, array, level: int, elem, warp: bool = False) -> Pull:
        """Materialize a push array in the memory of `level` (thesis rule 5.82); at the warp
        level, in the warp's memory (a thread-level array that its lanes may share). `elem` is
        the elements' IL type, or a record's shape (fcl.records): an array per field."""
        size = self.declare("len", self.length(array))
        if self.checks:
            self.fail(mk_bin("<", size, ir.Const(0, ir.INT), ir.BOOL), checks.NEGATIVE, [size])
        fields = records.leaves(elem, elem)
        if level == THREAD and not warp and isinstance(size, ir.Const) and size.value == 1:
            # A one-element thread-level array lives in registers.
            cells = [self.fresh("acc", field) for field in fields]
            for cell, field in zip(cells, fields):
                self.emit(ir.Declare(cell, ir.Const(ZERO[field], field)))
            self.force_to(array, lambda index, value: self.emit_all(
                [ir.Assign(cell, item) for cell, item in zip(cells, records.leaves(elem, value))]))
            return Pull(size, lambda index: records.rebuild(elem, list(cells)))
        buffers = [self.fresh("arr", ir.ArrayType(field)) for field in fields]
        for k, buffer in enumerate(buffers):
            record = (buffers[0].name, k, len(buffers)) if len(buffers) > 1 else None
            self.emit(ir.Alloc(buffer, size, LEVELS[level], record=record))
        self.force_to(array, lambda index, value: self.emit_all(
            [ir.Store(buffer, index, item)
             for buffer, item in zip(buffers, records.leaves(elem, value))]))
        return Pull(size, lambda index: records.rebuild(
            elem, [ir.Index(buffer, index) for buffer in buffers]), tuple(buffers))

    def force_to(self, array, write: Callable) -> None:
        """Emit the loops that write every element of a push array through `write`."""
        if isinstance(array, MapPush):
            self.force_to(array.inner, lambda index, value: write(
                index, self.apply(self.apply(array.fn, index), value)))
        elif isinstance(array, PushPull):
            i = self.fresh("i", ir.INT)
            with self.capture() as body, self.parallel(checks.PUSH_PLACES[array.level], i):
                write(i, array.pull.fn(i))
            if array.level == THREAD:
                self.emit(ir.SeqFor(i, array.pull.length, body, lanes=array.lanes))
            else:
                self.emit(ir.ParFor(LEVELS[array.level], i, array.pull.length, body))
        elif isinstance(array, Interleave):
            outer = self.fresh("b" if array.level >= GRID else "j", ir.INT)
            def place(index, value):
                # The element lands where the interleave's index function says: locate it there.
                with self.at(array.span):
                    where = self.apply(array.place, (outer, index))
                    write(self.within(where, self.length(array), checks.PLACED,
                                      checks.PLACED_HINT), value)
            kind = None if array.sequential else checks.INTERLEAVE_PLACES[array.level]
            with self.capture() as body, self.parallel(kind, outer):
                pushed = self.run(array.programs.fn(outer))
                if self.checks:
                    produced = self.length(pushed)
                    with self.at(array.span):
                        self.fail(mk_bin("!=", produced, array.size, ir.BOOL),
                                  checks.INNER_LENGTH, [produced, array.size],
                                  checks.INNER_LENGTH_HINT)
                self.force_to(pushed, place)
            with self.at(array.span):
                if array.sequential:
                    self.emit(ir.SeqFor(outer, array.programs.length, body))
                else:
                    self.emit(ir.Distribute(LEVELS[array.level], outer, array.programs.length,
                                            body, warp=array.warp))
        elif isinstance(array, SeqForPush):
            self.force_seqfor(array, write)
        else:
            raise TypeError(array)  # pragma: no cover

    def force_seqfor(self, array: SeqForPush, write: Callable) -> None:
        elem = array.elem  # an IL type, or a record's shape: each field in a cell or array
        fields = records.leaves(elem, elem)
        with self.at(array.span):
            if isinstance(array.size, ir.Const) and array.size.value == 1:
                cells = [self.fresh("acc", field) for field in fields]
                for cell, field in zip(cells, fields):
                    self.emit(ir.Declare(cell, ir.Const(ZERO[field], field)))

                def assign(value) -> None:
                    self.emit_all([ir.Assign(cell, item)
                                   for cell, item in zip(cells, records.leaves(elem, value))])
                if array.init is not None:
                    self.force_to(array.init, lambda _, value: assign(value))

                def accumulate(i):
                    read = Prim("read", 1, lambda k: records.rebuild(elem, list(cells)))
                    _, value = self.apply(self.apply(array.step, read), i)
                    assign(value)
                self.seq_loop(array.iterations, accumulate)
                write(ir.Const(0, ir.INT), records.rebuild(elem, list(cells)))
                return
            temps = [self.fresh("tmp", ir.ArrayType(field)) for field in fields]
            for temp in temps:
                self.emit(ir.Alloc(temp, array.size, "thread"))

            def put(i, value) -> None:
                self.emit_all([ir.Store(temp, i, item)
                               for temp, item in zip(temps, records.leaves(elem, value))])
            if array.init is not None:
                self.force_to(array.init, put)
            else:
                k = self.fresh("k", ir.INT)
                # Zeroed like the interpreter's, so reading an unwritten element is deterministic.
                self.emit(ir.SeqFor(k, array.size, [
                    ir.Store(temp, k, ir.Const(ZERO[field], field))
                    for temp, field in zip(temps, fields)]))
            stored = Pull(array.size, lambda index: records.rebuild(
                elem, [ir.Index(temp, index) for temp in temps]))
            read = Prim("read", 1, lambda index: self.index(stored, index))

            def store(i):
                index, value = self.apply(self.apply(array.step, read), i)
                put(self.within(index, array.size, checks.SEQFOR), value)
            self.seq_loop(array.iterations, store)
            out = self.fresh("k", ir.INT)
            with self.capture() as body:
                write(out, stored.fn(out))
            self.emit(ir.SeqFor(out, array.size, body))

    def seq_loop(self, iterations: ir.Expr, iteration: Callable[[ir.Expr], None]) -> None:
        """for i in [0, iterations): iteration(i). An iteration that tests whether i is 0 (as
        folds and scans do, to start from their initial value) has its first run peeled off:
        the loop then starts at 1, where the test is known (see passes.bound)."""
        i = self.fresh("it", ir.INT)
        with self.capture() as body:
            iteration(i)
        if not _compares_with_zero(body, i.name):
            self.emit(ir.SeqFor(i, iterations, body))
            return
        with self.capture() as peeled:
            iteration(ir.Const(0, ir.INT))
            rest = self.fresh("it", ir.INT)
            with self.capture() as body:
                iteration(mk_bin("+", rest, ir.Const(1, ir.INT), ir.INT))
            self.emit(ir.SeqFor(rest, mk_bin("-", iterations, ir.Const(1, ir.INT), ir.INT), body))
        if isinstance(iterations, ir.Const) and iterations.value >= 1:
            self.emit_all(peeled)
        else:
            self.emit(ir.If(mk_bin(">", iterations, ir.Const(0, ir.INT), ir.BOOL), peeled, []))

    def loop(self, level: int, elem, init: Prog, keep_going: Callable, step: Callable,
             span: Span | None, count: ir.Expr | None = None) -> Pull:
        """`while`, or `power` with its iteration `count`: double-buffered in the memory of
        `level`; never growing. `elem` is the elements' IL type or record shape (an array per
        field). A loop whose every test is known at compile time and that stops within
        UNROLL_LIMIT iterations is unrolled: each step then sees its array's length and
        iteration number as constants."""
        first = self.run(init)
        capacity = self.declare("capacity", self.length(first))
        types = [ir.ArrayType(field) for field in records.leaves(elem, elem)]
        front = [self.fresh("buf", array_t) for array_t in types]
        back = [self.fresh("buf", array_t) for array_t in types]
        for buffer in front + back:
            self.emit(ir.Alloc(buffer, capacity, LEVELS[level]))
        self.force_to(first, self.storing(front, elem))
        if not (isinstance(count, ir.Const) and count.value > UNROLL_LIMIT):
            with self.capture() as unrolled:
                final = self.unroll(front, back, elem, capacity, keep_going, step, span)
            if final is not None:
                self.emit_all(unrolled)
                return final
        current = [self.fresh("cur", array_t) for array_t in types]
        spare = [self.fresh("next", array_t) for array_t in types]
        self.emit_all([ir.Declare(v, buffer) for v, buffer in zip(current + spare, front + back)])
        counter = self.fresh("iter", ir.INT)
        go = self.fresh("go", ir.BOOL)

        def iteration(length: ir.Expr):
            state = self.reading(current, elem, length)
            with self.capture() as test:
                if count is None:
                    self.emit(ir.Assign(go, keep_going(state, counter)))
            with self.capture() as body:
                new_length = self.step_into(spare, elem, capacity, state, counter, step, span)
                for now, next_ in zip(current, spare):
                    swap = self.fresh("swap", now.type)
                    self.emit(ir.Declare(swap, now))
                    self.emit(ir.Assign(now, next_))
                    self.emit(ir.Assign(next_, swap))
            return state, test, body, new_length

        # Most loops keep their array's length: then it stays a constant, not a variable.
        if isinstance(capacity, ir.Const):
            state, test, body, new_length = iteration(capacity)
        if not (isinstance(capacity, ir.Const) and isinstance(new_length, ir.Const)
                and new_length.value == capacity.value):
            length = self.fresh("len", ir.INT)
            self.emit(ir.Declare(length, capacity))
            state, test, body, new_length = iteration(length)
            body.append(ir.Assign(length, new_length))
        if count is not None:
            self.emit(ir.SeqFor(counter, count, body))
            return state
        self.emit(ir.Declare(counter, ir.Const(0, ir.INT)))
        self.emit(ir.Declare(go, ir.Const(False, ir.BOOL)))
        body.append(ir.Assign(counter, mk_bin("+", counter, ir.Const(1, ir.INT), ir.INT)))
        self.emit(ir.While(test, go, body))
        return state

    def storing(self, buffers: list[ir.Var], elem) -> Callable:
        """A `write` for force_to: each field of an element into its buffer."""
        return lambda index, value: self.emit_all(
            [ir.Store(buffer, index, item)
             for buffer, item in zip(buffers, records.leaves(elem, value))])

    @staticmethod
    def reading(buffers: list[ir.Var], elem, length: ir.Expr) -> Pull:
        """The array of `length` records whose fields lie in `buffers`."""
        return Pull(length, lambda index: records.rebuild(
            elem, [ir.Index(buffer, index) for buffer in buffers]), tuple(buffers))

    def step_into(self, target: list[ir.Var], elem, capacity: ir.Expr, state: Pull,
                  counter: ir.Expr, step: Callable, span: Span | None) -> ir.Expr:
        """Run one loop step on `state`, writing its result to `target`; its length."""
        pushed = self.run(step(state, counter))
        new_length = self.declare("newlen", self.length(pushed))
        with self.at(span):
            self.fail(mk_bin(">", new_length, capacity, ir.BOOL), checks.GROWN,
                      [new_length, capacity])
        self.force_to(pushed, self.storing(target, elem))
        return new_length

    def unroll(self, current: list[ir.Var], spare: list[ir.Var], elem, capacity: ir.Expr,
               keep_going: Callable, step: Callable, span: Span | None) -> Pull | None:
        """The loop's final state, its steps emitted one after another, if every test folds to a
        constant (with no statements left to run) and it stops within UNROLL_LIMIT steps."""
        length = capacity
        for k in range(UNROLL_LIMIT + 1):
            state = self.reading(current, elem, length)
            with self.capture() as test:
                go = keep_going(state, ir.Const(k, ir.INT))
            if not isinstance(go, ir.Const) or not all(isinstance(s, ir.Declare) for s in test):
                return None
            if not go.value:
                return state
            if k == UNROLL_LIMIT:
                return None
            length = self.step_into(spare, elem, capacity, state, ir.Const(k, ir.INT), step, span)
            current, spare = spare, current
        return None

    # ---- builtins
    def primitive(self, var: ast.Var):
        return self.make_primitive(self, var.name, var.type, var.span)


def out_of_bounds(where: ir.Expr, length: ir.Expr) -> ir.Expr:
    """The condition of `within`'s check: `where` outside [0, length)."""
    return mk_bin("||", mk_bin("<", where, ir.Const(0, ir.INT), ir.BOOL),
                  mk_bin(">=", where, length, ir.BOOL), ir.BOOL)


def clamp(outside: ir.Expr, where: ir.Expr) -> ir.Expr:
    """`within`'s checked index: position 0 where the check fails."""
    return ir.Select(outside, ir.Const(0, ir.INT), where, ir.INT)


def clamp_parts(e: ir.Expr) -> tuple[ir.Expr, ir.Expr] | None:
    """(outside, where) of an index `clamp` made, else None."""
    if isinstance(e, ir.Select) and isinstance(e.then, ir.Const) and e.then.value == 0:
        return e.cond, e.else_
    return None


def _compares_with_zero(stmts: list[ir.Stmt], name: str) -> bool:
    """Whether some expression of the statements compares the variable `name` with 0."""
    def found(e) -> bool:
        if isinstance(e, ir.Bin) and e.op in ir.COMPARISONS:
            sides = (e.left, e.right)
            if any(isinstance(x, ir.Var) and x.name == name for x in sides) and \
                    any(isinstance(x, ir.Const) and x.value == 0 for x in sides):
                return True
        return isinstance(e, ir.Expr) and any(found(getattr(e, name))
                                              for name in ir.field_names(e))
    return any(found(getattr(s, name)) for s in ir.walk(stmts) for name in ir.field_names(s))


def _within_length(shorter: ir.Expr, length: ir.Expr) -> bool:
    """Whether `shorter` is `length`, or the `min` of it and something else."""
    key = ir.expr_key(length)
    return ir.expr_key(shorter) == key or (
        isinstance(shorter, ir.Bin) and shorter.op == "min"
        and key in (ir.expr_key(shorter.left), ir.expr_key(shorter.right)))
