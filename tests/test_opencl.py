"""The OpenCL back end on a real device (PoCL on the CPU in CI): same output as the interpreter."""
import io
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import fcl
from fcl import backend, pipeline
from fcl.codegen.kernel import Launch
from fcl.errors import FCLError, Source
from fcl.il import ir
from fcl.runtime import device as cl_device, host
from fcl.session import Session
from fclgen import programs
from opencl_programs import (
    ADJUST_IN_PLACE,
    BIG_THREAD_ARRAYS,
    CHUNK_SUMS_OF,
    CHUNKED_SUMS,
    DOUBLES_AND_POWER,
    GRID_LOOP_SCALAR,
    GRID_MAPS,
    LOCAL_ID_ARITHMETIC,
    MANY_CHUNK_SUMS,
    OWN_ACCUMULATOR,
    PER_ITEM_LENGTHS,
    POWER_LOOP,
    THREAD_SCANS,
    THREE_STAGES,
    TILED_TRANSPOSE,
)
from runs import compiled_source, run_cl, run_interp, session_for


@pytest.mark.parametrize("program", [pytest.param(CHUNKED_SUMS, marks=pytest.mark.slow),  # 0.8 s
                                     THREAD_SCANS, TILED_TRANSPOSE, DOUBLES_AND_POWER,
                                     pytest.param(GRID_LOOP_SCALAR, marks=pytest.mark.slow)],
                         ids=["block-while", "thread-seqfor", "tiled-transpose",
                              "doubles-power", "grid-while-host-scalar"])
def test_opencl_prints_what_the_interpreter_prints(program):
    expected = run_interp(program)
    assert expected.startswith("[")
    for target in ("gpu", "cpu"):  # the kernels of both kinds of device, on this device
        assert run_cl(program, target=target)[0] == expected, target


def test_tiled_transpose_is_a_transpose():
    values = [int(v) for v in run_cl(TILED_TRANSPOSE)[0].strip("[]\n").split(",")]
    assert values == [c * 8 + r for r in range(8) for c in range(8)]


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs_agree_with_the_interpreter(program):
    for target in ("gpu", "cpu"):
        assert run_cl(program.text, target=target)[0] == program.expected, program.text


def test_a_failed_index_check_reports_the_fcl_location_values_and_work_item():
    program = ("val main = do<grid> {\n"
               "  xs <- forcePull<grid> (generate 8 (fn i => i)) ;\n"
               "  forceAndPrint 8 (push<grid> (generate 8 (fn i => index xs (i + 1)))) }\n")
    with pytest.raises(FCLError) as err:
        run_cl(program)
    assert err.value.message == "index 8 is out of bounds for an array of length 8 (in work-item 7)"
    assert (err.value.span.line, err.value.span.col) == (3, 52)


def test_local_memory_beyond_the_device_limit_is_an_fcl_error():
    limit = cl_device.open_device().local_mem_size
    n = limit // 4 + 256
    program = (f"val main = do<grid> {{\n"
               f"  ys <- generate 1 (fn b => do<block> {{"
               f" a <- forcePull<block> (generate {n} (fn i => i)) ;"
               f" pushM<block> a }}) |> concat<block> {n} ;\n"
               f"  forceAndPrint 1 ys }}\n")
    with pytest.raises(FCLError, match="bytes of local memory"):
        run_cl(program)


def test_same_program_on_the_same_device_is_built_once():
    run_cl(CHUNKED_SUMS)
    builds = cl_device.build_count
    run_cl(CHUNKED_SUMS)
    assert cl_device.build_count == builds


def test_benchmark_reports_mean_then_min_and_median():
    program = ("val main = do<grid> { xs <- forcePull<grid> (generate 100 (fn i => i)) ;\n"
               "  benchmark 3 (forcePull<grid> (mapPull (fn x => x * 2) xs)) }\n")
    out, err = run_cl(program)
    lines = err.splitlines()
    assert out == ""
    assert lines[0].startswith("Benchmark (3 repetitions): ") and lines[0].endswith(" ms per run")
    assert lines[1].startswith("  min ") and "median" in lines[1]


