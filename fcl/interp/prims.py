"""The builtins of the reference interpreter, with 32-bit C/OpenCL integer semantics."""
from __future__ import annotations

import time

import numpy as np

from fcl import checks
from fcl.errors import FCLError
from fcl.hostio import benchmark_report, format_array, read_int_csv
from fcl.interp import streams
from fcl.interp.lanes import Ctx, Vec, elementwise, expand, host_int, lift, lift_full
from fcl.interp.rows import concat_rows, reduce_rows, scan_rows
from fcl.interp.values import (
    UNIT,
    Buffer,
    Interleave,
    MapPush,
    Primitive,
    Program,
    PullArray,
    PushPull,
    SeqFor,
    check,
    record_dtype,
    where_failed,
)
from fcl.intmath import c_div, c_mod, clz, d2i
from fcl.mono import level_number
from fcl.prelude import PRELUDE_NAME
from fcl.types.types import (
    Level,
    TProgram,
    TPull,
    TPush,
    Type,
    arg_type,
    chase,
    result_type,
)


def _result_level(t: Type) -> Level:
    """The level of the push array or program that a primitive of type `t` makes."""
    result = result_type(t)
    assert isinstance(result, (TPush, TProgram))
    return result.level


def _cast(dtype):
    return lambda a: np.asarray(a).astype(dtype) if isinstance(a, np.ndarray) else dtype(a)


def _signi(a):
    return np.sign(a).astype(np.int32) if isinstance(a, np.ndarray) else np.int32(np.sign(a))


SCALAR = {
    # name: (numpy function, check for a zero divisor)
    "addi": (np.add, False), "subi": (np.subtract, False), "muli": (np.multiply, False),
    "divi": (c_div, True), "modi": (c_mod, True),
    "mini": (np.minimum, False), "maxi": (np.maximum, False),
    "min": (np.minimum, False), "max": (np.maximum, False),
    "addd": (np.add, False), "subd": (np.subtract, False), "muld": (np.multiply, False),
    # As OpenCL's fmin and fmax: a NaN operand gives the other one.
    "divd": (np.divide, False), "mind": (np.fmin, False), "maxd": (np.fmax, False),
    "eqi": (np.equal, False), "neqi": (np.not_equal, False), "lti": (np.less, False),
    "lei": (np.less_equal, False), "gti": (np.greater, False), "gei": (np.greater_equal, False),
    "eqd": (np.equal, False), "ltd": (np.less, False), "led": (np.less_equal, False),
    "gtd": (np.greater, False), "ged": (np.greater_equal, False),
    # float32 operands give float32 results, rounded as OpenCL's correctly rounded float.
    "addf": (np.add, False), "subf": (np.subtract, False), "mulf": (np.multiply, False),
    "divf": (np.divide, False), "minf": (np.fmin, False), "maxf": (np.fmax, False),
    "eqf": (np.equal, False), "ltf": (np.less, False), "lef": (np.less_equal, False),
    "gtf": (np.greater, False), "gef": (np.greater_equal, False),
    "andi": (np.bitwise_and, False), "ori": (np.bitwise_or, False), "xor": (np.bitwise_xor, False),
    # OpenCL uses only the low five bits of a 32-bit shift count.
    "sll": (lambda a, b: np.left_shift(a, b & 31), False),
    "srl": (lambda a, b: np.right_shift(a, b & 31), False),
}
UNARY = {
    "negatei": np.negative, "negated": np.negative, "absi": np.abs, "absd": np.abs,
    "signi": _signi,
    "i2d": _cast(np.float64), "b2i": _cast(np.int32), "clz": clz, "not": np.logical_not,
    "sqrt": np.sqrt, "d2i": d2i,
    "negatef": np.negative, "absf": np.abs, "sqrtf": np.sqrt, "i2f": _cast(np.float32),
    "f2i": d2i, "d2f": _cast(np.float32), "f2d": _cast(np.float64),
}
ALIASES = {"length": "lengthPull", "map": "mapPull", "poweri": "power"}
# Their failures point at the builtin's name, not the whole application, as on OpenCL: in
# `programs |> interleave n f` the application starts at `programs`.
LOCATED_AT_NAME = {"interleave", "interleaveSeq", "seqfor"}


