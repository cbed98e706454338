"""The LMAD algebra and overlap tests: cases L01–L28 and O01–O12 of the reference notes §8.

Thesis page references are in the notes; dimension numbers here are 0-based, so the thesis's
join(·, 1) and split(·, 1, j) are join(0) and split(0, j).
"""
import itertools
import math
import random
import re

import pytest

from fcl.lmad import (
    LMAD,
    SOSI,
    Composition,
    LMADError,
    RotatedLMAD,
    apply_lmads,
    disjoint,
    disjoint_1d,
    expand,
    nest,
    overlap,
    render_svg,
    self_overlaps,
)
from fcl.lmad.cli import main_lmad

P = LMAD.parse
R = LMAD.row_major
C = LMAD.col_major


def nw_lmads(q: int, b: int, i: int) -> tuple[LMAD, LMAD, LMAD]:
    """NW's written blocks W and read slices R1 (left columns) and R2 (top rows), n = q·b + 1."""
    n = q * b + 1
    written = LMAD(n + i * b + 1, [(i + 1, n * b - b), (b, n), (b, 1)])
    left = LMAD(i * b, [(i + 1, n * b - b), (b + 1, n)])
    top = LMAD(i * b + 1, [(i + 1, n * b - b), (b, 1)])
    return written, left, top


def common_points(a: LMAD, b: LMAD) -> set[int]:
    return set(a.points()) & set(b.points())


def printed_1d_predicate(a: LMAD, b: LMAD) -> bool:
    """[M] §3.6.1 exactly as printed, with σ where the span belongs (erratum E2)."""
    (ta, (sa, da)), (tb, (sb, db)) = (a.offset, a.dims[0]), (b.offset, b.dims[0])
    return (ta - tb) % math.gcd(da, db) != 0 or ta > tb + sb or tb > ta + sa


# -- 8.1 set interpretation and operations ---------------------------------------------------

def test_L01_points_of_fig_3_3():
    assert P("2 + {(3:5),(4:1)}").points() == [2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 15]


def test_L02_staggered_columns():
    lmad = P("0 + {(6:9),(3:8)}")
    assert lmad.points() == [0, 8, 9, 16, 17, 18, 25, 26, 27, 34, 35, 36, 43, 44, 45, 52, 53, 61]
    for k in range(6):
        cells = {divmod(lmad.apply((k, j)), 8) for j in range(3)}
        assert cells == {(k, k), (k + 1, k), (k + 2, k)}


def test_L03_fix():
    fixed = P("10 + {(4:4),(4:1)}").fix(0, 1)
    assert fixed == P("14 + {(4:1)}")
    assert fixed.points() == [14, 15, 16, 17]


def test_L04_transpose():
    lmad = P("0 + {(20:10),(10:1)}")
    transposed = lmad.transpose()
    assert transposed == P("0 + {(10:1),(20:10)}")
    assert all(transposed.apply((j, i)) == lmad.apply((i, j)) for i in range(20) for j in range(10))


def test_L05_unrank():
    assert P("0 + {(4:4),(4:1)}").unrank(10) == (2, 2)


def test_L06_reshape():
    lmad = P("10 + {(20:10),(10:1)}")
    reshaped = lmad.reshape((50, 4))
    assert reshaped == P("10 + {(50:4),(4:1)}")
    new_layout = P("0 + {(50:4),(4:1)}")
    assert all(reshaped.apply(index) == apply_lmads(new_layout, lmad, index)
               for index in reshaped.domain())
    assert len(list(reshaped.domain())) == 200


def test_L07_rotate():
    rotated = RotatedLMAD(R(3), (1,))
    data = [0, 1, 2]
    assert [data[rotated.apply((k,))] for k in range(3)] == [1, 2, 0]


