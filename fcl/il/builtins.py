"""What each builtin means at compile time: IL expressions, delayed arrays and programs."""
from __future__ import annotations

from fcl import checks
from fcl.errors import FCLError
from fcl.il import ir, streams
from fcl.il.lower import Lowerer
from fcl.il.rows import concat_rows, reduce_rows, scan_rows
from fcl.il.simplify import mk_bin, mk_un
from fcl.il.values import (
    Closure,
    Interleave,
    MapPush,
    Prim,
    Prog,
    Pull,
    PushPull,
    SeqForPush,
    at_warp,
    elem_shape,
    elem_type,
    level_of,
)
from fcl.intmath import INT_MAX, INT_MIN
from fcl.prelude import PRELUDE_NAME
from fcl.types.types import TPull, TPush, Type, arg_type, result_type

I, D, F, B = ir.INT, ir.DOUBLE, ir.FLOAT, ir.BOOL  # noqa: E741  # the tables below read as types
BINARY = {
    # name: (operator, operand type, result type)
    "addi": ("+", I, I), "subi": ("-", I, I), "muli": ("*", I, I), "divi": ("/", I, I),
    "modi": ("%", I, I), "mini": ("min", I, I), "maxi": ("max", I, I), "min": ("min", I, I),
    "max": ("max", I, I), "addd": ("+", D, D), "subd": ("-", D, D), "muld": ("*", D, D),
    "divd": ("/", D, D), "mind": ("min", D, D), "maxd": ("max", D, D),
    "eqi": ("==", I, B), "neqi": ("!=", I, B), "lti": ("<", I, B), "lei": ("<=", I, B),
    "gti": (">", I, B), "gei": (">=", I, B), "eqd": ("==", D, B), "ltd": ("<", D, B),
    "led": ("<=", D, B), "gtd": (">", D, B), "ged": (">=", D, B),
    "addf": ("+", F, F), "subf": ("-", F, F), "mulf": ("*", F, F), "divf": ("/", F, F),
    "minf": ("min", F, F), "maxf": ("max", F, F), "eqf": ("==", F, B), "ltf": ("<", F, B),
    "lef": ("<=", F, B), "gtf": (">", F, B), "gef": (">=", F, B),
    "andi": ("&", I, I), "ori": ("|", I, I), "xor": ("^", I, I), "sll": ("<<", I, I),
    "srl": (">>", I, I),
}
UNARY = {
    "negatei": ("neg", I), "negated": ("neg", D), "absi": ("abs", I), "absd": ("abs", D),
    "signi": ("sign", I), "i2d": ("i2d", D), "d2i": ("d2i", I), "b2i": ("b2i", I),
    "clz": ("clz", I), "not": ("not", B), "sqrt": ("sqrt", D),
    "negatef": ("neg", F), "absf": ("abs", F), "sqrtf": ("sqrt", F), "i2f": ("i2f", F),
    "f2i": ("f2i", I), "d2f": ("d2f", F), "f2d": ("f2d", D),
}
ALIASES = {"length": "lengthPull", "map": "mapPull", "poweri": "power"}


def make_primitive(lw: Lowerer, name: str, t: Type, span):
    name = ALIASES.get(name, name)
    if name in BINARY:
        op, _, result = BINARY[name]
        if lw.checks and name in ("divi", "modi"):
            return Prim(name, 2, lambda a, b: _checked_division(lw, op, a, b))
        return Prim(name, 2, lambda a, b: mk_bin(op, a, b, result))
    if name in UNARY:
        op, result = UNARY[name]
        return Prim(name, 1, lambda a: mk_un(op, a, result))
    if name == "#BlockSize":
        return ir.Const(lw.block_size, I)
    if name == "#WarpSize":
        return ir.Const(lw.warp_size, I)
    if name == "powi":
        return Prim(name, 2, lambda b, e: _powi(lw, b, e))
    table = _array_builtins(lw, t, span)
    if name not in table:
        raise FCLError(f"`{name}` cannot be compiled to OpenCL", span)
    arity, impl = table[name]
    return Prim(name, arity, impl)


def snapshot(lw: Lowerer, value):
    """A scalar result of a program, fixed in a variable so later writes cannot change it."""
    if isinstance(value, ir.Expr):
        return lw.declare("result", value)
    if isinstance(value, tuple) and value:
        return tuple(snapshot(lw, v) for v in value)
    return value


