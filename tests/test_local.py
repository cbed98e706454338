"""A work-group's step changing some elements of a local array writes them in place
(fcl/memory/local.py), and a serial kernel reads a row's total once (fcl/codegen/serial.py)."""
from __future__ import annotations

import numpy as np

from fcl import pipeline
from fcl.il import ir
from fcl.steps import BACKEND_STEPS, Settings, run_steps
from runs import compiled_source, run_cl, run_interp, session_for
from test_oclgrind import oclgrind_findings

# The original repository's scan (tests/benchmarks/scan.fcl): Sklansky's scan in each chunk of
# 2^lg elements, a `power<block>` of lg steps, each keeping half of the chunk and adding a total
# to the other half; here on 32 chunks of 32 ints.
SKLANSKY = """\
fun appendPull a1 a2 =
  let n1 = lengthPull a1 in
  let n2 = lengthPull a2
  in generate (n1 + n2) (fn ix => if ix < n1 then index a1 ix else index a2 (ix - n1))
fun fan op arr =
  let x = halve arr in
  let c = index (fst x) (lengthPull (fst x) - 1)
  in appendPull (fst x) (mapPull (op c) (snd x))
fun binsplit2 n f iteration arr =
  let c = 1 << (n - iteration) in
  let m = lengthPull arr / c
  in return<block> (push<block> (generate (c * m) (fn i =>
       index (f (generate m (fn j => index arr ((i / m) * m + j)))) (i % m))))
fun sklansky n op arr =
  do<block> {
    a <- power<block> n (binsplit2 (n - 1) (fan op)) (return<block> (push<block> arr)) ;
    return<block> (push<block> a)
  }
val main = do<grid> {
  input <- forcePull<grid> (generate 1024 (fn i => (i * 7) % 10)) ;
  scans <- forceM<grid> (concatMap<block> 32 (sklansky 5 addi) (splitUp 32 input)) ;
  forceAndPrint 1024 (push<grid> scans)
}
"""

# Hillis and Steele's step reads an element the step changes (lane i - d): no update in place.
HILLIS_STEELE = """\
val main = do<grid> {
  input <- forcePull<grid> (generate 64 (fn i => i % 5)) ;
  scans <- forceM<grid> (concatMap<block> 32 (fn chunk => do<block> {
    a <- power<block> 5 (fn k => fn xs =>
           return<block> (push<block> (generate 32 (fn i =>
             if i >= (1 << k) then index xs (i - (1 << k)) + index xs i else index xs i))))
         (return<block> (push<block> chunk)) ;
    return<block> (push<block> a) }) (splitUp 32 input)) ;
  forceAndPrint 64 (push<grid> scans)
}
"""


def local_steps(text: str, short_circuit: bool = True) -> tuple[list[str], list[int]]:
    """The local arrays each work-group allocates, and the lengths of its steps writing them."""
    session = session_for(text)
    il = pipeline.lower(session, pipeline.main_root(session), pipeline.CompileOptions())
    settings = Settings(32, plan_memory=short_circuit)
    program = run_steps(il, BACKEND_STEPS[:2], settings, None)
    assert isinstance(program, list)
    arrays = [s.var.name for s in ir.walk(program) if isinstance(s, ir.Alloc)
              and s.level == "block"]
    steps = [int(s.bound.value) for s in ir.walk(program)
             if isinstance(s, ir.ParFor) and s.level == "block" and isinstance(s.bound, ir.Const)
             and any(isinstance(t, ir.Store) and t.array.name in arrays for t in s.body)]
    return arrays, steps


def test_sklanskys_steps_add_to_the_changed_half_in_place():
    arrays, steps = local_steps(SKLANSKY)
    # One local array, not two taking turns; the load of the chunk, then 5 steps over the 16
    # elements each changes.
    assert len(arrays) == 1 and steps == [32] + [16] * 5
    unplanned_arrays, unplanned_steps = local_steps(SKLANSKY, short_circuit=False)
    assert len(unplanned_arrays) == 2 and unplanned_steps == [32] * 6
    expected = np.cumsum(((np.arange(1024) * 7) % 10).reshape(32, 32), axis=1).ravel()
    out = run_interp(SKLANSKY)
    assert out == "[" + ",".join(map(str, expected)) + "]\n"
    for target in ("gpu", "cpu"):
        for short_circuit in (True, False):
            assert run_cl(SKLANSKY, block_size=32, target=target,
                          short_circuit=short_circuit)[0] == out


def test_a_step_reading_what_it_changes_keeps_its_two_arrays():
    arrays, steps = local_steps(HILLIS_STEELE)
    assert len(arrays) == 2 and steps == [32] * 6
    assert run_cl(HILLIS_STEELE, block_size=32)[0] == run_interp(HILLIS_STEELE)


def test_the_in_place_steps_race_nowhere_under_oclgrind(capfd):
    assert oclgrind_findings(SKLANSKY, "sklansky.fcl", capfd) == ""


# Of doubles, whose sums keep their order on a CPU; of ints, the serial kernel is one loop
# (fcl.codegen.reassociate, tests/test_reassociate.py).
SKLANSKY_DOUBLES = SKLANSKY.replace("(fn i => (i * 7) % 10)", "(fn i => i2d ((i * 7) % 10))") \
    .replace("sklansky 5 addi", "sklansky 5 addd").replace("forceAndPrint ", "forceAndPrintDouble ")


def test_a_serial_kernel_reads_each_rows_total_before_the_rows_loop():
    source = compiled_source(SKLANSKY_DOUBLES, block_size=32, target="cpu")
    lines = source.splitlines()
    # Step 3 (rows of 8 of which 4 change): the total of each row of 8, read once per row.
    row = next(k for k, line in enumerate(lines) if "_changed_row < 4;" in line)
    assert "double c_" in lines[row + 1] and "_changed_col < 4;" in lines[row + 2]
    assert run_cl(SKLANSKY_DOUBLES, block_size=32, target="cpu")[0] == \
        run_interp(SKLANSKY_DOUBLES)
    assert "folded_0" in compiled_source(SKLANSKY, block_size=32, target="cpu")