@pytest.mark.slow  # 0.75-1 s, a process
@pytest.mark.slow  # four processes: 2-4 s
def test_cli_compile_writes_the_kernels(tmp_path):
    src = tmp_path / "p.fcl"
    src.write_text(CHUNKED_SUMS)
    out = tmp_path / "p.cl"
    result = subprocess.run([sys.executable, "-m", "fcl", "compile", str(src), "-o", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert text.count("__kernel void") == 2 and "__local int*" in text and "barrier(" in text
    # The kernels for a CPU; `run` with either shape prints what the interpreter prints.
    cpu = subprocess.run([sys.executable, "-m", "fcl", "compile", "--target", "cpu", str(src)],
                         capture_output=True, text=True)
    assert cpu.returncode == 0 and "barrier(" not in cpu.stdout and "for (int i_" in cpu.stdout
    for target in ("gpu", "cpu"):
        ran = subprocess.run([sys.executable, "-m", "fcl", "run", "--backend", "opencl",
                              "--target", target, str(src)], capture_output=True, text=True)
        assert ran.stdout == run_interp(CHUNKED_SUMS), ran.stderr


def test_local_arrays_that_are_never_live_together_share_memory():
    session = session_for(THREE_STAGES)
    compiled = pipeline.compile_program(session, pipeline.main_root(session))
    (kernel,) = compiled.kernels
    # `a` is dead once `c` is computed, so `d` can take its place; `c` overlaps both.
    assert sorted(len(slot) for slot in kernel.slots) == [1, 2]
    assert compiled.source.count("__local ulong* local_slot") == 2
    assert run_cl(THREE_STAGES)[0] == run_interp(THREE_STAGES)


@pytest.mark.slow  # 0.6-1.2 s
def test_loops_with_known_tests_are_unrolled_and_loops_of_known_shape_are_not_loops():
    # CHUNKED_SUMS halves 64 elements six times: no loop is left, only one step per work-item
    # count (32, 16, ..., 1), and one work-group per chunk with no loop over groups.
    text = compiled_source(CHUNKED_SUMS, block_size=64).split("__kernel")[-1]
    assert "while" not in text and "for (" not in text and "fcl_abort" not in text
    assert "get_local_id(0)) < 16)" in text and "get_num_groups" not in text
    assert run_cl(CHUNKED_SUMS, block_size=64)[0] == run_interp(CHUNKED_SUMS)


def shaped(text: str, target: str, block_size: int = 64):
    session = session_for(text)
    return pipeline.compile_program(session, pipeline.main_root(session),
                                    pipeline.CompileOptions(block_size, target=target))


def test_on_a_cpu_a_reduction_tree_is_one_work_item_s_loops_without_barriers():
    gpu, cpu = shaped(CHUNKED_SUMS, "gpu"), shaped(CHUNKED_SUMS, "cpu")
    tree = cpu.source.split("__kernel")[-1]
    assert [k.serial for k in cpu.kernels] == [False, True]  # the grid loop is not a group's
    assert "barrier(" not in tree and "get_local_id" not in tree
    # The halving steps of an int sum are one loop over the chunk, in index order
    # (fcl.codegen.reassociate; test_serial has a tree of doubles, which keeps its order).
    assert "for (int at_0 = 0; at_0 < 64; at_0++)" in tree and "< 1; i_" not in tree
    assert "barrier(" in gpu.source.split("__kernel")[-1]
    assert cpu.target == "cpu" and gpu.target == "gpu" and not (cpu.portable or gpu.portable)
    expected = run_interp(CHUNKED_SUMS)
    assert run_cl(CHUNKED_SUMS, block_size=64, target="cpu")[0] == expected


def test_on_a_cpu_each_work_group_runs_a_run_of_consecutive_chunks():
    # 1027 chunks: 206 work-groups of 5 chunks, the last with 2 (PoCL pays for each group).
    cpu = shaped(MANY_CHUNK_SUMS, "cpu", 4)
    (launch,) = [s for s in cpu.host if isinstance(s, Launch) and s.kernel.serial]
    assert ir.show_expr(launch.groups) == "206"
    assert "get_group_id(0)) * 5); b_" in cpu.source and "< min(1027, " in cpu.source
    assert run_cl(MANY_CHUNK_SUMS, block_size=4, target="cpu")[0] == run_interp(MANY_CHUNK_SUMS)
    # A number of chunks known only at run time: at most 256 groups, each its share.
    read = shaped(CHUNK_SUMS_OF + 'val main = do<grid> { xs <- readIntCSV "in.csv" ; '
                  'ys <- sums xs ; forceAndPrint 8 ys }', "cpu", 4)
    (launch,) = [s for s in read.host if isinstance(s, Launch) and s.kernel.serial]
    assert ir.show_expr(launch.groups).startswith("min(") and "get_num_groups(0)" in read.source
    lib = fcl.load(CHUNK_SUMS_OF, block_size=4)
    for n in (1, 24, 8216, 8 * 256 + 3):
        xs = (np.arange(n, dtype=np.int32) * 37) % 101 - 50
        expected = np.pad(xs, (0, -n % 8)).reshape(-1, 8).sum(axis=1)
        assert (np.asarray(lib.sums(xs)) == expected).all(), n


def test_on_a_cpu_each_work_item_of_a_grid_loop_runs_consecutive_iterations():
    text = """val main = do<grid> {
  xs <- forcePull<grid> (generate 5000 (fn i => i * 3 - 7)) ;
  ys <- forcePull<grid> (map (fn x => x / 2) (reverse xs)) ;
  forceAndPrint 5000 (push<grid> ys) }"""
    # 5000 in runs of 16: 5 work-groups of 64 work-items, the last runs cut short.
    cpu = shaped(text, "cpu", 64)
    assert [ir.show_expr(s.groups) for s in cpu.host if isinstance(s, Launch)] == ["5", "5"]
    assert "get_global_id(0)) * 16); i_" in cpu.source and "< min(5000, " in cpu.source
    assert run_cl(text, block_size=64, target="cpu")[0] == run_interp(text)
    # A length known only at run time: each work-item's share of the launch.
    lib = fcl.load("sig addOne : [int] -> Program <grid> [int]\n"
                   "fun addOne xs = forcePull<grid> (map (fn x => x + 1) xs)", block_size=64)
    for n in (1, 17, 5000, 16 * 64 * 3 + 5):
        xs = np.arange(n, dtype=np.int32) * 7
        assert (np.asarray(lib.addOne(xs)) == xs + 1).all(), n


def test_on_a_cpu_a_tile_copied_through_local_memory_keeps_the_gpu_shape():
    # Two steps of one iteration per work-item: PoCL vectorizes them across work-items.
    gpu, cpu = shaped(TILED_TRANSPOSE, "gpu", 16), shaped(TILED_TRANSPOSE, "cpu", 16)
    tile = "__kernel" + gpu.source.split("__kernel")[-1]
    assert "barrier(" in tile and tile in cpu.source and not any(k.serial for k in cpu.kernels)
    # The grid loop filling the input is each work-item's run of 4 consecutive elements.
    assert "* 4); i_2 < ((((int)get_global_id(0)) * 4) + 4); i_2 += 1)" in cpu.source


def test_a_program_compiled_for_no_target_runs_the_kernels_of_its_device_kind():
    session = session_for(CHUNKED_SUMS)
    portable = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(64))
    assert portable.portable and portable.target == "gpu"  # what `fcl compile` shows
    on_cpu = backend.for_device(portable, cpu=True)
    assert on_cpu.target == "cpu" and on_cpu.kernels[-1].serial
    assert backend.for_device(portable, cpu=True) is on_cpu  # reshaped once
    assert backend.for_device(portable, cpu=False) is portable
    run = host.prepare_run(portable, None, None, io.StringIO(), io.StringIO())
    try:
        cpu = cl_device.serial_groups(run.device.device)
        assert run.program is (on_cpu if cpu else portable)
        run.run(run.program.host)
        run.check_failures()
    finally:
        run.release()
    assert run.out.getvalue() == run_interp(CHUNKED_SUMS)
    # A program of grid loops only is reshaped too: each work-item runs consecutive iterations.
    grid_session = session_for(GRID_MAPS)
    grid_only = pipeline.compile_program(grid_session, pipeline.main_root(grid_session),
                                         pipeline.CompileOptions(64))
    assert "get_global_id(0)) * " not in grid_only.source
    assert "get_global_id(0)) * " in backend.for_device(grid_only, cpu=True).source


def test_a_thread_array_whose_length_depends_on_the_work_item_gets_its_largest_length():
    # t + 1 for t < 4: 4 ints in registers; min (..) 80: 80 ints, beyond registers.
    gpu = shaped(PER_ITEM_LENGTHS, "gpu")
    (kernel,) = [k for k in gpu.kernels if k.private]
    assert [size for _, size in kernel.private] == [4]
    assert [ir.show_expr(local.size) for local in kernel.locals] == ["80"]
    expected = run_interp(PER_ITEM_LENGTHS)
    assert expected == "[0,0,61,61,122,122,161,161,1,1,62,62,123,123,162,162]\n"
    for target in ("gpu", "cpu"):
        assert run_cl(PER_ITEM_LENGTHS, block_size=64, target=target)[0] == expected, target


def test_a_thread_array_without_a_bound_is_refused_on_opencl_with_the_remedy():
    text = PER_ITEM_LENGTHS.replace("(min (index xs t + 1) 80)", "(index xs t + 1)")
    with pytest.raises(FCLError) as caught:
        run_cl(text)
    err = caught.value
    assert err.message.startswith("the length of this thread-level array depends on the "
                                  "work-item and has no bound the compiler can see")
    assert "`generate (min n 64) ...`" in err.message and (err.span.line, err.span.col) == (6, 15)


def test_on_a_cpu_a_thread_array_beyond_registers_is_one_slice_of_local_memory():
    # 16 threads on work-groups of 8: a serial kernel on a CPU.
    gpu, cpu = shaped(BIG_THREAD_ARRAYS, "gpu", 8), shaped(BIG_THREAD_ARRAYS, "cpu", 8)
    assert [local.per_item for local in gpu.kernels[-1].locals] == [True]
    assert [local.per_item for local in cpu.kernels[-1].locals] == [False]
    expected = run_interp(BIG_THREAD_ARRAYS)
    assert expected.startswith("[99,98,199,198,")
    for target in ("gpu", "cpu"):
        assert run_cl(BIG_THREAD_ARRAYS, block_size=8, target=target)[0] == expected


def test_a_grid_loop_gets_a_work_item_per_iteration():
    # 1000 iterations on 4 work-groups of 256: each work-item runs at most one, tested
    # against the bound, not a loop (PoCL ran a copy in a loop at half the speed).
    session = session_for(GRID_MAPS)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(256))
    assert "for (" not in compiled.source and "get_global_size" not in compiled.source
    assert compiled.source.count("if (i_") == 2 and "< 1000) {" in compiled.source
    launches = [s for s in ir.walk(compiled.host) if isinstance(s, Launch)]
    assert [ir.show_expr(s.groups) for s in launches] == ["4", "4"]
    assert run_cl(GRID_MAPS)[0] == run_interp(GRID_MAPS)
    # Unknown at compile time, the work-group size leaves a loop over the grid.
    assert "get_global_size(0)" in compiled_source(GRID_MAPS, block_size=None)


