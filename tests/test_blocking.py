"""Register blocking (fcl.codegen.blocking): a serial kernel's reduction into rows of private
accumulators keeps blocks of rows in OpenCL vectors through the reduction's loop; the results
are the interpreter's, to the last digit of a double."""
from pathlib import Path

import numpy as np
import pytest

from runs import compiled_source, run_cl, run_interp
from test_oclgrind import oclgrind_findings
from test_serial import after

ROOT = Path(__file__).parent
TILED = (ROOT.parent / "bench" / "matmul.fcl").read_text().split("val product")[0]


def product(side: int, tile: int, doubles: bool) -> str:
    """A side x side product in tiles of tile x tile; doubles whose sums depend on the order of
    the additions."""
    if doubles:
        a, b, ops = "divd (i2d ((i * 7) % 13 - 6)) 3.0", "divd (i2d ((i * 5) % 11 - 5)) 7.0", \
            "addd muld 0.0"
    else:
        a, b, ops = "(i * 7) % 13 - 6 + i * 40000", "(i * 5) % 11 - 5 + i * 90000", "addi muli 0"
    show = "forceAndPrintDouble" if doubles else "forceAndPrint"
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