def make_primitive(name: str, t: Type, span, interp):
    """The runtime value of builtin `name` used at monomorphic type t."""
    name = ALIASES.get(name, name)
    if name in SCALAR:
        fn, checks_zero = SCALAR[name]

        def binary(ctx, sp, a, b):
            if checks_zero:
                failed = check(ctx, elementwise(lambda b: b == 0, b, ctx=ctx),
                               checks.DIVISION if name == "divi" else checks.REMAINDER, (a,), sp)
                b = where_failed(b, failed, 1, ctx)
            return elementwise(fn, a, b, ctx=ctx)
        return Primitive(name, 2, binary)
    if name in UNARY:
        fn = UNARY[name]
        return Primitive(name, 1, lambda ctx, sp, a: elementwise(fn, a, ctx=ctx))
    if name == "#BlockSize":
        return np.int32(interp.config.block_size)
    if name == "#WarpSize":
        return np.int32(interp.config.warp_size)
    if name == "powi":
        return Primitive(name, 2, _powi)
    impl = ARRAY.get(name)
    if impl is None:
        raise FCLError(f"`{name}` is not supported by the interpreter", span)
    arity, build = impl

    def built(ctx, sp, *args):
        value = build(interp, t, span if name in LOCATED_AT_NAME else sp, ctx, *args)
        if isinstance(value, Program) and interp.user_calls:
            value.origin = interp.user_calls[-1]
        return value
    return Primitive(name, arity, built)


def _powi(ctx, span, base, exponent):
    failed = check(ctx, elementwise(lambda e: e < 0, exponent, ctx=ctx), checks.POWI_NEGATIVE,
                   (exponent,), span)
    exponent = where_failed(exponent, failed, 0, ctx)

    def power(b, e):
        wide = b.astype(np.int64) if isinstance(b, np.ndarray) else np.int64(b)
        return np.power(wide, e).astype(np.int32)
    return elementwise(power, base, exponent, ctx=ctx)


# ---- arrays and programs ---------------------------------------------------------------------

def _elem_dtype(t: Type):
    t = chase(t)
    while isinstance(t, TProgram):
        t = chase(t.result)
    return record_dtype(t.elem) if isinstance(t, (TPull, TPush)) else np.int32


def _generate(interp, t, span, ctx, n, f):
    failed = check(ctx, elementwise(lambda n: n < 0, n, ctx=ctx), checks.GENERATE_NEGATIVE, (n,),
                   span)
    n = where_failed(n, failed, 0, ctx)
    return PullArray(n, lambda i, lanes: interp.apply(f, i, lanes, span))


def _take(interp, t, span, ctx, n, arr):
    bad = elementwise(lambda n, length: (n < 0) | (n > length), n, arr.length, ctx=ctx)
    failed = check(ctx, bad, checks.TAKE, (n, arr.length), span)
    return PullArray(where_failed(n, failed, 0, ctx), arr.fn)


def _map_pull(interp, t, span, ctx, f, arr):
    return PullArray(arr.length, lambda i, lanes: interp.apply(f, arr.fn(i, lanes), lanes, span))


def _force(interp, t, span, ctx, arr):
    dtype = _elem_dtype(arg_type(t, 0))
    return Program(lambda lanes, it: it.force(arr, lanes, dtype, span))


def _interleave(sequential):
    def build(interp, t, span, ctx, n, place, programs):
        level = level_number(_result_level(t))
        # Built by a prelude function (concat, concatMap): its faults are the user's call's.
        if span is not None and span.source.name == PRELUDE_NAME and interp.user_calls:
            span = interp.user_calls[-1]
        return Program(lambda lanes, it: Interleave(n, place, programs, sequential, level, span))
    return build