def test_power_beyond_the_unrolling_limit_is_a_counted_loop_that_needs_no_abort_flag():
    text = compiled_source(POWER_LOOP)
    assert "for (int iter_" in text and "while" not in text and "fcl_abort" not in text
    assert run_cl(POWER_LOOP)[0] == run_interp(POWER_LOOP)


def test_folds_start_from_their_first_element_without_testing_for_it():
    text = compiled_source(THREAD_SCANS)
    assert "== 0)" not in text
    assert run_cl(THREAD_SCANS)[0] == run_interp(THREAD_SCANS)


def test_tiles_run_in_two_dimensional_work_groups():
    session = session_for(TILED_TRANSPOSE)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(16))
    # The tile's rows and columns (i >> 2, i & 3) become the work-group's two dimensions, and
    # the tile in local memory gets a padding element per row.
    assert [k.width for k in compiled.kernels] == [None, 4]
    assert "get_local_id(1)" in compiled.source and ">> 2" not in compiled.source
    assert [local.size.value for local in compiled.kernels[1].locals] == [20]
    assert "arr_5[((get_local_id(0) * 5) + get_local_id(1))]" in compiled.source
    # The output index `row * 8 + col` is one expression over the ids, and it provably lies in
    # [0, 64): it stays in size_t, untruncated (see the test below). Work-group b writes the
    # output tile of row b & 1: neighbouring work-groups read along a row of input tiles
    # (tests/test_tile_order.py). The row stride 8 is a kernel argument (fcl/codegen/strides.py).
    assert "arr_3[(((((b_4 & 1) * 4) + get_local_id(1)) * fcl_stride8) + " in compiled.source
    assert [(v.name, value) for v, value in compiled.kernels[1].constants] == [("fcl_stride8", 8)]
    assert run_cl(TILED_TRANSPOSE, block_size=16)[0] == run_interp(TILED_TRANSPOSE)


