"""Register blocking (fcl.codegen.blocking): a serial kernel's reduction into rows of private
accumulators keeps blocks of rows in OpenCL vectors through the reduction's loop; the results
are the interpreter's, to the last digit of a double."""
from pathlib import Path

import numpy as np
import pytest

from fcl import pipeline
from fcl.codegen.blocking import RegisterBlocked
from fcl.codegen.carried import carried
from fcl.il import ir
from runs import compiled_source, run_cl, run_interp, session_for
from test_oclgrind import oclgrind_findings
from test_serial import after

ROOT = Path(__file__).parent
TILED = (ROOT.parent / "bench" / "matmul.fcl").read_text().split("val product")[0]


def elements(doubles: bool) -> tuple[str, str, str, str]:
    """A's and B's elements, matmulTiled's operations and the printer: doubles whose sums
    depend on the order of the additions, or ints that wrap."""
    if doubles:
        return "divd (i2d ((i * 7) % 13 - 6)) 3.0", "divd (i2d ((i * 5) % 11 - 5)) 7.0", \
            "addd muld 0.0", "forceAndPrintDouble"
    return "(i * 7) % 13 - 6 + i * 40000", "(i * 5) % 11 - 5 + i * 90000", "addi muli 0", \
        "forceAndPrint"


def product(side: int, tile: int, doubles: bool) -> str:
    """A side x side product in tiles of tile x tile."""
    a, b, ops, show = elements(doubles)
    return f"""val n = {side}
{TILED}
val main = do<grid> {{
  a <- forcePull<grid> (generate (n * n) (fn i => {a}));
  b <- forcePull<grid> (generate (n * n) (fn i => {b}));
  c <- matmulTiled {ops} {tile} n n n a b;
  {show} (n * n) c
}}
"""


INTS = product(32, 16, doubles=False)


def test_a_tiled_products_accumulators_are_vectors_through_the_reduction():
    steps = after(INTS)
    blocked = steps["blocking"]
    assert "blocked in registers: 4 rows x 16 of acc_" in blocked and "vectors of 8" in blocked
    source = compiled_source(INTS, target="cpu")
    lines = source.splitlines()
    start = next(k for k, line in enumerate(lines) if "_row_block < 16; " in line)
    # Two vectors of 8 per row, 4 rows: loaded before the reduction's loop, stored after it.
    assert sum("uint8 acc_" in line for line in lines[start:start + 10]) == 8
    loop = next(k for k in range(start, len(lines)) if lines[k].lstrip().startswith("for (int it"))
    body = lines[loop + 1:loop + 9]
    assert all(line.lstrip().startswith("acc_") and "_v" in line.split("=")[0] for line in body)
    assert not any("_each[" in line for line in body)  # no accumulator in memory in the loop
    assert lines[loop + 9].strip() == "}" and "vstore8(as_int8(acc_" in lines[loop + 10]


def test_the_blocked_product_is_the_interpreters_and_numpys():
    out, err = run_cl(INTS, target="cpu")
    assert err == "" and out == run_interp(INTS)
    i = np.arange(32 * 32, dtype=np.int64)
    a = ((i * 7) % 13 - 6 + i * 40000).reshape(32, 32)
    b = ((i * 5) % 11 - 5 + i * 90000).reshape(32, 32)
    want = ((a @ b + 2**31) % 2**32 - 2**31).flatten()  # ints wrap
    assert out.strip() == "[" + ",".join(map(str, want)) + "]"


@pytest.mark.parametrize(("tile", "rows"), [(16, 2), (8, 4)])
def test_doubles_are_blocked_in_vectors_of_4_to_the_last_digit(tile, rows):
    text = product(32, tile, doubles=True)
    assert f"blocked in registers: {rows} rows x {tile} of acc_" in after(text)["blocking"]
    assert "double4 acc_" in compiled_source(text, target="cpu")
    out, err = run_cl(text, target="cpu")
    assert err == "" and out == run_interp(text)


def test_rows_narrower_than_a_vector_and_gpu_kernels_are_left_alone():
    narrow = product(16, 4, doubles=False)  # rows of 4 ints: half a vector
    steps = after(narrow)
    assert steps["blocking"] == steps["reads"]
    gpu = after(INTS, target="gpu")
    assert gpu["blocking"] == gpu["reads"]


def test_the_blocked_kernel_is_clean_under_oclgrind(capfd):
    assert oclgrind_findings(INTS, "product.fcl", capfd, target="cpu") == ""


