"""The warp level: its place among the levels, its primitives on both back ends, #WarpSize, and
the code it becomes where the device has no sub-groups (a warp's lanes in one work-item)."""
import io
import operator
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fcl
from fcl import pipeline
from fcl.cli import main as fcl_main
from fcl.errors import FCLError
from fcl.interp.eval import RunConfig
from fcl.notebook import Workspace
from marks import sampled
from runs import compiled_source, run_cl, run_interp, session_for
from test_memory import same_everywhere
from test_oclgrind import oclgrind_findings
from test_programs import tree_reduce, tree_scan
from test_types import types_of


def warps_program(part: str, n: int, per_warp: int, lanes: int = 32, values: str = "i * 7 % 13",
                  elem: str = "int") -> str:
    """A program whose warps each run `part` on `lanes` of n values and print `per_warp`
    results each: one block of n / lanes warps."""
    warps = n // lanes
    printer = "forceAndPrint" if elem == "int" else "forceAndPrintDouble"
    return f"""\
sig part : [{elem}] -> Program<warp> [{elem}]<warp>
fun part xs = {part}

val main = do<grid> {{
  r <- forceM<grid> (concat<block> {warps * per_warp} (generate 1 (fn b =>
         concat<warp> {per_warp} (map part (splitUp {lanes} (generate {n} (fn i => {values})))))));
  {printer} {warps * per_warp} (push<grid> r)
}}
"""


def ints(text: str) -> list[int]:
    return [int(x) for x in text.strip().strip("[]").split(",")]


# ---- the level ---------------------------------------------------------------------------------

def test_a_block_of_warps_is_one_level_up_and_warp_prints_as_written():
    program = ("sig sums : [int] -> Program<1+warp> [int]<1+warp>\n"
               "fun sums xs = concat<warp> 1 (map (fn lanes => reduceWarp addi lanes "
               "|> liftM<warp> push<warp>) (splitUp #WarpSize xs))\n"
               "fun lanes<l> xs = forcePull<l> xs\n"
               "val inWarp = lanes<warp>")
    assert types_of(program, prelude=True)[-3:] == [
        "sums : [int] -> Program <block> [int]<block>",
        "lanes : forall 'a <l>. ['a] -> Program <l> ['a]",
        "inWarp : forall 'a. ['a] -> Program <warp> ['a]"]


@pytest.mark.parametrize("code, levels", [
    # Thread-level parts make a block, not a warp: the warp's lanes are no thread's parts.
    ("concat<thread> 1 (generate 1 (fn i => reduceWarp addi (iota 4) |> liftM<warp> "
     "push<warp>))", ("thread", "warp")),
    # A warp primitive belongs to a warp, not a whole block.
    ("do<block> { s <- reduceWarp addi (iota 4) ; pushM<block> s }", ("block", "warp")),
])
def test_warp_code_outside_a_warp_is_a_level_error(code, levels):
    with pytest.raises(FCLError) as caught:
        types_of(f"val bad = {code}", prelude=True)
    text = caught.value.render()
    assert all(f"`{level}`" in text or f"<{level}>" in text for level in levels), text


def test_warp_is_still_a_level_variable_where_one_is_declared_so():
    # The original has no warp level: its programs may call a level variable `warp`.
    program = ("sig copy : forall <warp> 'a. ['a] -> Program<warp> ['a]\n"
               "fun copy<warp> xs = force<warp> (push<warp> xs)\n"
               "val main = do<grid> { r <- copy<grid> (iota 3) ; forceAndPrint 3 (push<grid> r) }")
    assert types_of(program, prelude=True)[0] == \
        "copy : forall 'a <warp>. ['a] -> Program <warp> ['a]"
    assert same_everywhere(program) == "[0,1,2]\n"


def test_a_misspelt_warp_is_caught_as_the_other_levels_are():
    with pytest.raises(FCLError) as caught:
        types_of("sig f : [int] -> Program<wrap> [int]\nfun f xs = forcePull<warp> xs",
                 prelude=True)
    assert "did you mean `warp`?" in caught.value.render()


# ---- the primitives ------------------------------------------------------------------------------

# Kernels shaped for a GPU run a warp's lanes as work-items, for a CPU as one work-item's loop;
# both shapes run on every device.
TARGETS = ("gpu", "cpu")

SHUFFLES = {
    "shuffleXor 5 xs": lambda lanes: [lanes[i ^ 5] for i in range(32)],
    "shuffleUp 3 xs": lambda lanes: [lanes[i - 3] if i >= 3 else lanes[i] for i in range(32)],
    "shuffleDown 3 xs": lambda lanes: [lanes[i + 3] if i + 3 < 32 else lanes[i]
                                       for i in range(32)],
    "broadcast 7 xs": lambda lanes: [lanes[7]] * 32,
    "shuffle (fn i => 31 - i) xs": lambda lanes: lanes[::-1],
    "scanWarp maxi xs": lambda lanes: tree_scan(max, lanes),
}


