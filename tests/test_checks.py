"""Run-time checks, on by default: every faulty program stops with the same error on both back
ends (message, values, work-group/work-item, location) and prints nothing after it; checks the
compiler can prove never fail are not emitted; `--unsafe` and `%config checks=off` turn them off.
"""
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest

import fcl
from bench.sizes import FULL
from bench.tasks import compile_task, tasks
from course import FCL_NOTEBOOKS, fcl_cells, notebook_programs, small
from fcl import checks, pipeline
from fcl.cli import main as cli_main
from fcl.errors import FCLError, Source
from fcl.interp.eval import RunConfig
from fcl.session import Session
from marks import slow_unless

ROOT = Path(__file__).parents[1]


def run(text: str, backend: str, checks: bool = True) -> tuple[str, FCLError | None]:
    """What the program prints on a back end, and the error it stops with (None if none)."""
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    out = io.StringIO()
    try:
        root = pipeline.main_root(session)
        if backend == "interp":
            pipeline.run_interpreter(session, root, RunConfig(out=out, err=io.StringIO()))
        else:
            target = backend.partition(":")[2] or "auto"  # opencl:gpu, opencl:cpu: that shape
            pipeline.run_opencl(session, root, pipeline.CompileOptions(checks=checks,
                                                                       target=target),
                                out=out, err=io.StringIO())
    except FCLError as err:
        return out.getvalue(), err
    return out.getvalue(), None


def grid(body: str, n: int = 4) -> str:
    return f"val main = forceAndPrint {n} (push<grid> (generate {n} (fn i => {body})))\n"


CASES = {
    "index": (grid("index (iota 10) (i + 8)"),
              "index 10 is out of bounds for an array of length 10 (in work-item 2)"),
    "negative index": (grid("index (iota 10) (i - 1)"),
                       "index -1 is out of bounds for an array of length 10 (in work-item 0)"),
    "division": (grid("1000 / (i % 3)", 6), "division by zero: 1000 / 0 (in work-item 0)"),
    "remainder": (grid("(i + 5) % (i - 2)"),
                  "remainder of a division by zero: 7 % 0 (in work-item 2)"),
    "constant divisor": ("val z = 0\n" + grid("7 / z", 1),
                         "division by zero: 7 / 0 (in work-item 0)"),
    "inner length": ("val main = do<grid> { a <- concat<block> 4 (generate 4 (fn b => "
                     "pushM<block> (generate 1 (fn i => b)))) ; forceAndPrint 16 a }\n",
                     "an inner array has length 1, but 4 was declared (in work-group 0)"),
    "block index": ("val main = do<grid> { a <- concat<block> 4 (generate 3 (fn b => "
                    "pushM<block> (generate 4 (fn t => index (iota 5) (b + t))))) ; "
                    "forceAndPrint 12 a }\n",
                    "index 5 is out of bounds for an array of length 5 (in work-group 2, "
                    "work-item 3)"),
    "placed": ("val main = do<grid> {\n"
               "  ys <- generate 2 (fn b => pushM<block> (generate 32 (fn i => i + b)))\n"
               "        |> interleave<block> 32 (fn ij => fst ij * 32 + snd ij * 100000000) ;\n"
               "  forceAndPrint 32 ys }\n",
               "an element was placed at index 100000000, outside the array of length 64 "
               "(in work-group 0, work-item 1)"),
    "seqfor": ("val main = do<grid> { a <- concat<block> 3 (generate 2 (fn b => concat<thread> 3 "
               "(generate 1 (fn t => return<thread> (seqfor 3 (3 + b) (fn read => fn k => "
               "(k, k))))))) ; forceAndPrint 6 a }\n",
               "seqfor step wrote to index 3, outside its array of length 3 (in work-group 1, "
               "work-item 0)"),
    "negative generate": ("val n = 0 - 3\n" + grid("index (generate n (fn k => k)) 0", 1),
                          "generate was given the negative length -3 (in work-item 0)"),
    "take": ("val main = forceAndPrint 3 (push<grid> (take 12 (iota 10)))\n",
             "cannot take 12 elements of an array of length 10"),
    "powi": (grid("powi 2 (i - 2)"), "powi needs a non-negative exponent, not -2 (in work-item 0)"),
}


