"""Defined integer arithmetic (docs/language.md, "Integer arithmetic"): wrap-around, truncating
division, INT_MIN / -1, shift amounts modulo 32. The interpreter, OpenCL kernels (operands read
from memory at run time, or one of them a constant), the host's evaluator and the constant folder
must all agree with a model of the semantics, over boundary values and random ones. Each back end
runs one program holding every case, so that OpenCL builds once."""
import io
import os
import re
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyopencl as cl
import pytest
from hypothesis import assume, given, strategies as st

from fcl import pipeline
from fcl.errors import Source
from fcl.il import ir
from fcl.il.simplify import mk_bin, mk_un
from fcl.il.traverse import sub_exprs
from fcl.interp.eval import RunConfig
from fcl.intmath import c_div, c_mod
from fcl.runtime.device import build, open_device
from fcl.runtime.host import HostRun
from fcl.session import Session

INT_MIN, INT_MAX = -2**31, 2**31 - 1
BOUNDARY = [INT_MIN, INT_MIN + 1, -65536, -46341, -7, -2, -1, 0, 1, 2, 7, 46341, 65536,
            INT_MAX - 1, INT_MAX]
SHIFTS = list(range(-33, 65))
int32s = st.integers(INT_MIN, INT_MAX)


# ---- the model ---------------------------------------------------------------------------------

