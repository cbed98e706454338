"""The `reads` step (fcl/codegen/reads.py): an element read again and again is read once."""
from __future__ import annotations

import re

import numpy as np

from fcl import pipeline
from fcl.errors import Source
from fcl.session import Session
from runs import run_cl, run_interp

ROWS = """\
val main = do<grid> {
  offs <- forcePull<grid> (generate 65 (fn r => 4 * r + 3 * (r / 8)));
  vals <- forcePull<grid> (generate (index offs 64) (fn e => e % 10));
  sums <- forceM<grid> (concat<block> 64 (map (fn block => concat<thread> 1 (map (fn r =>
    return<thread> (foldl addi 0 (generate (index offs (r + 1) - index offs r)
                                            (fn k => index vals (index offs r + k))))) block))
    (splitUp 64 (iota 64))));
  forceAndPrint 64 (push<grid> sums)
}
"""
OFFSETS = 4 * np.arange(65) + 3 * (np.arange(65) // 8)


def kernel_source(text: str, name: str) -> str:
    session = Session.new(prelude=True)
    session.add_file(Source("t.fcl", text))
    source = pipeline.compile_program(session, pipeline.main_root(session),
                                      pipeline.CompileOptions(block_size=64)).source
    return source[source.index(f"void {name}("):].split("\n}\n")[0]


def test_a_rows_bounds_are_read_once_before_its_loop():
    sums = kernel_source(ROWS, "kernel2_line4")
    # The loop's bound, each element's position and the checks all read the two offsets; the
    # kernel reads them into two variables. Only a failure's report reads them again.
    reads = [line for line in sums.splitlines() if "arr_1[" in line and "fcl_report" not in line]
    assert len(reads) == 2 and all(re.match(r"\s*int arr_1_read\d = arr_1\[", r) for r in reads)
    loop = next(line for line in sums.splitlines() if line.strip().startswith("for ("))
    assert "arr_1_read" in loop and "arr_1[" not in loop
    expected = run_interp(ROWS)
    assert run_cl(ROWS)[0] == run_cl(ROWS, target="cpu")[0] == expected
    sums = np.add.reduceat(np.arange(OFFSETS[-1]) % 10, OFFSETS[:-1])
    assert expected == "[" + ",".join(map(str, sums)) + "]\n"


def test_a_read_is_kept_where_its_value_may_change_or_it_may_not_run():
    squares = kernel_source(
        "val main = do<grid> { xs <- forcePull<grid> (iota 4096); forcePull<grid> "
        "(generate 4096 (fn i => if i % 2 == 0 then index xs i * index xs i else 0)) }",
        "kernel1_line1")
    # The kernel writes xs (its squares over it): both reads stay.
    assert squares.count("arr_1[i_4]") == 3 and "_read" not in squares
    # ys is only read, but both reads are in a branch of `?:`: reading ys[i] before it would
    # read it for the odd i too, which the program does not.
    branch = kernel_source(
        "val main = do<grid> { ys <- forcePull<grid> (iota 4096); "
        "xs <- forcePull<grid> (generate 4096 (fn i => if i % 2 == 0 then index ys i * index ys i "
        "else 0)); forcePull<grid> (generate 16 (fn i => index xs i + index ys i)) }",
        "kernel1_line1")
    assert branch.count("arr_1[") == 2 and "_read" not in branch