@pytest.mark.parametrize("name", CASES)
def test_a_failed_check_is_the_same_error_on_both_back_ends(name):
    text, message = CASES[name]
    results = {backend: run(text, backend) for backend in ("interp", "opencl:gpu", "opencl:cpu")}
    for backend, (out, err) in results.items():
        assert err is not None, f"{backend} printed {out!r}"
        assert err.message == message, backend
    (out_i, err_i), *on_opencl = results.values()
    for out_c, err_c in on_opencl:
        assert out_i == out_c == ""  # nothing printed: the run stops at the failure
        # The same location and caret (the interpreter may add a note on the prelude line).
        assert err_i.render().splitlines()[:3] == err_c.render().splitlines()[:3]
        assert err_i.hints == err_c.hints


LOCATED = {
    # A grid-level concat of the wrong length: at the concat, not where it is printed.
    "concat<block>": ("val main = do<grid> {\n"
                      "  r <- concat<block> 4 (generate 4 (fn b =>\n"
                      "         pushM<block> (generate (4 + b / 2) (fn i => i * b))));\n"
                      "  forceAndPrint 16 r }\n", (2, 8),
                      "an inner array has length 5, but 4 was declared (in work-group 2)"),
    "concat<thread>": ("val main = do<grid> {\n"
                       "  r <- concat<block> 8 (generate 2 (fn b => concat<thread> 4 (generate 2 "
                       "(fn t =>\n"
                       "         return<thread> (push<thread> (generate (4 + t) (fn i => i * b)))"
                       "))));\n"
                       "  forceAndPrint 16 r }\n", (2, 45),
                       "an inner array has length 5, but 4 was declared (in work-group 0, "
                       "work-item 1)"),
    # A read out of bounds in a seqfor step: at the read, not at the seqfor.
    "seqfor read": ("val main = do<grid> {\n"
                    "  r <- concat<block> 2 (generate 1 (fn b => concat<thread> 2 (generate 1 "
                    "(fn t =>\n"
                    "         return<thread> (seqfor 2 3 (fn read => fn j =>\n"
                    "           (j, read (j + 1))))))));\n"
                    "  forceAndPrint 2 r }\n", (4, 16),
                    "index 2 is out of bounds for an array of length 2 (in work-group 0, "
                    "work-item 0)"),
}


@pytest.mark.parametrize("name", LOCATED)
def test_faults_are_located_where_the_user_wrote_them(name):
    text, (line, col), message = LOCATED[name]
    for backend in ("interp", "opencl:gpu", "opencl:cpu"):
        out, err = run(text, backend)
        assert out == "", backend  # nothing printed before the fault
        assert err is not None and err.message == message, backend
        assert (err.span.line, err.span.col) == (line, col), backend
        assert err.notes == [], backend  # no prelude note: the user wrote the call


def test_the_run_stops_at_the_failing_kernel_and_keeps_what_was_printed_before():
    text = ("val main = do<grid> {\n  a <- forceAndPrint 2 (push<grid> (iota 2)) ;\n"
            "  b <- forcePull<grid> (generate 4 (fn i => index a (i + 1))) ;\n"
            "  forceAndPrint 4 (push<grid> b) }\n")
    for backend in ("interp", "opencl"):
        out, err = run(text, backend)
        assert out == "[0,1]\n" and err is not None
        assert err.message == "index 2 is out of bounds for an array of length 2 (in work-item 1)"
        assert (err.span.line, err.span.col) == (3, 45)


FAULTS = sorted((ROOT / "tests" / "faults").glob("*.fcl"))


@pytest.mark.parametrize("path", FAULTS, ids=lambda p: p.stem)
def test_several_failures_at_once_report_the_same_one_on_every_back_end(path):
    # Of the first launch that fails: the lowest failing work-group, its first failing round,
    # that round's lowest failing work-item (tests/faults/README.md).
    text = path.read_text()
    expect = re.match(r"-- expect: (\d+):(\d+): (.*)\n", text)
    assert expect, "the first line says what is reported"
    for backend in ("interp", "opencl:gpu", "opencl:cpu"):
        out, err = run(text, backend)
        assert out == "" and err is not None, backend
        assert (err.span.line, err.span.col, err.message) == \
            (int(expect[1]), int(expect[2]), expect[3]), backend