def wrap(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


BINARY = {  # FCL operator: its meaning
    "+": lambda a, b: wrap(a + b), "-": lambda a, b: wrap(a - b), "*": lambda a, b: wrap(a * b),
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "min": min, "max": max,
}
DIVISION = {"/": lambda a, b: wrap(trunc_div(a, b)),
            "%": lambda a, b: wrap(a - trunc_div(a, b) * b)}
SHIFT = {"<<": lambda a, b: wrap(a << (b & 31)), ">>": lambda a, b: a >> (b & 31)}
DIVISION_NAMES, SHIFT_NAMES = {"/": "divi", "%": "modi"}, {"<<": "sll", ">>": "srl"}
UNARY = {"negatei": lambda a: wrap(-a), "absi": lambda a: wrap(abs(a)),
         "signi": lambda a: (a > 0) - (a < 0), "clz": lambda a: 32 - (a % 2**32).bit_length()}
IL_OPS = {"negatei": "neg", "absi": "abs", "signi": "sign", "clz": "clz"}
# Compositions a C compiler may fold by assuming that signed arithmetic never overflows.
COMPOSED = {
    "b2i (a + b > a)": lambda a, b: int(wrap(a + b) > a),
    "b2i (a - b < a)": lambda a, b: int(wrap(a - b) < a),
    "(a * 2) / 2": lambda a, b: trunc_div(wrap(a * 2), 2),
    "b2i (a * a >= 0)": lambda a, b: int(wrap(a * a) >= 0),
    "b2i (powi a 2 >= 0)": lambda a, b: int(wrap(a * a) >= 0),
    "b2i (negatei a < 0)": lambda a, b: int(wrap(-a) < 0),
    "b2i (absi a < 0)": lambda a, b: int(wrap(abs(a)) < 0),
    "(a + b) >> 1": lambda a, b: wrap(a + b) >> 1,
    "d2i (i2d (a * b))": lambda a, b: wrap(a * b),
    "max (a + 1) a": lambda a, b: max(wrap(a + 1), a),
}


def fcl_binary(op: str, a: str, b: str) -> str:
    return f"{op} ({a}) ({b})" if op.isalpha() else f"({a}) {op} ({b})"


# ---- the constant folder -----------------------------------------------------------------------

def folded(op: str, a: int, b: int) -> int:
    e = mk_bin(op, ir.Const(a, ir.INT), ir.Const(b, ir.INT), ir.INT)
    assert isinstance(e, ir.Const), (op, a, b)
    return e.value


def test_the_constant_folder_follows_the_model_on_boundary_values():
    for a in BOUNDARY:
        for op, meaning in BINARY.items():
            for b in BOUNDARY:
                assert folded(op, a, b) == meaning(a, b), (a, op, b)
        for op, meaning in DIVISION.items():
            for b in BOUNDARY:
                if b:
                    assert folded(op, a, b) == meaning(a, b), (a, op, b)
        for op, meaning in SHIFT.items():
            for b in SHIFTS:
                assert folded(op, a, b) == meaning(a, b), (a, op, b)
        for name, meaning in UNARY.items():
            assert mk_un(IL_OPS[name], ir.Const(a, ir.INT), ir.INT).value == meaning(a), (name, a)


@given(st.sampled_from([*BINARY, *DIVISION, *SHIFT]), int32s, int32s)
def test_the_constant_folder_follows_the_model(op, a, b):
    assume(b or op not in DIVISION)
    assert folded(op, a, b) == {**BINARY, **DIVISION, **SHIFT}[op](a, b)


def test_the_constant_folder_leaves_division_by_zero_to_run_time():
    e = mk_bin("/", ir.Const(7, ir.INT), ir.Const(0, ir.INT), ir.INT)
    assert isinstance(e, ir.Bin)


def test_constant_operands_simplify_to_what_they_compute():
    x = ir.Var("x", ir.INT)

    def shown(op: str, left: ir.Expr, right: int) -> str:
        return ir.show_expr(mk_bin(op, left, ir.Const(right, ir.INT), ir.INT))

    assert shown("/", x, -1) == ir.show_expr(ir.Un("neg", x, ir.INT))
    assert shown("%", x, -1) == "0"
    assert shown("<<", x, 33) == shown("<<", x, 1) != "x"
    assert shown(">>", x, -1) == shown(">>", x, 31) != "x"
    assert shown("<<", x, 32) == shown(">>", x, -64) == "x"
    # Sums with INT_MIN, which has no positive counterpart, stay within 32 bits.
    product = mk_bin("*", x, ir.Const(INT_MIN, ir.INT), ir.INT)
    for e in (mk_bin("+", x, ir.Const(INT_MIN, ir.INT), ir.INT),
              mk_bin("-", x, ir.Const(INT_MIN, ir.INT), ir.INT),
              mk_bin("-", ir.Const(0, ir.INT), product, ir.INT),
              mk_bin("+", ir.Const(1, ir.INT), product, ir.INT)):
        assert all(INT_MIN <= c.value <= INT_MAX for c in _constants(e)), ir.show_expr(e)


def _constants(e: ir.Expr):
    if isinstance(e, ir.Const):
        yield e
    for part in sub_exprs(e):
        yield from _constants(part)


# ---- numpy helpers and the host's evaluator ----------------------------------------------------

@given(st.lists(st.tuples(int32s, int32s.filter(bool)), min_size=1, max_size=20))
def test_c_div_and_c_mod_follow_the_model(pairs):
    a = np.array([p[0] for p in pairs], dtype=np.int32)
    b = np.array([p[1] for p in pairs], dtype=np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warnings must not reach the user
        for op, fn in (("/", c_div), ("%", c_mod)):
            expected = [DIVISION[op](x, y) for x, y in pairs]
            assert fn(a, b).tolist() == expected
            assert [int(fn(np.int32(x), np.int32(y))) for x, y in pairs] == expected
            for y in {p[1] for p in pairs}:  # a uniform divisor takes other paths
                assert fn(a, np.int32(y)).tolist() == [DIVISION[op](x, y) for x in a.tolist()]


def test_the_host_evaluator_follows_the_model():
    run = HostRun(open_device(), {}, 256, io.StringIO(), io.StringIO())
    left, right = ir.Var("a", ir.INT), ir.Var("b", ir.INT)
    pairs = [(a, b) for a in BOUNDARY for b in BOUNDARY + SHIFTS]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for table in (BINARY, DIVISION, SHIFT):
            for op, meaning in table.items():
                cases = [(a, b) for a, b in pairs if b or table is not DIVISION]
                e = ir.Bin(op, left, right, ir.INT)
                run.env["a"] = np.array([a for a, _ in cases], dtype=np.int32)
                run.env["b"] = np.array([b for _, b in cases], dtype=np.int32)
                expected = [meaning(a, b) for a, b in cases]
                assert run.eval(e, lanes=True).tolist() == expected, op
                scalar = []
                for a, b in cases:
                    run.env["a"], run.env["b"] = np.int32(a), np.int32(b)
                    scalar.append(int(run.eval(e)))
                assert scalar == expected, op
        for name, meaning in UNARY.items():
            e = ir.Un(IL_OPS[name], left, ir.INT)
            run.env["a"] = np.array(BOUNDARY, dtype=np.int32)
            assert run.eval(e, lanes=True).tolist() == [meaning(a) for a in BOUNDARY], name
            for a in BOUNDARY:
                run.env["a"] = np.int32(a)
                assert int(run.eval(e)) == meaning(a), (name, a)


# ---- whole programs on both back ends ----------------------------------------------------------

@dataclass
class Case:
    text: str  # FCL, over the operands a and b
    meaning: Callable[[int, int], int]
    operands: list[tuple[int, int]]


def all_cases() -> list[Case]:
    """Every operation over boundary values (and shift amounts), then random ones; and with one
    operand a constant, which the compiler may simplify with."""
    rng = np.random.default_rng(15)
    randoms = [(int(a), int(b))
               for a, b in rng.integers(INT_MIN, INT_MAX, size=(64, 2), endpoint=True)]
    general = [(a, b) for a in BOUNDARY for b in BOUNDARY] + randoms
    division = [(a, b) for a, b in general if b]
    shift = [(a, b) for a in BOUNDARY for b in SHIFTS] + [(a, b % 98 - 33) for a, b in randoms]
    single = [(a, 0) for a in BOUNDARY] + randoms
    found = []
    for table, pairs, names in ((BINARY, general, {}), (DIVISION, division, DIVISION_NAMES),
                                (SHIFT, shift, SHIFT_NAMES)):
        for op, meaning in table.items():
            found += [Case(fcl_binary(op, "a", "b"), meaning, pairs)]
            if op in names:
                found += [Case(fcl_binary(names[op], "a", "b"), meaning, pairs)]
    for name, unary in UNARY.items():
        found += [Case(f"{name} a", lambda a, b, unary=unary: unary(a), single)]
    found += [Case(text, meaning, general) for text, meaning in COMPOSED.items()]
    for table, constants in ((BINARY, BOUNDARY), (DIVISION, [b for b in BOUNDARY if b]),
                             (SHIFT, [-33, -1, 0, 1, 31, 32, 33, 64])):
        for op, meaning in table.items():
            for c in constants:
                found += [Case(fcl_binary(op, "a", str(c)),
                               lambda a, b, meaning=meaning, c=c: meaning(a, c), single)]
                if table is not SHIFT:  # the constant on the left; never divided by 0
                    found += [Case(f"if a == 0 then 0 else {fcl_binary(op, str(c), 'a')}",
                                   lambda a, b, meaning=meaning, c=c: meaning(c, a) if a else 0,
                                   single)]
    return found


def program(cases: list[Case], path: str) -> str:
    """One grid program computing every case, from rows (case, a, b) read from a file at run
    time: operands the compiler does not know. Each row picks its case through a tree of ifs."""
    def pick(low: int, high: int) -> str:
        if high - low == 1:
            return f"({cases[low].text})"
        middle = (low + high) // 2
        return f"(if k < {middle} then {pick(low, middle)} else {pick(middle, high)})"

    rows = sum(len(case.operands) for case in cases)
    return (f'val main = do<grid> {{\n  t <- readIntCSV "{path}";\n'
            f"  forceAndPrint {rows} (push<grid> (generate {rows} (fn i =>\n"
            f"    let k = index t (3 * i) in let a = index t (3 * i + 1) in "
            f"let b = index t (3 * i + 2) in\n    {pick(0, len(cases))})))\n}}\n")


@pytest.fixture(scope="module")
def arithmetic(tmp_path_factory) -> tuple[str, list[Case]]:
    cases = all_cases()
    path = tmp_path_factory.mktemp("operands") / "rows.csv"
    path.write_text("".join(f"{k},{a},{b}\n" for k, case in enumerate(cases)
                            for a, b in case.operands))
    return program(cases, str(path)), cases


def parse(output: str) -> list[list[int]]:
    return [[int(v) for v in line.strip("[]").split(",")] for line in output.splitlines()]


def session_for(text: str) -> Session:
    session = Session.new()
    session.add_file(Source("arithmetic.fcl", text))
    return session


def check(output: str, cases: list[Case]) -> None:
    [got] = parse(output)
    rows = [(case, a, b) for case in cases for a, b in case.operands]
    assert len(got) == len(rows)
    wrong = [f"{case.text} with a = {a}, b = {b}: {value}, not {case.meaning(a, b)}"
             for (case, a, b), value in zip(rows, got) if value != case.meaning(a, b)]
    assert not wrong, f"{len(wrong)} wrong, the first:\n" + "\n".join(wrong[:10])


@pytest.mark.slow  # 1.2-2.3 s
def test_the_interpreter_follows_the_model(arithmetic):
    text, cases = arithmetic
    session, out = session_for(text), io.StringIO()
    pipeline.run_interpreter(session, pipeline.main_root(session),
                             RunConfig(out=out, err=io.StringIO()))
    check(out.getvalue(), cases)


@pytest.mark.slow  # 2.6-7 s
def test_opencl_follows_the_model(arithmetic):
    text, cases = arithmetic
    session, out, err = session_for(text), io.StringIO(), io.StringIO()
    pipeline.run_opencl(session, pipeline.main_root(session), pipeline.CompileOptions(),
                        out=out, err=err)
    check(out.getvalue(), cases)
    assert err.getvalue() == ""


LITERALS = [  # an expression of constants, its value
    ("-2147483648 / -1", INT_MIN), ("-2147483648 % -1", 0), ("divi -2147483648 -1", INT_MIN),
    ("2147483647 + 1", INT_MIN), ("-2147483648 - 1", INT_MAX), ("65536 * 65536", 0),
    ("46341 * 46341", -2147479015), ("negatei -2147483648", INT_MIN),
    ("absi -2147483648", INT_MIN), ("1 << 33", 2), ("1 << -1", INT_MIN), ("1 << 32", 1),
    ("-1 >> 40", -1), ("-8 >> -31", -4), ("7 % -2", 1), ("-7 / 2", -3), ("-7 % 2", -1),
    ("sll 3 31", INT_MIN), ("srl -2147483648 63", -1), ("powi 3 21", 1870418611),
    ("powi -2 31", INT_MIN), ("2147483647 * -1 - 2", INT_MAX),
]


def test_constant_expressions_are_folded_to_what_both_back_ends_compute():
    # One array of the expressions' values: the kernel stores constants.
    body = "".join(f"if i == {k} then {text} else " for k, (text, _) in enumerate(LITERALS))
    text = (f"val main = forceAndPrint {len(LITERALS)} (push<grid> (generate {len(LITERALS)} "
            f"(fn i => {body}0)))\n")
    session = session_for(text)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions())
    kernel_lines = [line for line in compiled.source.splitlines() if "arr_" in line and "=" in line]
    assert not any(op in line for line in kernel_lines for op in (" / ", " % ", "<<", ">>", " * "))
    session, out = session_for(text), io.StringIO()
    pipeline.run_interpreter(session, pipeline.main_root(session),
                             RunConfig(out=out, err=io.StringIO()))
    session, cl_out = session_for(text), io.StringIO()
    pipeline.run_opencl(session, pipeline.main_root(session), pipeline.CompileOptions(),
                        out=cl_out, err=io.StringIO())
    assert parse(out.getvalue()) == parse(cl_out.getvalue()) == [[v for _, v in LITERALS]]


def kernel_line(expression: str) -> str:
    """The OpenCL computing `expression` over x (read at run time) and i (an index below 100),
    names without their numbers."""
    text = (f'val main = do<grid> {{ xs <- readIntCSV "x.csv"; forceAndPrint 100 (push<grid> '
            f"(generate 100 (fn i => let x = index xs i in {expression}))) }}\n")
    session = session_for(text)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(checks=False))
    [line] = [line for line in compiled.source.splitlines() if "] = " in line]
    return re.sub(r"\b([a-z]+)_\d+\b", r"\1", line.split(" = ", 1)[1].rstrip(";"))