@pytest.mark.parametrize("call", sampled(SHUFFLES, 3))  # 0.3 s each
def test_shuffles_and_scans_give_each_lane_its_value_on_every_back_end(call):
    values = [(i * 37 + 11) % 101 - 50 for i in range(64)]
    text = warps_program(f"do<warp> {{ ys <- {call} ; pushM<warp> ys }}", 64, 32,
                         values="(i * 37 + 11) % 101 - 50")
    expected = SHUFFLES[call](values[:32]) + SHUFFLES[call](values[32:])
    for target in TARGETS:
        assert ints(same_everywhere(text, target=target)) == expected


@pytest.mark.slow  # 0.5 s
def test_votes_count_any_and_all_over_the_lanes():
    part = ("do<warp> { c <- ballotCount (map (fn x => x > 6) xs) ; "
            "a <- anyWarp (map (fn x => x == 12) xs) ; l <- allWarp (map (fn x => x < 12) xs) ; "
            "pushM<warp> (generate 3 (fn k => if k == 0 then index c 0 "
            "else if k == 1 then b2i (index a 0) else b2i (index l 0))) }")
    values = [i * 7 % 13 for i in range(96)]
    expected = []
    for w in range(3):
        lanes = values[32 * w:32 * w + 32]
        expected += [sum(x > 6 for x in lanes), int(12 in lanes), int(all(x < 12 for x in lanes))]
    for target in TARGETS:
        assert ints(same_everywhere(warps_program(part, 96, 3), target=target)) == expected


@pytest.mark.slow  # about 1 s per example
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lanes=st.integers(1, 40), a=st.integers(1, 97), b=st.integers(0, 50))
def test_a_tree_over_any_number_of_lanes_keeps_the_operands_order(lanes, a, b):
    # `fn x y => x - y` is not associative: the result shows the exact order of the tree.
    part = ("do<warp> { r <- reduceWarp (fn x => fn y => x - y) xs ; "
            "s <- scanWarp (fn x => fn y => x * 3 - y) xs ; "
            f"pushM<warp> (generate {lanes + 1} (fn k => if k == 0 then index r 0 "
            "else index s (k - 1))) }")
    values = [(i * a + b) % 29 - 14 for i in range(lanes)]
    expected = tree_reduce(operator.sub, values) + tree_scan(lambda x, y: x * 3 - y, values)
    text = warps_program(part, lanes, lanes + 1, lanes=lanes, values=f"(i * {a} + {b}) % 29 - 14")
    wrapped = [(v + 2**31) % 2**32 - 2**31 for v in expected]  # ints wrap as on a device
    for target in TARGETS:
        assert ints(same_everywhere(text, target=target)) == wrapped


@pytest.mark.slow  # 0.4 s
def test_double_sums_follow_the_tree_not_the_input_order():
    values = [1.0e16 if i % 4 == 0 else -1.0e16 if i % 4 == 2 else float(i) for i in range(32)]
    text = warps_program("do<warp> { r <- reduceWarp addd xs ; pushM<warp> r }", 32, 1,
                         values="if i % 4 == 0 then 1.0e16 else if i % 4 == 2 "
                                "then negated 1.0e16 else i2d i", elem="double")
    (total,) = tree_reduce(operator.add, values)
    assert total != sum(values)  # the order shows
    for target in TARGETS:
        assert same_everywhere(text, target=target) == f"[{total:.5f}]\n"


def test_no_lanes_reduce_to_nothing():
    text = warps_program("do<warp> { r <- reduceWarp addi (take 0 xs) ; s <- scanWarp addi "
                         "(take 0 xs) ; pushM<warp> (generate (1 + lengthPull r + lengthPull s) "
                         "(fn k => 7)) }", 32, 1)
    assert same_everywhere(text) == "[7]\n"


def test_a_lane_out_of_range_is_the_same_error_on_every_back_end():
    text = warps_program("do<warp> { ys <- shuffleXor 32 xs ; pushM<warp> ys }", 64, 32)
    rendered = []
    for run in (run_interp, lambda t: run_cl(t, target="gpu")[0],
                lambda t: run_cl(t, target="cpu")[0]):
        with pytest.raises(FCLError) as caught:
            run(text)
        rendered.append(caught.value.render().splitlines()[:3])
    assert rendered[0] == rendered[1] == rendered[2]
    assert "index 32 is out of bounds for an array of length 32" in rendered[0][0]