def test_only_tiles_whose_columns_are_read_are_padded():
    # The thesis's matmulTiled reads its tiles along rows (B's) and broadcasts from A's: no
    # work-item walks down a column, so padding would only shift the two rows of a warp of a
    # 16-wide tile into each other's banks. The transpose above reads its tile by columns.
    path = Path(__file__).parent / "thesis" / "matmul.fcl"
    session = Session.new(prelude=True)
    session.add_file(Source(str(path), path.read_text()))
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(16))
    tiled = [k for k in compiled.kernels if k.width]
    assert tiled and all(local.size.value == 16 for k in tiled for local in k.locals)
    assert "* 5)" not in compiled.source


def test_indices_over_local_ids_are_truncated_to_int_only_where_they_might_not_fit():
    # `(int)(base + get_local_id(0))` hides from PoCL that neighbouring work-items access
    # neighbouring elements, so an index whose int range is known to lie in [0, 2^31) stays
    # in size_t; any other keeps C's int result through the truncation.
    from fcl.codegen.emit import c_expr
    from fcl.codegen.kernel import Kernel, Special
    from fcl.codegen.widen import widen
    from fcl.il import ir

    n = ir.Var("n", ir.INT)
    xs = ir.Var("xs", ir.ArrayType(ir.INT))

    def load(row: ir.Expr, in_loop: bool = False) -> str:
        """The C of `xs[row * 16 + local_x]` read in a kernel of 4 rows of 16 work-items."""
        b, x = ir.Var("b", ir.INT), ir.Var("x", ir.INT)
        index = ir.Bin("+", ir.Bin("*", b, ir.Const(16, ir.INT), ir.INT), Special("local_x"),
                       ir.INT)
        read: list[ir.Stmt] = [ir.Declare(x, ir.Index(xs, index))]
        if in_loop:  # a loop of one work-item: no barrier in it
            read = [ir.SeqFor(ir.Var("k", ir.INT), ir.Const(4, ir.INT), read)]
        kernel = Kernel("k", [ir.Declare(b, row), *read], block_size=64, width=16)
        declare = next(s for s in ir.walk(widen(kernel).body) if isinstance(s, ir.Declare)
                       and s.var.name == "x")
        return c_expr(declare.init)

    def masked(bits: int, minus: int = 0) -> ir.Expr:  # n & bits - minus: in [-minus, bits-minus]
        return ir.Bin("-", ir.Bin("&", n, ir.Const(bits, ir.INT), ir.INT),
                      ir.Const(minus, ir.INT), ir.INT)

    assert load(masked(1023)) == "xs[((b * 16) + get_local_id(0))]"
    assert load(n) == "xs[((int)((b * 16) + get_local_id(0)))]"                # unknown
    assert load(masked(1023, 1)) == "xs[((int)((b * 16) + get_local_id(0)))]"  # negative
    assert load(masked(2**27)) == "xs[((int)((b * 16) + get_local_id(0)))]"    # wraps
    # Inside loops of one work-item: there int indices already step well.
    assert load(masked(1023), in_loop=True) == "xs[((b * 16) + ((int)get_local_id(0)))]"