def test_the_generated_opencl_pays_only_where_an_operation_is_undefined_in_c():
    assert kernel_line("x / 7") == "(x / 7)"  # a constant divisor other than -1
    assert kernel_line("x % (i - 200)") == "(x % (i - 200))"  # never -1
    assert kernel_line("(x & 255) / i") == "((x & 255) / i)"  # never INT_MIN
    assert kernel_line("x / -1") == "((int)(-(uint)x))"
    assert kernel_line("x / (i - 1)") == "fcl_div(x, (i - 1))"
    assert kernel_line("x % (i - 1)") == "fcl_mod(x, (i - 1))"
    assert kernel_line("i * 3 + 1") == "((i * 3) + 1)"  # cannot overflow
    assert kernel_line("x + 1") == "((int)((uint)x + 1u))"
    assert kernel_line("x * x - 1") == "((int)(((uint)x * (uint)x) - 1u))"
    assert kernel_line("index xs (x * 2)") == "csv[(x * 2)]"  # a subscript
    assert kernel_line("absi (x & 255)") == "((int)abs((x & 255)))"
    assert kernel_line("absi x") == "fcl_abs(x)"
    assert kernel_line("x << 33") == "(x << 1)"


# ---- the OpenCL compiler's notes ---------------------------------------------------------------

