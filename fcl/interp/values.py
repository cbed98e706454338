"""Runtime values of the reference interpreter (thesis §5.3.3).

Pull arrays are a length and an index function; push arrays are delayed iteration schemes that
`emit` their elements as (lanes, position, value) chunks when forced; programs are delayed
computations run in a lane context. Scalars are uniform numpy scalars or per-lane `Vec`s.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from fcl import checks, records
from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.interp.faults import failure_at, in_parallel_code, locate_in_user_code
from fcl.interp.lanes import Ctx, Vec, deepest, elementwise, expand, lift, lift_full
from fcl.mono import GRID
from fcl.types.types import TCon, TPair, Type, chase


def dtype_of(t: Type):
    t = chase(t)
    return ir.NUMPY_TYPES.get(t.name, np.int32) if isinstance(t, TCon) else np.int32


def record_dtype(t: Type):
    """A record type's numpy dtypes, nested as its pairs are: a base type's dtype, or a pair of
    them (docs/language.md, "Records")."""
    t = chase(t)
    if isinstance(t, TPair):
        return (record_dtype(t.fst), record_dtype(t.snd))
    return dtype_of(t)

def check(ctx: Ctx, failed, template: str, values: tuple, span: Span | None,
          hint: str = "") -> np.ndarray | None:
    """A run-time check: where `failed` holds, the error `template` (fcl.checks) with the
    failing lane's `values` and the parallel loops it runs in. In parallel code the failure is
    recorded (see faults) and the lanes where it failed are returned, to go on with harmless
    values; elsewhere it is raised. A failure in no lane (ctx may have none) is no failure: the
    code does not run."""
    if not (failed.data.any() if isinstance(failed, Vec) else failed) or ctx.n == 0:
        return None
    mask = lift(failed, ctx)
    if not isinstance(mask, np.ndarray):
        mask = np.ones(ctx.n, dtype=bool)
    elif not mask.any():
        return None
    faults = ctx.root().faults
    if faults is None or not in_parallel_code(ctx):
        raise failure_at(ctx, int(np.argmax(mask)), [lift(v, ctx) for v in values], template,
                         span, hint)
    faults.record(ctx, mask, template, values, span, hint)
    return mask


def where_failed(value, failed: np.ndarray | None, harmless, ctx: Ctx):
    """`value` with `harmless` in the lanes of ctx that failed a check."""
    if failed is None:
        return value
    data = lift_full(value, ctx, np.asarray(value.data if isinstance(value, Vec) else value).dtype)
    return Vec(ctx, np.where(failed, harmless, data).astype(data.dtype))


# ---- pull arrays -------------------------------------------------------------------------------

class PullArray:
    def __init__(self, length, fn: Callable):
        self.length = length
        self.fn = fn  # fn(index, ctx) -> value

    def index(self, i, ctx: Ctx, span: Span | None):
        if isinstance(i, Vec) and not isinstance(self.length, Vec):
            # The common case, checked with two reductions instead of a mask over all lanes.
            lanes = elementwise(lambda i: i, i, ctx=ctx).data
            if lanes.size == 0 or (lanes.min() >= 0 and lanes.max() < self.length):
                return self.fn(i, ctx)
        bad = elementwise(lambda i, n: (i < 0) | (i >= n), i, self.length, ctx=ctx)
        failed = check(ctx, bad, checks.INDEX, (i, self.length), span)
        if failed is None:
            return self.fn(i, ctx)
        if isinstance(self, Buffer) and self.data.size == 0:
            return Vec(ctx, np.zeros(ctx.n, dtype=self.data.dtype))
        return self.fn(where_failed(i, failed, 0, ctx), ctx)  # element 0 where it failed


class Buffer(PullArray):
    """An array materialized in memory: lane k's elements are data[offset_k : offset_k+length_k]."""

    def __init__(self, data: np.ndarray, offset, length):
        super().__init__(length, self._read)
        self.data = data
        self.offset = offset

    def _read(self, i, ctx):
        data = self.data
        # np.take is about twice as fast as fancy indexing for large gathers.
        # Clipped: a lane that failed a check reads its element 0, which an empty array lacks.
        return elementwise(lambda o, i: np.take(data, np.add(o, i, dtype=np.int64), mode="clip"),
                           self.offset, i, ctx=ctx)


