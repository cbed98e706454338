"""Records (docs/language.md, "Records"): pairs of base types in push arrays and memory, an array
per field, on both back ends and from Python (structured arrays or tuples of arrays in, tuples of
arrays out)."""
import numpy as np
import pytest

import fcl
from fcl.errors import FCLError

SOURCE = """
sig bounce : [(double, double)] -> Program <grid> [(double, double)]
fun bounce ps = forcePull<grid> (map (fn p => let x = addd (fst p) (snd p) in
                  if gtd x 10.0 then (subd 20.0 x, negated (snd p)) else (x, snd p)) ps)

sig norms : [(double, (double, double))] -> Program <grid> [double]
fun norms vs =
  forcePull<grid> (map (fn v => sqrt (addd (muld (fst v) (fst v))
                                           (addd (muld (fst (snd v)) (fst (snd v)))
                                                 (muld (snd (snd v)) (snd (snd v)))))) vs)

sig squares : int -> Program <grid> [(int, bool)]
fun squares n = forcePull<grid> (generate n (fn i => (i * i, i % 2 == 0)))

sig sums : [(int, int)] -> Program <grid> [(int, int)]<grid>
fun sums ps = concat<block> 4 (map (fn chunk => do<block> {
                local <- forcePull<block> chunk ;
                return<block> (push<block> (reverse local)) }) (splitUp 4 ps))

sig generic : forall 'a. [('a, 'a)] -> Program <grid> [('a, 'a)]
fun generic ps = forcePull<grid> ps
"""


@pytest.fixture(scope="module", params=["opencl", "interp"])
def lib(request):
    return fcl.load(SOURCE, backend=request.param)


def test_records_go_in_as_tuples_or_structured_arrays_and_come_back_as_tuples(lib):
    x = np.arange(8.0)
    moved = lib.bounce((x, x + 1))
    assert isinstance(moved, tuple) and len(moved) == 2
    position = np.where(x + x + 1 > 10, 20 - (x + x + 1), x + x + 1)
    velocity = np.where(x + x + 1 > 10, -(x + 1), x + 1)
    assert moved[0].tolist() == position.tolist() and moved[1].tolist() == velocity.tolist()
    vectors = np.zeros(3, dtype=[("x", "f8"), ("v", [("y", "f8"), ("z", "f8")])])
    vectors["x"], vectors["v"]["y"], vectors["v"]["z"] = [3, 0, 1], [4, 0, 2], [0, 0, 2]
    flat = np.zeros(3, dtype=[("x", "f8"), ("y", "f8"), ("z", "f8")])
    flat["x"], flat["y"], flat["z"] = [3, 0, 1], [4, 0, 2], [0, 0, 2]
    for given in (vectors, flat, ([3.0, 0, 1], ([4.0, 0, 2], [0.0, 0, 2])),
                  ([3.0, 0, 1], [4.0, 0, 2], [0.0, 0, 2])):
        assert lib.norms(given).tolist() == [5.0, 0.0, 3.0]
    squares, evens = lib.squares(5)
    assert squares.dtype == np.int32 and squares.tolist() == [0, 1, 4, 9, 16]
    assert evens.dtype == np.bool_ and evens.tolist() == [True, False, True, False, True]


def test_records_in_local_memory_come_back_in_order(lib):
    a, b = np.arange(16, dtype=np.int32), np.arange(16, dtype=np.int32) * 10
    first, second = lib.sums((a, b))
    assert first.tolist() == [3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12]
    assert second.tolist() == [10 * v for v in first.tolist()]


def test_bad_records_are_named(lib):
    with pytest.raises(TypeError, match=r"parameter `ps` is \[\(double, double\)\], 2 fields; "
                                        "got a structured array of 3"):
        lib.bounce(np.zeros(2, dtype=[("a", "f8"), ("b", "f8"), ("c", "f8")]))
    with pytest.raises(ValueError, match="its fields have different lengths: 3, 2"):
        lib.bounce((np.zeros(3), np.zeros(2)))
    with pytest.raises(TypeError, match="field 2, an array of float64; got an array of int64"):
        lib.bounce((np.zeros(3), np.zeros(3, dtype=np.int64)))
    with pytest.raises(TypeError, match="a structured array of 2 fields, or a tuple of 2 arrays"):
        lib.bounce(np.zeros(3))
    assert "generic" in lib.not_callable
    assert "arrays of records of ints, doubles and bools, with concrete types" in \
        lib.not_callable["generic"]


def test_an_if_needing_statements_chooses_each_field():
    text = """
val main = do<grid> {
  ps <- forcePull<grid> (generate 6 (fn i => if i % 2 == 0 then (i, 10 / (i + 1)) else (0 - i, 7)));
  forceAndPrint 6 (push<grid> (map fst ps)) ;
  forceAndPrint 6 (push<grid> (map snd ps))
}"""
    from tests.runs import run_cl, run_interp
    expected = "[0,-1,2,-3,4,-5]\n[10,7,3,7,2,7]\n"
    assert run_interp(text) == expected and run_cl(text)[0] == expected


