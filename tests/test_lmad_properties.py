"""Property tests: every LMAD operation against brute-force enumeration of index tuples.

The numpy reference builds the strided view `as_strided` makes of a buffer holding each
address, so `apply` is checked against an independent implementation of strided indexing.
"""
import math
from itertools import product

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st
from numpy.lib.stride_tricks import as_strided

from fcl.lmad import (
    LMAD,
    SOSI,
    Composition,
    LMADError,
    apply_lmads,
    disjoint,
    disjoint_1d,
    expand,
    self_overlaps,
)

SETTINGS = settings(max_examples=150, deadline=None)

sizes = st.integers(1, 5)
strides = st.integers(-12, 12)
offsets = st.integers(-20, 40)


@st.composite
def lmads(draw, min_rank=0, max_rank=3):
    rank = draw(st.integers(min_rank, max_rank))
    return LMAD(draw(offsets), [(draw(sizes), draw(strides)) for _ in range(rank)])


def image(lmad: LMAD) -> set[int]:
    return {lmad.apply(index) for index in lmad.domain()}


def numpy_view(lmad: LMAD) -> np.ndarray:
    """The LMAD as a numpy strided view of a buffer whose element at address a holds a."""
    low, high = lmad.bounds()
    buffer = np.arange(low, high + 1, dtype=np.int64)
    start = buffer[lmad.offset - low:]
    return as_strided(start, shape=lmad.shape,
                      strides=[stride * buffer.itemsize for stride in lmad.strides])


def affine_fit(shape, address_of) -> LMAD | None:
    """The one LMAD over `shape` agreeing with `address_of` everywhere, if any (brute force)."""
    origin = address_of((0,) * len(shape))
    dims = []
    for dim, size in enumerate(shape):
        unit = tuple(int(k == dim) for k in range(len(shape)))
        dims.append((size, address_of(unit) - origin if size > 1 else 0))
    candidate = LMAD(origin, dims)
    return (candidate if all(candidate.apply(i) == address_of(i) for i in candidate.domain())
            else None)


# -- interpretation --------------------------------------------------------------------------

@SETTINGS
@given(lmads())
def test_apply_matches_numpy_strided_view(lmad):
    view = numpy_view(lmad)
    for index in lmad.domain():
        assert lmad.apply(index) == int(view[index])
    assert lmad.points() == sorted(set(view.ravel().tolist()))


@SETTINGS
@given(lmads())
def test_points_bounds_and_round_trip(lmad):
    assert lmad.points() == sorted(image(lmad))
    assert lmad.bounds() == (min(image(lmad)), max(image(lmad)))
    assert LMAD.parse(str(lmad)) == lmad
    assert hash(LMAD.parse(str(lmad))) == hash(lmad)


@SETTINGS
@given(lmads(), st.data())
def test_unrank_is_row_major(lmad, data):
    count = math.prod(lmad.shape)
    flat = data.draw(st.integers(0, count - 1))
    assert lmad.unrank(flat) == tuple(int(k) for k in np.unravel_index(flat, lmad.shape))
    assert list(lmad.domain())[flat] == lmad.unrank(flat)


# -- index-function operations -----------------------------------------------------------------

@SETTINGS
@given(lmads(min_rank=2))
def test_transpose_swaps_indices(lmad):
    transposed = lmad.transpose()
    for index in lmad.domain():
        assert transposed.apply((index[1], index[0], *index[2:])) == lmad.apply(index)


@SETTINGS
@given(lmads(min_rank=1), st.data())
def test_permute_reorders_indices(lmad, data):
    perm = data.draw(st.permutations(range(lmad.rank)))
    permuted = lmad.permute(perm)
    for index in lmad.domain():
        assert permuted.apply(tuple(index[k] for k in perm)) == lmad.apply(index)


@SETTINGS
@given(lmads(min_rank=1), st.data())
def test_fix_indexes_one_dimension(lmad, data):
    dim = data.draw(st.integers(0, lmad.rank - 1))
    at = data.draw(st.integers(0, lmad.shape[dim] - 1))
    fixed = lmad.fix(dim, at)
    for rest in fixed.domain():
        assert fixed.apply(rest) == lmad.apply((*rest[:dim], at, *rest[dim:]))