def test_L08_slice_of_a_rotation_is_no_lmad():
    rotated = RotatedLMAD(R(10), (5,))
    assert str(rotated) == "0 + {(10:1:5)}"
    offsets = [rotated.apply((3 + k,)) for k in range(4)]
    assert offsets == [8, 9, 0, 1]
    # A 1-D LMAD is an arithmetic progression; these steps are not constant.
    assert len({b - a for a, b in itertools.pairwise(offsets)}) > 1


def test_L09_composition():
    composition = Composition((RotatedLMAD(LMAD(3, [(4, 1)]), (0,)), RotatedLMAD(R(10), (5,))))
    assert str(composition) == "[3 + {(4:1:0)}, 0 + {(10:1:5)}]"
    assert [composition.apply((k,)) for k in range(4)] == [8, 9, 0, 1]


def test_L10_python_slice_as_triplet():
    sliced = R(12).slice([(1, 5, 2)])
    assert sliced == P("1 + {(5:2)}")
    assert sliced.points() == list(range(12))[1:10:2] == [1, 3, 5, 7, 9]


def test_L11_slice():
    sliced = R(4, 5).slice([(1, 2), (2, 3)])
    assert sliced == P("7 + {(2:5),(3:1)}")
    assert sliced.points() == [7, 8, 9, 12, 13, 14]


def test_L12_slice_lmad_unflattens():
    assert R(6).slice_lmad(P("0 + {(2:3),(3:1)}")) == P("0 + {(2:3),(3:1)}")


def test_L13_slice_lmads():
    sliced = R(4, 6).slice_lmads([P("1 + {(2:2)}"), P("0 + {(2:3),(3:1)}")])
    assert sliced == P("6 + {(2:12),(2:3),(3:1)}")
    assert sliced.points() == [*range(6, 12), *range(18, 24)]


def test_L14_row_and_column_major():
    assert R(2, 3) == P("0 + {(2:3),(3:1)}")
    assert C(2, 3) == P("0 + {(2:1),(3:2)}")


def test_L15_permute():
    assert P("0 + {(2:12),(3:4),(4:1)}").permute([2, 0, 1]) == P("0 + {(4:1),(2:12),(3:4)}")


def test_L16_normalize():
    lmad = P("16 + {(4:-1),(8:4)}")
    assert lmad.normalize() == P("13 + {(8:4),(4:1)}")
    assert lmad.points() == lmad.normalize().points() == list(range(13, 45))


def test_L17_normalize_erratum_E1():
    lmad = P("10 + {(3:-2)}")
    assert lmad.normalize() == P("6 + {(3:2)}")
    assert lmad.normalize().points() == lmad.points() == [6, 8, 10]
    printed_rule = LMAD(10 + 3 * -2 + 1, [(3, 2)])
    assert printed_rule.points() == [5, 7, 9]


def test_L18_join():
    assert P("0 + {(20:10),(10:1)}").join(0) == P("0 + {(200:1)}")


def test_L19_split():
    assert P("0 + {(200:1)}").split(0, 10) == P("0 + {(20:10),(10:1)}")


def test_L20_insert_empty_dimension():
    lmad = P("3 + {(5:2)}")
    widened = lmad.insert_empty_dim(1)
    assert widened == P("3 + {(5:2),(1:1)}")
    assert widened.points() == lmad.points()
    assert widened.remove_empty_dim(1) == lmad


def test_L21_expand_anti_diagonal():
    expanded = expand(lambda i: LMAD(9 + 9 * i), 0, 10)
    assert expanded == P("9 + {(10:9)}")
    assert expanded.points() == list(range(9, 91, 9))


def test_L22_expand_fails_when_the_variable_is_in_a_size():
    with pytest.raises(LMADError, match="occurs in the dimensions"):
        expand(lambda i: LMAD(9, [(i, 9)]), 1, 9)
    with pytest.raises(LMADError):  # i = 0 gives a size of 0, which is no LMAD at all
        expand(lambda i: LMAD(9, [(i, 9)]), 0, 10)


