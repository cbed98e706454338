"""The compiler's steps after lowering (fcl.steps): a declared list of functions from a program to
a new one, none changing its input, each one's result verified and shown on request."""
import dataclasses
from pathlib import Path

import pytest

from fcl import pipeline
from fcl.codegen.kernel import Kernel
from fcl.errors import FCLError, Source
from fcl.il import ir
from fcl.session import Session
from fcl.steps import (
    BACKEND_STEPS,
    FIXPOINTS,
    IL_STEPS,
    STEPS,
    KernelProgram,
    Settings,
    Step,
    all_step_names,
    run_steps,
    show_program,
    step_names,
    verifier,
)
from fcl.viz.steps import step_changes, steps_html, steps_text

ROOT = Path(__file__).parent
PROGRAMS = sorted([*ROOT.glob("thesis/*.fcl"), *ROOT.glob("programs/*.fcl")])

# A block-level read of a generated array whose index the ranges prove in bounds: the `bound`
# step removes both checks, `prune` the statements left.
CHECKED = """val main = do<grid> {
  r <- concat<block> 4 (generate 8 (fn b =>
         pushM<block> (generate 4 (fn i => index (generate 32 (fn j => j * 2)) (b * 4 + i)))));
  forceAndPrint 32 r }
"""


def session_of(text: str, name: str = "p.fcl") -> Session:
    session = Session.new()
    session.add_file(Source(name, text))
    return session


def test_the_steps_are_listed_in_order_each_named_once_with_a_purpose():
    names = all_step_names()
    assert len(names) == len(set(names))
    assert names.index("optimize") < names.index("unnest") < names.index("short-circuit") \
        < names.index("kernelize") < names.index("interface") < names.index("checks")
    assert all(purpose for _, purpose in step_names())
    assert STEPS == IL_STEPS + BACKEND_STEPS and {"optimize"} == FIXPOINTS
    assert pipeline.stage_names() == ["lower", *names, "emit"]


@pytest.mark.slow  # 3.5-5 s each
@pytest.mark.parametrize("target", ["auto", "cpu"])
def test_no_step_changes_the_program_it_was_given(target):
    """Each program after each step is shown when the step has run and again once all have:
    a step that changed what an earlier one made (a kernel's field, a statement list) would
    change the second showing."""
    changed = []
    for path in PROGRAMS:
        session = session_of(path.read_text(), str(path))
        try:
            root = pipeline.main_root(session)
        except FCLError:
            continue
        seen: list[tuple[str, object, str]] = []

        def keep(step: str, program, seen=seen) -> None:
            seen.append((step, program, show_program(program)))
        try:
            pipeline.compile_program(session, root, pipeline.CompileOptions(target=target),
                                     observe=keep)
        except FCLError:
            continue
        changed += [f"{path.name}: {step}" for step, program, text in seen
                    if show_program(program) != text]
        assert seen
    assert changed == []


def test_kernels_cannot_be_changed_once_made():
    kernel = Kernel("k", [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        kernel.body = [ir.Barrier("block")]  # type: ignore[misc]


def test_the_verifier_names_the_step_that_broke_the_program():
    session = session_of(CHECKED)
    il = pipeline.lower(session, pipeline.main_root(session))

    def drop_declarations(program, _settings):
        return [s for s in program if not isinstance(s, ir.Alloc)]
    broken = Step("careless", "forgets the allocations", drop_declarations)
    with pytest.raises(FCLError) as error:
        run_steps(il, [*IL_STEPS, broken], Settings(256), verifier())
    assert "careless" in error.value.message and "arr_1" in error.value.message


def test_kernels_are_verified_after_each_step_as_interface_and_checks_will_make_them():
    session = session_of(CHECKED)
    seen: list[str] = []
    options = pipeline.CompileOptions(verify_il=True)
    pipeline.compile_program(session, pipeline.main_root(session), options,
                             observe=lambda step, _: seen.append(step))
    assert seen[0] == "lower" and seen[-1] == "blocking"
    assert "checks" in seen and "kernelize" in seen


def test_compile_steps_shows_each_stage_and_the_opencl_last():
    session = session_of(CHECKED)
    views = pipeline.compile_steps(session, pipeline.main_root(session))
    names = [name for name, _ in views]
    assert names[0] == "lower" and names[-1] == "emit"
    assert names.count("bound") == 2  # the second round finds nothing more: the fixpoint
    after = dict(views)
    assert "failIf(((((b_2 * 4) + i_3) < 0)" in after["lower"]
    assert "failIf" not in after["prune"]
    assert "kernel kernel0_line2()" in after["kernelize"]
    assert "kernel kernel0_line2(arr_1)" in after["interface"]
    assert after["emit"] == pipeline.compile_program(session, pipeline.main_root(session)).source


def test_the_changes_fold_steps_that_changed_nothing():
    views = [("lower", "a\nb\nc"), ("propagate", "a\nb\nc"), ("bound", "a\nB\nc"),
             ("optimize", "a\nB\nc"), ("kernelize", "a\nB\nc\nd"), ("emit", "C code")]
    changes = step_changes(views)
    assert [c.label for c in changes] == ["lower", "propagate", "bound", "kernelize", "emit"]
    bound = changes[2]
    assert (bound.added, bound.removed) == (1, 1) and "-b" in bound.diff and "+B" in bound.diff
    text = steps_text(changes)
    assert "== unchanged: propagate" in text and "== emit:" in text and "C code" in text
    html = steps_html(changes)
    assert html.count("<details>") == 4 and "unchanged: propagate" in html
    assert "<span class='add'>+B</span>" in html and "<span class='del'>-b</span>" in html


def test_a_kernel_program_shows_its_kernels_decisions():
    session = session_of((ROOT / "thesis" / "transpose.fcl").read_text())
    views = dict(pipeline.compile_steps(session, pipeline.main_root(session)))
    assert "as 64 rows of 4" not in views["order"] and "as 64 rows of 4" in views["tiles"]
    assert "local int arr_7[16]" in views["tiles"]


def test_a_kernel_program_is_host_then_kernels():
    kernel = Kernel("k", [ir.Barrier("block")], block_size=64)
    text = show_program(KernelProgram([ir.Print(ir.Const(1, ir.INT),
                                                 ir.Var("a", ir.ArrayType(ir.INT)))], [kernel]))
    assert text.splitlines()[0] == "printIntArray(1, a);"
    assert "kernel k()  -- group 64" in text and "synchronize<block>;" in text


def test_a_kernel_from_another_cell_says_which():
    """A kernel is named after the line its loop comes from; when that line is in another cell
    (or file) than the program's, its name says which: `%%opencl` can colour only its own."""
    import io

    from fcl.notebook import Workspace
    workspace = Workspace()
    workspace.prompt = 3
    workspace.execute("fun doubled n =\n  forcePull<grid> (generate n (fn i => 2 * i))",
                      io.StringIO(), io.StringIO())
    workspace.prompt = 4
    names = [k.name for k in workspace.compile_cell(
        "do<grid> {\n  a <- doubled 8 ;\n  forcePull<grid> (generate 8 (fn i => index a i + 1))\n}"
    ).kernels]
    assert names == ["kernel0_cell3_line2", "kernel1_line3"]
