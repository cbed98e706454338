"""The memory planner (fcl/memory): copies short-circuited or aliased, arrays sharing blocks,
each decision explained, and every program printing the same with planning on and off."""
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bench.planning import lud_reference, nw_reference
from fcl import pipeline
from fcl.il import ir
from fcl.lmad.core import LMAD
from fcl.memory.check import lifetimes, plan_problems
from fcl.memory.plan import memory_plan
from fcl.viz.blocks import plan_svg
from fclgen import memory_programs
from runs import run_cl, run_interp, session_for
from test_oclgrind import oclgrind_findings
from test_serial import after

# Two parts computed by their own kernels, concatenated, then sampled.
CONCAT = """\
val main = do<grid> {
  a <- forcePull<grid> (generate 1000 (fn i => i * i)) ;
  b <- forcePull<grid> (generate 500 (fn i => 3 * i + 1)) ;
  c <- forcePull<grid> (generate 1500 (fn i =>
         if i < 1000 then index a i else index b (i - 1000))) ;
  forceAndPrint 8 (push<grid> (generate 8 (fn i => index c (i * 187))))
}
"""

# A grid loop with a temporary array in its body; its result printed from one of its buffers.
LOOP = """\
val main = do<grid> {
  r <- while<grid> (fn xs => index xs 0 < 1000)
         (fn xs => do<grid> { ys <- forcePull<grid> (map (fn x => 2 * x) xs) ;
                              return<grid> (push<grid> (map (fn y => y + 1) ys)) })
         (return<grid> (push<grid> (generate 4096 (fn i => i + 1)))) ;
  forceAndPrint 8 (push<grid> r)
}
"""

# a is dead once b is made, so c can take a's block.
CHAIN = """\
val main = do<grid> {
  a <- forcePull<grid> (generate 64 (fn i => i * 3)) ;
  b <- forcePull<grid> (generate 64 (fn i => index a (63 - i) + index a i)) ;
  c <- forcePull<grid> (generate 48 (fn i => index b ((i * 7) % 64))) ;
  forceAndPrint 48 (push<grid> c)
}
"""


def plan_of(text: str, checks: bool = True):
    session = session_for(text)
    options = pipeline.CompileOptions(checks=checks)
    return memory_plan(pipeline.lower(session, pipeline.main_root(session), options))


def kernels_of(text: str, **options) -> int:
    session = session_for(text)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(**options))
    return len(compiled.kernels)


def decisions(plan, kind: str) -> list:
    return [d for d in plan.decisions if d.kind == kind]


def same_everywhere(text: str, target: str = "auto", block_size: int = 256) -> str:
    """The program's output, the same on the interpreter and on OpenCL with planning on and
    off (asserted)."""
    expected = run_interp(text)
    for short_circuit in (True, False):
        # Verified after every step: the planner places arrays inside their blocks.
        out, _ = run_cl(text, short_circuit=short_circuit, target=target, block_size=block_size,
                        verify_il=True)
        assert out == expected, (short_circuit, text)
    return expected


def test_the_parts_of_a_concatenation_are_built_in_its_place():
    plan = plan_of(CONCAT)
    placed = {d.array: d for d in decisions(plan, "short-circuit")}
    assert {name: (d.done, d.place) for name, d in placed.items()} == {
        "arr_1": (True, LMAD(0, ((1000, 1),))), "arr_3": (True, LMAD(1000, ((500, 1),)))}
    assert "overlaps no other part's" in placed["arr_3"].why
    assert placed["arr_1"].span.line == 2 and placed["arr_3"].span.line == 3
    # The copy kernel is gone: each part's kernel writes into the concatenation.
    assert (kernels_of(CONCAT), kernels_of(CONCAT, short_circuit=False)) == (3, 4)
    (block,) = [b for b in plan.blocks if b.name == "arr_5"]
    assert [(p.array, p.place) for p in block.arrays] == [
        ("arr_1", LMAD(0, ((1000, 1),))), ("arr_3", LMAD(1000, ((500, 1),))),
        ("arr_5", LMAD(0, ((1500, 1),)))]
    assert (plan.planned.bytes, plan.unplanned.bytes) == (6032, 12032)
    assert plan.copy_bytes_saved == 2 * 1500 * 4
    assert same_everywhere(CONCAT) == "[0,34969,139876,314721,559504,874225,367,928]\n"