def test_lanes_that_fail_alike_report_the_first_lane_on_every_back_end():
    # Lanes 3 and 5 read outside the warp: the interpreter reports lane 3's index, the first.
    # Lanes in parallel would report the lowest value (33); a kernel with such a check keeps
    # a warp's lanes in one work-item, and says why.
    text = warps_program("do<warp> { ys <- shuffle (fn i => if i == 3 then 40 else if i == 5 "
                         "then 33 else i) xs ; pushM<warp> ys }", 64, 32)
    rendered = []
    for run in (run_interp, lambda t: run_cl(t, target="gpu")[0],
                lambda t: run_cl(t, target="cpu")[0]):
        with pytest.raises(FCLError) as caught:
            run(text)
        rendered.append(caught.value.render().splitlines()[0])
    assert rendered == ["prog.fcl:2:32: error: index 40 is out of bounds for an array of length "
                        "32 (in work-group 0, work-item 0)"] * 3
    assert "since a run-time check in a lane loop may fail" in compiled_source(text, target="gpu")


# ---- #WarpSize -----------------------------------------------------------------------------------

SIZED = """\
val main = do<grid> {
  r <- forceM<grid> (concat<block> 2 (generate 1 (fn b => concat<warp> 1
         (map (fn xs => do<warp> { s <- reduceWarp addi xs ; pushM<warp> s })
              (splitUp #WarpSize (generate (2 * #WarpSize) (fn i => i))))))) ;
  forceAndPrint 2 (push<grid> r) ;
  forceAndPrint 1 (push<grid> (generate 1 (fn i => #WarpSize)))
}
"""


def test_the_warp_size_is_an_option_that_both_back_ends_read():
    expected = {32: "[496,1520]\n[32]\n", 8: "[28,92]\n[8]\n"}
    for size, output in expected.items():
        out = io.StringIO()
        session = session_for(SIZED)
        pipeline.run_interpreter(session, pipeline.main_root(session),
                                 RunConfig(out=out, warp_size=size))
        assert out.getvalue() == output
        assert run_cl(SIZED, warp_size=size)[0] == output


def test_the_command_line_sets_the_warp_size(tmp_path, capsys):
    path = tmp_path / "sized.fcl"
    path.write_text(SIZED)
    for backend in ("interp", "opencl"):
        assert fcl_main(["run", "--backend", backend, "--warp-size", "4", str(path)]) == 0
        assert capsys.readouterr().out == "[6,22]\n[4]\n"
    assert fcl_main(["run", "--warp-size", "0", str(path)]) != 0
    assert "the warp size must be positive, not 0" in capsys.readouterr().err


# ---- what it becomes -----------------------------------------------------------------------------

BLOCK_OF_WARPS = """\
sig blockSum : [int] -> Program<block> [int]<block>
fun blockSum xs =
  let byWarp = fn lanes => do<warp> { s <- reduceWarp addi lanes ; pushM<warp> s } in
  do<block> {
    sums <- forceM<block> (concat<warp> 1 (map byWarp (splitUp #WarpSize xs)));
    concat<warp> 1 (generate 1 (fn w => byWarp sums))
  }

val main = do<grid> {
  r <- forceM<grid> (concat<block> 1 (map blockSum (splitUp 256 (generate 1024 (fn i => i)))));
  forceAndPrint 4 (push<grid> r)
}
"""


def test_on_a_gpu_the_lanes_are_work_items_and_the_warps_arrays_local_slices():
    source = compiled_source(BLOCK_OF_WARPS, target="gpu")
    # Warp w is work-items [32 w, 32 w + 32); its arrays lie at w times their length.
    warp = re.search(r"int (warp_\d+) = \(\(\(int\)get_local_id\(0\)\) / 32\);", source)
    assert warp and re.search(r"int lane_\d+ = \(\(\(int\)get_local_id\(0\)\) % 32\);", source)
    assert re.search(rf"buf_\d+\[\(\({warp[1]} \* 32\) \+ i_\d+\)\] = ", source)
    # Each lane loop ends with a barrier, without sub-groups the work-group's: the 32 values
    # loaded, 5 steps of a tree, the warps' sums placed; 8 sums loaded, 3 steps, the block's
    # sum placed; but none at the kernel's end.
    assert source.count("barrier(") == (1 + 5 + 1) + (1 + 3 + 1) - 1
    # The kernel says so, for each of its two warp steps.
    assert source.count("/* warp code of line 5: warp w's 32 lanes are work-items 32w to "
                        "32w + 31, its arrays in local memory */") == 1
    expected = "[" + ",".join(str(sum(range(256 * b, 256 * b + 256))) for b in range(4)) + "]\n"
    for target in TARGETS:
        assert same_everywhere(BLOCK_OF_WARPS, target=target) == expected