def _bind(interp, t, span, ctx, m, f):
    return Program(lambda lanes, it: it.apply(f, m.run(lanes, it), lanes, span).run(lanes, it))


def _iterate(interp, span, ctx, dtype, init, keep_going, step):
    """Run `init`, then `step` while `keep_going` holds, lane by lane, double-buffered."""
    state = interp.force(init.run(ctx, interp), ctx, dtype, span)
    capacity = state.length  # the OpenCL back end double-buffers in arrays of this length
    iteration = 0
    while True:
        go = lift(keep_going(state, ctx, iteration), ctx)
        stopped = interp.faults.stopped(ctx)
        if stopped is not None:
            go = ~stopped & go
        if isinstance(go, np.ndarray):
            if not go.any():
                return state
            lanes, idx = (ctx, None) if go.all() else interp.restrict(ctx, go)
        elif not go:
            return state
        else:
            lanes, idx = ctx, None
        pushed = step(state, lanes, iteration).run(lanes, interp)
        grown = pushed.length()
        check(lanes, elementwise(lambda n, c: n > c, grown, capacity, ctx=lanes), checks.GROWN,
              (grown, capacity), span)
        updated = interp.force(pushed, lanes, dtype, span)
        state = updated if idx is None else _merge(state, updated, ctx, lanes, idx)
        iteration += 1


def _merge(old: Buffer, new: Buffer, ctx: Ctx, lanes: Ctx, idx) -> Buffer:
    """old with the lanes idx replaced by new (which lives in the sub-context `lanes`)."""
    offset = lift_full(old.offset, ctx, np.int64).copy()
    length = lift_full(old.length, ctx, np.int32).copy()
    offset[idx] = lift_full(new.offset, lanes, np.int64) + len(old.data)
    length[idx] = lift_full(new.length, lanes, np.int32)
    return Buffer(np.concatenate([old.data, new.data]), Vec(ctx, offset), Vec(ctx, length))


def _power(interp, t, span, ctx, n, step, init):
    dtype = _elem_dtype(arg_type(t, 2))
    return Program(lambda lanes, it: _iterate(
        it, span, lanes, dtype, init,
        lambda state, where, k: elementwise(lambda n: k < n, n, ctx=where),
        lambda state, where, k: it.apply(it.apply(step, np.int32(k), where, span), state,
                                         where, span)))


def _while(interp, t, span, ctx, cond, step, init):
    dtype = _elem_dtype(arg_type(t, 2))
    return Program(lambda lanes, it: _iterate(
        it, span, lanes, dtype, init,
        lambda state, where, k: it.apply(cond, state, where, span),
        lambda state, where, k: it.apply(step, state, where, span)))


def _seqfor(interp, t, span, ctx, first, iters, step):
    result = chase(result_type(t))
    assert isinstance(result, (TPull, TPush))
    dtype = record_dtype(result.elem)
    if isinstance(arg_type(t, 0), TPush):  # the thesis's form: first is the initial array
        return SeqFor(first.length(), iters, step, dtype, span, init=first)
    return SeqFor(first, iters, step, dtype, span)


def _print(dtype):
    def build(interp, t, span, ctx, n, arr):
        def run(lanes, it):
            buf = it.force(arr, lanes, dtype, span)
            count, length = host_int(n, lanes), host_int(buf.length, lanes)
            if not 1 <= count <= length:
                raise FCLError(f"cannot print {count} elements of an array of length {length}: "
                               f"the count must be between 1 and the length", span)
            start = host_int(buf.offset, lanes)
            it.config.out.write(format_array(buf.data[start:start + count]))
            it.outputs += 1
            return buf
        return Program(run)
    return build