def test_a_part_placed_backwards_gets_a_negative_stride():
    text = CONCAT.replace("index b (i - 1000)", "index b (1499 - i)")
    (second,) = [d for d in decisions(plan_of(text), "short-circuit") if d.array == "arr_3"]
    assert second.done and second.place == LMAD(1499, ((500, -1),))
    same_everywhere(text, target="cpu")


PRINT_C = "forceAndPrint 8 (push<grid> (generate 8 (fn i => index c (i * 187))))"


KEPT = [
    # a part printed afterwards must keep its own memory
    (PRINT_C, PRINT_C + " ;\n  forceAndPrint 2 (push<grid> a)",
     "arr_1 is used after the copy (line 7)"),
    # the same part read in two places of the concatenation
    ("index b (i - 1000)", "index a (i - 500)", "the copy reads arr_1 in more than one place"),
    # every other element: not a range of the copy's index (reading past the parts' ends, so
    # without run-time checks, whose failures would make this no copy kernel)
    ("if i < 1000 then", "if i % 2 == 0 then",
     "the condition choosing arr_1 is not a range of the copy's index"),
    # not the index plus a constant
    ("index a i", "index a (mini i 998)", "the copy's index into arr_1 is not i_"),
    # only some of the part's elements
    ("index a i", "index a (i - 1)", "the copy reads elements -1..998 of arr_1, not all 1000"),
]


# The first case in the fast loop, all in `make test`.
@pytest.mark.parametrize("old, new, reason", [
    pytest.param(*case, marks=() if k == 0 else pytest.mark.slow) for k, case in enumerate(KEPT)])
def test_a_copy_kept_says_why(old, new, reason):
    text = CONCAT.replace(old, new)
    valid = "-1" not in reason and "%" not in new  # the others read outside a part
    kept = [d for d in decisions(plan_of(text, checks=valid), "short-circuit")
            if d.array == "arr_1"]
    assert kept and not kept[0].done and reason in kept[0].why, kept
    if valid:
        same_everywhere(text)


def test_a_loops_result_is_printed_from_its_buffer_and_its_temporary_made_once():
    plan = plan_of(LOOP)
    (alias,) = decisions(plan, "alias")
    assert alias.done and alias.block == "cur_4"
    (hoist,) = decisions(plan, "hoist")
    assert hoist.done and hoist.array == "arr_8"
    # Unplanned, the loop allocates its temporary in every iteration: a size nobody knows.
    assert plan.unplanned.unknown == 1 and plan.planned.unknown == 0
    assert plan.planned.bytes == 3 * 4096 * 4
    assert (kernels_of(LOOP), kernels_of(LOOP, short_circuit=False)) == (3, 4)
    assert same_everywhere(LOOP) == "[1023,1535,2047,2559,3071,3583,4095,4607]\n"


def test_an_array_made_after_anothers_last_use_takes_its_block():
    plan = plan_of(CHAIN)
    (merge,) = decisions(plan, "merge")
    assert (merge.array, merge.block) == ("arr_5", "arr_1")
    assert "arr_1 last used before arr_5 is allocated (line 3)" in merge.why
    assert [b.name for b in plan.blocks] == ["arr_1", "arr_3"]
    assert plan.planned.bytes == 2 * 64 * 4
    assert plan.unplanned.bytes == (64 + 64 + 48 + 48) * 4  # the print's copy too
    same_everywhere(CHAIN, block_size=16)
    # Without merging (as on Oclgrind), the plan that --verify-il checks merges nothing either.
    session = session_for(CHAIN)
    il = pipeline.lower(session, pipeline.main_root(session), pipeline.CompileOptions())
    unmerged = memory_plan(il, merge_blocks=False)
    assert not decisions(unmerged, "merge") and len(unmerged.blocks) == 3
    pipeline.compile_program(session, pipeline.main_root(session),
                             pipeline.CompileOptions(verify_il=True, share_blocks=False))