def test_L23_nw_written_blocks():
    written, _, _ = nw_lmads(3, 3, 1)
    assert written == P("14 + {(2:27),(3:10),(3:1)}")
    assert written.shape == (2, 3, 3)
    assert written.points() == [14, 15, 16, 24, 25, 26, 34, 35, 36,
                                41, 42, 43, 51, 52, 53, 61, 62, 63]
    cells = {divmod(address, 10) for address in written.points()}
    assert cells == ({(r, c) for r in range(1, 4) for c in range(4, 7)}
                     | {(r, c) for r in range(4, 7) for c in range(1, 4)})


def test_L24_nw_read_slices():
    _, left, top = nw_lmads(3, 3, 1)
    assert left == P("3 + {(2:27),(4:10)}")
    assert set(left.points()) == {3, 13, 23, 33, 30, 40, 50, 60}
    assert top == P("4 + {(2:27),(3:1)}")
    assert top.points() == [4, 5, 6, 31, 32, 33]


def test_L25_memory_expansion():
    cpu = expand(lambda x: LMAD(3 * x, [(3, 1)]), 0, 4)
    gpu = expand(lambda x: LMAD(x, [(3, 4)]), 0, 4)
    assert cpu == P("0 + {(4:3),(3:1)}") and gpu == P("0 + {(4:1),(3:4)}")
    assert cpu.fix(1, 0).points() == [0, 3, 6, 9]
    assert gpu.fix(1, 0).points() == [0, 1, 2, 3]


SIXTEEN = list(range(1, 17))


def test_L26_vectorised_view_m1():
    view = P("0 + {(2:8),(4:1),(2:4)}")
    assert view.gather(SIXTEEN) == [[[1, 5], [2, 6], [3, 7], [4, 8]],
                                    [[9, 13], [10, 14], [11, 15], [12, 16]]]
    assert view == R(4, 4).split(0, 2).permute([0, 2, 1])


def test_L27_vectorised_view_m2():
    view = P("0 + {(4:4),(2:2),(2:1)}")
    assert view.gather(SIXTEEN) == [[[1, 2], [3, 4]], [[5, 6], [7, 8]],
                                    [[9, 10], [11, 12]], [[13, 14], [15, 16]]]
    assert view == R(4, 4).split(1, 2)


def test_L28_nest():
    assert nest([1, 2, 3, 4], [2, 2]) == [[1, 2], [3, 4]]


# -- 8.2 overlap and disjointness ---------------------------------------------------------------

def test_O01_disjoint_by_one_interval_pair():
    first, second = P("0 + {(3:10),(5:1)}"), P("5 + {(3:10),(5:1)}")
    assert first.points() == [*range(5), *range(10, 15), *range(20, 25)]
    assert second.points() == [*range(5, 10), *range(15, 20), *range(25, 30)]
    assert disjoint(first, second)
    sosi_first = SOSI(0, (10, 1), (0, 0), (2, 4))
    sosi_second = SOSI(5, (10, 1), (0, 0), (2, 4)).distributed()
    assert sosi_second == SOSI(0, (10, 1), (0, 5), (2, 9))
    assert sosi_first.self_overlap_dim() is None and sosi_second.self_overlap_dim() is None
    assert sosi_first.points() == first.points() and sosi_second.points() == second.points()
    # Theorem 3.6.2: the outer intervals meet, the inner ones do not.
    assert sosi_second.lows[0] <= sosi_first.highs[0] and sosi_first.highs[1] < sosi_second.lows[1]


def test_O02_self_overlap_and_its_split():
    lmad = P("0 + {(2:10),(11:1)}")
    assert self_overlaps(lmad)
    assert lmad.points() == list(range(21)) and len(list(lmad.domain())) == 22
    sosi = SOSI.from_lmad(lmad)
    assert str(sosi) == "[0,1]*10 + [0,10]*1"
    assert sosi.self_overlap_dim() == 0
    lower, upper = sosi.split(0)
    assert lower == SOSI(0, (10, 1), (0, 0), (1, 9))
    assert upper.rebased() == SOSI(10, (10, 1), (0, 0), (1, 0))  # 10 + [0,1]·10
    assert sorted(set(lower.points()) | set(upper.points())) == list(range(21))
    with pytest.raises(LMADError, match="no interval to split"):
        SOSI(0, (10, 1), (0, 20), (0, 20)).split(0)