def test_arithmetic_over_local_ids_keeps_int_semantics():
    text = compiled_source(LOCAL_ID_ARITHMETIC, block_size=16)
    assert "((get_local_id(0) - 2) * (get_local_id(1) - 3))" in text
    assert run_cl(LOCAL_ID_ARITHMETIC, block_size=16)[0] == run_interp(LOCAL_ID_ARITHMETIC)


def test_arrays_only_touched_at_the_own_position_become_registers():
    session = session_for(OWN_ACCUMULATOR)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(32))
    kernel = compiled.kernels[-1]
    assert not kernel.locals and [size for _, size in kernel.private] == [1]
    assert run_cl(OWN_ACCUMULATOR, block_size=32)[0] == run_interp(OWN_ACCUMULATOR)
    session = session_for(POWER_LOOP)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(32))
    assert len(compiled.kernels[-1].locals) == 2 and not compiled.kernels[-1].private


@pytest.mark.parametrize("old, new, in_place", [
    ("", "", True),
    ("ys }", "ys ; forceAndPrint 64 (push<grid> xs) }", False),  # xs is used later
    ("index xs (c * 16 + j)", "index xs (63 - (c * 16 + j))", False),  # another item's element
    # Where c == 0, xs[j] is the element written (the scan's last kernel reads so) ...
    ("index xs (c * 16 + j) + c", "if c == 0 then index xs j else index xs (c * 16 + j) + c",
     True),
    # ... where c == 1 it is not.
    ("index xs (c * 16 + j) + c", "if c == 1 then index xs j else index xs (c * 16 + j) + c",
     False),
])
def test_kernels_write_in_place_into_arrays_nothing_reads_afterwards(old, new, in_place):
    from fcl.il import ir
    program = ADJUST_IN_PLACE.replace(old, new) if old else ADJUST_IN_PLACE
    session = session_for(program)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(16))
    allocs = [s for s in compiled.host if isinstance(s, ir.Alloc)]
    assert len(allocs) == (1 if in_place else 2)
    assert [p.name for p in compiled.kernels[1].params] == \
        (["arr_1"] if in_place else ["arr_1", "arr_3"])
    assert run_cl(program, block_size=16)[0] == run_interp(program)


