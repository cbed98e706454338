"""The OpenCL back end on hand-built IL programs (kernel splitting, OpenCL C, PyOpenCL runtime).

Blocks of 4 work-items and few work-groups keep the programs small while still making every
loop stride over several iterations per work-item and per work-group.
"""
import io
import re

import pytest

from fcl.errors import FCLError, Source, Span
from fcl.il.ir import (BOOL, DOUBLE, INT, Alloc, ArrayType, Assign, Benchmark, Bin, Const,
                       Declare, Distribute, Fail, If, Index, ParFor, Print, ReadCSV, SeqFor, Store,
                       Un, Var, While)
from fcl.il.kernels import Launch, launch_groups, split_program
from fcl.opencl.codegen import FP64_PRAGMA, compile_source
from fcl.opencl.devices import PROGRAM_CACHE
from fcl.opencl.runtime import OpenCLRuntime

BLOCK = 4
SOURCE = Source("test.fcl", "val main = do { arr <- force<grid> xs; forceAndPrint 4 arr }\n")


def span_of(text):
    start = SOURCE.text.index(text)
    return Span(SOURCE, start, start + len(text))


SPAN = span_of("force<grid> xs")
OTHER_SPAN = span_of("forceAndPrint 4 arr")


def var(name, t=INT):
    return Var(name, t)


def const(value, t=INT):
    return Const(value, t)


def add(a, b):
    return Bin("+", a, b, INT)


def mul(a, b):
    return Bin("*", a, b, INT)


def less(a, b):
    return Bin("<", a, b, BOOL)


def array(name, elem=INT):
    return Var(name, ArrayType(elem))


def run(program, **options):
    out, err = io.StringIO(), io.StringIO()
    OpenCLRuntime(block_size=BLOCK, out=out, err=err, **options).run(program)
    return out.getvalue(), err.getvalue()


def test_iota_with_more_groups_and_items_than_launched():
    arr, b, i = array("arr_1"), var("b_2"), var("i_3")
    index = add(mul(b, const(8)), i)
    program = [Alloc(arr, const(40), "grid"),
               Distribute("grid", b, const(5), [ParFor("block", i, const(8), [
                   Store(arr, index, index)])], span=SPAN),
               Print(const(40), arr)]
    out, _ = run(program, max_groups=2)
    assert out == "[" + ",".join(map(str, range(40))) + "]\n"
    source, table = compile_source(program)
    assert source.startswith("__kernel void kernel_0_force(__global int* arr_1) {\n")
    assert "b_2 += get_num_groups(0)" in source and "i_3 += get_local_size(0)" in source
    assert table[0] == (1, SPAN)


def test_launch_shape_follows_the_problem_size():
    groups, items = split_program([
        Distribute("grid", var("b"), var("n"), []), ParFor("grid", var("i"), var("n"), [])]).host
    assert isinstance(groups, Launch) and isinstance(items, Launch)
    assert launch_groups(groups, 5, block_size=256) == 5
    assert launch_groups(groups, 10**6, block_size=256, max_groups=1000) == 1000
    assert launch_groups(items, 1000, block_size=256) == 4
    assert launch_groups(items, 0, block_size=256) == 0