def test_O03_nw_proof_steps():
    for q, b, i in [(2, 2, 1), (3, 3, 1), (4, 5, 3), (6, 2, 8)]:
        n = q * b + 1
        written, left, _ = nw_lmads(q, b, i)
        strides = (n * b - b, n, 1)
        shift = min(written.offset, left.offset)
        sosi_w = SOSI.from_lmad(written).with_strides(strides).rebased(-shift).distributed()
        sosi_r = SOSI.from_lmad(left).with_strides(strides).rebased(-shift).distributed()
        assert sosi_w == SOSI(0, strides, (0, 1, 1), (i, b, b))
        assert sosi_r == SOSI(0, strides, (0, 0, 0), (i, b, 0))
        assert sosi_w.self_overlap_dim() == 0 and sosi_r.self_overlap_dim() == 0
        w2, w1 = sosi_w.split(0)
        r2, r1 = sosi_r.split(0)
        w1, r1 = w1.rebased().distributed(), r1.rebased().distributed()
        assert w1 == SOSI(0, strides, (1, 0, b + 1), (i + 1, 0, 2 * b))
        assert w2 == SOSI(0, strides, (0, 1, 1), (i, b - 1, b))
        assert r1 == SOSI(0, strides, (1, 0, b), (i + 1, 0, b))
        assert r2 == SOSI(0, strides, (0, 0, 0), (i, b - 1, 0))
        for piece_w in (w1, w2):
            for piece_r in (r1, r2):
                assert piece_w.self_overlap_dim() is None and piece_r.self_overlap_dim() is None
                assert any(hw < lr or hr < lw for lw, hw, lr, hr in
                           zip(piece_w.lows, piece_w.highs, piece_r.lows, piece_r.highs))
        assert disjoint(written, left)


def test_O04_small_nw_instance():
    written, left, _ = nw_lmads(2, 2, 1)
    assert written == P("8 + {(2:8),(2:5),(2:1)}") and left == P("2 + {(2:8),(3:5)}")
    assert written.points() == [8, 9, 13, 14, 16, 17, 21, 22]
    assert left.points() == [2, 7, 10, 12, 15, 20]
    assert disjoint(written, left)


def test_O05_nw_sweep():
    cases = [(q, b, i) for q in range(2, 7) for b in range(2, 7) for i in range(1, q + 3)]
    assert len(cases) == 150
    for q, b, i in cases:
        written, left, _ = nw_lmads(q, b, i)
        assert not common_points(written, left)
        assert disjoint(written, left), (q, b, i)


def test_O06_nw_reads_and_writes():
    written, left, top = nw_lmads(3, 3, 1)
    assert disjoint(written, left) and disjoint(written, top)
    assert common_points(left, top) == {33}
    assert not disjoint(left, top)


def test_O07_anti_diagonal_writes_versus_other_iterations():
    for i in range(10):
        write = LMAD(9 + 9 * i)
        others = (([LMAD(9, [(i, 9)])] if i > 0 else [])
                  + ([LMAD(9 * i + 18, [(9 - i, 9)])] if i < 9 else []))
        for other in others:
            assert not common_points(write, other)
            assert disjoint(write, other)
        if i == 3:
            assert write.points() == [36]
            assert [o.points() for o in others] == [[9, 18, 27], list(range(45, 91, 9))]


def test_O08_gcd_case():
    a, b = P("0+{(5:2)}"), P("1+{(5:2)}")
    assert printed_1d_predicate(a, b) and disjoint_1d(a, b) and disjoint(a, b)


def test_O09_separate_ranges():
    a, b = P("0+{(5:1)}"), P("10+{(5:1)}")
    assert disjoint_1d(a, b) and disjoint(a, b)