def test_every_faulty_program_of_the_suite_fails_alike_on_both_back_ends():
    programs = [text for text, _ in CASES.values()] + [text for text, *_ in LOCATED.values()] \
        + [path.read_text() for path in FAULTS]
    for text in programs:
        reports = []
        for backend in ("interp", "opencl:gpu", "opencl:cpu"):
            out, err = run(text, backend)
            assert err is not None, (backend, text)
            reports.append((out, err.message, err.span.line, err.span.col, err.hints))
        assert reports[0] == reports[1] == reports[2], text


def test_the_lowest_failing_work_item_is_reported_whatever_the_order_they_ran_in():
    # Every element from 100 on fails, in 8 work-groups: the record keeps work-item 100's values.
    text = grid("index (iota 100) (i * 1)", 2048)
    for _ in range(3):
        _, err = run(text, "opencl")
        assert err.message == "index 100 is out of bounds for an array of length 100 " \
                              "(in work-item 100)"


def test_unsafe_compiles_no_check_and_the_cli_flag_turns_them_off(tmp_path, capsys):
    text, _ = CASES["division"]
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    root = pipeline.main_root(session)
    checked = pipeline.compile_program(session, root, pipeline.CompileOptions())
    unchecked = pipeline.compile_program(session, root, pipeline.CompileOptions(checks=False))
    assert any(k.fails for k in checked.kernels) and "fcl_report" in checked.source
    assert not any(k.fails for k in unchecked.kernels) and "fcl_report" not in unchecked.source
    path = tmp_path / "t.fcl"
    path.write_text(CASES["index"][0])
    assert cli_main(["run", "--backend", "opencl", str(path)]) == 1
    assert "index 10 is out of bounds" in capsys.readouterr().err
    cli_main(["run", "--backend", "opencl", "--unsafe", str(path)])
    assert "out of bounds" not in capsys.readouterr().err


def kernel_checks(compiled) -> list[str]:
    return [f"{k.name}: {check.message}" for k in compiled.kernels for check in k.fails]


def test_no_check_is_left_in_the_kernels_of_the_benchmarks():
    for task in tasks(FULL, np.random.default_rng(0)):
        compiled = compile_task(task, FULL.block)
        # A histogram's bins are the input's values: only the run can check them.
        data = [f"kernel1_line7: {checks.BIN}{checks.where([checks.GLOBAL])}"] \
            if task.fcl == "histogram.fcl" else []
        if task.fcl == "smvm.fcl":
            # A sparse matrix's offsets and column indices are data: only the run can check
            # the rows' lengths, where they lie in the values, and the columns in x.
            index = f"kernel1_line10: {checks.INDEX}{checks.where([checks.GLOBAL])}"
            data = [f"kernel0_line10: {checks.GENERATE_NEGATIVE}"
                    f"{checks.where([checks.GLOBAL])}", index, index]
            if not task.flatten:  # a work-item per row: not the point; the same kinds
                assert set(kernel_checks(compiled)) == set(data), task.name
                continue
            # Flattened, an element whose column fails makes its row's position checks first
            # (at its first element and past it), as the interpreter reports them first.
            data += [index, index]
        assert kernel_checks(compiled) == data, task.name
        # The checks `take` makes of the inputs' lengths run once, on the host.
        assert any(isinstance(s, pipeline.ir.Fail) for s in pipeline.ir.walk(compiled.host))


# 0.1-0.3 s a notebook, the later ones 0.5-5 s: `make test-fast` runs the small ones.
@pytest.mark.parametrize("notebook", slow_unless(FCL_NOTEBOOKS, small), ids=lambda p: p.name)
def test_no_check_is_left_in_the_kernels_of_the_course_notebooks(notebook):
    compiled = 0
    sources = list(fcl_cells(notebook))
    for n, session, root in notebook_programs(notebook):
        try:
            program = pipeline.compile_program(session, root,
                                               pipeline.CompileOptions(keep_result=True))
        except FCLError:
            continue  # a deliberate error, as in test_verify
        found = kernel_checks(program)
        if "segments" in sources[n]:
            # Rows of different lengths: how long each is and where its elements lie come
            # from offsets, which a formula's divisions or memory keep from the prover.
            kinds = (checks.GENERATE_NEGATIVE.split("{")[0], checks.INDEX.split("{")[0])
            assert all(c.split(": ", 1)[1].startswith(kinds) for c in found), f"cell {n}"
            found = []
        assert found == [], f"cell {n}"
        compiled += 1
    assert compiled > 0 or not json.loads(notebook.read_text())["cells"]