def _checked_division(lw: Lowerer, op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """With run-time checks on, integer division by zero (undefined in C: garbage on a GPU, a
    crash on some CPUs) is reported where it happens, as the interpreter does."""
    zero = mk_bin("==", b, ir.Const(0, I), B)
    lw.fail(zero, checks.DIVISION if op == "/" else checks.REMAINDER, [a])
    # The failing work-item goes on (the host reports the flag afterwards): divide by 1 instead.
    if isinstance(zero, ir.Const):
        return mk_bin(op, a, ir.Const(1, I) if zero.value else b, I)
    return mk_bin(op, a, ir.Select(zero, ir.Const(1, I), b, I), I)


# Histograms of at most this many bins combine in local memory first: a work-group
# adds its chunk of the values into a sub-histogram of its own with local atomics, then adds
# its bins that changed into the histogram with global atomics. Few bins hit by many values
# contend less in a work-group's local memory than in the whole device's L2, and the global
# atomics fall from one per value to one per bin and work-group.
LOCAL_BINS = 1024
VALUES_PER_ITEM = 8  # a work-group's chunk: this many values per work-item
IDENTITY = {(I, "add"): 0, (I, "min"): INT_MAX, (I, "max"): INT_MIN,
            (D, "min"): float("inf"), (D, "max"): float("-inf"),
            (F, "min"): float("inf"), (F, "max"): float("-inf")}


def _sub_histograms(lw: Lowerer, hist: ir.Var, elem: str, count: ir.Expr, n: ir.Expr,
                    combine: str, combine_into, i: ir.Var) -> None:
    chunk = ir.Const(lw.block_size * VALUES_PER_ITEM, I)
    g, t, u = lw.fresh("g", I), lw.fresh("t", I), lw.fresh("t", I)
    sub = lw.fresh("sub", ir.ArrayType(elem))
    identity = ir.Const(IDENTITY[elem, combine], elem)
    with lw.capture() as guarded:
        combine_into(sub)
    with lw.capture() as group:
        lw.emit(ir.Alloc(sub, count, "block"))
        lw.emit(ir.ParFor("block", t, count, [ir.Store(sub, t, identity)]))
        lw.emit(ir.ParFor("block", u, chunk, [
            ir.Declare(i, mk_bin("+", mk_bin("*", g, chunk, I), u, I)),
            ir.If(mk_bin("<", i, n, B), guarded, [])]))
        b = lw.fresh("b", I)
        lw.emit(ir.ParFor("block", b, count, [
            ir.If(mk_bin("!=", ir.Index(sub, b), identity, B),
                  [ir.Store(hist, b, ir.Index(sub, b), combine=combine)], [])]))
    groups = mk_bin("/", mk_bin("+", n, ir.Const(chunk.value - 1, I), I), chunk, I)
    lw.emit(ir.Distribute("grid", g, groups, group))


def _powi(lw: Lowerer, base: ir.Expr, exponent: ir.Expr) -> ir.Expr:
    if lw.checks:
        lw.fail(mk_bin("<", exponent, ir.Const(0, I), B), checks.POWI_NEGATIVE, [exponent])
    result = lw.fresh("pow", I)
    k = lw.fresh("k", I)
    lw.emit(ir.Declare(result, ir.Const(1, I)))
    lw.emit(ir.SeqFor(k, exponent, [ir.Assign(result, mk_bin("*", result, base, I))]))
    return result


def _array_builtins(lw: Lowerer, t: Type, span):
    def program(run):
        # Located at the user's line that builds it (not inside the prelude), so the code it
        # generates is shown next to that line.
        return Prog(run, lw.user_span())

    def force(array):
        level = level_of(arg_type(t, 0))
        return program(lambda: lw.force(array, level, elem_shape(t), at_warp(arg_type(t, 0))))

    def generate(n, f):
        if lw.checks:
            lw.fail(mk_bin("<", n, ir.Const(0, I), B), checks.GENERATE_NEGATIVE, [n])
        return Pull(n, lambda i: lw.apply(f, i))

    def take(n, array):
        if lw.checks:
            lw.fail(mk_bin("||", mk_bin("<", n, ir.Const(0, I), B),
                           mk_bin(">", n, array.length, B), B), checks.TAKE, [n, array.length])
        return Pull(n, array.fn)

    def interleave(sequential):
        def build(size, place, programs):
            level = level_of(result_type(t))
            # Built by a prelude function (concat, concatMap): its faults are the user's call's.
            where = lw.user_span() if span is not None and span.source.name == PRELUDE_NAME \
                else span
            parts = arg_type(t, 2)
            assert isinstance(parts, TPull)
            warp = lw.warp_size if at_warp(parts.elem) and not sequential else 0
            return program(lambda: Interleave(level, size, place, programs, sequential, where,
                                              warp))
        return build

    def bind(m, f):
        def run():
            value = lw.run(m)
            if isinstance(f, Closure):  # `name <- m` in a do block
                lw.name_arrays(value, f.param, f.body.span)
            return lw.run(lw.apply(f, value))
        return program(run)

    def seqfor(first, iterations, step):
        if isinstance(arg_type(t, 0), TPush):  # the thesis's form: first is the initial array
            return SeqForPush(lw.length(first), iterations, step, elem_shape(t), span, first)
        return SeqForPush(first, iterations, step, elem_shape(t), span)

    def power(count, step, init):
        return program(lambda: lw.loop(
            level_of(result_type(t)), elem_shape(t), init,
            lambda state, k: mk_bin("<", k, count, B),
            lambda state, k: lw.apply(lw.apply(step, k), state), span, count))

    def while_(cond, step, init):
        return program(lambda: lw.loop(
            level_of(result_type(t)), elem_shape(t), init,
            lambda state, k: lw.apply(cond, state),
            lambda state, k: lw.apply(step, state), span))

    def print_array(count, array):
        def run():
            forced = lw.force(array, 2, elem_type(arg_type(t, 1)))
            buffer = forced.fn(ir.Const(0, I)).array
            lw.emit(ir.Fail(mk_bin("||", mk_bin("<", count, ir.Const(1, I), B),
                                   mk_bin(">", count, forced.length, B), B),
                            "cannot print {} elements of an array of length {}: the count must "
                            "be between 1 and the length", [count, forced.length]))
            lw.emit(ir.Print(count, buffer))
            return forced
        return program(run)

    def benchmark(count, prog):
        def run():
            with lw.capture() as body:
                lw.run(prog)
            lw.emit(ir.Benchmark(count, body))
            return ()
        return program(run)

    def read_csv(path):
        def run():
            array = lw.fresh("csv", ir.ArrayType(I))
            length = lw.fresh("csvlen", I)
            lw.emit(ir.Declare(length, ir.Const(0, I)))
            lw.emit(ir.Input(array, length, path))
            return Pull(length, lambda index: ir.Index(array, index), (array,))
        return program(run)

    def histogram(bins, op, neutral, indices, values):
        elem = elem_type(result_type(t))

        def run():
            name = op.name if isinstance(op, Prim) and not op.args else None
            combine = checks.histogram_combine(name, lw.user_span())
            count = lw.declare("bins", bins)
            n = lw.declare("n", indices.length)
            if lw.checks:
                lw.fail(mk_bin("<", count, ir.Const(0, I), B), checks.NEGATIVE, [count])
                lw.fail(mk_bin("!=", values.length, n, B), checks.HISTOGRAM_LENGTHS,
                        [n, values.length])
            hist = lw.fresh("hist", ir.ArrayType(elem))
            lw.emit(ir.Alloc(hist, count, "grid"))
            b, i = lw.fresh("b", I), lw.fresh("i", I)
            lw.emit(ir.ParFor("grid", b, count, [ir.Store(hist, b, neutral)]))

            def combine_into(target: ir.Var) -> None:  # work-item i's value into its bin
                with lw.parallel(checks.GLOBAL, i):
                    at = lw.within(lw.declare("bin", indices.fn(i)), count, checks.BIN)
                    lw.emit(ir.Store(target, at, values.fn(i), combine=combine))
            if isinstance(count, ir.Const) and count.value <= LOCAL_BINS:
                _sub_histograms(lw, hist, elem, count, n, combine, combine_into, i)
            else:
                with lw.capture() as body:
                    combine_into(hist)
                lw.emit(ir.ParFor("grid", i, n, body))
            return Pull(count, lambda j: ir.Index(hist, j))
        return program(run)

    def rows_program(build):
        def make(f, z, rows):
            return program(lambda: build(lw, f, z, rows, elem_type(result_type(t))))
        return make

    return {
        "histogram": (5, histogram),
        "reduceRows": (3, rows_program(reduce_rows)),
        "scanRows": (3, rows_program(scan_rows)),
        "concatRows": (1, lambda rows: program(
            lambda: concat_rows(lw, rows, elem_type(result_type(t))))),
        "fst": (1, lambda p: p[0]),
        "snd": (1, lambda p: p[1]),
        "index": (2, lw.index),
        "lengthPull": (1, lambda array: array.length),
        "lengthPush": (1, lambda array: lw.length(array)),
        "generate": (2, generate),
        "take": (2, take),
        "mapPull": (2, lambda f, array: Pull(array.length, lambda i: lw.apply(f, array.fn(i)))),
        "mapPush": (2, lambda f, array: MapPush(f, array)),
        "push": (1, lambda array: PushPull(level_of(result_type(t)), array,
                                           at_warp(result_type(t)))),
        "force": (1, force),
        "return": (1, lambda value: program(lambda: snapshot(lw, value))),
        "bind": (2, bind),
        "interleave": (3, interleave(False)),
        "interleaveSeq": (3, interleave(True)),
        "seqfor": (3, seqfor),
        "power": (3, power),
        "while": (3, while_),
        "readIntCSV": (1, read_csv),
        "forceAndPrint": (2, print_array),
        "forceAndPrintDouble": (2, print_array),
        "forceAndPrintFloat": (2, print_array),
        "benchmark": (2, benchmark),
        **streams.builtins(lw, t),
    }