def rectangle(steps: int, doubles: bool) -> str:
    """An 8 x 8·steps by 8·steps x 16 product in tiles of 8: two tiles of C, each a `power`
    loop of `steps` steps (more than the lowering unrolls)."""
    wide = 8 * steps
    a, b, ops, show = elements(doubles)
    return f"""{TILED}
val main = do<grid> {{
  a <- forcePull<grid> (generate (8 * {wide}) (fn i => {a}));
  b <- forcePull<grid> (generate ({wide} * 16) (fn i => {b}));
  c <- matmulTiled {ops} 8 8 {wide} 16 a b;
  {show} (8 * 16) c
}}
"""


def carried_kernel(text: str):
    session = session_for(text)
    compiled = pipeline.compile_program(session, pipeline.main_root(session),
                                        pipeline.CompileOptions(target="cpu"))
    found = [s for kernel in compiled.kernels for s in ir.walk(kernel.body)
             if isinstance(s, RegisterBlocked) and s.carry is not None]
    return compiled, found


@pytest.mark.parametrize("steps", [17, 18])  # the running totals end in either local array
@pytest.mark.parametrize("doubles", [False, True])
def test_a_power_loops_running_totals_stay_in_registers(steps, doubles):
    text = rectangle(steps, doubles)
    compiled, found = carried_kernel(text)
    assert len(found) == 1 and found[0].carry.loop.name.startswith("iter_")
    lines = compiled.source.splitlines()
    start = next(k for k, line in enumerate(lines) if "_row_block < 8; " in line)
    end = next(k for k in range(start, len(lines)) if lines[k].startswith(lines[start][:-len(
        lines[start].lstrip())] + "}"))
    block = lines[start:end]
    loop = next(k for k, line in enumerate(block) if line.lstrip().startswith("for (int iter_"))
    # The totals are loaded before the power loop and stored after it; inside it no local
    # array is read: the tiles' elements come from the global arrays they were copied from.
    assert all("_v" in line for line in block[1:loop])
    tiles = {s.var.name for s in ir.walk(found[0].body) if isinstance(s, ir.Alloc)}
    assert len(tiles) == 2
    assert not any(name in line for line in block[loop:] for name in {*tiles, "next_"})
    assert sum("vstore" in line and "cur_" in line for line in block[loop:]) == loop - 1
    out, err = run_cl(text, target="cpu")
    assert err == "" and out == run_interp(text)  # doubles to the last digit
    if not doubles:
        i, j = np.arange(8 * 8 * steps, dtype=np.int64), np.arange(8 * steps * 16, dtype=np.int64)
        a = ((i * 7) % 13 - 6 + i * 40000).reshape(8, 8 * steps)
        b = ((j * 5) % 11 - 5 + j * 90000).reshape(8 * steps, 16)
        want = ((a @ b + 2**31) % 2**32 - 2**31).flatten()
        assert out.strip() == "[" + ",".join(map(str, want)) + "]"


def test_running_totals_are_kept_only_where_nothing_reads_what_the_loop_no_longer_leaves():
    _, (blocked,) = carried_kernel(rectangle(17, False))
    loop = blocked.body[0]
    cur, nxt = blocked.carry.total, loop.body[-1].var
    before = [ir.Declare(cur, ir.Var("buf_a", cur.type)),
              ir.Declare(nxt, ir.Var("buf_b", cur.type))]
    private = {blocked.found.acc.name}
    assert carried(loop, before, [], [loop], private) is not None
    acc = blocked.found.acc
    for read in (ir.Index(nxt, ir.Const(0, ir.INT)), ir.Index(ir.Var("buf_a", cur.type),
                                                              ir.Const(0, ir.INT))):
        after = [ir.Store(ir.Var("out", acc.type), ir.Const(0, ir.INT), read)]
        assert carried(loop, before, after, [loop], private) is None
    # The accumulators read elsewhere in the kernel, or not private; a tile's source written.
    elsewhere = [ir.Store(ir.Var("out", acc.type), ir.Const(0, ir.INT),
                          ir.Index(acc, ir.Const(0, ir.INT)))]
    assert carried(loop, before, [], [loop, *elsewhere], private) is None
    assert carried(loop, before, [], [loop], set()) is None
    tiles = {s.var.name for s in ir.walk([loop]) if isinstance(s, ir.Alloc)}
    tile_source = next(s.value.array for s in ir.walk([loop])
                       if isinstance(s, ir.Store) and s.array.name in tiles)
    written = [ir.Store(tile_source, ir.Const(0, ir.INT), ir.Const(0, ir.INT))]
    assert carried(loop, before, [], [loop, *written], private) is None


def test_the_carried_kernel_is_clean_under_oclgrind(capfd):
    assert oclgrind_findings(rectangle(17, False), "product.fcl", capfd, target="cpu") == ""