def test_block_tree_reduction_with_double_buffered_local_memory():
    """Each work-group sums 8 elements by halving in local memory; the host reads a sum back."""
    data, out = array("data_1"), array("out_2")
    g, i, j, k = var("g_3"), var("i_4"), var("j_5"), var("k_6")
    front, back = array("front_7"), array("back_8")
    cur, nxt, swap = array("cur_9"), array("next_10"), array("swap_11")
    length, go = var("len_12"), var("go_13", BOOL)
    half = Bin("/", length, const(2), INT)
    reduce_group = [
        Alloc(front, const(8), "block"), Alloc(back, const(8), "block"),
        ParFor("block", i, const(8), [Store(front, i, Index(data, add(mul(g, const(8)), i)))]),
        Declare(cur, front), Declare(nxt, back), Declare(length, const(8)),
        Declare(go, const(False, BOOL)),
        While([Assign(go, Bin(">", length, const(1), BOOL))], go, [
            ParFor("block", j, half, [Store(nxt, j, add(Index(cur, mul(j, const(2))),
                                                        Index(cur, add(mul(j, const(2)),
                                                                       const(1)))))]),
            Declare(swap, cur), Assign(cur, nxt), Assign(nxt, swap), Assign(length, half)]),
        ParFor("block", k, const(1), [Store(out, g, Index(cur, const(0)))])]
    program = [Alloc(data, const(24), "grid"), Alloc(out, const(3), "grid"),
               ParFor("grid", i, const(24), [Store(data, i, i)]),
               Distribute("grid", g, const(3), reduce_group),
               If(Bin("==", Index(out, const(2)), const(156), BOOL), [Print(const(3), out)], [])]
    assert run(program)[0] == "[28,92,156]\n"
    source, _ = compile_source(program)
    assert "__local int* front_7" in source and "__local int* swap_11 = cur_9;" in source
    assert "if (!go_13) break;" in source


@pytest.mark.parametrize("size", [const(4), var("m_1")], ids=["private", "local-slice"])
def test_thread_level_array_in_a_grid_parfor(size):
    out, tmp = array("out_2"), array("tmp_3")
    i, k, n, acc = var("i_4"), var("k_5"), var("n_6"), var("acc_7")
    program = [Declare(var("m_1"), const(4)), Alloc(out, const(10), "grid"),
               ParFor("grid", i, const(10), [
                   Alloc(tmp, size, "thread"),
                   SeqFor(k, const(4), [Store(tmp, k, mul(i, k))]),
                   Declare(acc, const(0)),
                   SeqFor(n, const(4), [Assign(acc, add(acc, Index(tmp, n)))]),
                   Store(out, i, acc)]),
               Print(const(10), out)]
    # Two groups of 4 work-items: each work-item does more than one iteration.
    assert run(program, max_groups=2)[0] == "[" + ",".join(str(6 * i) for i in range(10)) + "]\n"
    source, _ = compile_source(program)
    if isinstance(size, Const):
        assert "    int tmp_3[4];" in source
    else:
        assert "__local int* tmp_3 = tmp_3_pool + get_local_id(0) * m_1;" in source


def test_doubles_print_with_five_decimals():
    d, i = array("d_1", DOUBLE), var("i_2")
    third = Bin("/", Un("i2d", i, DOUBLE), const(3.0, DOUBLE), DOUBLE)
    program = [Alloc(d, const(3), "grid"), ParFor("grid", i, const(3), [Store(d, i, third)],
                                                  span=SPAN),
               Print(const(3), d)]
    assert run(program)[0] == "[0.00000,0.33333,0.66667]\n"
    source, table = compile_source(program)
    assert source.startswith(FP64_PRAGMA + "\n\n__kernel void")
    assert table[0] == (3, SPAN)


def test_operators_have_c_semantics_in_kernels_and_on_the_host():
    a, b, big = var("a_1"), var("b_2"), var("big_3")
    ints = [Bin("/", a, b, INT), Bin("%", a, b, INT), Bin("/", b, a, INT), Bin("%", b, a, INT),
            Bin("<<", b, const(33), INT), Bin(">>", a, const(1), INT), Bin("min", a, b, INT),
            Bin("max", a, b, INT), Un("abs", a, INT), Un("sign", a, INT), Un("clz", b, INT),
            Un("d2i", Un("neg", const(2.7, DOUBLE), DOUBLE), INT), Un("b2i", less(a, b), INT),
            Bin("^", big, const(-1), INT), Un("sign", Un("i2d", const(0), DOUBLE), INT)]
    expected = "[-3,-1,0,2,4,-4,-7,2,7,-1,30,-2,1,-2147483648,0]\n"
    on_device, on_host, i = array("dev_4"), array("host_5"), var("i_6")
    n = const(len(ints))
    program = [Declare(a, const(-7)), Declare(b, const(2)), Declare(big, const(2**31 - 1)),
               Alloc(on_device, n, "grid"), Alloc(on_host, n, "grid"),
               ParFor("grid", i, const(1), [Store(on_device, const(k), e)
                                            for k, e in enumerate(ints)]),
               *[Store(on_host, const(k), e) for k, e in enumerate(ints)],
               Print(n, on_device), Print(n, on_host)]
    assert run(program)[0] == expected * 2


