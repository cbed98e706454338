"""Irregular arrays (`segments offsets xs`, rows of different lengths) reduced and scanned row by
row with `reduceRows` and `scanRows`: flattened into kernels balanced by elements, the same bits
on both back ends, and checked against plain Python."""
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fcl
from fcl import pipeline
from fcl.analysis.costs import program_costs
from fcl.analysis.trace import trace_program
from fcl.backend import for_device
from fcl.cli import main as fcl_main
from fcl.errors import FCLError
from fcl.notebook import Workspace
from fcl.rowtiles import ROW_TILE
from runs import compiled_source, run_cl, run_interp, session_for
from test_memory import same_everywhere
from test_oclgrind import oclgrind_findings

LIBRARY = """
sig smvm : [int] -> [int] -> [double] -> [double] -> Program<grid> [double]
fun smvm offsets cols vals x =
  reduceRows addd 0.0 (map (map (fn p => muld (fst p) (index x (snd p))))
                           (segments offsets (zipWith (fn v => fn c => (v, c)) vals cols)))

sig rowSums : [int] -> [int] -> Program<grid> [int]
fun rowSums offsets xs = reduceRows addi 0 (segments offsets xs)

sig rowScans : [int] -> [double] -> Program<grid> [double]
fun rowScans offsets xs = scanRows addd 0.0 (segments offsets xs)

-- One step of PageRank over a graph's in-edges: row v of `segments offsets sources` lists the
-- vertices with an edge into v.
sig pageRankStep : [int] -> [int] -> [int] -> [double] -> Program<grid> [double]
fun pageRankStep offsets sources outDegrees ranks =
  let n = i2d (lengthPull ranks) in
  do<grid> {
    sums <- reduceRows addd 0.0 (map (map (fn u => divd (index ranks u) (i2d (index outDegrees u))))
                                     (segments offsets sources)) ;
    forcePull<grid> (map (fn s => addd (divd 0.15 n) (muld 0.85 s)) sums)
  }

sig firstHalves : [int] -> [int] -> Program<grid> [int]
fun firstHalves offsets xs =
  reduceRows addi 0 (map (fn row => take (lengthPull row / 2) row) (segments offsets xs))
"""


@pytest.fixture(scope="module")
def libraries():
    return {backend: fcl.load(LIBRARY, backend=backend) for backend in ("interp", "opencl")}


@pytest.fixture(scope="module")
def unflattened():
    return fcl.load(LIBRARY, backend="opencl", flatten=False)


def skewed(seed: int, rows: int = 60, columns: int = 50):
    """A CSR matrix with power-law row lengths: empty rows, and rows over several tiles."""
    rng = np.random.default_rng(seed)
    lengths = np.minimum((rng.pareto(1.2, rows) * 20).astype(np.int32), 3 * ROW_TILE + 17)
    lengths[[1, 5, 6]] = 0
    lengths[2] = 2 * ROW_TILE + 3
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    nnz = int(offsets[-1])
    return (offsets, rng.integers(0, columns, nnz).astype(np.int32), rng.standard_normal(nnz),
            rng.standard_normal(columns))


def python_rows(offsets, values):
    return [list(values[offsets[r]:offsets[r + 1]]) for r in range(len(offsets) - 1)]


def test_sparse_matrix_vector_product_matches_python_and_both_back_ends_agree(libraries):
    offsets, cols, vals, x = skewed(1)
    results = {b: lib.smvm(offsets, cols, vals, x) for b, lib in libraries.items()}
    assert np.array_equal(results["interp"], results["opencl"])  # bit for bit
    rows = zip(python_rows(offsets, vals), python_rows(offsets, cols), strict=True)
    expected = [sum(v * x[c] for v, c in zip(row_vals, row_cols, strict=True))
                for row_vals, row_cols in rows]
    assert np.allclose(results["opencl"], expected, rtol=1e-12, atol=1e-12)
    assert results["opencl"][1] == 0.0 and len(results["opencl"]) == len(offsets) - 1