def test_O10_erratum_E2():
    a, b = P("0+{(5:3)}"), P("6+{(5:1)}")
    assert common_points(a, b) == {6, 9}
    assert printed_1d_predicate(a, b)  # the printed predicate wrongly claims disjointness
    assert not disjoint_1d(a, b) and not disjoint(a, b)


def test_O11_incompleteness_of_the_1d_predicate():
    a, b = P("0+{(3:4)}"), P("5+{(3:1)}")
    assert not common_points(a, b)
    assert not disjoint_1d(a, b)
    # The SOSI procedure does better: 5 = 1·4 + 1·1 puts b at [1,1]·4 + [1,3]·1, and the
    # stride-1 intervals [0,0] and [1,3] do not meet.
    assert disjoint(a, b)


def test_O12_fuzz_never_unsound(monkeypatch):
    rng = random.Random(2023)

    def random_lmad() -> LMAD:
        return LMAD(rng.randint(0, 30), [(rng.randint(1, 5), rng.randint(1, 12))
                                         for _ in range(rng.randint(1, 3))])

    # The cost of a proof counted in its steps (calls of the SOSI procedure, one per piece a
    # split leaves), not in seconds, which move with the machine's load.
    steps = 0
    prove = overlap._SplitBudget.prove_disjoint

    def counted(self, *args):
        nonlocal steps
        steps += 1
        return prove(self, *args)

    monkeypatch.setattr(overlap._SplitBudget, "prove_disjoint", counted)
    truly_disjoint = proved = most = total = 0
    for _ in range(3000):
        a, b = random_lmad(), random_lmad()
        separate = not common_points(a, b)
        steps = 0
        claimed = disjoint(a, b)
        assert separate or not claimed, (str(a), str(b))
        truly_disjoint += separate
        proved += claimed
        most, total = max(most, steps), total + steps
    # The split budget keeps every pair cheap: a proof takes a step, and two more per split.
    assert most <= 1 + 2 * overlap.MAX_SPLITS
    # These 3000 small pairs took 13,651 steps (79 at most for one): the bound only catches a
    # blow-up, such as a split that stops shrinking its pieces.
    assert total < 20 * 3000, total
    assert truly_disjoint > 1000
    # Within its split budget the procedure is exact; these small pairs never exhaust it.
    assert proved == truly_disjoint


# -- notation -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, offset, dims", [
    ("2 + {(3:5),(4:1)}", 2, ((3, 5), (4, 1))),
    ("2+{(3:5),(4:1)}", 2, ((3, 5), (4, 1))),
    ("  -4 +{ ( 3 : -2 ) ,(1:0)}  ", -4, ((3, -2), (1, 0))),
    ("16 + {(4:\u22121),(8:4)}", 16, ((4, -1), (8, 4))),
    ("5 + {}", 5, ()),
    ("{}", 0, ()),
    ("{(3:1)}", 0, ((3, 1),)),
    ("- 7 + {}", -7, ()),
])
def test_parse(text, offset, dims):
    assert P(text) == LMAD(offset, dims)


@pytest.mark.parametrize("text, position, fragment", [
    ("2 + {(3 5)}", 8, "expected ':'"),
    ("2 + {(0:1)}", 6, "size 0"),
    ("2 + {(-3:1)}", 6, "size -3"),
    ("x", 0, "expected an offset"),
    ("2 {}", 2, "expected '+'"),
    ("2 + {(3:5),}", 11, "expected '('"),
    ("2 + {(3:5)", 10, "found end of text"),
    ("2+{}x", 4, "expected end of text"),
    ("- + {}", 2, "digits after the minus sign"),
    ("", 0, "expected an offset"),
    ("2 + {(3:five)}", 8, "expected a stride"),
])
def test_parse_errors_give_the_position(text, position, fragment):
    with pytest.raises(LMADError, match=re.escape(fragment)) as caught:
        P(text)
    assert caught.value.position == position
    assert f"position {position}" in str(caught.value)


