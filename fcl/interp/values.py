"""Runtime values of the reference interpreter (thesis §5.3.3).

Pull arrays are a length and an index function; push arrays are delayed iteration schemes that
`emit` their elements as (lanes, position, value) chunks when forced; programs are delayed
computations run in a lane context. Scalars are uniform numpy scalars or per-lane `Vec`s.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from fcl.errors import FCLError, Span
from fcl.interp.lanes import Ctx, Vec, deepest, elementwise, expand, lift, lift_full
from fcl.prelude import PRELUDE_NAME
from fcl.types.types import TCon, Type, chase

DTYPES = {"int": np.int32, "double": np.float64, "bool": np.bool_}


def dtype_of(t: Type):
    t = chase(t)
    return DTYPES[t.name] if isinstance(t, TCon) and t.name in DTYPES else np.int32


def runtime_error(message: str, span: Span | None) -> FCLError:
    return FCLError(message, span)


def locate_in_user_code(err: FCLError, call: Span | None) -> None:
    """An error inside a prelude function is shown at the user's call, with the prelude line as
    a note: the user wrote the call, not the prelude (the OpenCL back end does the same)."""
    if (err.span is not None and err.span.source.name == PRELUDE_NAME and call is not None
            and call.source.name != PRELUDE_NAME):
        err.notes.insert(0, (err.span, "inside this prelude definition"))
        err.span = call


def first_failure(mask, *values):
    """Lane values at the first lane where mask holds, or None when it holds nowhere."""
    if isinstance(mask, Vec):
        if not mask.data.any():
            return None
        k = int(np.argmax(mask.data))
        lifted = (lift(v, mask.ctx) for v in values)
        return [v[k] if isinstance(v, np.ndarray) else v for v in lifted]
    return list(values) if bool(mask) else None


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
        failure = first_failure(bad, i, self.length)
        if failure is not None:
            raise runtime_error(f"index {int(failure[0])} is out of bounds for an array of "
                                f"length {int(failure[1])}", span)
        return self.fn(i, ctx)


class Buffer(PullArray):
    """An array materialized in memory: lane k's elements are data[offset_k : offset_k+length_k]."""

    def __init__(self, data: np.ndarray, offset, length):
        super().__init__(length, self._read)
        self.data = data
        self.offset = offset

    def _read(self, i, ctx):
        data = self.data
        # np.take is about twice as fast as fancy indexing for large gathers.
        return elementwise(lambda o, i: np.take(data, np.add(o, i, dtype=np.int64)), self.offset, i,
                           ctx=ctx)


# ---- push arrays -------------------------------------------------------------------------------

Chunk = tuple[Ctx, object, object]  # (element lanes, position in the array, value)


class PushArray:
    def length(self):
        raise NotImplementedError

    def emit(self, ctx: Ctx, interp) -> Iterator[Chunk]:
        raise NotImplementedError


class PushPull(PushArray):
    """`push<l> arr`."""

    def __init__(self, pull: PullArray):
        self.pull = pull

    def length(self):
        return self.pull.length

    def emit(self, ctx, interp):
        lanes, pos = expand(ctx, self.pull.length)
        yield lanes, pos, self.pull.fn(pos, lanes)


class Interleave(PushArray):
    """`interleave n f programs` (sequential: `interleaveSeq`)."""

    def __init__(self, size, place, programs: PullArray, sequential_host: bool, span):
        self.size, self.place, self.programs = size, place, programs
        self.sequential_host = sequential_host
        self.span = span

    def length(self):
        size, count = self.size, self.programs.length
        target = deepest(size, count)
        if target is None:
            return size * count
        return Vec(target, lift(size, target) * lift(count, target))

    def emit(self, ctx, interp):
        if self.sequential_host and ctx.n == 1:
            # Host-level sub-programs may print or time: run them one at a time, in order.
            count = int(lift_full(self.programs.length, ctx, np.int32)[0])
            for b in range(count):
                lanes = Ctx(1, ctx, np.zeros(1, dtype=np.int64))
                yield from self._emit_from(lanes, Vec(lanes, np.array([b], dtype=np.int32)), interp)
            return
        lanes, outer = expand(ctx, self.programs.length)
        yield from self._emit_from(lanes, outer, interp)

    def _emit_from(self, lanes, outer, interp):
        program = self.programs.fn(outer, lanes)
        inner_push = program.run(lanes, interp)
        for elems, pos, value in inner_push.emit(lanes, interp):
            where = interp.apply(self.place, (outer, pos), elems, self.span)
            yield elems, where, value


class SeqFor(PushArray):
    """`seqfor size iterations step`: a sequential loop over a per-lane array."""

    def __init__(self, size, iterations, step, dtype, span):
        self.size, self.iterations, self.step = size, iterations, step
        self.dtype, self.span = dtype, span

    def length(self):
        return self.size

    def emit(self, ctx, interp):
        data, offset, size = interp.allocate(ctx, self.size, self.dtype, self.span)
        acc = Buffer(data, offset, size)
        iterations = lift(self.iterations, ctx)
        steps = int(np.max(iterations)) if isinstance(iterations, np.ndarray) and iterations.size \
            else int(iterations) if not isinstance(iterations, np.ndarray) else 0

        def read(i, lanes):
            return acc.index(i, lanes, self.span)

        reader = Primitive("read", 1, lambda lanes, span, i: read(i, lanes))
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
            failure = first_failure(bad, pos, self.size)
            if failure is not None:
                raise runtime_error(f"seqfor step wrote to index {int(failure[0])}, outside its "
                                    f"array of length {int(failure[1])}", self.span)
            data[offsets + lift(pos, lanes)] = lift(value, lanes)
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
        try:
            return self._run(ctx, interp)
        except FCLError as err:
            locate_in_user_code(err, self.origin)
            raise


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