def test_a_slice_read_element_by_element_is_a_view():
    text = """\
val main = do<grid> {
  a <- forcePull<grid> (generate 100 (fn i => 7 * i)) ;
  s <- forcePull<grid> (generate 10 (fn i => index a (i + 40))) ;
  forceAndPrint 10 (push<grid> (generate 10 (fn i => index s (9 - i) + 1)))
}
"""
    (alias,) = decisions(plan_of(text), "alias")
    assert alias.done and alias.place == LMAD(40, ((10, 1),)) and alias.block == "arr_1"
    assert kernels_of(text) == 2
    assert same_everywhere(text) == "[" + ",".join(str(7 * (49 - i) + 1) for i in range(10)) + "]\n"


def test_a_whole_reversal_is_the_programs_own_kernel():
    # The layout the program forced (and the lessons draw) stays: its kernel is not removed.
    text = ("val main = do<grid> {\n  xs <- forcePull<grid> (iota 64) ;\n"
            "  ys <- forcePull<grid> (reverse xs) ;\n  forceAndPrint 4 (push<grid> ys)\n}\n")
    (kept,) = decisions(plan_of(text), "short-circuit")
    assert not kept.done and "reorders all of arr_1" in kept.why
    assert kernels_of(text) == 2


@pytest.mark.slow  # 1.5 s
def test_every_array_of_the_suite_lives_in_one_block(program_texts):
    # (That planning changes no program's output, the suite's program tests check: they run
    # with it on.)
    for name, text in program_texts:
        session = session_for(text)
        il = pipeline.lower(session, pipeline.main_root(session))
        plan = memory_plan(il)
        allocated = [s.var.name for s in ir.walk(il) if isinstance(s, ir.Alloc)
                     and s.level == "grid"]
        aliased = {d.array for d in plan.decisions if d.done and d.kind == "alias"}
        # An array nothing uses once the passes have run is not allocated at all (a flattened
        # scan's pieces when its one row fits in a tile).
        unused = {d.array for d in plan.decisions if d.done and d.kind == "unused"}
        placed = [p.array for b in plan.blocks for p in b.arrays]
        assert sorted(placed) == sorted(set(placed)) and set(placed) <= set(allocated), name
        # A view of a loop's buffer (a variable naming one of two) is in no block.
        assert all(array in placed or array in aliased or array in unused
                   for array in allocated), name
        assert plan.planned.bytes <= plan.unplanned.bytes, name
        assert plan.planned.unknown <= plan.unplanned.unknown, name


@pytest.fixture(scope="module")
def program_texts():
    here = Path(__file__).parent
    files = sorted((here / "programs").glob("*.fcl")) + sorted((here / "thesis").glob("*.fcl"))
    return [(f.name, f.read_text()) for f in files
            if f.name not in ("readIntCSV.fcl", "streamFile.fcl")]


@pytest.mark.slow  # about 1 s per example (four OpenCL builds)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(memory_programs(), st.sampled_from(["gpu", "cpu"]), st.sampled_from([1, 32, 256]))
def test_generated_programs_print_the_same_planned_and_not(program, target, block_size):
    assert same_everywhere(program.text, target, block_size) == program.expected, program.text