@pytest.mark.parametrize("lmad, text", [
    (LMAD(2, [(3, 5), (4, 1)]), "2 + {(3:5),(4:1)}"),
    (LMAD(5), "5 + {}"),
    (LMAD(-3, [(2, -7)]), "-3 + {(2:-7)}"),
])
def test_str(lmad, text):
    assert str(lmad) == text
    assert P(text) == lmad


def test_equality_and_hashing():
    assert LMAD(2, [(3, 5)]) == LMAD(2, ((3, 5),)) == P("2+{(3:5)}")
    assert LMAD(2, [(3, 5)]) != LMAD(2, [(5, 3)])
    assert len({LMAD(2, [(3, 5)]), P("2 + {(3:5)}"), LMAD(3, [(3, 5)])}) == 2
    with pytest.raises(AttributeError):
        LMAD(0).offset = 1  # type: ignore[misc]


@pytest.mark.parametrize("offset, dims, fragment", [
    (0, [(0, 1)], "size 0"),
    (0, [(3,)], "pair"),
    ("1", [], "integer"),
    (0, [(2.0, 1)], "integer"),
    (True, [], "integer"),
])
def test_invalid_lmads(offset, dims, fragment):
    with pytest.raises(LMADError, match=fragment):
        LMAD(offset, dims)


# -- operations: edge cases and errors -----------------------------------------------------

def test_rank_shape_strides_and_bounds():
    lmad = P("16 + {(4:-1),(8:4)}")
    assert (lmad.rank, lmad.shape, lmad.strides) == (2, (4, 8), (-1, 4))
    assert lmad.bounds() == (13, 44)
    assert LMAD(7).rank == 0 and LMAD(7).points() == [7] and LMAD(7).apply(()) == 7


def test_apply_checks_arity_and_range():
    lmad = R(2, 3)
    assert lmad.apply((1, 2)) == 5
    with pytest.raises(LMADError, match="rank 2"):
        lmad.apply((1,))
    with pytest.raises(LMADError, match="out of range in dimension 1"):
        lmad.apply((1, 3))
    with pytest.raises(LMADError, match="out of range"):
        lmad.apply((-1, 0))


def test_slice_keeps_and_drops_dimensions():
    grid = R(4, 5)
    assert grid.slice([2]) == P("10 + {(5:1)}")                   # an index drops the row dimension
    assert grid.slice([(0, 4), 3]) == P("3 + {(4:5)}")            # a column
    assert grid.slice([(3, 4, -1)]) == P("15 + {(4:-5),(5:1)}")   # rows reversed
    assert grid.slice([]) == grid
    for bad in ([(3, 2)], [(0, 3, 2)], [5], [(0, 0)], [(0, 1), (0, 1), (0, 1)], [(0, 1, 1, 1)]):
        with pytest.raises(LMADError):
            grid.slice(bad)


def test_slice_lmads_checks_ranges():
    with pytest.raises(LMADError, match="outside dimension 0"):
        R(6).slice_lmad(P("1 + {(2:3),(3:1)}"))
    with pytest.raises(LMADError, match="1-D"):
        R(2, 3).slice_lmad(P("0 + {(2:1)}"))
    with pytest.raises(LMADError, match="one per dimension"):
        R(2, 3).slice_lmads([P("0 + {(2:1)}")])
    assert R(4, 6).slice_lmads([LMAD(2), P("5 + {(3:-2)}")]) == P("17 + {(3:-2)}")


def test_fix_any_dimension():
    assert R(3, 4).fix(1, 2) == P("2 + {(3:4)}")
    with pytest.raises(LMADError, match="no dimension 2"):
        R(3, 4).fix(2, 0)
    with pytest.raises(LMADError, match="out of range"):
        R(3, 4).fix(0, 3)


def test_transpose_and_permute_errors():
    with pytest.raises(LMADError, match="rank ≥ 2"):
        R(3).transpose()
    with pytest.raises(LMADError, match="not a permutation"):
        R(2, 3).permute([0, 0])
    assert R(2, 3, 4).transpose() == P("0 + {(3:4),(2:12),(4:1)}")