@pytest.mark.slow  # 0.7-1.3 s
def test_a_copy_of_an_array_nothing_reads_afterwards_is_left_out():
    # Printing a stored array pushes it into a fresh one; written in place, that copy would
    # store each element onto itself, so there is no kernel for it at all.
    program = ("val main = do<grid> {\n  xs <- forcePull<grid> (generate 40 (fn i => i * i));\n"
               "  forceAndPrint 40 (push<grid> xs)\n}\n")
    session = session_for(program)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(16))
    assert [k.name for k in compiled.kernels] == ["kernel0_line2"]
    assert run_cl(program, block_size=16)[0] == run_interp(program)
    # A copy whose source is read again, but never written again, is the source itself
    # (fcl.memory.copies: an alias); unplanned, it is a kernel of its own.
    again = program.replace("forceAndPrint 40 (push<grid> xs)",
                            "ys <- forcePull<grid> xs;\n  forceAndPrint 40 (push<grid> "
                            "(zipWith addi xs ys))")
    session = session_for(again)
    for short_circuit, kernels in ((True, 2), (False, 3)):
        options = pipeline.CompileOptions(short_circuit=short_circuit)
        compiled = pipeline.compile_program(session, pipeline.main_root(session), options)
        assert len(compiled.kernels) == kernels
        assert run_cl(again, block_size=16, short_circuit=short_circuit)[0] == run_interp(again)