def compile_checked(text: str):
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    return pipeline.compile_program(session, pipeline.main_root(session),
                                    pipeline.CompileOptions(keep_result=True))


@pytest.mark.parametrize("guard", ["i % (2 * s) == 0 && i + s < length arr",
                                   "not (i % (2 * s) != 0 || i + s >= length arr)"])
def test_a_branch_guarded_by_and_needs_no_check(guard):
    """`c1 && c2` is C's `c1 ? c2 : 0` by the time it guards a branch: the branch's index
    `i + s` is in range because c2 holds there (a reduction step of notebook 10)."""
    program = compile_checked(
        "fun step s arr = return<block> (push<block> (generate (length arr) (fn i =>\n"
        f"  if {guard}\n"
        "  then (let right = index arr (i + s) in index arr i + right) else index arr i)))\n"
        "val main = do<grid> { xs <- forcePull<grid> (iota 1024);\n"
        "  forceM<grid> (splitUp 256 xs |> map (fn c => do<block> { a <- forcePull<block> c;"
        " step 1 a }) |> concat<block> 256) }\n")
    assert kernel_checks(program) == []


@pytest.mark.parametrize("length, checks", [(256, 0), (255, 1)])
def test_an_even_index_lies_below_the_last_even_number(length, checks):
    """Without the guard's second half, `i % 2 == 0` alone keeps `i + 1` in an array of 256 (i
    is at most 254), not in one of 255 (i = 254 reads element 255): the check stays there."""
    unguarded = compile_checked(
        "fun step s arr = return<block> (push<block> (generate (length arr) (fn i =>\n"
        "  if i % (2 * s) == 0 then (let right = index arr (i + s) in index arr i + right)\n"
        "  else index arr i)))\n"
        "val main = do<grid> { xs <- forcePull<grid> (iota 1024);\n"
        "  forceM<grid> (splitUp 256 xs |> map (fn c => do<block> { a <- forcePull<block>"
        f" (generate {length} (fn i => index c i)); step 1 a }}) |> concat<block> {length}) }}\n")
    assert len(kernel_checks(unguarded)) == checks


@pytest.mark.parametrize("length, checks", [(32, 0), (24, 1)])
def test_an_xor_index_is_bounded_by_the_next_power_of_two(length, checks):
    """A butterfly step reads `xor i h`: for i < 32 and h < 32 it is below 32, so it needs no
    check in an array of 32, and one in an array of 24."""
    program = compile_checked(
        "val main = do<grid> { xs <- forcePull<grid> (iota 1024);\n"
        "  forceM<grid> (splitUp 32 xs |> map (fn c => do<block> {\n"
        f"    a <- forcePull<block> (generate {length} (fn i => index c i));\n"
        "    return<block> (push<block> (generate 32 (fn i => index a (xor i 16)))) })\n"
        "  |> concat<block> 32) }\n")
    assert len(kernel_checks(program)) == checks


def entry_checks(source: str) -> dict[str, list[str]]:
    """The checks left in the kernels of each function of `source`, called from Python (the
    arrays' lengths known only at run time)."""
    lib = fcl.load(source)
    return {name: kernel_checks(entry.compiled()) for name, entry in lib.entry_points.items()}