def test_pagerank_steps_over_adjacency_lists_match_python(libraries):
    rng = np.random.default_rng(6)
    vertices = 400
    # Power-law in-degrees: a few vertices with hundreds of in-edges; every vertex has an out-edge.
    targets = np.minimum((rng.pareto(1.1, 3000) * 5).astype(np.int32), vertices - 1)
    sources = rng.integers(0, vertices, 3000).astype(np.int32)
    sources = np.concatenate([sources, np.arange(vertices, dtype=np.int32)])
    targets = np.concatenate([targets, (np.arange(vertices, dtype=np.int32) + 1) % vertices])
    order = np.argsort(targets, kind="stable")
    in_sources = sources[order]
    offsets = np.searchsorted(targets[order], np.arange(vertices + 1)).astype(np.int32)
    out_degrees = np.bincount(sources, minlength=vertices).astype(np.int32)
    assert np.diff(offsets).max() > ROW_TILE  # a row over several tiles
    ranks = {backend: np.full(vertices, 1.0 / vertices) for backend in libraries}
    expected = [1.0 / vertices] * vertices
    for _ in range(5):
        for backend, lib in libraries.items():
            ranks[backend] = lib.pageRankStep(offsets, in_sources, out_degrees, ranks[backend])
        expected = [0.15 / vertices + 0.85 * sum(
            expected[u] / out_degrees[u] for u in in_sources[offsets[v]:offsets[v + 1]])
            for v in range(vertices)]
        assert np.array_equal(ranks["interp"], ranks["opencl"])
    assert np.allclose(ranks["opencl"], expected, rtol=1e-12, atol=0)
    assert abs(ranks["opencl"].sum() - 1.0) < 1e-9


def test_a_row_within_one_tile_is_an_ordinary_left_fold(libraries):
    offsets, _, vals, _ = skewed(2)
    sums = libraries["opencl"].rowScans(offsets, vals)
    for r, row in enumerate(python_rows(offsets, vals)):
        if row and offsets[r] // ROW_TILE == (offsets[r + 1] - 1) // ROW_TILE:
            # Python's sum adds left to right from 0: the same bits.
            assert sums[offsets[r + 1] - 1] == sum(row), r


def test_each_scanned_row_ends_with_the_rows_reduction(libraries):
    offsets, cols, vals, _ = skewed(3)
    for backend, lib in libraries.items():
        scanned = lib.rowScans(offsets, vals)
        reduced = lib.smvm(offsets, np.zeros_like(cols), vals, np.ones(1))
        ends = offsets[1:][offsets[1:] > offsets[:-1]] - 1
        assert np.array_equal(scanned[ends], reduced[offsets[1:] > offsets[:-1]]), backend
        expected = np.concatenate([np.cumsum(row) for row in python_rows(offsets, vals) if row])
        assert np.allclose(scanned, expected, rtol=1e-12, atol=1e-12), backend
    assert np.array_equal(libraries["interp"].rowScans(offsets, vals),
                          libraries["opencl"].rowScans(offsets, vals))


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([0, 1, 2, 5, ROW_TILE - 1, ROW_TILE, ROW_TILE + 1, 700]),
                min_size=1, max_size=12), st.integers(0, 1000))