def test_writes_in_place_need_every_iteration_to_write_its_own_element():
    from fcl.il import ir
    from fcl.memory.inplace import in_place
    INT, arrays = ir.INT, ir.ArrayType(ir.INT)
    inp, out = ir.Var("inp", arrays), ir.Var("out", arrays)
    b, i = ir.Var("b", INT), ir.Var("i", INT)

    def program(stride: int):
        index = ir.Bin("+", ir.Bin("*", b, ir.Const(stride, INT), INT), i, INT)
        return [ir.Alloc(inp, ir.Const(64, INT), "grid"), ir.Alloc(out, ir.Const(64, INT), "grid"),
                ir.Distribute("grid", b, ir.Const(4, INT), [
                    ir.ParFor("block", i, ir.Const(16, INT), [
                        ir.Store(out, index, ir.Bin("+", ir.Index(inp, index), b, INT))])]),
                ir.Print(ir.Const(64, INT), out)]

    def rewritten(stmts) -> bool:
        shown = ir.show_stmts(stmts)
        after = ir.show_stmts(in_place(stmts))
        assert ir.show_stmts(stmts) == shown  # the IL given is left alone
        return "out" not in after

    assert rewritten(program(16))
    assert not rewritten(program(8))   # groups overlap: b * 8 + i repeats elements
    assert not rewritten(program(0))   # every group writes the same elements


@pytest.mark.slow  # 1.4-2.9 s
def test_checked_tiled_matmul_with_a_register_accumulator(tmp_path, monkeypatch):
    # Input lengths unknown at compile time (read from files) leave index checks inside a
    # kernel whose accumulator moves to registers. Check codes used to be found by the identity
    # of the check's statement, which that rewrite replaces: compiling raised a ValueError.
    bench_matmul = Path(__file__).parents[1] / "bench" / "matmul.fcl"
    h, w, tile = 8, 12, 4
    program = (f"val hA = {h}\nval wA = {w}\nval wB = {h}\nval tile = {tile}\n"
               # Without `take`, the inputs' lengths are unknown: the kernel keeps its checks.
               + bench_matmul.read_text().replace("(take (hA * wA) a) (take (wA * wB) b)", "a b")
               + f"val main = do<grid> {{ p <- product ; forceAndPrint {h * h} (push<grid> p) }}\n")
    rng = np.random.default_rng(1)
    a, b = rng.integers(-9, 9, h * w), rng.integers(-9, 9, w * h)
    (tmp_path / "a").write_text(",".join(map(str, a)))
    (tmp_path / "b").write_text(",".join(map(str, b)))
    monkeypatch.chdir(tmp_path)
    expected = (a.reshape(h, w) @ b.reshape(w, h)).flatten()
    session = session_for(program)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(tile * tile))
    assert any(k.fails and k.private for k in compiled.kernels)
    out = run_cl(program, block_size=tile * tile)[0]
    assert out == run_interp(program) == "[" + ",".join(map(str, expected)) + "]\n"


def test_the_build_helper_leaves_no_zombie_when_it_exits(monkeypatch):
    # A lean process (a Jupyter kernel) builds each program in a helper first; the helper exits
    # when idle, and must then be reaped at once, not when the kernel ends.
    from fcl.server import lean
    dev = cl_device.open_device().device
    if not lean.is_pocl(dev):
        pytest.skip("the build helper serves PoCL devices only")
    monkeypatch.setattr(lean, "_helper_wanted", True)
    monkeypatch.setattr(lean, "_helper", None)
    lean.build_in_helper(dev, "__kernel void k(__global int* a) { a[0] = 1; }", [])
    helper = lean._helper
    assert helper is not None and helper.poll() is None
    helper.stdin.close()  # its input ends: it exits, as it does after HELPER_IDLE seconds idle
    status = Path(f"/proc/{helper.pid}/status")
    for _ in range(600):
        if not status.exists():
            break
        time.sleep(0.05)
    assert not status.exists(), status.read_text().splitlines()[1]  # "State: Z (zombie)"