def test_records_in_a_cell_show_as_their_fields():
    import io

    from fcl.notebook import Workspace, render
    workspace = Workspace()
    for backend in ("opencl", "interp"):
        workspace.settings.set("backend", backend)
        outcome = workspace.execute("val main = forcePull<grid> (generate 3 (fn i => (i, i2d i)))",
                                    io.StringIO(), io.StringIO())
        assert render(outcome.value, outcome.type)["text/plain"] == \
            "([0,1,2], [0.00000,1.00000,2.00000])"


def test_a_push_array_holding_an_array_is_refused():
    with pytest.raises(FCLError, match=r"`\[int\]` is not a record of base types"):
        fcl.load("val p = push<block> (generate 3 (fn i => (i, iota i)))")


TUPLES = """
sig norm : (double, double, double) -> double
fun norm v = sqrt (addd (muld (fst v) (fst v)) (addd (muld (fst (snd v)) (fst (snd v)))
                                                     (muld (snd (snd v)) (snd (snd v)))))

sig same : (int, int, int, bool) -> (int, (int, (int, bool)))
fun same t = t

val main = do<grid> {
  vs <- forcePull<grid> (generate 4 (fn i => (i2d i, i2d (i + 1), i2d (i + 2)))) ;
  forceAndPrintDouble 4 (push<grid> (map norm vs)) ;
  forceAndPrint 3 (push<grid> (generate 3 (fn i =>
    let t = same (i, 20, 300, i > 0) in fst t + fst (snd (snd t)) + b2i (snd (snd (snd t))))))
}"""


def test_a_tuple_is_pairs_nested_to_the_right():
    from tests.runs import run_cl, run_interp
    expected = run_interp(TUPLES)
    assert expected.splitlines() == ["[2.23607,3.74166,5.38516,7.07107]", "[300,302,303]"]
    assert run_cl(TUPLES)[0] == expected
    # From Python, an array of triples is a tuple of three arrays, or a structured array.
    lib = fcl.load(TUPLES.split("sig same")[0] +
                   "sig norms : [(double, double, double)] -> Program <grid> [double]\n"
                   "fun norms vs = forcePull<grid> (map norm vs)\n")
    x, y, z = np.arange(4.0), np.arange(4.0) + 1, np.arange(4.0) + 2
    assert np.allclose(lib.norms((x, y, z)), np.sqrt(x * x + y * y + z * z))


LOOPS = """
sig bounce : (double, double) -> (double, double)
fun bounce p = let x = addd (fst p) (snd p) in
               if gtd x 10.0 then (subd 20.0 x, negated (snd p)) else (x, snd p)

val main = do<grid> {
  ps <- power 20 (fn k => fn a => return<grid> (push<grid> (map bounce a)))
                 (return<grid> (push<grid> (generate 8 (fn i => (i2d i, addd 0.5 (i2d i))))));
  forceAndPrintDouble 8 (push<grid> (map fst ps));
  forceAndPrintDouble 8 (push<grid> (map snd ps));
  qs <- while (fn a => fst (index a 0) < 100)
              (fn a => return<grid> (push<grid> (map (fn p => (fst p * 2, fst (snd p) + 1,
                                                              fst p + snd (snd p))) a)))
              (return<grid> (push<grid> (generate 4 (fn i => (i + 1, i, 0)))));
  forceAndPrint 4 (push<grid> (map (fn p => fst p + fst (snd p) + snd (snd p)) qs));
  r <- forceM<grid> (concat<block> 4 (map (fn chunk => do<block> {
         s <- power 3 (fn k => fn a => return<block> (push<block> (map (fn p =>
                (fst p + snd p, snd p * 2)) a)))
                (return<block> (push<block> (map (fn x => (x, 1)) chunk)));
         return<block> (push<block> (map (fn p => fst p * 100 + snd p) s)) })
       (splitUp 4 (generate 16 (fn i => i)))));
  forceAndPrint 4 (push<grid> r)
}"""


def test_while_and_power_loop_over_records_in_global_and_local_memory():
    from tests.runs import run_cl, run_interp
    # Particle 1 (x 1, v 1.5) reaches 11.5 at step 7 and bounces back: 8.5 - 13 * 1.5 = -11.
    # The while doubles a until lane 0's reaches 128: b counts 7 steps, c sums 1 + ... + 64.
    # Each block's power: (x, 1) -> (x + 1, 2) -> (x + 3, 4) -> (x + 7, 8).
    expected = ["[10.00000,-11.00000,-32.00000,-53.00000,-74.00000,-95.00000,-116.00000,"
                "-137.00000]",
                "[0.50000,-1.50000,-2.50000,-3.50000,-4.50000,-5.50000,-6.50000,-7.50000]",
                "[262,518,774,1030]", "[708,808,908,1008]"]
    assert run_interp(LOOPS).splitlines() == expected
    for target in ("gpu", "cpu"):
        assert run_cl(LOOPS, target=target)[0].splitlines() == expected