def test_conditions_and_loops_tell_linear_facts():
    """`i - n >= 0` in the else branch of `i < n`, `n - 1 >= 0` inside `for i < n`, and
    `min`/`max` decided side by side: the usual ways of joining and clamping need no checks,
    whatever the lengths; an index one past them keeps its check, which fires."""
    checks = entry_checks(
        "sig append : [int] -> [int] -> Program <grid> [int]\n"
        "fun append xs ys = let n = length xs in forcePull<grid> (generate (n + length ys)\n"
        "  (fn i => if i < n then index xs i else index ys (i - n)))\n"
        "sig clamped : [int] -> Program <grid> [int]\n"
        "fun clamped xs = let n = length xs in\n"
        "  forcePull<grid> (generate n (fn i => index xs (mini (n - 1) (maxi 0 (i - 1)))))\n"
        "sig selected : [int] -> int -> Program <grid> [int]\n"
        "fun selected xs k = forcePull<grid> (generate (length xs) (fn i =>\n"
        "  if k >= 0 && i >= k then index xs (i - k) else 0))\n"
        "sig pastTheEnd : [int] -> [int] -> Program <grid> [int]\n"
        "fun pastTheEnd xs ys = let n = length xs in forcePull<grid> (generate (n + length ys)\n"
        "  (fn i => if i < n then index xs i else index ys (i - n + 1)))\n")
    assert checks == {"append": [], "clamped": [], "selected": [], "pastTheEnd": [
        f"{checks['pastTheEnd'][0].split(':')[0]}: index {{}} is out of bounds for an array of "
        "length {} (in work-item {})"]}
    for backend in ("opencl", "interp"):
        lib = fcl.load("sig pastTheEnd : [int] -> [int] -> Program <grid> [int]\n"
                       "fun pastTheEnd xs ys = let n = length xs in\n"
                       "  forcePull<grid> (generate (n + length ys)\n"
                       "  (fn i => if i < n then index xs i else index ys (i - n + 1)))\n",
                       backend=backend)
        with pytest.raises(FCLError, match="index 2 is out of bounds for an array of length 2 "
                                           r"\(in work-item 4\)"):
            lib.pastTheEnd(np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32))


def test_a_multiple_is_at_least_its_divisor():
    """Harris's interleaved step the other way round: where `(i + 1) % (2 * s) == 0`, i + 1 is
    at least 2 * s, so `i - s` is not negative (s >= 1 from the loop)."""
    program = compile_checked(
        "fun step s arr = return<block> (push<block> (generate (length arr) (fn i =>\n"
        "  if (i + 1) % (2 * s) == 0 then index arr i + index arr (i - s) else index arr i)))\n"
        "val main = do<grid> { xs <- forcePull<grid> (iota 1024);\n"
        "  forceM<grid> (splitUp 256 xs |> map (fn c => do<block> { a <- forcePull<block> c;\n"
        "  b <- power<block> 4 (fn k => step (k + 1)) (return<block> (push<block> a));\n"
        "  return<block> (push<block> b) })\n"
        "  |> concat<block> 256) }\n")
    assert kernel_checks(program) == []


# ---- adversarial programs that once crashed the compiler --------------------------------------

REPRODUCERS = {
    # A thread-level `while` (its state a thread array) in a block that also forces a local
    # array: registers.py unpacked an empty alias set.
    "thread while beside a local array": (
        "val main = do<grid> { r <- concat<block> 2 (generate 1 (fn b => do<block> { xs <- "
        "forcePull<block> (generate 2 (fn t => t)); concat<thread> 1 (generate 2 (fn t => "
        "liftM<thread> push<thread> (while<thread> (fn s => index s 0 > 1) (fn s => "
        "return<thread> (push<thread> (generate 1 (fn k => index s 0 / 2)))) (return<thread> "
        "(push<thread> (generate 1 (fn k => t + 5))))))) })) ; forceAndPrint 2 r }\n", "[1,1]\n"),
    # A checked block-level `power` whose step indexes the previous array: a check's code was
    # looked up by the identity of a statement a rewrite had replaced.
    "checked block power": (
        "val main = do<grid> { r <- concat<block> 2 (generate 1 (fn b => do<block> { a <- "
        "power<block> 1 (fn it => fn a => return<block> (push<block> (generate 2 (fn i => "
        "if i >= 1 then index a (i - 1) else 0)))) (return<block> (push<block> (generate 2 "
        "(fn i => i + 1)))) ; return<block> (push<block> a) })) ; forceAndPrint 2 r }\n",
        "[0,1]\n"),
    "block scan of 257": (
        "fun steps lg xs = power<block> lg (fn k => fn ys => return<block> (push<block> "
        "(generate (length ys) (fn i => if i >= (1 << k) then index ys (i - (1 << k)) + "
        "index ys i else index ys i)))) (return<block> (push<block> xs))\n"
        "val main = do<grid> { r <- concat<block> 257 (generate 1 (fn b => do<block> { a <- "
        "steps 9 (generate 257 (fn i => i)) ; return<block> (push<block> a) })) ; "
        "forceAndPrint 4 r }\n", "[0,1,3,6]\n"),
}


@pytest.mark.parametrize("name", REPRODUCERS)
def test_adversarial_reproducers_run_on_both_back_ends(name):
    text, expected = REPRODUCERS[name]
    for backend in ("interp", "opencl"):
        assert run(text, backend) == (expected, None), backend