def test_on_a_cpu_one_work_item_runs_a_warps_lanes_in_turn():
    source = compiled_source(BLOCK_OF_WARPS, target="cpu")
    assert "barrier(" not in source and "warp_" not in source
    assert "/* warp code of line 6: one work-item runs each warp's 32 lanes in turn, since the " \
        "kernel is shaped for a CPU (a serial work-group) */" in source
    assert re.search(r"for \(int j_\d+ = 0; j_\d+ < 8; j_\d+\+\+\)", source)


@pytest.mark.parametrize("part, why", [
    # The tree's depth follows the part's first value.
    ("do<warp> { r <- reduceWarp addi (take (index xs 0 % 7 + 1) xs) ; pushM<warp> r }",
     "an array's length depends on the part or on memory"),
    # A `while` over the lanes: its buffers swap at run time.
    ("do<warp> { ys <- while<warp> (fn a => index a 0 < 100) (fn a => pushM<warp> "
     "(map (fn x => x * 2 + 1) a)) (pushM<warp> xs) ; pushM<warp> (take 1 ys) }",
     "a loop's arrays swap"),
])
def test_the_kernel_says_why_a_warps_lanes_stay_in_one_work_item(part, why):
    text = warps_program(part, 64, 1)
    source = compiled_source(text, target="gpu")
    assert f"one work-item runs each warp's 32 lanes in turn, since {why}" in source
    assert same_everywhere(text, target="gpu") == run_interp(text)


@pytest.mark.slow  # 2-4 s on Oclgrind
@pytest.mark.parametrize("block_size", [256, 64])  # 64: two warps take the 8 parts in 4 rounds
def test_warp_code_is_clean_under_oclgrind(block_size, capfd):
    assert oclgrind_findings(BLOCK_OF_WARPS, "warps.fcl", capfd, block_size=block_size) == ""


def test_a_notebook_sets_the_warp_size_with_config():
    workspace = Workspace()
    workspace.settings.set("warp_size", "4")
    for backend in ("interp", "opencl"):
        workspace.settings.set("backend", backend)
        out = io.StringIO()
        workspace.execute(SIZED.replace("val main = ", ""), out, out)
        assert out.getvalue() == "[6,22]\n[4]\n", backend
    with pytest.raises(FCLError, match="use block_size=N, warp_size=N"):
        workspace.settings.set("warp_size", "0")


@pytest.mark.slow  # 2 s
def test_python_loads_a_library_with_its_warp_size():
    source = """\
sig warpSums : [int] -> Program<grid> [int]
fun warpSums xs = forceM<grid> (concat<block> (256 / #WarpSize) (map (fn chunk =>
  concat<warp> 1 (map (fn lanes => do<warp> { s <- reduceWarp addi lanes ; pushM<warp> s })
                      (splitUp #WarpSize chunk))) (splitUp 256 xs)))
"""
    values = np.arange(512, dtype=np.int32)
    for backend in ("interp", "opencl"):
        for size in (32, 8):
            lib = fcl.load(source, backend=backend, warp_size=size)
            assert list(lib.warpSums(values)) == list(values.reshape(-1, size).sum(axis=1))


def test_costs_say_how_each_warp_step_runs(tmp_path, capsys):
    path = tmp_path / "warps.fcl"
    path.write_text(BLOCK_OF_WARPS)
    assert fcl_main(["costs", "--gpu", "h100", str(path)]) == 0
    shown = capsys.readouterr().out
    assert shown.count("warp code of line ") == 2
    assert "kernel0_line10, warp code of line 6: warp w's 32 lanes are work-items 32w to " \
        "32w + 31, its arrays in local memory." in shown


def test_costs_count_a_warps_barriers_and_price_them_as_a_sub_groups(tmp_path, capsys):
    # Each of the two phases of the block's sum is a warp reduction: 5 exchanges of 32 lanes'
    # values (16, 8, 4, 2, 1 lanes adding), then the warp's result written out. The first
    # phase's last barrier is the block's: the second phase reads what every warp wrote.
    path = tmp_path / "warps.fcl"
    path.write_text(BLOCK_OF_WARPS)
    assert fcl_main(["costs", "--gpu", "h100", str(path)]) == 0
    shown = capsys.readouterr().out
    [row] = [line for line in shown.splitlines() if line.startswith("barriers per group")]
    assert row.split()[-4:] == ["11", "(10", "a", "warp's)"]
    said = re.search(r"kernel0_line10: 10 of its 11 barriers per group end an exchange between a "
                     r"warp's lanes .* As sub-group barriers, each waiting for its warp alone, "
                     r"the kernel would take ([\d.]+) µs on the H100 SXM5 instead of ([\d.]+) "
                     r"µs\.", shown)
    assert said and float(said.group(1)) < float(said.group(2))
    # Shaped for a CPU, one work-item runs each warp's lanes: no barrier to count.
    assert fcl_main(["costs", "--gpu", "h100", "--target", "cpu", str(path)]) == 0
    assert "a warp's" not in capsys.readouterr().out
