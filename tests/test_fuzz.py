"""Robustness: whatever the input, the front end, the OpenCL compiler and the interpreter fail
only with FCLError.

Three sources of input: random streams of FCL tokens, small random mutations of valid programs,
and random characters and bytes. Each input is added to a session both as a file and as a
notebook cell; inputs that type-check and have a `main` of type `Program <grid> 'a` are compiled
to OpenCL and run on the interpreter. A front-end error must also be located in the input and
render cleanly, and a failed add must leave the session as it was. (Random well-typed programs,
run on both back ends, are in test_generated.py.)
"""
import io
import signal
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from fcl import pipeline
from fcl.errors import FCLError, Source
from fcl.interp.eval import RunConfig
from fcl.pipeline import main_root, run_interpreter
from fcl.session import Session
from fcl.syntax.lexer import tokenize
from fclgen import SEEDS

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUN_SECONDS = 0.5  # per run of a generated main: mutations may make a `while` loop forever
SMALL = 64  # programs with larger integer literals are checked but not run (memory, time)


class _Timeout(Exception):
    pass


@contextmanager
def _time_limit(seconds: float):
    def expire(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _small_literals_only(text: str) -> bool:
    tokens = tokenize(Source("fuzz.fcl", text))
    return all(abs(t.value) <= SMALL for t in tokens if t.type == "INT")


def _add(text: str, as_cell: bool) -> Session | None:
    """A session with text added, or None after checking the FCLError it raised."""
    session = Session.new()
    decls_before, scope_before = len(session.decls), session.scope
    try:
        (session.add_cell if as_cell else session.add_file)(Source("fuzz.fcl", text))
    except FCLError as err:
        assert err.span is not None and err.span.source.name == "fuzz.fcl"
        assert 0 <= err.span.start <= len(text)
        assert err.render().startswith(f"fuzz.fcl:{err.span.line}:{err.span.col}: error: ")
        assert len(session.decls) == decls_before and session.scope is scope_before
        event("rejected")
        return None
    event("accepted")
    return session


def _run(session: Session, text: str) -> None:
    try:
        root = main_root(session)
    except FCLError:
        return
    _compile(session, root)
    if not _small_literals_only(text):
        return
    out = io.StringIO()
    try:
        with _time_limit(RUN_SECONDS):
            run_interpreter(session, root, RunConfig(out=out, err=io.StringIO()))
    except FCLError:
        event("run failed with an FCLError")
        return
    except _Timeout:
        event("run timed out")
        return
    event("ran")
    # Whatever a run prints comes from forceAndPrint*: bracketed, comma-separated lines.
    assert all(line.startswith("[") and line.endswith("]") for line in out.getvalue().splitlines())


def _compile(session: Session, root) -> None:
    """The OpenCL back end's compiler (lowering, kernels, OpenCL C) fails only with FCLError.
    Compile time does not depend on sizes, so large literals are compiled too; the kernels are
    not run (a mutated `while` may loop forever inside one)."""
    try:
        with _time_limit(RUN_SECONDS):
            compiled = pipeline.compile_program(session, root,
                                                pipeline.CompileOptions(block_size=32))
    except FCLError as err:
        assert err.span is None or err.render().startswith(f"{err.span}: error: ")
        event("compile failed with an FCLError")
        return
    except _Timeout:
        event("compile timed out")
        return
    event("compiled")
    assert compiled.source.count("__kernel") == len(compiled.kernels)


def exercise(text: str) -> None:
    """Add text as a file and as a cell; run main if there is a runnable one."""
    session = _add(text, as_cell=False)
    if session is not None and session.type_of("main") is not None:
        _run(session, text)
    _add(text, as_cell=True)


# ---- (a) random token streams -----------------------------------------------------------------

TOKENS = [
    # keywords and the words that are keywords only in types and level lists
    "sig", "fun", "val", "let", "in", "fn", "true", "false", "if", "then", "else", "do", "int",
    "double", "bool", "char", "kernel", "forall", "Program", "unit", "string", "thread", "block",
    "grid", "Z",
    # operators and punctuation
    "|>", "||", "&&", "==", "!=", "<=", ">=", "<<", ">>", "<-", "=>", "->", "<", ">", "+", "-",
    "*", "/", "%", "&", "|", "^", "=", ".", ":", ",", ";", "(", ")", "[", "]", "{", "}",
    "(*", "*)", "--",
    # names: plain, builtin, prelude, level and type variables
    "x", "y", "f", "n", "xs", "main", "l", "lvl", "'a", "'b", "#BlockSize", "iota", "generate",
    "push", "force", "mapPull", "index", "lengthPull", "forceAndPrint", "return", "bind",
    "concat", "while", "power", "interleave", "seqfor", "fst", "snd", "addd", "i2d", "pushM",
    "splitUp", "readIntCSV",
    # literals, including ones at and past the 32-bit limit
    "0", "1", "2", "3", "-1", "1+", "1.5", "2e3", "0x1F", "0o17", "2147483647", "2147483648",
    '"data.csv"', '"\\n"',
]
SEPARATORS = [" ", " ", " ", "\n", "", "\t", "\n  "]

token_streams = st.lists(st.tuples(st.sampled_from(TOKENS), st.sampled_from(SEPARATORS)),
                         max_size=40).map(lambda pairs: "".join(t + s for t, s in pairs))
# Streams that start like a definition get further into the parser and the type checker.
definition_like = st.tuples(st.sampled_from(["val main = ", "fun f x = ", "val x<l> = ", ""]),
                            token_streams).map("".join)


@pytest.mark.slow
@settings(FUZZ, max_examples=1000)
@given(definition_like)
def test_random_token_streams(text):
    exercise(text)


# ---- (b) mutations of valid programs ----------------------------------------------------------

SEED_TEXTS = [text for text, _ in SEEDS.values()]


@pytest.mark.parametrize("name", SEEDS)
def test_seeds_are_valid_programs_with_known_output(name):
    # Mutations start from programs that really check and run.
    text, expected = SEEDS[name]
    session = Session.new()
    session.add_file(Source(f"{name}.fcl", text))
    out = io.StringIO()
    run_interpreter(session, main_root(session), RunConfig(out=out, err=io.StringIO()))
    assert out.getvalue() == expected


def _pieces(text: str, by_token: bool) -> list[str]:
    """text cut into tokens with the text between them kept, or into characters."""
    if not by_token:
        return list(text)
    pieces, pos = [], 0
    for tok in tokenize(Source("seed.fcl", text)):
        pieces += [text[pos:tok.start_pos], text[tok.start_pos:tok.end_pos]]
        pos = tok.end_pos
    return pieces + [text[pos:]]


def mutate(text: str, by_token: bool, edits: list[tuple[str, int, str]]) -> str:
    pieces = _pieces(text, by_token)
    for op, at, new in edits:
        i = at % len(pieces)
        if op == "delete":
            del pieces[i]
        elif op == "insert":
            pieces.insert(i, new if by_token else new[:1])
        elif op == "duplicate":
            pieces.insert(i, pieces[i])
        elif op == "swap" and i + 1 < len(pieces):
            pieces[i], pieces[i + 1] = pieces[i + 1], pieces[i]
        if not pieces:
            pieces = [""]
    return "".join(pieces)


edits = st.lists(st.tuples(st.sampled_from(["delete", "insert", "duplicate", "swap"]),
                           st.integers(0, 10_000), st.sampled_from(TOKENS)),
                 min_size=1, max_size=3)


@pytest.mark.slow
@settings(FUZZ, max_examples=400)
@given(st.sampled_from(SEED_TEXTS), edits)
def test_token_mutations_of_valid_programs(seed, changes):
    exercise(mutate(seed, by_token=True, edits=changes))


@pytest.mark.slow
@settings(FUZZ, max_examples=400)
@given(st.sampled_from(SEED_TEXTS), edits)
def test_character_mutations_of_valid_programs(seed, changes):
    exercise(mutate(seed, by_token=False, edits=changes))


# ---- (c) random characters and bytes ----------------------------------------------------------

FCL_CHARS = "()[]{}<>-+*/%=|&^!.,;:'\"#\\_ \n\t0123456789abefilnotvxyzFP"


@pytest.mark.slow  # 4-7 s
@settings(FUZZ, max_examples=1500)
@given(st.text(alphabet=FCL_CHARS, max_size=80))
def test_random_fcl_characters(text):
    exercise(text)


@pytest.mark.slow  # 3-11 s
@settings(FUZZ, max_examples=1000)
@given(st.text(max_size=60))
def test_random_unicode_text(text):
    exercise(text)


@pytest.mark.slow  # 3-4 s
@settings(FUZZ, max_examples=1000)
@given(st.binary(max_size=60))
def test_random_bytes(data):
    # Undecodable bytes become lone surrogates, which the lexer must reject like any character.
    exercise(data.decode("utf-8", errors="surrogateescape"))