def test_reshape_cases():
    assert R(6).reshape((2, 3)) == R(2, 3)
    assert R(2, 3).reshape((2, 1, 3)) == R(2, 1, 3)
    assert R(6).reshape((1, 6)) == R(1, 6)
    assert R(2, 3, 4).reshape((6, 4)) == R(6, 4)
    assert LMAD(5).reshape((1, 1)) == LMAD(5, [(1, 1), (1, 1)])
    assert P("0 + {(4:-3),(3:-1)}").reshape((12,)) == P("0 + {(12:-1)}")
    assert P("0 + {(4:10),(6:1)}").reshape((4, 2, 3)) == P("0 + {(4:10),(2:3),(3:1)}")
    with pytest.raises(LMADError, match="not representable as one LMAD"):
        P("0 + {(4:10),(6:1)}").reshape((24,))
    with pytest.raises(LMADError, match="not representable as one LMAD"):
        C(2, 3).reshape((3, 2))
    with pytest.raises(LMADError, match="element counts differ"):
        R(2, 3).reshape((5,))


def test_join_split_and_empty_dims_errors():
    with pytest.raises(LMADError, match="cannot join"):
        P("0 + {(2:5),(4:1)}").join(0)
    with pytest.raises(LMADError, match="no dimension"):
        R(4).join(0)
    with pytest.raises(LMADError, match="cannot split"):
        R(6).split(0, 4)
    with pytest.raises(LMADError, match="not 1"):
        R(2, 3).remove_empty_dim(0)
    with pytest.raises(LMADError, match="cannot insert"):
        R(2).insert_empty_dim(2)
    assert R(2).insert_empty_dim(0, stride=7) == P("0 + {(1:7),(2:1)}")


def test_unrank_and_nest_errors():
    with pytest.raises(LMADError, match="outside"):
        R(2, 2).unrank(4)
    with pytest.raises(LMADError, match="cannot nest"):
        nest([1, 2, 3], [2, 2])
    assert nest([9], []) == 9
    assert LMAD(1).gather([4, 5]) == 5


def test_expand_more():
    assert expand(lambda i: LMAD(2 * i + 1, [(3, 1)]), 0, 1) == P("1 + {(1:2),(3:1)}")
    assert expand(lambda i: LMAD(20 - 3 * i), 2, 4) == P("14 + {(4:-3)}")
    with pytest.raises(LMADError, match="not affine"):
        expand(lambda i: LMAD(i * i), 0, 4)
    with pytest.raises(LMADError, match="count must be positive"):
        expand(lambda i: LMAD(i), 0, 0)


def test_self_overlaps():
    assert not self_overlaps(R(3, 4))
    assert not self_overlaps(P("0 + {(6:9),(3:8)}"))
    assert self_overlaps(P("0 + {(2:0)}"))
    assert self_overlaps(P("0 + {(4:2),(3:3)}"))  # (3,0) and (0,2) both reach 6
    assert not self_overlaps(P("0 + {(3:2),(2:3)}"))  # 2x + 3y is injective on this domain
    assert not self_overlaps(LMAD(4))
    assert not self_overlaps(P("0 + {(1:0),(5:1)}"))


def test_disjoint_handles_rank_zero_negative_strides_and_equal_strides():
    assert disjoint(LMAD(3), LMAD(4)) and not disjoint(LMAD(3), LMAD(3))
    assert disjoint(P("10 + {(3:-2)}"), P("7 + {(2:2)}"))
    assert not disjoint(P("0 + {(3:2),(3:2)}"), LMAD(8))
    assert disjoint(P("-5 + {(2:1),(2:1)}"), P("-1 + {(4:1)}"))
    with pytest.raises(LMADError, match="rank ≤ 1"):
        disjoint_1d(R(2, 2), LMAD(0))


