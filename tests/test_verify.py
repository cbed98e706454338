"""The IL verifier (fcl.il.verify) and the kernel verifier (fcl.codegen.verify): every program
of the tests, the benchmarks and the course notebooks compiles with the IL verified after every
pass, and hand-built broken IL is rejected with a message that names what is wrong.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench.sizes import FULL, TINY
from bench.tasks import fcl_source, tasks
from course import FCL_NOTEBOOKS, notebook_programs, small
from fcl.cli import main as cli_main
from fcl.codegen.kernel import FailFlag, Kernel, Launch, Special, StridedFor, WideInt
from fcl.codegen.verify import verify_kernels
from fcl.errors import FCLError, Source, Span
from fcl.il import ir
from fcl.il.verify import verify
from fcl.pipeline import CompileOptions, compile_il, compile_program, main_root
from fcl.session import Session
from marks import slow_unless

ROOT = Path(__file__).parents[1]
# Programs with a `main` (tests/python holds entry points without one: test_python verifies them).
PROGRAMS = sorted(p for p in (ROOT / "tests").rglob("*.fcl") if p.parent.name != "python")
CONFIGS = [(256, False), (256, True), (32, False), (32, True)]  # (block size, bounds checks)


def is_internal(error: FCLError) -> bool:
    return error.message.startswith("internal:")


def compile_verified(session: Session, root, block: int, checks: bool, keep: bool = False):
    """Compile with the verifier on; an ordinary FCL error (the program is meant to fail, or
    needs what the compiler does not do) is no concern here."""
    options = CompileOptions(block_size=block, checks=checks, keep_result=keep,
                             verify_il=True)
    try:
        compiled = compile_program(session, root, options)
        # The kernels of a CPU device too (serial work-groups), from the IL it reshapes (its
        # irregular rows not flattened).
        compile_il(compiled.cpu_il or compiled.il, replace(options, target="cpu"))
        return compiled
    except FCLError as error:
        if is_internal(error):
            raise
        return None


# ---- every program passes ----------------------------------------------------------------------

# 112 programs, 0.05-1 s each (rows.fcl 3 s): `make test-fast` verifies every fourth but that.
@pytest.mark.parametrize("path", slow_unless(PROGRAMS, lambda p: PROGRAMS.index(p) % 4 == 0
                                             and p.name != "rows.fcl"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_test_program_verifies_after_every_pass(path):
    session = Session.new()
    try:
        session.add_file(Source(str(path), path.read_text()))
        root = main_root(session)
    except FCLError:
        pytest.skip("does not type-check or has no main: nothing to compile")
    for block, checks in CONFIGS:
        compile_verified(session, root, block, checks)


@pytest.mark.slow  # 1.6-1.7 s
def test_every_benchmark_verifies():
    compiled = 0
    for sizes in (TINY, FULL):
        for task in tasks(sizes, np.random.default_rng(0)):
            session = Session.new()
            session.add_file(Source(task.fcl, fcl_source(task)))
            for checks in (False, True):
                compiled += compile_verified(session, main_root(session), sizes.block, checks,
                                             keep=True) is not None
    assert compiled > 0


# 0.1-0.3 s a notebook, the later ones 0.5-3.7 s: `make test-fast` runs the small ones.
@pytest.mark.parametrize("notebook", slow_unless(FCL_NOTEBOOKS, small), ids=lambda p: p.name)
def test_every_notebook_program_verifies(notebook):
    compiled = 0
    for n, session, root in notebook_programs(notebook):
        # One configuration a cell, taking turns: the notebooks are many programs.
        block, checks = CONFIGS[n % len(CONFIGS)]
        compiled += compile_verified(session, root, block, checks, keep=True) is not None
    assert compiled > 0


def test_fcl_compile_verify_il_prints_the_opencl(capsys):
    path = ROOT / "tests" / "programs" / "while.fcl"
    assert cli_main(["compile", "--verify-il", "--unsafe", str(path)]) == 0
    assert "__kernel void" in capsys.readouterr().out


def test_fcl_compile_verify_il_reports_an_ordinary_error_as_such(tmp_path, capsys):
    bad = tmp_path / "bad.fcl"
    bad.write_text("val main = 1 +\n")
    assert cli_main(["compile", "--verify-il", str(bad)]) == 1
    captured = capsys.readouterr()
    assert "__kernel" not in captured.out and "internal" not in captured.err


# ---- broken IL is rejected ---------------------------------------------------------------------

INT, DOUBLE, BOOL = ir.INT, ir.DOUBLE, ir.BOOL
ints = ir.ArrayType(INT)


def v(name: str, t: ir.ILType = INT) -> ir.Var:
    return ir.Var(name, t)


def c(value: int) -> ir.Const:
    return ir.Const(value, INT)


def rejected(stmts: list[ir.Stmt]) -> str:
    with pytest.raises(FCLError) as caught:
        verify("sweep", stmts)
    message = caught.value.message
    assert message.startswith("internal: the IL after sweep is not well formed: ")
    assert any("bug in FCL" in hint for hint in caught.value.hints)
    return message


def test_a_well_formed_program_passes():
    a, i, go = v("a", ints), v("i"), v("go", BOOL)
    verify("lower", [
        ir.Alloc(a, c(4), "grid"),
        ir.ParFor("grid", i, c(4), [ir.Store(a, i, ir.Bin("*", i, c(2), INT))]),
        ir.Declare(go, ir.Const(True, BOOL)),
        # The test's declarations are seen by the condition and the body.
        ir.While([ir.Declare(v("t"), ir.Index(a, c(0)))],
                 ir.Bin("<", v("t"), c(3), BOOL), [ir.Store(a, c(0), v("t"))]),
        ir.Print(c(4), a),
    ])


def test_use_before_declaration():
    message = rejected([ir.Declare(v("y"), ir.Bin("+", v("x"), c(1), INT)),
                        ir.Declare(v("x"), c(2))])
    assert "`x` is used before it is declared" in message


def test_use_outside_the_declaring_block():
    message = rejected([ir.If(ir.Const(True, BOOL), [ir.Declare(v("x"), c(1))], []),
                        ir.Declare(v("y"), v("x"))])
    assert "`x` is used outside the block that declares it" in message


def test_declared_twice():
    message = rejected([ir.Declare(v("x"), c(1)),
                        ir.SeqFor(v("x"), c(3), [])])
    assert "`x` is declared twice" in message


def test_add_int_and_double():
    message = rejected([ir.Declare(v("x"), ir.Bin("+", c(1), ir.Const(1.5, DOUBLE), INT))])
    assert "applies `+` to int and double" in message


def test_store_double_into_int_array():
    a = v("a", ints)
    message = rejected([ir.Alloc(a, c(4), "grid"), ir.Store(a, c(0), ir.Const(1.5, DOUBLE))])
    assert "stored into `a`" in message and "has type double, not int" in message


def test_a_part_placed_past_the_end_of_its_block():
    # A part of 4 elements placed at offset 8 of an array of 10: the memory planner's kind of
    # mistake (a place outside the destination's block).
    a, i = v("a", ints), v("i")
    message = rejected([ir.Alloc(a, c(10), "grid"),
                        ir.ParFor("grid", i, c(4), [ir.Store(a, ir.Bin("+", i, c(8), INT), i)])])
    assert "a store into `a` at indices 8..11, outside its memory block of 10 elements" in message
    # Placed at offset 6 it fits; under a check or a condition a store may be guarded; and a
    # variable assigned later in a loop has no single range.
    fits = [ir.Alloc(a, c(10), "grid"),
            ir.ParFor("grid", i, c(4), [ir.Store(a, ir.Bin("+", i, c(6), INT), i)])]
    verify("sweep", fits)
    guarded = [ir.Alloc(a, c(10), "grid"),
               ir.ParFor("grid", i, c(12), [
                   ir.Fail(ir.Bin(">=", i, c(10), BOOL), "index {} is out of bounds", [i]),
                   ir.Store(a, i, i)])]
    verify("sweep", guarded)
    k = v("k")
    counted = [ir.Alloc(a, c(10), "grid"), ir.Declare(k, c(0)),
               ir.SeqFor(i, c(12), [ir.If(ir.Bin("<", k, c(10), BOOL), [ir.Store(a, k, k)], []),
                                    ir.Assign(k, ir.Bin("+", k, c(1), INT))])]
    verify("sweep", counted)
    unguarded = counted[:2] + [ir.SeqFor(i, c(12), [ir.Store(a, k, k),
                                                     ir.Assign(k, ir.Bin("+", k, c(1), INT))])]
    verify("sweep", unguarded)  # k's range is not known: nothing to check


def test_if_with_an_int_condition():
    message = rejected([ir.Declare(v("n"), c(1)), ir.If(v("n"), [], [])])
    assert "condition" in message and "has type int, not bool" in message


def test_barrier_on_the_host():
    assert "a barrier on the host" in rejected([ir.Barrier("block")])


def test_barrier_in_thread_level_code():
    i = v("i")
    message = rejected([ir.ParFor("grid", i, c(4), [ir.Barrier("block")])])
    assert "a barrier in code each work-item runs on its own" in message


def test_print_inside_a_kernel_loop():
    a, i = v("a", ints), v("i")
    message = rejected([ir.Alloc(a, c(4), "grid"),
                        ir.Distribute("grid", i, c(4), [ir.Print(c(4), a)])])
    assert "host operation (Print) inside parallel code" in message


def test_kernel_nodes_are_not_il():
    message = rejected([ir.Declare(v("x"), Special("local_id"))])
    assert "Special expression" in message


def test_the_error_is_located_at_the_statement():
    span = Span(Source("prog.fcl", "val main = 1\n"), 4, 8)
    bad = ir.Declare(v("x"), v("nowhere"), span=span)
    with pytest.raises(FCLError) as caught:
        verify("bound", [bad])
    assert caught.value.span is span
    assert "(in `int x = nowhere;`)" in caught.value.message


# ---- broken kernels are rejected ---------------------------------------------------------------

def group_kernel(body: list[ir.Stmt], **fields) -> Kernel:
    """A one-work-group-per-iteration kernel (barriers allowed at its top level)."""
    g = v("g")
    return Kernel("k0", [ir.Declare(g, Special("group_id")), *body], group_var=g,
                  group_bound=c(1), block_size=32, **fields)


def kernel_rejected(kernel: Kernel, host: list[ir.Stmt] | None = None) -> str:
    with pytest.raises(FCLError) as caught:
        verify_kernels(host if host is not None else [Launch(kernel, c(1))], [kernel])
    assert caught.value.message.startswith("internal: the IL after kernelize and shape")
    return caught.value.message


def test_a_well_formed_kernel_passes():
    n, a, i = v("n"), v("a", ints), v("i")
    kernel = group_kernel([
        ir.Barrier("block"),
        StridedFor(i, Special("local_id"), n, Special("local_size"),
                   [ir.Store(a, WideInt(i, i, truncate=False), c(0))]),
        ir.Barrier("block"),
        FailFlag(ir.Bin("<", n, c(0), BOOL), 1),
    ], params=[a, n], fails=[ir.Fail(ir.Bin("<", n, c(0), BOOL), "negative")])
    groups = ir.Bin("/", n, Special("local_size"), INT)
    verify_kernels([ir.Declare(n, c(64)), ir.Alloc(a, n, "grid"), Launch(kernel, groups)],
                   [kernel])


def test_barrier_inside_a_branch_on_the_local_id():
    kernel = group_kernel([ir.If(ir.Bin("<", Special("local_id"), c(4), BOOL),
                                 [ir.Barrier("block")], [])])
    assert "barrier inside a branch on the work-item's local id" in kernel_rejected(kernel)


def test_barrier_inside_a_branch_on_a_value_computed_from_the_local_id():
    # A warp's number: the warps whose part this round is past the last would skip it.
    warp, part = v("warp"), v("j")
    kernel = group_kernel([
        ir.Declare(warp, ir.Bin("/", Special("local_id"), c(32), INT)),
        ir.Declare(part, ir.Bin("+", warp, c(8), INT)),
        ir.If(ir.Bin("<", part, c(12), BOOL), [ir.Barrier("block")], [])])
    assert "barrier inside a branch on `j`, which differs between work-items" in \
        kernel_rejected(kernel)


def test_barrier_inside_a_loop_whose_bound_only_some_work_items_share():
    limit, k = v("limit"), v("k")
    kernel = group_kernel([
        ir.Declare(limit, c(0)),
        ir.If(ir.Bin("<", Special("local_id"), c(4), BOOL), [ir.Assign(limit, c(3))], []),
        ir.SeqFor(k, limit, [ir.Barrier("block")])])
    assert "barrier inside a loop whose bound differs between work-items" in \
        kernel_rejected(kernel)


def test_barrier_inside_a_loop_over_work_items():
    i = v("i")
    kernel = group_kernel([StridedFor(i, Special("local_id"), c(100), c(32),
                                      [ir.Barrier("block")])])
    assert "barrier inside a loop over work-items" in kernel_rejected(kernel)


def test_barrier_in_a_kernel_without_a_group_loop():
    kernel = Kernel("k0", [ir.Barrier("block")])
    assert "barrier in a kernel of one work-item per iteration" in kernel_rejected(kernel)


def test_fail_flag_code_out_of_range():
    fail = ir.Fail(ir.Const(True, BOOL), "always")
    kernel = group_kernel([FailFlag(ir.Const(True, BOOL), 2)], fails=[fail])
    assert "failure code 2" in kernel_rejected(kernel)


def test_fail_flag_code_twice():
    fails = [ir.Fail(ir.Const(True, BOOL), "one"), ir.Fail(ir.Const(True, BOOL), "two")]
    flag = FailFlag(ir.Const(True, BOOL), 1)
    kernel = group_kernel([flag, FailFlag(ir.Const(True, BOOL), 1)], fails=fails)
    assert "failure code 1 is used twice" in kernel_rejected(kernel)


def test_a_check_left_unnumbered_in_a_kernel():
    kernel = group_kernel([ir.Fail(ir.Const(True, BOOL), "unchecked")])
    assert "a Fail statement inside a kernel" in kernel_rejected(kernel)


def test_undefined_kernel_variable():
    kernel = group_kernel([ir.Declare(v("y"), ir.Bin("*", v("x"), c(2), INT))])
    message = kernel_rejected(kernel)
    assert "`x` is used before it is declared" in message and "(kernel k0)" in message


def test_kernel_parameter_undefined_on_the_host():
    kernel = group_kernel([ir.Declare(v("y"), v("n"))], params=[v("n")])
    assert "takes `n` (int), which is not defined at its launch" in kernel_rejected(kernel)


def test_work_item_ids_on_the_host():
    kernel = group_kernel([])
    message = kernel_rejected(kernel, [Launch(kernel, Special("group_id"))])
    assert "work-item builtin group_id" in message


def test_kernel_never_launched():
    assert "kernel k0 is never launched" in kernel_rejected(group_kernel([]), [])


def test_wide_int_of_a_double():
    x = v("x", DOUBLE)
    kernel = group_kernel([ir.Declare(x, ir.Const(1.0, DOUBLE)),
                           ir.Declare(v("y"), WideInt(x, x, truncate=True))])
    assert "an index computed in size_t (`x`) has type double" in kernel_rejected(kernel)


def test_a_faulty_memory_plan_is_an_internal_error(monkeypatch):
    """After the memory steps the verifier checks the plan apart from the planner
    (fcl.memory.check). A planner that put b in a's block, where b overwrites a as it reads it,
    is caught there."""
    from fcl import steps
    from fcl.memory.plan import memory_plan
    text = ("val main = do<grid> {\n"
            "  a <- forcePull<grid> (generate 64 (fn i => i * 3)) ;\n"
            "  b <- forcePull<grid> (generate 64 (fn i => index a (63 - i))) ;\n"
            "  forceAndPrint 4 (push<grid> b)\n}\n")

    def faulty(il, merge_blocks):
        plan = memory_plan(il, merge_blocks)
        a_block, b_block = plan.blocks
        return replace(plan, blocks=[replace(a_block, arrays=a_block.arrays + b_block.arrays)])
    monkeypatch.setattr(steps, "memory_plan", faulty)
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    with pytest.raises(FCLError) as info:
        compile_program(session, main_root(session), CompileOptions(verify_il=True))
    assert info.value.message.startswith(
        "internal: the memory plan after blocks is not valid: block arr_1: arr_1 at 0 + "
        "{(64:1)} (line 2) and arr_3 at 0 + {(64:1)} (line 3) are live at once")
    assert "a bug in FCL's compiler" in info.value.hints[0]