@st.composite
def slice_entries(draw, size):
    """An index, or a (start, count, step) triplet that stays inside a dimension of `size`."""
    if draw(st.booleans()):
        return draw(st.integers(0, size - 1))
    start = draw(st.integers(0, size - 1))
    step = draw(st.integers(-3, 3))
    limit = size if step == 0 else (start // -step if step < 0 else (size - 1 - start) // step) + 1
    count = draw(st.integers(1, min(limit, 6)))
    return (start, count, step)


@SETTINGS
@given(lmads(), st.data())
def test_slice_selects_the_right_elements(lmad, data):
    spec = [data.draw(slice_entries(size))
            for size in lmad.shape[:data.draw(st.integers(0, lmad.rank))]]
    sliced = lmad.slice(spec)
    kept = [entry for entry in spec if isinstance(entry, tuple)]
    for index in sliced.domain():
        chosen, rest = list(index[:len(kept)]), index[len(kept):]
        original = [entry if isinstance(entry, int) else entry[0] + chosen.pop(0) * entry[2]
                    for entry in spec]
        assert sliced.apply(index) == lmad.apply((*original, *rest))


@SETTINGS
@given(lmads(min_rank=1, max_rank=2), st.data())
def test_slice_lmads_composes_per_dimension(lmad, data):
    views = []
    for size in lmad.shape:
        stride = data.draw(st.integers(-2, 2))
        count = data.draw(st.integers(1, 3))
        span = (count - 1) * abs(stride)
        assume(span < size)
        start = data.draw(st.integers(span if stride < 0 else 0,
                                      size - 1 if stride < 0 else size - 1 - span))
        inner = data.draw(st.lists(st.tuples(st.integers(1, 2), st.just(0)), max_size=1))
        views.append(LMAD(start, [(count, stride), *inner]))
    sliced = lmad.slice_lmads(views)
    ranks = [view.rank for view in views]
    for index in sliced.domain():
        parts, at = [], 0
        for view, rank in zip(views, ranks):
            parts.append(view.apply(index[at:at + rank]))
            at += rank
        assert sliced.apply(index) == lmad.apply(parts)


@SETTINGS
@given(lmads(max_rank=3), st.data())
def test_reshape_is_exactly_the_representable_compositions(lmad, data):
    count = math.prod(lmad.shape)
    factors = [f for f in range(1, count + 1) if count % f == 0]
    new_shape, left = [], count
    while left > 1 and len(new_shape) < 3:
        factor = data.draw(st.sampled_from([f for f in factors if left % f == 0]))
        new_shape.append(factor)
        left //= factor
    new_shape.append(left)
    if data.draw(st.booleans()):
        new_shape.insert(data.draw(st.integers(0, len(new_shape))), 1)
    layout = LMAD.row_major(*new_shape)
    fit = affine_fit(new_shape, lambda index: apply_lmads(layout, lmad, index))
    try:
        reshaped = lmad.reshape(new_shape)
    except LMADError:
        assert fit is None, f"{lmad} reshaped to {new_shape} is {fit}"
    else:
        assert reshaped.shape == tuple(new_shape)
        assert all(reshaped.apply(i) == Composition((layout, lmad)).apply(i)
                   for i in reshaped.domain())


@SETTINGS
@given(lmads(min_rank=1), st.data())
def test_split_and_join(lmad, data):
    dim = data.draw(st.integers(0, lmad.rank - 1))
    size = lmad.shape[dim]
    inner = data.draw(st.sampled_from([f for f in range(1, size + 1) if size % f == 0]))
    split = lmad.split(dim, inner)
    for index in split.domain():
        outer_part, inner_part = index[dim], index[dim + 1]
        merged = (*index[:dim], outer_part * inner + inner_part, *index[dim + 2:])
        assert split.apply(index) == lmad.apply(merged)
    assert split.join(dim) == lmad


@SETTINGS
@given(lmads(), st.data())
def test_empty_dimensions_keep_the_image(lmad, data):
    position = data.draw(st.integers(0, lmad.rank))
    widened = lmad.insert_empty_dim(position, data.draw(strides))
    assert widened.points() == lmad.points()
    assert widened.remove_empty_dim(position) == lmad


# -- image-preserving operations and expansion ----------------------------------------------------

@SETTINGS
@given(lmads())
def test_normalize_keeps_the_image(lmad):
    normal = lmad.normalize()
    assert normal.points() == lmad.points()
    assert all(stride >= 0 for stride in normal.strides)
    assert list(normal.strides) == sorted(normal.strides, reverse=True)
    assert sorted(normal.shape) == sorted(lmad.shape)


@SETTINGS
@given(lmads(max_rank=2), st.integers(-5, 5), st.integers(-3, 3), st.integers(1, 5))
def test_expand_is_the_union_over_the_loop(body_lmad, slope, lo, count):
    def body(i):
        return LMAD(body_lmad.offset + slope * i, body_lmad.dims)

    expanded = expand(body, lo, count)
    assert set(expanded.points()) == set().union(*(image(body(i)) for i in range(lo, lo + count)))
    assert all(expanded.fix(0, k) == body(lo + k) for k in range(count))


# -- overlap --------------------------------------------------------------------------------------

@pytest.mark.slow  # 1.1-2.7 s
@settings(max_examples=600, deadline=None)
@given(lmads(), lmads())
def test_disjoint_is_never_wrong(a, b):
    if disjoint(a, b):
        assert not image(a) & image(b), (str(a), str(b))


@settings(max_examples=300, deadline=None)
@given(lmads(max_rank=1), lmads(max_rank=1))
def test_the_1d_predicate_is_sound_and_implied(a, b):
    if disjoint_1d(a, b):
        assert not image(a) & image(b)
        assert disjoint(a, b)


@pytest.mark.slow  # 0.7-0.8 s
@settings(max_examples=300, deadline=None)
@given(lmads())
def test_self_overlaps_errs_towards_true(lmad):
    truly = len(image(lmad)) < math.prod(lmad.shape)
    if not self_overlaps(lmad):
        assert not truly
    # Small LMADs never exhaust the split budget, so the answer is exact here.
    assert self_overlaps(lmad) == truly


@SETTINGS
@given(lmads(min_rank=1))
def test_sosi_splits_preserve_the_image(lmad):
    sosi = SOSI.from_lmad(lmad)
    assert sosi.points() == lmad.points()
    sosi = sosi.with_strides(tuple(sorted(set(sosi.strides) | {1}, reverse=True)))
    assert sosi.points() == lmad.points()
    dim = sosi.self_overlap_dim()
    if dim is not None:
        lower, upper = sosi.split(dim)
        assert sorted(set(lower.points()) | set(upper.points())) == sosi.points()
        rebased = lower.rebased()
        assert rebased.points() == lower.points()
        if rebased.offset >= 0:  # only a non-negative offset can be distributed
            assert rebased.distributed().points() == lower.points()


positive_dims = st.lists(st.tuples(sizes, st.integers(1, 12)), max_size=3)


@pytest.mark.slow  # 1.2-1.3 s
@settings(max_examples=300, deadline=None)
@given(positive_dims, positive_dims, offsets, offsets)
def test_disjoint_is_exact_for_small_positive_lmads(dims_a, dims_b, offset_a, offset_b):
    # Such small LMADs never exhaust the split budget, and within it the procedure is exact.
    a, b = LMAD(offset_a, dims_a), LMAD(offset_b, dims_b)
    assert disjoint(a, b) == (not image(a) & image(b))


@SETTINGS
@given(lmads(max_rank=2), lmads(max_rank=2))
def test_apply_lmads_unranks_between_the_two(first, second):
    flat_count = math.prod(second.shape)
    for index in first.domain():
        flat = first.apply(index)
        if 0 <= flat < flat_count:
            expected = second.apply(list(product(*map(range, second.shape)))[flat])
            assert apply_lmads(first, second, index) == expected
        else:
            try:
                apply_lmads(first, second, index)
            except LMADError:
                continue
            raise AssertionError("an out-of-range flat position must be rejected")
