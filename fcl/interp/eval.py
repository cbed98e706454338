"""The reference interpreter: evaluates a monomorphic FCL program by the thesis's semantics.

Every expression is evaluated in a lane context, all lanes in lockstep (see lanes.py). `if`
evaluates each branch only in the lanes that take it, so a branch that would fail (an index out
of bounds, a division by zero) fails only where it actually runs.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from fcl import checks, records
from fcl.deep import depth_guard
from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.env import Env
from fcl.errors import FCLError, Span
from fcl.hostio import Writer
from fcl.il import ir
from fcl.interp.faults import Faults, in_parallel_code
from fcl.interp.lanes import (
    MAX_ELEMENTS,
    Ctx,
    Vec,
    elementwise,
    lift,
    lift_full,
    restrict,
    too_large,
)
from fcl.interp.prims import make_primitive
from fcl.interp.values import (
    UNIT,
    Buffer,
    Closure,
    Program,
    PushArray,
    RecordBuffer,
    check,
    locate_in_user_code,
    record_dtype,
)
from fcl.mono import MonoProgram
from fcl.prelude import PRELUDE_NAME
from fcl.syntax import ast


@dataclass
class RunConfig:
    block_size: int = BLOCK_SIZE
    out: Writer = field(default_factory=lambda: sys.stdout)
    err: Writer = field(default_factory=lambda: sys.stderr)
    warp_size: int = WARP_SIZE


class Interpreter:
    def __init__(self, config: RunConfig | None = None):
        self.config = config or RunConfig()
        self.globals: dict[str, object] = {}
        self.faults = Faults()
        self.host = Ctx(1)
        self.host.faults = self.faults
        self.outputs = 0  # host outputs so far (prints, benchmark reports)
        # The user's applications being evaluated, innermost last: a program built inside a
        # prelude function remembers the user's call, to report its run-time errors there.
        self.user_calls: list[Span] = []

    # ---- programs
    def run(self, program: MonoProgram, arguments: list | None = None):
        """Evaluate the definitions, then the root; apply it to `arguments` if given (an entry
        point's, fcl.python); run it if it is a Program."""
        with np.errstate(all="ignore"), depth_guard(program.root.span,
                                                    "the program is nested too deeply to run"):
            for name, expr in program.defs:
                self.globals[name] = self.eval(expr, None, self.host)
            value = self.eval(program.root, None, self.host)
            for argument in arguments or []:
                value = self.apply(value, argument, self.host, program.root.span)
            if isinstance(value, Program):
                value = value.run(self.host, self)
            self.faults.raise_first()
            return value

    # ---- expressions
    def eval(self, e: ast.Expr, env: Env | None, ctx: Ctx):
        if isinstance(e, ast.Lit):
            return e.value if e.kind == "string" else ir.NUMPY_TYPES[e.kind](e.value)
        if isinstance(e, ast.Var):
            if e.builtin:
                return make_primitive(e.name, e.type, e.span, self)
            try:
                return env.lookup(e.name) if env is not None else self.globals[e.name]
            except KeyError:
                return self.globals[e.name]
        if isinstance(e, ast.App):
            user = e.span.source.name != PRELUDE_NAME
            if user:
                self.user_calls.append(e.span)
                self.faults.calls.append(e.span)
            try:
                fn = self.eval(e.fn, env, ctx)
                return self.apply(fn, self.eval(e.arg, env, ctx), ctx, e.span)
            except FCLError as err:
                locate_in_user_code(err, e.span)
                raise
            finally:
                if user:
                    self.user_calls.pop()
                    self.faults.calls.pop()
        if isinstance(e, ast.Lam):
            return Closure(e.param, e.body, env)
        if isinstance(e, ast.Let):
            return self.eval(e.body, Env(e.name, self.eval(e.value, env, ctx), env), ctx)
        if isinstance(e, ast.Pair):
            return (self.eval(e.fst, env, ctx), self.eval(e.snd, env, ctx))
        if isinstance(e, ast.UnitLit):
            return UNIT
        if isinstance(e, ast.If):
            return self.eval_if(e, env, ctx)
        raise TypeError(e)  # pragma: no cover

    def apply(self, fn, arg, ctx: Ctx, span: Span | None):
        if isinstance(fn, Closure):
            return self.eval(fn.body, Env(fn.param, arg, fn.env), ctx)
        return fn.apply(arg, ctx, span)

    def eval_if(self, e: ast.If, env, ctx: Ctx):
        cond = self.eval(e.cond, env, ctx)
        if not isinstance(cond, Vec):
            return self.eval(e.then if cond else e.else_, env, ctx)
        mask = lift(cond, ctx)
        assert isinstance(mask, np.ndarray)  # cond is a Vec
        if mask.all():
            return self.eval(e.then, env, ctx)
        if not mask.any():
            return self.eval(e.else_, env, ctx)
        dtype = record_dtype(e.type)
        dtypes = records.leaves(dtype, dtype)
        outs = [np.empty(ctx.n, dtype=leaf) for leaf in dtypes]
        for branch, lanes_mask in ((e.then, mask), (e.else_, ~mask)):
            lanes, idx = restrict(ctx, lanes_mask)
            items = records.leaves(dtype, self.eval(branch, env, lanes))
            for out, leaf, item in zip(outs, dtypes, items, strict=True):
                out[idx] = lift_full(item, lanes, leaf)
        return records.rebuild(dtype, [Vec(ctx, out) for out in outs])

    # ---- memory
    def restrict(self, ctx: Ctx, mask: np.ndarray) -> tuple[Ctx, np.ndarray]:
        return restrict(ctx, mask)

    def allocate(self, ctx: Ctx, length, dtype, span: Span | None = None):
        """A zeroed buffer holding `length` elements for every lane of ctx."""
        lengths = lift(length, ctx)
        if isinstance(lengths, np.ndarray):
            lengths = lengths.astype(np.int64)
            total = int(lengths.sum())
            offsets = np.cumsum(lengths) - lengths
        else:
            total = int(lengths) * ctx.n
            offsets = np.arange(ctx.n, dtype=np.int64) * int(lengths)
        if total > MAX_ELEMENTS:
            raise too_large(total, span)
        # One lane (the host) gets a plain offset; no lanes get an empty per-lane one.
        offset = np.int64(offsets[0]) if ctx.n == 1 else Vec(ctx, offsets)
        return np.zeros(total, dtype=dtype), offset, length

    def force(self, array: PushArray, ctx: Ctx, dtype, span: Span | None) -> Buffer:
        """Materialize a push array in every lane of ctx (thesis rule 5.82)."""
        length = array.length()
        failed = check(ctx, elementwise(lambda n: n < 0, length, ctx=ctx), checks.NEGATIVE,
                       (length,), span)
        stopped = self.faults.stopped(ctx)
        skip = failed if stopped is None else stopped if failed is None else failed | stopped
        if skip is None or not skip.any():
            buffer = self._materialize(array, ctx, dtype, span)
        else:  # lanes that failed, or whose work-group stopped, get an empty array
            lanes, idx = restrict(ctx, ~skip)
            written = self._materialize(array, lanes, dtype, span)
            offset, length = np.zeros(ctx.n, dtype=np.int64), np.zeros(ctx.n, dtype=np.int32)
            offset[idx] = lift_full(written.offset, lanes, np.int64)
            length[idx] = lift_full(written.length, lanes, np.int32)
            fields = written.fields if isinstance(written, RecordBuffer) else [written]
            spread = [Buffer(f.data, Vec(ctx, offset), Vec(ctx, length)) for f in fields]
            buffer = RecordBuffer(written.shape, spread) \
                if isinstance(written, RecordBuffer) else spread[0]
        # A force outside work-items is a barrier, or at grid level the end of a kernel launch.
        if not in_parallel_code(ctx, work_items=True):
            self.faults.end_round()
            if not in_parallel_code(ctx):
                self.faults.raise_first()
        return buffer

    def _materialize(self, array: PushArray, ctx: Ctx, dtype, span: Span | None):
        """The array's elements in memory: a Buffer, or for records (a nested tuple of
        dtypes) a RecordBuffer, a Buffer per field."""
        dtypes = records.leaves(dtype, dtype)
        allocated = [self.allocate(ctx, array.length(), leaf, span) for leaf in dtypes]
        _, offset, length = allocated[0]
        try:
            for lanes, pos, value in array.emit(ctx, self):
                where = lift_full(pos, lanes, np.int64) + lift_full(offset, lanes, np.int64)
                for (data, _, _), leaf, item in zip(allocated, dtypes,
                                                    records.leaves(dtype, value), strict=True):
                    data[where] = lift_full(item, lanes, leaf)
        except FCLError as err:
            if err.span is None:  # a loop too large to run (lanes.too_large) is located here
                err.span = span
            raise
        buffers = [Buffer(data, offset, length) for data, _, _ in allocated]
        return RecordBuffer(dtype, buffers) if isinstance(dtype, tuple) else buffers[0]