# ---- push arrays -------------------------------------------------------------------------------

Chunk = tuple[Ctx, object, object]  # (element lanes, position in the array, value)


class RecordBuffer(PullArray):
    """An array of records in memory: a Buffer per field, sharing offsets and lengths (SoA)."""

    def __init__(self, shape, fields: list[Buffer]):
        super().__init__(fields[0].length, self._read)
        self.shape, self.fields = shape, fields
        self.offset = fields[0].offset

    def _read(self, i, ctx):
        return records.rebuild(self.shape, [field.fn(i, ctx) for field in self.fields])


class PushArray:
    def length(self):
        raise NotImplementedError

    def emit(self, ctx: Ctx, interp) -> Iterator[Chunk]:
        raise NotImplementedError


class PushPull(PushArray):
    """`push<l> arr`, forced by a parallel loop of kind `place` (fcl.checks)."""

    def __init__(self, pull: PullArray, place: str | None = None):
        self.pull, self.place = pull, place

    def length(self):
        return self.pull.length

    def emit(self, ctx, interp):
        lanes, pos = expand(ctx, self.pull.length, self.place)
        yield lanes, pos, self.pull.fn(pos, lanes)


class Interleave(PushArray):
    """`interleave n f programs` (sequential: `interleaveSeq`)."""

    def __init__(self, size, place, programs: PullArray, sequential: bool, level: int, span):
        self.size, self.place, self.programs = size, place, programs
        self.sequential_host = sequential and level == GRID
        self.loop = None if sequential else checks.INTERLEAVE_PLACES[level]
        self.span = span

    def length(self):
        size, count = self.size, self.programs.length
        target = deepest(size, count)
        sizes, counts = np.broadcast_arrays(*(np.asarray(lift(v, target) if target else v,
                                                         dtype=np.int64) for v in (size, count)))
        wide = sizes * counts
        if np.any(wide > np.iinfo(np.int32).max):
            k = int(np.argmax(wide > np.iinfo(np.int32).max))
            raise FCLError(checks.TOO_LONG.format(int(counts.flat[k]), int(sizes.flat[k])),
                           self.span)
        return np.int32(wide) if target is None else Vec(target, wide.astype(np.int32))

    def emit(self, ctx, interp):
        if self.sequential_host and ctx.n == 1:
            # Host-level sub-programs may print or time: run them one at a time, in order.
            count = int(lift_full(self.programs.length, ctx, np.int32)[0])
            for b in range(count):
                lanes = Ctx(1, ctx, np.zeros(1, dtype=np.int64))
                yield from self._emit_from(lanes, Vec(lanes, np.array([b], dtype=np.int32)), interp)
            return
        lanes, outer = expand(ctx, self.programs.length, self.loop)
        yield from self._emit_from(lanes, outer, interp)

    def _emit_from(self, lanes, outer, interp):
        program = self.programs.fn(outer, lanes)
        inner_push = program.run(lanes, interp)
        produced = inner_push.length()
        check(lanes, elementwise(lambda p, n: p != n, produced, self.size, ctx=lanes),
              checks.INNER_LENGTH, (produced, self.size), self.span, checks.INNER_LENGTH_HINT)
        length = self.length()
        for elems, pos, value in inner_push.emit(lanes, interp):
            where = interp.apply(self.place, (outer, pos), elems, self.span)
            bad = elementwise(lambda p, n: (p < 0) | (p >= n), where, length, ctx=elems)
            failed = check(elems, bad, checks.PLACED, (where, length), self.span,
                           checks.PLACED_HINT)
            if failed is not None:  # their elements are not written
                elems, _ = interp.restrict(elems, ~failed)
            yield elems, where, value