def test_generated_rows_sum_exactly_on_both_back_ends(libraries, unflattened, lengths, seed):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    rng = np.random.default_rng(seed)
    xs = rng.integers(-1000, 1000, int(offsets[-1])).astype(np.int32)
    doubles = rng.standard_normal(int(offsets[-1]))
    expected = [sum(row) for row in python_rows(offsets, xs)]
    halves = [sum(row[:len(row) // 2]) for row in python_rows(offsets, xs)]
    for backend, lib in [*libraries.items(), ("not flattened", unflattened)]:
        assert list(lib.rowSums(offsets, xs)) == expected, backend
        assert list(lib.firstHalves(offsets, xs)) == halves, backend
    # Sums of doubles: the same bits everywhere, flattened or not.
    scans = [lib.rowScans(offsets, doubles) for lib in [*libraries.values(), unflattened]]
    assert all(np.array_equal(scans[0], other) for other in scans[1:])


SHAPES = """val main =
  let xs = generate 1000 (fn i => i % 17) in
  let offsets = generate 5 (fn r => r * r * 40) in
  do<grid> {
    a <- reduceRows addi 0 (splitUp 300 xs) ;
    forceAndPrint 3 (push<grid> a) ;
    b <- scanRows maxi 0 (splitUp 300 xs) ;
    forceAndPrint 900 (push<grid> b) ;
    c <- reduceRows addi 0 (map (map (fn x => x * 2)) (segments offsets xs)) ;
    forceAndPrint 4 (push<grid> c) ;
    d <- reduceRows addi 0 (map (fn row => take (lengthPull row / 2) row) (segments offsets xs)) ;
    forceAndPrint 4 (push<grid> d) ;
    e <- reduceRows addi 5 (segments (generate 4 (fn i => 0)) xs) ;
    forceAndPrint 3 (push<grid> e)
  }
"""


@pytest.mark.slow
def test_the_shape_of_the_rows_is_found_and_said_with_the_kernels():
    xs = [i % 17 for i in range(1000)]
    starts = [r * r * 40 for r in range(5)]
    rows = [xs[starts[r]:starts[r + 1]] for r in range(4)]
    scanned = [max(xs[r * 300:r * 300 + k + 1]) for r in range(3) for k in range(300)]
    assert same_everywhere(SHAPES).splitlines() == [
        str([sum(xs[r * 300:r * 300 + 300]) for r in range(3)]).replace(" ", ""),
        str(scanned).replace(" ", ""),
        str([2 * sum(row) for row in rows]).replace(" ", ""),
        str([sum(row[:len(row) // 2]) for row in rows]).replace(" ", ""),
        "[5,5,5]"]
    source = compiled_source(SHAPES)
    # splitUp's rows need no descriptor; segments' share the offsets where they lie; rows cut
    # by `take` follow neither, so their lengths are added up first.
    assert "regular rows of 300 elements, flattened" in source
    assert "rows starting where a formula of the row says, flattened: a work-item per row" \
        in source
    assert "each work-item writes its row's length, to be added up" in source
    assert "rows segmented by the lengths added up in lengths_" in source
    assert f"a work-group per tile of {ROW_TILE} elements reads them side by side" in source


IN_MEMORY = """val main =
  let xs = generate 1000 (fn i => i % 17) in
  do<grid> {
    offsets <- forcePull<grid> (generate 5 (fn r => r * r * 40)) ;
    a <- reduceRows addi 0 (segments offsets xs) ;
    b <- reduceRows addi 0 (map (map (fn x => x * 3)) (segments offsets (map (fn x => 1) xs))) ;
    forceAndPrint 4 (push<grid> (generate 4 (fn r => index a r - index b r)))
  }
"""


@pytest.mark.slow
def test_rows_on_offsets_in_memory_read_the_descriptor_where_it_lies():
    xs = [i % 17 for i in range(1000)]
    starts = [r * r * 40 for r in range(5)]
    assert same_everywhere(IN_MEMORY) == str(
        [sum(xs[starts[r]:starts[r + 1]]) - 3 * (starts[r + 1] - starts[r])
         for r in range(4)]).replace(" ", "") + "\n"
    notes = [line for line in compiled_source(IN_MEMORY).splitlines() if "flattened" in line]
    # Both arrays' rows are segmented by the one forced descriptor, so they are reduced
    # together (one tile kernel, one row kernel); no lengths are added up.
    assert len(notes) == 2 and all("rows segmented by arr_" in note and
                                   "(2 reductions of these rows made together)" in note
                                   for note in notes)
    assert "adds up" not in compiled_source(IN_MEMORY)


FAULT = """val main =
  let xs = generate 1000 (fn i => i % 17) in
  do<grid> {
    s <- reduceRows addi 0 (map (map (fn c => index xs (c * 100)))
                                (segments (generate 4 (fn i => i * 300)) xs)) ;
    forceAndPrint 3 (push<grid> s)
  }
"""


def test_a_fault_in_a_rows_element_is_the_same_located_error_everywhere():
    messages = []
    for run in (run_interp, lambda text: run_cl(text)):
        with pytest.raises(FCLError) as caught:
            run(FAULT)
        messages.append(caught.value.render())
    assert messages[0] == messages[1]
    assert "index 1000 is out of bounds for an array of length 1000 (in work-item 0)" \
        in messages[0]
    assert ":4:" in messages[0]


DECREASING = """val main =
  let xs = generate 1000 (fn i => i % 17) in
  let offsets = generate 5 (fn r => if r == 2 then 700 else r * 100) in
  do<grid> {
    s <- reduceRows addi 0 (segments offsets xs) ;
    forceAndPrint 4 (push<grid> s)
  }
"""


# Two reductions of rows of one shape: the faults below come from the first's rows or the
# second's. The elements' checks are made a row at a time before the kernels read them side by
# side, and the failure reported is the one the interpreter reports.
TWO_REDUCTIONS = """val main =
  let xs = generate 1000 (fn i => i % 17) in
  let offsets = OFFSETS in
  do<grid> {
    s <- reduceRows addi 0 (FIRST) ;
    t <- reduceRows maxi 0 (SECOND) ;
    forceAndPrint 4 (push<grid> s) ;
    forceAndPrint 4 (push<grid> t)
  }
"""
REVERSED = ("map (fn row => generate (lengthPull row) (fn i => index row (lengthPull row - 1 - i)))"
            " (segments offsets xs)")
GATHER = "map (map (fn c => index xs (c * 70))) (segments offsets xs)"
FAULTS = {  # name: offsets, first rows, second rows, whether the reductions are made together
    "an element after the first leaves xs": (
        "generate 5 (fn r => r * 260)", "segments offsets xs", None, True),
    "the first element is before xs": (
        "generate 5 (fn r => r * 100 - 50)", "segments offsets xs", None, True),
    "a reversed row steps below 0": (
        "generate 5 (fn r => r * 300 - 250)", REVERSED, None, False),
    "a row's length before an earlier row's element": (
        "generate 5 (fn r => if r == 3 then 100 else r * 400)", "segments offsets xs", None, True),
    "a gathered element, reduced first": ("generate 5 (fn r => r * 200)", GATHER, None, False),
    "a gathered element, reduced second": (
        "generate 5 (fn r => r * 200)", "segments offsets xs", GATHER, True),
}


@pytest.mark.parametrize("fault", [pytest.param(name, marks=() if n == 0 else pytest.mark.slow)
                                   for n, name in enumerate(FAULTS)])
def test_a_fault_in_reductions_made_together_is_the_interpreters_first(fault):
    offsets, first, second, together = FAULTS[fault]
    text = TWO_REDUCTIONS.replace("OFFSETS", offsets).replace("FIRST", first).replace(
        "SECOND", second or "segments offsets (generate 800 (fn i => i))")
    messages = []
    for run in (run_interp, run_cl, lambda text: run_cl(text, flatten=False),
                lambda text: run_cl(text.replace("reduceRows", "scanRows"))):
        with pytest.raises(FCLError) as caught:
            run(text)
        messages.append(caught.value.render())
    assert messages[1] == messages[2] == messages[0]
    # scanRows is two characters shorter than reduceRows: the columns differ, not the error.
    assert messages[3].splitlines()[0].split("error:")[1] == \
        messages[0].splitlines()[0].split("error:")[1]
    assert ("made together" in compiled_source(text)) == together


def test_a_reduction_of_an_earlier_ones_result_waits_for_it():
    text = """val main =
  let xs = generate 1000 (fn i => i % 17) in
  do<grid> {
    offsets <- forcePull<grid> (generate 5 (fn r => r * 250)) ;
    a <- reduceRows addi 0 (segments offsets xs) ;
    b <- reduceRows addi 0 (map (map (fn x => x + index a 0)) (segments offsets xs)) ;
    forceAndPrint 4 (push<grid> b)
  }
"""
    sums = [sum(i % 17 for i in range(r * 250, r * 250 + 250)) for r in range(4)]
    assert same_everywhere(text) == str([s + 250 * sums[0] for s in sums]).replace(" ", "") + "\n"
    assert "made together" not in compiled_source(text)


@pytest.mark.slow  # 0.8 s
def test_offsets_that_decrease_are_the_same_error_everywhere_not_garbage():
    messages = []
    for run in (run_interp, run_cl, lambda text: run_cl(text, flatten=False),
                lambda text: run_cl(text.replace("reduceRows", "scanRows"))):
        with pytest.raises(FCLError) as caught:
            run(DECREASING)
        messages.append(caught.value.render().splitlines()[0])
    assert messages == [
        "prog.fcl:5:10: error: generate was given the negative length -400 (in work-item 2)"] * 4


@pytest.mark.slow
def test_flattened_rows_are_clean_under_oclgrind(capfd):
    assert oclgrind_findings(SHAPES, "rows.fcl", capfd) == ""
    assert oclgrind_findings(IN_MEMORY, "memory.fcl", capfd) == ""


def test_unflattened_rows_give_the_same_bits_a_work_item_per_row(libraries):
    offsets, cols, vals, x = skewed(5)
    whole = fcl.load(LIBRARY, backend="opencl", flatten=False)
    assert np.array_equal(whole.smvm(offsets, cols, vals, x),
                          libraries["opencl"].smvm(offsets, cols, vals, x))
    assert np.array_equal(whole.rowScans(offsets, vals),
                          libraries["opencl"].rowScans(offsets, vals))


def test_a_cpu_device_folds_each_row_in_a_work_item():
    # A GPU's warps wait for their longest row, a CPU's cores do not: the rows are flattened
    # for the one and given a work-item each on the other, which runs 2-3 times faster there.
    session = session_for(SHAPES)
    root = pipeline.main_root(session)
    compiled = pipeline.compile_program(session, root)
    assert "a work-group per tile" in compiled.source and compiled.cpu_il is not None
    on_cpu = for_device(compiled, cpu=True)
    assert "a work-group per tile" not in on_cpu.source
    assert on_cpu.source.count("not flattened (for a CPU, or --no-flatten)") == 6
    cpu = pipeline.compile_program(session, root, pipeline.CompileOptions(target="cpu"))
    assert cpu.cpu_il is None and "a work-group per tile" not in cpu.source
    out, err = run_cl(SHAPES)  # the device here is a CPU
    assert err == "" and out == run_interp(SHAPES)
    # A program without irregular rows is lowered once.
    plain = session_for("val main = forceAndPrint 4 (push<grid> (generate 4 (fn i => i)))")
    assert pipeline.compile_program(plain, pipeline.main_root(plain)).cpu_il is None


@pytest.mark.slow
def test_the_command_line_and_a_notebook_turn_flattening_off(capsys):
    out, _ = run_cl(SHAPES, flatten=False)
    assert out == run_interp(SHAPES)
    session = session_for(SHAPES)
    source = pipeline.compile_program(session, pipeline.main_root(session),
                                      pipeline.CompileOptions(flatten=False)).source
    assert "not flattened (for a CPU, or --no-flatten): a work-item per row folds the whole " \
        "row" in source
    assert "a work-item per tile" not in source
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "rows.fcl")
        path.write_text(SHAPES)
        assert fcl_main(["compile", "--no-flatten", str(path)]) == 0
    # Five reductions and scans, and the scan that adds up the lengths of rows cut by `take`.
    assert capsys.readouterr().out.count("not flattened (for a CPU, or --no-flatten)") == 6
    # The shape found, and the flattening, in the IL the steps start from.
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "rows.fcl")
        path.write_text(IN_MEMORY)
        assert fcl_main(["compile", "--after", "lower", str(path)]) == 0
    lowered = capsys.readouterr().out
    assert lowered.count("-- rows segmented by arr_1, flattened: a work-group per tile") == 1
    # The second reduction's checks are the first's over again: made once.
    assert lowered.count("each row's elements checked before they are read side by side") == 1
    workspace = Workspace()
    workspace.settings.set("flatten", "off")
    assert not workspace.settings.options().flatten
    with pytest.raises(FCLError, match=r"flatten=on\|off"):
        workspace.settings.set("flatten", "sometimes")


def test_the_memory_diagram_of_a_flattened_kernel_shows_the_tiles_segments(capsys):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "rows.fcl")
        path.write_text(IN_MEMORY)
        assert fcl_main(["memory", str(path)]) == 0
    diagrams = capsys.readouterr().out.split("\nkernel")
    tiles, = [d for d in diagrams if "a work-group per tile of" in d.replace("\n", " ")]
    # The kernel says what its rows are; its work-items mark each position of the tile with its
    # row, one work-item per row: rows 0, 1 and 2 begin at 0, 40 and 160 (offsets r * r * 40).
    assert "rows segmented by arr_1, flattened:" in tiles
    marking = tiles[tiles.index("writes local rowof_"):].split("\n\n")[0].splitlines()
    assert marking[1].strip().startswith("warp 0's first access: 3 work-items,")
    grid = {int(line.split()[0]): line.split()[1] for line in marking[2:]}
    assert [at for at in range(ROW_TILE) if grid[at // 32 * 32][at % 32] == "#"] == [0, 40, 160]


SKEWED_ROWS = """val rowStarts = generate 1025 (fn r => 4 * r + 1996 * ((r + 63) / 64))
val rowValues = generate (index rowStarts 1024) (fn e => (e * 7) % 10)
fun rowSums rows =
  forceM<grid> (concat<block> #BlockSize (map (fn block =>
    concat<thread> 1 (map (fn row => return<thread> (foldl addi 0 row)) block))
    (splitUp #BlockSize rows)))
val main = do<grid> {
  starts <- forcePull<grid> rowStarts;
  values <- forcePull<grid> rowValues;
  SUM (segments starts values)
}
"""


@pytest.mark.slow
def test_the_costs_show_a_work_item_per_row_waiting_for_long_rows_and_flattening_not():
    costs = {}
    for name, sum_rows in (("by row", "rowSums"), ("flattened", "reduceRows addi 0")):
        session = session_for(SKEWED_ROWS.replace("SUM", sum_rows))
        compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                            pipeline.CompileOptions(target="gpu"))
        costs[name] = program_costs(trace_program(compiled))
    # The two kernels writing the rows into memory share out their work evenly.
    assert [c.busiest for c in costs["by row"][:2]] == [1.0, 1.0]
    by_row, = costs["by row"][2:]
    check, elements, tiles, rows = costs["flattened"][2:]
    # Work-item 0 of the row sums has a row of 2,000 elements, the others rows of 4.
    assert by_row.simt_efficiency < 0.15 and by_row.busiest > 15
    assert tiles.simt_efficiency > 0.3 and rows.simt_efficiency > 0.3 and rows.busiest < 5
    # Each row's own checks and its elements' (a row at a time), the same for every row.
    assert check.busiest == 1.0 and elements.busiest == 1.0
    assert "flattened" in " ".join(tiles.warp_notes + rows.warp_notes)