@pytest.mark.slow  # 2 s: three processes
def test_the_cli_shows_the_plan_and_turns_planning_off(tmp_path):
    src = tmp_path / "concat.fcl"
    src.write_text(CONCAT)
    shown = subprocess.run([sys.executable, "-m", "fcl", "memory", "--blocks", str(src)],
                           capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == ("global memory: 6,032 bytes in 2 blocks (without planning: 12,032 "
                        "bytes); copies removed: 2, 12,000 bytes not moved")
    assert "  arr_3      at 1000 + {(500:1)} (line 3)" in lines
    assert any(line.startswith("  short-circuit arr_1 into arr_5 at 0 + {(1000:1)} (line 2): "
                               "done: ") for line in lines)
    assert lines[-1] == ("checked apart from the planner: no two arrays written and live at "
                         "once share memory")
    off = subprocess.run([sys.executable, "-m", "fcl", "compile", "--no-short-circuit",
                          str(src)], capture_output=True, text=True, timeout=300)
    on = subprocess.run([sys.executable, "-m", "fcl", "compile", str(src)],
                        capture_output=True, text=True, timeout=300)
    assert on.stdout.count("__kernel") == 3 and off.stdout.count("__kernel") == 4


# Each step of the loop changes one block of 4 elements from the last element of the block
# before: a running sum over blocks, updated in place.
BLOCKED = """\
val main = do<grid> {
  r <- power<grid> 3 (fn k => fn xs => return<grid> (push<grid> (generate 16 (fn i =>
         if i >= 4 * (k + 1) && i < 4 * (k + 2) then index xs i + index xs (4 * (k + 1) - 1)
         else index xs i))))
       (return<grid> (push<grid> (generate 16 (fn i => i % 4 + 1)))) ;
  forceAndPrint 16 (push<grid> r)
}
"""


def test_a_loop_step_that_changes_a_block_writes_only_that_block_in_place():
    plan = plan_of(BLOCKED)
    updates = decisions(plan, "update")
    assert [(d.done, d.array, d.block) for d in updates] == [(True, "buf_2", "buf_1")] * 3
    assert [d.why.split(",")[0] for d in updates] == [
        f"only elements {lo}..{lo + 3} change" for lo in (4, 8, 12)]
    # The loop's other buffer is no longer needed; only the first step allocates.
    assert [b.name for b in plan.blocks] == ["buf_1"]
    assert [d.array for d in decisions(plan, "unused")] == ["buf_2"]
    session = session_for(BLOCKED)
    steps = dict(pipeline.compile_steps(session, pipeline.main_root(session)))
    # Each update runs over the 4 elements it changes, writing into the first buffer.
    assert steps["short-circuit"].count("parfor<grid> (i_") == 4
    for k, lo in ((4, 4), (5, 8), (6, 12)):
        assert f"parfor<grid> (i_{k} < 4) {{\n  buf_1[(i_{k} + {lo})] = " \
            f"(buf_1[(i_{k} + {lo})] + buf_1[{lo - 1}]);" in steps["short-circuit"]
    assert same_everywhere(BLOCKED) == "[" + ",".join(str(v) for v in range(1, 17)) + "]\n"


@pytest.mark.slow  # 1 s each
@pytest.mark.parametrize("old, new, reason", [
    # the update reads an element another work-item changes: a race, written in place
    ("index xs (4 * (k + 1) - 1)", "index xs (i + 1)", "may overlap the elements changed"),
    # which elements change depends on the data, read where another work-item writes
    ("if i >= 4 * (k + 1) && i < 4 * (k + 2)", "if index xs 0 > i",
     "reads buf_1[0], not only its own element"),
])
def test_an_update_kept_says_why(old, new, reason):
    text = BLOCKED.replace(old, new)
    if "i + 1" in new:  # keep the read inside the array
        text = text.replace("i < 4 * (k + 2)", "i < 4 * (k + 2) && i < 15")
    kept = [d for d in decisions(plan_of(text), "update") if not d.done]
    assert kept and reason in kept[0].why, (kept, text)
    same_everywhere(text)


def test_a_loop_over_two_buffers_updates_one_in_place_and_stops_swapping():
    # 19 steps: more than are unrolled, so a loop whose two buffers take turns.
    text = BLOCKED.replace("power<grid> 3", "power<grid> 19").replace("16", "80")
    plan = plan_of(text)
    (update,) = decisions(plan, "update")
    assert update.done and (update.array, update.block) == ("next_5", "cur_4")
    assert "each step changes only elements (4 * (iter_6 + 1))..(4 * (iter_6 + 2)) - 1" \
        in update.why
    assert [d.array for d in decisions(plan, "unused")] == ["buf_2"]
    session = session_for(text)
    steps = dict(pipeline.compile_steps(session, pipeline.main_root(session)))
    loop = steps["short-circuit"].split("seqfor")[1]
    # One kernel of 4 work-items per step, and no swap: the counter's range proves the
    # block lies inside the array.
    assert "parfor<grid> (i_8 < 4) {" in loop and "swap" not in loop
    assert same_everywhere(text) == "[" + ",".join(str(v) for v in range(1, 81)) + "]\n"
    # An update reading the next block's first element races with its writer: not in place.
    racy = text.replace("index xs (4 * (k + 1) - 1)", "index xs (4 * (k + 2) - 4 + (i % 1))")
    kept = [d for d in decisions(plan_of(racy), "update") if not d.done]
    assert kept and "may be among the elements changed" in kept[0].why
    same_everywhere(racy)


@pytest.mark.slow  # 2-5 s each on Oclgrind
@pytest.mark.parametrize("name", ["concat", "blocked", "loop", "view", "chain"])
def test_planned_programs_are_clean_under_oclgrind(name, capfd):
    text = {"concat": CONCAT.replace("1000", "100").replace("1500", "150")
            .replace("500", "50").replace("i * 187", "i * 18"),
            "blocked": BLOCKED,
            "loop": BLOCKED.replace("power<grid> 3", "power<grid> 19").replace("16", "80"),
            "view": "val main = do<grid> {\n  a <- forcePull<grid> (generate 100 (fn i => 7 * i)) ;"
                    "\n  s <- forcePull<grid> (generate 10 (fn i => index a (i + 40))) ;\n"
                    "  forceAndPrint 10 (push<grid> (generate 10 (fn i => index s (9 - i))))\n}\n",
            "chain": CHAIN}[name]
    assert oclgrind_findings(text, f"{name}.fcl", capfd) == ""


@pytest.mark.slow  # about 2 s per example on Oclgrind
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(program=memory_programs())
def test_generated_programs_planned_are_clean_under_oclgrind(program, capfd):
    assert oclgrind_findings(program.text, "generated.fcl", capfd) == "", program.text


# ---- blocked updates under a mask: the thesis's NW and LUD (bench/nw.fcl, bench/lud.fcl) ------

def bench_program(name: str, entry: str, sizes: dict[str, int], printer: str, count: int) -> str:
    defined = "".join(f"val {k} = {v}\n" for k, v in sizes.items())
    text = (Path(__file__).parent.parent / "bench" / name).read_text()
    return f"{defined}{text}\nval main = do<grid> {{ m <- {entry} ; {printer} {count} " \
           f"(push<grid> m) }}\n"


def printed(text: str) -> list[float]:
    return [float(x) for x in text.strip().strip("[]").split(",")]


@pytest.mark.slow  # 3-6 s each: two sizes, unrolled and a loop
@pytest.mark.parametrize("n, b, steps", [(32, 8, 7), (72, 4, 35)])
def test_needleman_wunsch_writes_each_diagonals_blocks_in_place(n, b, steps):
    sizes = {"n": n, "b": b, "penalty": 10}
    text = bench_program("nw.fcl", "scores", sizes, "forceAndPrint", (n + 1) ** 2)
    plan = plan_of(text)
    updates = decisions(plan, "update")
    assert updates and all(d.done for d in updates)
    # Unrolled, one update per step; a loop, one for its step.
    assert len(updates) == (steps if steps < 17 else 1)
    assert "only the elements where (r_" in updates[0].why
    assert "each reads" in updates[0].why and "only at its own element" in updates[0].why
    # The bytes the copies of unchanged elements would have moved, the masks evaluated: each
    # block changes once, so (steps x (n + 1)^2 - n^2) ints read and written.
    kept = steps * (n + 1) ** 2 - n * n
    assert sum(d.saved for d in updates) == 2 * 4 * kept and plan.unknown_savings == 0
    # The matrix lives in one block: the steps no longer need a second one.
    matrix = [block for block in plan.blocks if block.length == (n + 1) ** 2]
    assert len(matrix) == 1
    # The diagonal's blocks are built in the matrix, through the inverse of the update's
    # index: no update kernel, no compact array left (scatter.py).
    built = decisions(plan, "short-circuit")
    assert len(built) == len(updates) and all(d.done for d in built)
    assert all(d.block == updates[0].array for d in built)  # inside the array it makes
    assert "the inverse of the update's index" in built[0].why
    assert "reads" in built[0].why and "nowhere it writes" in built[0].why
    assert [b for b in plan.blocks if b.length is None or b.length < (n + 1) ** 2] == []
    if steps < 17:  # unrolled: each step's blocks drawn where they lie, b runs of b per block
        first = next(d for d in built if d.why.startswith(f"{d.array}[j]"))
        place = next(p.place for block in plan.blocks for p in block.arrays
                     if p.array == first.array)
        assert place.dims == ((1, b * (n + 1) - b), (b, n + 1), (b, 1))
        assert plan_svg(plan).count(f"<title>{first.array}: ") == b
    expected = nw_reference(sizes)
    assert printed(same_everywhere(text)) == list(expected)


@pytest.mark.slow  # 3-6 s each
@pytest.mark.parametrize("n, b", [(32, 8), (72, 4)])
def test_lu_decomposition_writes_the_trailing_blocks_in_place(n, b):
    text = bench_program("lud.fcl", "factored", {"n": n, "b": b}, "forceAndPrintDouble", n * n)
    plan = plan_of(text)
    updates = decisions(plan, "update")
    assert updates and all(d.done for d in updates)
    assert "(bc_" in updates[0].why and "only at its own element" in updates[0].why
    kept = [d for d in decisions(plan, "short-circuit") if not d.done]
    assert kept and all("only an update from one compact array" in d.why for d in kept)
    got = np.array(printed(same_everywhere(text)))
    # Printed to 5 decimals: within rounding of the unblocked factors.
    assert np.abs(got - lud_reference({"n": n})).max() < 1e-4


def test_an_update_reading_a_neighbour_under_a_mask_is_kept():
    # Step k adds the element left of each odd element: the elements changed are no range,
    # and the neighbour read may be an element another work-item changes.
    racy = """\
val main = do<grid> {
  r <- power<grid> 3 (fn k => fn xs => return<grid> (push<grid> (generate 16 (fn i =>
         if i % 2 == 1 then index xs i + index xs (i - 1) + k else index xs i))))
       (return<grid> (push<grid> (generate 16 (fn i => i)))) ;
  forceAndPrint 16 (push<grid> r)
}
"""
    kept = [d for d in decisions(plan_of(racy), "update") if not d.done]
    assert kept and "not only its own element" in kept[0].why
    assert same_everywhere(racy) == "[0,4,2,12,4,20,6,28,8,36,10,44,12,52,14,60]\n"
    # Reading only its own element, the same step is written in place under the mask.
    own = racy.replace("index xs (i - 1)", "i")
    (first, *_) = decisions(plan_of(own), "update")
    assert first.done and "only the elements where ((i_4 & 1) == 1) change" in first.why
    assert first.saved == 8 * 2 * 4  # the 8 even ints each step keeps, read and written
    assert same_everywhere(own) == "[0,7,2,15,4,23,6,31,8,39,10,47,12,55,14,63]\n"


# Each step moves 8 elements computed apart into every fourth element of the array, from 1.
SCATTERED = """\
val main = do<grid> {{
  r <- power<grid> 3 (fn k => fn xs => do<grid> {{
         t <- forcePull<grid> (generate 8 (fn j => index xs (j * 4 + {read}) + k));
         return<grid> (push<grid> (generate 32 (fn i =>
           if i % 4 == 1 then index t (i / 4) else index xs i)))
       }}) (return<grid> (push<grid> (generate 32 (fn i => i))));
  forceAndPrint 32 (push<grid> r)
}}
"""


@pytest.mark.parametrize(("read", "done", "printed"), [
    (0, True, "[0,2,2,3,4,6,6,7,8,10,10,11,12,14,14,15,16,18,18,19,20,22,22,23,24,26,26,27,"
              "28,30,30,31]"),
    # The kernel making t reads the elements t goes into: t stays apart.
    (1, False, "[0,4,2,3,4,8,6,7,8,12,10,11,12,16,14,15,16,20,18,19,20,24,22,23,24,28,26,27,"
               "28,32,30,31]"),
])
def test_an_updates_compact_array_is_built_in_place_where_the_inverse_is_proven(read, done,
                                                                                printed):
    text = SCATTERED.format(read=read)
    scattered = [d for d in decisions(plan_of(text), "short-circuit")
                 if d.array.startswith("arr_")]  # t, at each of the 3 steps
    assert len(scattered) == 3 and all(d.done == done for d in scattered)
    if done:  # i / 4 under i % 4 == 1, inverted: 4 j + 1
        assert "[j] is buf_1[((j * 4) + 1)], the inverse of the update's index" in \
            scattered[0].why
        # No compact array left, nor the update moving it.
        planned = after(text, target="gpu")["short-circuit"]
        assert not any(d.array in planned for d in scattered) and planned.count("parfor") == 4
    else:
        assert scattered[0].why == f"the kernel making {scattered[0].array} reads buf_1 where " \
                                   "it would write"
    assert same_everywhere(text) == printed + "\n"


@pytest.mark.slow  # 10-20 s on Oclgrind
@pytest.mark.parametrize("name", ["nw", "lud"])
def test_blocked_updates_are_clean_under_oclgrind(name, capfd):
    text = bench_program("nw.fcl", "scores", {"n": 16, "b": 4, "penalty": 3}, "forceAndPrint",
                         17 * 17) if name == "nw" else \
        bench_program("lud.fcl", "factored", {"n": 16, "b": 4}, "forceAndPrintDouble", 256)
    assert oclgrind_findings(text, f"{name}.fcl", capfd) == ""


# ---- the plan checked apart from the planner (fcl.memory.check) -----------------------------

def plan_and_il(text: str):
    session = session_for(text)
    il = pipeline.lower(session, pipeline.main_root(session))
    return il, memory_plan(il)


def moved(plan, array: str, block: str, place=None):
    """The plan with `array` moved into `block` (at `place`), as a faulty planner might."""
    found = next(p for b in plan.blocks for p in b.arrays if p.array == array)
    blocks = []
    for b in plan.blocks:
        arrays = tuple(p for p in b.arrays if p.array != array)
        if b.name == block:
            arrays += (replace(found, place=place if place is not None else found.place),)
        blocks.append(replace(b, arrays=arrays))
    return replace(plan, blocks=blocks)


@pytest.mark.slow  # 6-7 s: every program's plan, checked pair by pair
def test_the_plans_of_the_suite_and_the_bench_have_no_overlap(program_texts):
    from bench.planning import programs
    from bench.sizes import HERE
    texts = list(program_texts) + [
        (p.name, "".join(f"val {k} = {v}\n" for k, v in p.sizes.items())
         + (HERE / p.fcl).read_text() + f"\nval main = {p.entry}\n")
        for p in programs(tiny=True)]
    for name, text in texts:
        il, plan = plan_and_il(text)
        assert plan_problems(il, plan) == [], name


def test_arrays_live_at_once_in_one_block_are_found():
    # In CHAIN, c takes a's block (a is dead once b is made). Had the planner put b there too,
    # b (made from a) would overwrite a while it is read, and c would overwrite b.
    il, plan = plan_and_il(CHAIN)
    lives = lifetimes(il)
    (shared,) = [b for b in plan.blocks if len(b.arrays) > 1]
    a, c = shared.arrays[0].array, shared.arrays[1].array
    assert lives[a].last < lives[c].first and plan_problems(il, plan) == []
    (alone,) = [blk for blk in plan.blocks if blk is not shared]
    b = alone.arrays[0].array
    problems = plan_problems(il, moved(plan, b, shared.name))
    assert problems == [
        f"block {shared.name}: {a} at 0 + {{(64:1)}} (line 2) and {b} at 0 + {{(64:1)}} (line 3) "
        "are live at once in memory that may overlap, and neither is built inside the other",
        f"block {shared.name}: {c} at 0 + {{(48:1)}} (line 4) and {b} at 0 + {{(64:1)}} (line 3) "
        "are live at once in memory that may overlap, and neither is built inside the other"]


def test_parts_placed_over_each_other_are_found():
    # The two parts of CONCAT lie side by side in c: a at 0, b at 1000. Placed at 600, b would
    # overwrite a's last 400 elements before c is read.
    il, plan = plan_and_il(CONCAT)
    (block,) = [b for b in plan.blocks if len(b.arrays) == 3]
    b = next(p.array for p in block.arrays if str(p.place) == "1000 + {(500:1)}")
    assert plan_problems(il, plan) == []
    (problem,) = plan_problems(il, moved(plan, b, block.name, LMAD(600, ((500, 1),))))
    assert f"{b} at 600 + {{(500:1)}} (line 3) are live at once" in problem


def test_an_array_read_in_a_loop_lives_to_the_loop_end():
    # xs is written before the loop and read at the start of every step; ys is made later in
    # each step. By position ys comes after xs's last read, but the next step reads xs again:
    # xs lives to the loop's end, and may not share ys's memory.
    il, plan = plan_and_il("""\
val main = do<grid> {
  xs <- forcePull<grid> (generate 64 (fn i => i)) ;
  r <- while<grid> (fn acc => index acc 0 < 1000)
         (fn acc => do<grid> {
            ys <- forcePull<grid> (map (fn x => x + index xs 3) acc) ;
            return<grid> (push<grid> (map (fn y => 2 * y) ys)) })
         (return<grid> (push<grid> (generate 64 (fn i => 1)))) ;
  forceAndPrint 4 (push<grid> r)
}
""")
    lives = lifetimes(il)
    (loop,) = [s for s in il if isinstance(s, ir.While)]
    made = {s.var.name for s in ir.walk(loop.body) if isinstance(s, ir.Alloc)}
    xs = min((name for name in lives if name not in made), key=lambda name: lives[name].first)
    assert made and all(lives[xs].last >= lives[name].last for name in made)
    assert plan_problems(il, plan) == []
    ys = sorted(made)[0]
    home = next(b.name for b in plan.blocks if any(p.array == xs for p in b.arrays))
    assert plan_problems(il, moved(plan, ys, home))


def test_the_masked_update_count_shifts_and_wraps_as_the_kernels_do():
    # Ints wrap and shift counts are taken mod 32 in the kernels and the simplifier; the count
    # of elements a masked update changes evaluates its conditions so too.
    from fcl.il.numeric import evaluate
    from fcl.il.simplify import mk_bin
    elements = np.arange(-4, 5)
    for op in ("<<", ">>", "*"):
        for count in (1, 31, 33, 35, 2**30 + 3):
            shifted = evaluate(ir.Bin(op, ir.Var("e", ir.INT), ir.Const(count, ir.INT), ir.INT),
                                {"e": elements})
            folded = [mk_bin(op, ir.Const(int(x), ir.INT), ir.Const(count, ir.INT), ir.INT)
                      for x in elements]
            assert [int(x) for x in shifted] == [f.value for f in folded], (op, count)


def test_a_bool_takes_one_byte_of_a_block_as_in_device_memory():
    plan = plan_of("val main = do<grid> { "
                   "flags <- forcePull<grid> (generate 1000 (fn i => i % 3 == 0)); "
                   "forcePull<grid> (generate 1000 (fn i => if index flags i then 1 else 0)) }")
    assert sorted(block.bytes for block in plan.blocks) == [1000, 4000]