class SeqFor(PushArray):
    """`seqfor size iterations step`: a sequential loop over a per-lane array, zeroed first; or,
    given `init` (the thesis's `seqfor init iterations step`), over the elements of `init`."""

    def __init__(self, size, iterations, step, dtype, span, init: PushArray | None = None):
        self.size, self.iterations, self.step = size, iterations, step
        self.dtype, self.span, self.init = dtype, span, init

    def length(self):
        return self.size

    def emit(self, ctx, interp):
        fields = records.leaves(self.dtype, self.dtype)
        if self.init is None:
            buffers = [Buffer(*interp.allocate(ctx, self.size, field, self.span))
                       for field in fields]
            acc = RecordBuffer(self.dtype, buffers) if len(buffers) > 1 else buffers[0]
        else:
            acc = interp.force(self.init, ctx, self.dtype, self.span)  # thesis rule 5.78
        datas = [b.data for b in acc.fields] if isinstance(acc, RecordBuffer) else [acc.data]
        offset, size = acc.offset, acc.length
        iterations = lift(self.iterations, ctx)
        steps = int(np.max(iterations)) if isinstance(iterations, np.ndarray) and iterations.size \
            else int(iterations) if not isinstance(iterations, np.ndarray) else 0

        # A read out of bounds is reported at the read (its application's span), as OpenCL does.
        reader = Primitive("read", 1, lambda lanes, span, i: acc.index(i, lanes, span))
        all_offsets = lift_full(offset, ctx, np.int64)
        for it in range(steps):
            lanes, offsets = ctx, all_offsets
            if isinstance(iterations, np.ndarray) and not np.all(iterations > it):
                lanes, active = interp.restrict(ctx, iterations > it)
                offsets = all_offsets[active]
            step = interp.apply(interp.apply(self.step, reader, lanes, self.span),
                                np.int32(it), lanes, self.span)
            pos, value = step
            bad = elementwise(lambda p, n: (p < 0) | (p >= n), pos, self.size, ctx=lanes)
            failed = check(lanes, bad, checks.SEQFOR, (pos, self.size), self.span)
            ok = slice(None) if failed is None else ~failed  # the lanes that failed write nothing
            where = offsets[ok] + lift_full(pos, lanes, np.int64)[ok]
            for data, item in zip(datas, records.leaves(self.dtype, value), strict=True):
                data[where] = lift_full(item, lanes, data.dtype)[ok]
        lanes, pos = expand(ctx, size)
        yield lanes, pos, acc.fn(pos, lanes)


class MapPush(PushArray):
    """`mapPush f arr`: f gets each element's final position and its value."""

    def __init__(self, fn, inner: PushArray, span):
        self.fn, self.inner, self.span = fn, inner, span

    def length(self):
        return self.inner.length()

    def emit(self, ctx, interp):
        for lanes, pos, value in self.inner.emit(ctx, interp):
            yield lanes, pos, interp.apply(interp.apply(self.fn, pos, lanes, self.span), value,
                                           lanes, self.span)


# ---- programs and functions --------------------------------------------------------------------

class Program:
    def __init__(self, run: Callable):
        self._run = run  # run(ctx, interp) -> value
        self.origin: Span | None = None  # the user's call that built it (Interpreter.user_calls)

    def run(self, ctx: Ctx, interp):
        calls = interp.faults.calls
        if self.origin is not None:
            calls.append(self.origin)
        try:
            return self._run(ctx, interp)
        except FCLError as err:
            locate_in_user_code(err, self.origin)
            raise
        finally:
            if self.origin is not None:
                calls.pop()


class Primitive:
    """A builtin, applied one argument at a time; runs once it has `arity` arguments."""

    __slots__ = ("name", "arity", "impl", "args")

    def __init__(self, name: str, arity: int, impl: Callable, args: tuple = ()):
        self.name, self.arity, self.impl, self.args = name, arity, impl, args

    def apply(self, arg, ctx: Ctx, span: Span | None):
        args = self.args + (arg,)
        if len(args) == self.arity:
            return self.impl(ctx, span, *args)
        return Primitive(self.name, self.arity, self.impl, args)


class Closure:
    __slots__ = ("param", "body", "env")

    def __init__(self, param: str, body, env):
        self.param, self.body, self.env = param, body, env


UNIT = ()