def test_budget_exhaustion_answers_may_overlap():
    crowded = P("0 + {(2000:7),(2000:5)}")
    top = 7 * 1999 + 5 * 1999
    # By the symmetry x -> 1999 - x, top - 1 is reached iff 1 = 7x + 5y is: never. Proving it
    # needs about a thousand splits, more than the budget, so the answer is "may overlap".
    assert not disjoint(crowded, LMAD(top - 1))
    assert disjoint(crowded, LMAD(top + 1))  # the range check alone proves this one
    assert not disjoint(crowded, LMAD(top - 5))  # truly reached, at (1999, 1998)


# -- diagrams and the command line -----------------------------------------------------------

def test_svg_grid():
    svg = render_svg(P("0 + {(6:9),(3:8)}"), pitch=8)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count("<rect") == 64  # addresses 0..63 at pitch 8
    assert svg.count("<title>") == 18
    assert "<title>61: [5, 2]</title>" in svg
    assert "(pitch 8)" in svg


def test_svg_default_pitch_and_self_overlap():
    svg = render_svg(P("2 + {(3:5),(4:1)}"))
    assert "(pitch 5)" in svg and svg.count("<rect") == 20  # rows 0–3 hold addresses 2..15
    overlapping = render_svg(P("0 + {(2:10),(11:1)}"))
    assert overlapping.count('stroke="#d00000"') == 1  # only address 10 is reached twice
    assert "(pitch 10)" in overlapping
    assert "(pitch 4)" in render_svg(P("1 + {(4:1)}"))  # a strip when every stride is 1
    with pytest.raises(LMADError, match="cells"):
        render_svg(P("0 + {(2:100000)}"), pitch=1)


def test_cli_prints_summary(capsys):
    assert main_lmad(["16 + {(4:-1),(8:4)}", "--points"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "lmad:        16 + {(4:-1),(8:4)}",
        "normalized:  13 + {(8:4),(4:1)}",
        "shape:       [4][8]",
        "points:      32",
        "sorted:      " + " ".join(str(a) for a in range(13, 45)),
        "self-overlap: none",
    ]


def test_cli_rank_zero_and_self_overlap(capsys):
    assert main_lmad(["-4 + {}"]) == 0
    assert "shape:       []" in capsys.readouterr().out
    assert main_lmad(["0 + {(2:10),(11:1)}"]) == 0
    assert "points:      21 (self-overlapping: 22 index tuples)" in capsys.readouterr().out


def test_cli_svg(tmp_path, capsys):
    target = tmp_path / "fig.svg"
    assert main_lmad(["0 + {(6:9),(3:8)}", "--svg", str(target), "--pitch", "8"]) == 0
    assert target.read_text().count("<rect") == 64
    assert f"svg:         {target}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["2 + {(3 5)}"], "error: expected ':'"),
    ([], "error: the following arguments are required"),
    (["5 + {}", "--pitch", "x"], "error: argument --pitch"),
    (["5 + {}", "--bogus"], "error: unrecognized arguments"),
    (["5 + {}", "--svg", "/nonexistent-dir/x.svg"], "error:"),
])
def test_cli_errors(argv, fragment, capsys):
    assert main_lmad(argv) == 1
    captured = capsys.readouterr()
    assert captured.err.startswith(fragment) and captured.out == ""


def test_cli_help(capsys):
    assert main_lmad(["--help"]) == 0
    assert "fcl lmad" in capsys.readouterr().out


def test_cli_compares_two(capsys):
    assert main_lmad(["0 + {(4:3)} ; 1 + {(4:2)}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "overlap:     yes, 1 shared address: 3"
    assert main_lmad(["0 + {(8:2)};1 + {(8:2)}"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "overlap:     no shared address", "proof:       the non-overlap test proves them disjoint"]
    assert main_lmad(["0 + {(8:2)};1 + {(8:2)}", "--svg", "x.svg"]) == 1
    assert "--svg draws one LMAD" in capsys.readouterr().err