def test_benchmark_reports_on_err():
    arr, i = array("arr_1"), var("i_2")
    program = [Benchmark(const(3), [Alloc(arr, const(16), "grid"),
                                    ParFor("grid", i, const(16), [Store(arr, i, i)])])]
    out, err = run(program)
    assert out == ""
    assert re.fullmatch(r"Benchmark \(3 repetitions\): \d+\.\d{6} ms per run\n"
                        r"  min \d+\.\d{6} ms, median \d+\.\d{6} ms\n", err)


def test_local_memory_beyond_the_device_is_a_located_error():
    runtime = OpenCLRuntime(block_size=BLOCK)
    too_many = runtime.device.local_mem_size // 4 + 1
    program = [Distribute("grid", var("b_1"), const(2), [
        Alloc(array("big_2"), const(too_many), "block", span=OTHER_SPAN)])]
    with pytest.raises(FCLError) as caught:
        runtime.run(program)
    assert caught.value.span is OTHER_SPAN and "local memory" in caught.value.message


def test_local_memory_sized_by_the_group_index_is_a_located_error():
    b, n = var("b_1"), var("n_2")
    program = [Distribute("grid", b, const(2), [
        Declare(n, add(b, const(1))), Alloc(array("a_3"), n, "block", span=OTHER_SPAN)])]
    with pytest.raises(FCLError, match="`b_1`, which is computed inside the kernel") as caught:
        compile_source(program)
    assert caught.value.span is OTHER_SPAN


def test_the_same_program_is_built_once_per_device():
    arr, i = array("arr_1"), var("i_2")
    program = [Alloc(arr, const(2), "grid"),
               ParFor("grid", i, const(2), [Store(arr, i, add(i, const(424242)))]),
               Print(const(2), arr)]
    builds = PROGRAM_CACHE.builds
    assert run(program)[0] == "[424242,424243]\n"
    assert PROGRAM_CACHE.builds == builds + 1
    assert run(program)[0] == "[424242,424243]\n"
    assert PROGRAM_CACHE.builds == builds + 1


def test_read_csv_like_atoi(tmp_path):
    path = tmp_path / "input.csv"
    path.write_text("3, -4,5\n6 x7 8\n")
    arr, length = array("arr_1"), var("len_2")
    assert run([ReadCSV(arr, length, str(path)), Print(length, arr)])[0] == "[3,-4,5,6,0,8]\n"
    with pytest.raises(FCLError, match="cannot read") as caught:
        run([ReadCSV(arr, length, str(tmp_path / "missing.csv"), span=SPAN)])
    assert caught.value.span is SPAN


def test_fail_on_the_host_and_in_a_kernel():
    arr, i = array("arr_1"), var("i_2")
    with pytest.raises(FCLError) as caught:
        run([Fail(less(const(1), const(2)), "too small", span=SPAN)])
    assert caught.value.message == "too small" and caught.value.span is SPAN
    checked = [Alloc(arr, const(8), "grid"),
               ParFor("grid", i, const(8), [
                   Fail(Bin(">=", i, const(6), BOOL), "index out of bounds", span=OTHER_SPAN),
                   Store(arr, i, i)]),
               Print(const(8), arr)]
    with pytest.raises(FCLError, match="index out of bounds") as caught:
        run(checked)
    assert caught.value.span is OTHER_SPAN


def test_opencl_build_errors_carry_the_build_log():
    keyword = var("float")  # not a usable C name: line 3 column 13 of the OpenCL source
    program = [ParFor("grid", var("i_1"), const(1), [Declare(keyword, const(1))])]
    with pytest.raises(FCLError, match=r"(?s)rejected the generated code:\n.*:3:13"):
        run(program)


def test_oclgrind_is_not_chosen_by_default(monkeypatch):
    monkeypatch.delenv("PYOPENCL_CTX", raising=False)
    assert "Oclgrind" not in OpenCLRuntime().device_name
