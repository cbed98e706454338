"""Serial kernels' loops rearranged for a CPU (fcl.codegen.serial): a work-item's reduction
outside the loop over work-items, loops over a tile's (row, column) nested; the results are the
interpreter's, and nothing else changes."""
from pathlib import Path

from fcl import pipeline
from fcl.errors import Source
from fcl.session import Session
from runs import run_cl, run_interp

ROOT = Path(__file__).parent
MATMUL = (ROOT / "thesis" / "matmul.fcl").read_text()
# Each work-item folds over the chunk with weights of its own, the step's scalars its own too.
WEIGHTED = """val main = do<grid> {
  xs <- forcePull<grid> (generate 16 (fn x => x * 3 - 7)) ;
  ys <- splitUp 8 xs |> mapPull (fn c => do<block> { t <- forcePull<block> c ;
          generate (lengthPull t) (fn j => return<thread> (foldl addi j (generate (lengthPull t)
            (fn it => let x = index t it in (x ^ 5) * (j - it))))) |> concat<thread> 1 })
        |> concat<block> 8 ;
  forceAndPrint 16 ys
}
"""
# A fold whose length depends on the work-item: its steps cannot run outside their loop.
RAGGED = (ROOT / "programs" / "prelude_foldl.fcl").read_text()


def after(text: str, target: str = "cpu") -> dict[str, str]:
    session = Session.new()
    session.add_file(Source("p.fcl", text))
    return dict(pipeline.compile_steps(session, pipeline.main_root(session),
                                       pipeline.CompileOptions(target=target)))


def test_a_dot_product_runs_outside_the_loop_over_work_items():
    steps = after(MATMUL)
    assert "acc_19_each" not in steps["kernelize"]
    interchanged = steps["interchange"]
    assert "private int acc_19_each[16]" in interchanged
    # The reduction's loop holds the loop over work-items, which adds to their accumulators.
    at = interchanged.index("seqfor (it_21 < 4) {")
    assert interchanged.index("seqfor (j_16 < 16) {", at) > at
    assert "acc_19_each[j_16] = (acc_19_each[j_16] + " in interchanged
    assert "seqfor (j_16_init < 16)" in interchanged and "seqfor (j_16_out < 16)" in interchanged


def test_a_step_with_scalars_of_its_own_is_interchanged_too():
    interchanged = after(WEIGHTED)["interchange"]
    at = interchanged.index("seqfor (it_12 < 8) {")
    assert interchanged.index("seqfor (j_7 < 8) {", at) > at
    assert "branch_14 = (acc_8_each[j_7] + " in interchanged
    assert "acc_8_each[j_7] = branch_14;" in interchanged


def test_a_tiles_loop_is_split_into_rows_and_columns():
    split = after(MATMUL)["split"]
    assert "seqfor (j_16_row < 4) {" in split and "seqfor (j_16_col < 4) {" in split
    assert "int col_17 = j_16_col;" in split and "(j_16 & 3)" not in split


def test_only_serial_kernels_change():
    steps = after(MATMUL, target="gpu")
    assert steps["interchange"] == steps["kernelize"] == steps["split"]


def test_a_reduction_of_a_length_per_work_item_stays_in_its_loop():
    steps = after(RAGGED)
    assert steps["interchange"] == steps["kernelize"]


def test_the_rearranged_kernels_compute_what_the_interpreter_does():
    for text in (MATMUL, WEIGHTED, RAGGED):
        out, err = run_cl(text, target="cpu")
        assert out == run_interp(text) and err == ""


REDUCE = "val n = 2048\n" + (ROOT.parent / "bench" / "reduce.fcl").read_text()
# Doubles whose sum depends on the order of the additions: fusing may not reorder them.
SUMS = REDUCE + """
val main = do<grid> {
  xs <- forcePull<grid> (generate 2048 (fn i =>
          addd (divd 1.0 (i2d (i + 1))) (muld (i2d (i % 7)) 1000000.0))) ;
  r <- reducePart addd 0.0 xs ;
  forceAndPrintDouble 4 r
}
"""


def test_a_reduction_tree_adds_in_registers():
    steps = after(SUMS)
    fused = steps["fuse"].split("kernel kernel1")[1]
    # The load and five tree steps are one loop over 8 elements, each adding 64 of the input;
    # the last steps read what it stored.
    assert fused.count("seqfor (") == 2 and "seqfor (i_12 < 8) {" in fused
    loop = fused.split("seqfor (i_12 < 8) {")[1].split("}")[0]
    assert loop.count("arr_1[") == 64 and "buf_5" not in loop
    # In the tree's order: the first two reads are the load step's pair, 256 apart.
    assert loop.split("arr_1[")[1:3] == ["((b_4 * 512) + i_12)] + ",
                                          "(((b_4 * 512) + i_12) + 256)]) + ("]
    # The GPU's kernels, not serial, are left alone.
    assert after(SUMS, "gpu")["fuse"] == after(SUMS, "gpu")["split"]


def test_a_fused_reduction_of_doubles_is_the_interpreters_to_the_last_digit():
    assert run_cl(SUMS, target="cpu")[0] == run_interp(SUMS)
    # Work-groups of 16 (chunks of 32): the serial kernel, fused, against the GPU's shape.
    assert run_cl(SUMS, target="cpu", block_size=16)[0] == \
        run_cl(SUMS, target="gpu", block_size=16)[0]