def _benchmark(interp, t, span, ctx, n, program):
    def run(lanes, it):
        count = host_int(n, lanes)
        if count < 1:
            raise FCLError(f"benchmark needs at least one repetition, not {count}", span)
        times = []
        outputs_before = it.outputs
        for _ in range(count):
            start = time.perf_counter()
            program.run(lanes, it)
            times.append((time.perf_counter() - start) * 1000)
        if it.outputs != outputs_before:
            # The original also runs an untimed warm-up. Nothing warms up in the interpreter,
            # but a body that prints must print as often; FCL is pure, so each run prints the same.
            program.run(lanes, it)
        it.config.err.write(benchmark_report(times, "wall time, interpreter"))
        it.outputs += 1
        return UNIT
    return Program(run)


def _read_int_csv(interp, t, span, ctx, path):
    def run(lanes, it):
        data = read_int_csv(path, span)
        return Buffer(data, np.int64(0), np.int32(len(data)))
    return Program(run)


def _histogram(interp, t, span, ctx, bins, op, neutral, indices, values):
    name = op.name if isinstance(op, Primitive) and not op.args else None
    dtype = _elem_dtype(result_type(t))

    def run(lanes, it):
        checks.histogram_combine(name, span)  # located, as on OpenCL, at the program's call
        count, n = host_int(bins, lanes), host_int(indices.length, lanes)
        if count < 0:
            raise FCLError(checks.NEGATIVE.format(count), span)
        if host_int(values.length, lanes) != n:
            raise FCLError(checks.HISTOGRAM_LENGTHS.format(n, host_int(values.length, lanes)),
                           span)
        hist = np.full(count, lift_full(neutral, lanes, dtype)[0], dtype=dtype)
        # One parallel loop over the values, as on a device: a work-item computes its bin,
        # checks it, then computes its value.
        items, k = expand(lanes, n, checks.GLOBAL)
        at = indices.fn(k, items)
        failed = check(items, elementwise(lambda b: (b < 0) | (b >= count), at, ctx=items),
                       checks.BIN, (at, count), span)
        at = where_failed(at, failed, 0, items)
        value = values.fn(k, items)
        it.faults.end_round()
        it.faults.raise_first()
        # In the input's order, with the operator's own function: ints wrap as on a device,
        # mind and maxd keep a number over a NaN as fmin and fmax do.
        combine = SCALAR[str(name)][0]  # str: histogram_combine refused None above
        assert isinstance(combine, np.ufunc)
        with np.errstate(over="ignore"):
            combine.at(hist, lift_full(at, items, np.int64), lift_full(value, items, dtype))
        return Buffer(hist, np.int64(0), np.int32(count))
    return Program(run)


ARRAY = {
    "histogram": (5, _histogram),
    "reduceRows": (3, reduce_rows),
    "scanRows": (3, scan_rows),
    "concatRows": (1, concat_rows),
    "fst": (1, lambda interp, t, span, ctx, p: p[0]),
    "snd": (1, lambda interp, t, span, ctx, p: p[1]),
    "index": (2, lambda interp, t, span, ctx, arr, i: arr.index(i, ctx, span)),
    "lengthPull": (1, lambda interp, t, span, ctx, arr: arr.length),
    "lengthPush": (1, lambda interp, t, span, ctx, arr: arr.length()),
    "generate": (2, _generate),
    "take": (2, _take),
    "mapPull": (2, _map_pull),
    "mapPush": (2, lambda interp, t, span, ctx, f, arr: MapPush(f, arr, span)),
    "push": (1, lambda interp, t, span, ctx, arr: PushPull(
        arr, checks.PUSH_PLACES[level_number(_result_level(t))])),
    "force": (1, _force),
    "return": (1, lambda interp, t, span, ctx, v: Program(lambda lanes, it: v)),
    "bind": (2, _bind),
    "interleave": (3, _interleave(False)),
    "interleaveSeq": (3, _interleave(True)),
    "seqfor": (3, _seqfor),
    "power": (3, _power),
    "while": (3, _while),
    "readIntCSV": (1, _read_int_csv),
    "forceAndPrint": (2, _print(np.int32)),
    "forceAndPrintDouble": (2, _print(np.float64)),
    "forceAndPrintFloat": (2, _print(np.float32)),
    "benchmark": (2, _benchmark),
    **streams.BUILTINS,
}