def warned_source() -> str:
    """OpenCL that the compiler warns about, new to every cache (PoCL's ignores comments)."""
    return f"__kernel void k(__global int* a) {{ a[0] = 7 / 0 + {uuid.uuid4().int % 2**30}; }}\n"


def test_compiler_notes_stay_off_stderr(capfd, monkeypatch):
    # Clang inside PoCL or Oclgrind writes "1 warning generated." to the process's stderr.
    monkeypatch.delenv("PYOPENCL_COMPILER_OUTPUT", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(open_device(), warned_source())
    assert "generated" not in capfd.readouterr().err


def test_compiler_output_is_shown_when_asked_for(capfd, monkeypatch):
    monkeypatch.setenv("PYOPENCL_COMPILER_OUTPUT", "1")
    with pytest.warns(cl.CompilerWarning, match="division by zero"):
        build(open_device(), warned_source())
    if "Portable Computing Language" in open_device().device.platform.name:
        assert "1 warning generated." in capfd.readouterr().err


@pytest.mark.slow  # 4-8 s
def test_the_cli_keeps_compiler_notes_off_stderr(tmp_path):
    path = tmp_path / "z.fcl"
    path.write_text("val z = 0\n"
                    "val main = forceAndPrint 1 (push<grid> (generate 1 (fn i => 7 / z)))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYOPENCL_COMPILER_OUTPUT"}
    env.update(PYOPENCL_NO_CACHE="1", POCL_KERNEL_CACHE="0")  # compile, whatever ran before
    # --unsafe: no check for the division by zero, so that the C compiler sees `7 / 0`.
    result = subprocess.run([sys.executable, "-m", "fcl", "run", "--unsafe", str(path)],
                            capture_output=True, text=True, timeout=120, env=env)
    assert "generated" not in result.stderr and "Traceback" not in result.stderr


def test_a_nan_operand_of_mind_or_maxd_gives_the_other_everywhere():
    # OpenCL's fmin and fmax: the interpreter and the constant folder agree with the device.
    from runs import run_cl, run_interp
    text = ("val main = forceAndPrintDouble 4 (push<grid> (generate 4 (fn i =>\n"
            "  let nan = divd 0.0 (i2d (i - i)) in\n"
            "  if i == 0 then mind nan 1.0 else if i == 1 then maxd 2.0 nan\n"
            "  else if i == 2 then mind 3.0 nan else maxd nan nan)))\n")
    expected = "[1.00000,2.00000,3.00000,nan]\n"
    folded = text.replace("(i2d (i - i))", "0.0")
    for program in (text, folded):
        assert run_interp(program) == expected
        assert run_cl(program)[0] == expected
