"""Programs nested 10,000 deep check, compile and run on both back ends (fcl.deep, fcl.il.unnest);
errors deep inside them point at their line; deeper than the compiler can go is an FCL error,
never a crash."""
import io
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fcl import deep, pipeline
from fcl.errors import FCLError, Source
from fcl.interp.eval import RunConfig
from fcl.notebook import Workspace
from fcl.session import Session

N = 10_000
FCL = Path(sys.executable).with_name("fcl")


def fcl(*args: str | Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(FCL), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def session_for(text: str) -> Session:
    session = Session.new()
    session.add_file(Source("deep.fcl", text))
    return session


def run_both(text: str) -> tuple[str, str]:
    """What `main` prints on the interpreter and on OpenCL."""
    session = session_for(text)
    root = pipeline.main_root(session)
    interp, opencl = io.StringIO(), io.StringIO()
    pipeline.run_interpreter(session, root, RunConfig(out=interp, err=io.StringIO()))
    pipeline.run_opencl(session, root, out=opencl, err=io.StringIO())
    return interp.getvalue(), opencl.getvalue()


def error_of(thunk) -> FCLError:
    with pytest.raises(FCLError) as caught:
        thunk()
    return caught.value


# ---- the shapes: definitions, and an int expression nested n deep in v ----------------------
def lets(v: str, n: int = N) -> str:
    return f"let a0 = {v} in " + "".join(f"let a{k} = a{k - 1} + 1 in " for k in range(1, n)) + \
        f"a{n - 1}"


def lambdas(v: str, n: int = N) -> str:  # (fn a0 => ... fn a(n-1) => v + a0 + a(n-1)) 0 1 ...
    return "(" + "".join(f"fn a{k} => " for k in range(n)) + f"{v} + a0 + a{n - 1}) " + \
        " ".join(str(k % 7) for k in range(n))


def if_chain(v: str, n: int = N) -> str:
    return "".join(f"if {v} == {k} then {100 + k} else " for k in range(n)) + "7"


def parentheses(v: str, n: int = N) -> str:
    return "(1 + " * n + v + ")" * n


def definitions(n: int = N) -> str:
    return "val x0 = 1\n" + "".join(f"val x{k} = x{k - 1} + 1\n" for k in range(1, n))


def functions(n: int = N) -> str:
    return "fun f0 x = x\n" + "".join(f"fun f{k} x = f{k - 1} x + 1\n" for k in range(1, n))


SHAPES = {  # name: (n -> (definitions, the deep expression of v, its value))
    "definitions": lambda n: (definitions(n), lambda v: f"{v} + x{n - 1}", lambda v: v + n),
    "functions": lambda n: (functions(n), lambda v: f"f{n - 1} {v}", lambda v: v + n - 1),
    "lets": lambda n: ("", lambda v: lets(v, n), lambda v: v + n - 1),
    "lambdas": lambda n: ("", lambda v: lambdas(v, n), lambda v: v + (n - 1) % 7),
    "if-chain": lambda n: ("", lambda v: if_chain(v, n), lambda v: 100 + v),
    "parentheses": lambda n: ("", lambda v: parentheses(v, n), lambda v: v + n),
}


def shape_program(shape: str, n: int = N) -> tuple[str, str]:
    """A program printing the deep expression of a constant (a scalar, which OpenCL computes at
    compile time) and of each work-item's index (in a kernel); what it prints."""
    defined, expr, value = SHAPES[shape](n)
    text = (defined + "val main = do<grid> {\n"
            f"  forceAndPrint 1 (push<grid> (generate 1 (fn i => {expr('3')})));\n"
            f"  forceAndPrint 4 (push<grid> (generate 4 (fn i => {expr('i')}))) }}\n")
    printed = f"[{value(3)}]\n[{','.join(str(value(i)) for i in range(4))}]\n"
    return text, printed


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.slow  # 4-33 s each
def test_ten_thousand_deep_runs_on_both_back_ends(shape):
    text, printed = shape_program(shape)
    assert run_both(text) == (printed, printed)


@pytest.mark.slow
def test_ten_thousand_deep_through_the_cli(tmp_path):
    text, printed = shape_program("functions")
    path = tmp_path / "deep.fcl"
    path.write_text(text)
    for backend in ("interp", "opencl"):
        result = fcl("run", "--backend", backend, path, cwd=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (0, printed, "")


@pytest.mark.slow  # 14-49 s
def test_an_if_chain_ten_thousand_deep_in_a_kernel():
    """On values the compiler cannot know (read from memory), the chain stays in the kernel:
    fcl.il.unnest turns it into `if`s that C compilers take."""
    chain = "".join(f"if x == {k} then {2 * k} else " for k in range(N)) + "7"
    text = ("val main = do<grid> {\n"
            "  xs <- force<grid> (push<grid> (generate 4 (fn i => i * 4000 + 5)));\n"
            f"  forceAndPrint 4 (push<grid> (map (fn x => {chain}) xs)) }}\n")
    printed = "[10,8010,16010,7]\n"
    assert run_both(text) == (printed, printed)


@pytest.mark.slow  # 5-16 s
def test_deep_conditionals_of_every_kind_in_a_kernel():
    """`if`s nested in either branch, `&&` and `||` chains, one guarding a division: the
    kernel evaluates only what the source does (no division by zero at 305), and the IL stays
    valid (verified after every pass)."""
    n = 300
    then_nested = "".join(f"if x != {k} then " for k in range(n)) + "7" + \
        "".join(f" else {2 * k}" for k in reversed(range(n)))
    all_above = "".join(f"x > {k} && (" for k in range(n)) + "true" + ")" * n
    any_equal = "".join(f"x == {k} || (" for k in range(n)) + "false" + ")" * n
    cases = [(then_nested, [10, 210, 410, 7]), (f"b2i ({all_above})", [0, 0, 0, 1]),
             (f"b2i ({any_equal})", [1, 1, 1, 0]),
             (f"if {any_equal} then 1000 / (305 - x) else -1", [3, 5, 10, -1])]
    for expr, values in cases:
        text = ("val main = do<grid> {\n"
                "  xs <- force<grid> (push<grid> (generate 4 (fn i => i * 100 + 5)));\n"
                f"  forceAndPrint 4 (push<grid> (map (fn x => {expr}) xs)) }}\n")
        session = session_for(text)
        root = pipeline.main_root(session)
        interp, opencl = io.StringIO(), io.StringIO()
        pipeline.run_interpreter(session, root, RunConfig(out=interp, err=io.StringIO()))
        pipeline.run_opencl(session, root, pipeline.CompileOptions(verify_il=True), out=opencl)
        printed = f"[{','.join(map(str, values))}]\n"
        assert (interp.getvalue(), opencl.getvalue()) == (printed, printed), expr[:40]


@pytest.mark.slow  # 11-17 s
def test_a_notebook_runs_deep_cells():
    workspace = Workspace()
    out = io.StringIO()
    assert workspace.execute(definitions(), out, out).shown is False
    assert int(workspace.execute(f"x{N - 1}", out, out).value) == N
    workspace.execute("val main = forceAndPrint 2 (push<grid> (generate 2 (fn i => "
                      f"{lets('i')})))", out, out)
    assert out.getvalue() == f"[{N - 1},{N}]\n"


@pytest.mark.slow  # 1.3-2.6 s
def test_a_notebook_interprets_deep_expressions_on_its_own_thread_as_far_as_it_can():
    """The interpreter runs on the kernel's thread (on another, its arrays came from a new malloc
    arena in every run, and the kernel grew): an expression too deep for that stack is an
    error at the cell, and the cell is not kept."""
    workspace = Workspace()
    out = io.StringIO()
    err = error_of(lambda: workspace.execute(f"val deep = {parentheses('0')}\ndeep", out, out))
    assert err.message == "the program is nested too deeply to run"
    assert (err.span.line, err.span.col) == (2, 1)
    assert workspace.session.type_of("deep") is None


# ---- errors deep inside: at their own line and column ------------------------------------------
@pytest.mark.slow  # 2-3 s
def test_a_type_error_deep_in_a_chain_of_definitions_is_at_its_line():
    lines = definitions().splitlines()
    lines[7000] = "val x7000 = x6999 + true"
    err = error_of(lambda: session_for("\n".join(lines) + "\n"))
    assert (err.span.line, err.span.col, err.span.text) == (7001, 21, "true")


@pytest.mark.slow  # 2.4-5 s
def test_a_type_error_deep_in_nested_lets_is_at_its_line():
    lines = ["val main = forceAndPrint 1 (push<grid> (generate 1 (fn i =>", "  let a0 = i in"]
    lines += [f"  let a{k} = a{k - 1} + 1 in" for k in range(1, N)]
    lines[5000] = "  let a4999 = a4998 + 1.5 in"
    lines.append(f"  a{N - 1})))")
    err = error_of(lambda: session_for("\n".join(lines) + "\n"))
    assert (err.span.line, err.span.col, err.span.text) == (5001, 23, "1.5")


@pytest.mark.slow  # 3-4 s
def test_a_type_error_deep_in_an_if_chain_is_at_its_if():
    lines = ["val main = forceAndPrint 1 (push<grid> (generate 1 (fn i =>"]
    lines += [f"  if i == {k} then {k} else" for k in range(N)]
    lines[6000] = "  if i == 5999 then true else"
    lines.append("  7)))")
    err = error_of(lambda: session_for("\n".join(lines) + "\n"))
    assert "different types" in err.message
    assert (err.span.line, err.span.col) == (6001, 3)


@pytest.mark.slow  # 8-13 s
def test_a_run_time_error_deep_in_nested_lets_is_at_its_line_on_both_back_ends():
    lines = ["val main = forceAndPrint 4 (push<grid> (generate 4 (fn i =>", "  let a0 = i in"]
    lines += [f"  let a{k} = a{k - 1} + 1 in" for k in range(1, N)]
    lines[8000] = "  let a7999 = 100 / (a7998 - 8000) in"  # a7998 = i + 7998: zero at i = 2
    lines.append(f"  a{N - 1})))")
    session = session_for("\n".join(lines) + "\n")
    root = pipeline.main_root(session)
    for run in (lambda: pipeline.run_interpreter(session, root, RunConfig(out=io.StringIO())),
                lambda: pipeline.run_opencl(session, root, out=io.StringIO())):
        err = error_of(run)
        assert err.message.startswith("division by zero")
        assert (err.span.line, err.span.col) == (8001, 15)


# ---- deeper than the compiler goes: a located FCL error ---------------------------------------
@pytest.fixture
def shallow(monkeypatch):
    """A recursion limit of 3,000 frames, so that modest depths reach it."""
    monkeypatch.setattr(deep, "RECURSION_LIMIT", 3000)


def test_a_definition_too_deep_to_check_is_a_located_error(shallow):
    err = error_of(lambda: session_for("val ok = 1\nval deep = " + "1 + " * 2000 + "1"))
    assert err.message == "the definition of `deep` is nested too deeply to type-check"
    assert (err.span.line, err.span.col, err.span.text) == (2, 5, "deep")
    assert err.hints[0].startswith("FCL handles programs nested at least 10,000 deep")


def test_a_cell_expression_too_deep_to_check_is_a_located_error(shallow):
    session = Session.new()
    err = error_of(lambda: session.add_cell(Source("<cell>", "fn a => " * 2000 + "1")))
    assert err.message == "this expression is nested too deeply to type-check"
    assert (err.span.line, err.span.col) == (1, 1)


def test_a_program_too_deep_to_compile_is_a_located_error(shallow):
    text = "fun f0 x = x\n" + "".join(f"fun f{k} x = f{k - 1} x + 1\n" for k in range(1, 1000))
    session = session_for(text + "val main = forceAndPrint 1 (push<grid> (generate 1 f999))\n")
    root = pipeline.main_root(session)
    for run in (lambda: pipeline.run_interpreter(session, root),
                lambda: pipeline.run_opencl(session, root)):
        err = error_of(run)
        assert err.message == "the program is nested too deeply to compile"
        assert (err.span.line, err.span.col, err.span.text) == (1001, 5, "main")


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["functions", "lets", "lambdas", "parentheses"])
def test_a_hundred_thousand_deep_is_an_error_or_runs_never_a_crash(tmp_path, shape):
    text, printed = shape_program(shape, 100_000)
    path = tmp_path / "deep.fcl"
    path.write_text(text)
    result = fcl("run", "--backend", "interp", path, cwd=tmp_path, timeout=600)
    assert "Traceback" not in result.stderr
    if result.returncode == 0:
        assert result.stdout == printed
    else:
        assert result.returncode == 1
        assert result.stderr.startswith(f"{path}:")
        assert "is nested too deeply" in result.stderr.splitlines()[0]


# ---- fcl.deep itself ---------------------------------------------------------------------------
def test_on_big_stack_runs_deep_recursion_and_restores_the_limit():
    limit = sys.getrecursionlimit()

    @deep.on_big_stack
    def depth(n: int) -> int:
        return depth(n - 1) + 1 if n else 0  # nested calls run on the same thread, directly

    assert depth(100_000) == 100_000
    assert sys.getrecursionlimit() == limit


def test_on_big_stack_raises_what_its_function_raises():
    @deep.on_big_stack
    def fail():
        raise FCLError("no")

    assert error_of(fail).message == "no"


@pytest.fixture
def interrupt_soon():
    """Ctrl-C in a moment: SIGINT to this process, which Python turns into KeyboardInterrupt in
    the main thread."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are handled in the main thread")
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Timer(0.3, signal.pthread_kill,
                    [threading.main_thread().ident, signal.SIGINT]).start()
    yield
    signal.signal(signal.SIGINT, handler)


def ten_seconds() -> str:
    for _ in range(2000):
        time.sleep(0.005)
    return "not interrupted"


def test_an_interrupt_stops_the_work_on_the_big_stack(interrupt_soon):
    with pytest.raises(KeyboardInterrupt):
        deep.on_big_stack(ten_seconds)()


def test_work_that_handles_an_interrupt_returns_what_it_makes_of_it(interrupt_soon):
    @deep.on_big_stack
    def until_interrupted():
        try:
            return ten_seconds()
        except KeyboardInterrupt:
            return "stopped"

    assert until_interrupted() == "stopped"
