"""The LMAD algebra of [M] ch. 3 (reference notes §2.1–2.7).

An LMAD `τ + {(σ1:δ1),…,(σn:δn)}` is an offset τ and a list of dimensions, outermost first,
each a size σ ≥ 1 and a stride δ (any integer). It is at once an index function
`L(y1,…,yn) = τ + Σ yi·δi` and, under the set interpretation, the set of addresses it reaches.

Conventions: dimensions are numbered from 0 (the thesis numbers join/split from 1), index
tuples are 0-based, and every operation that treats the LMAD as an index function checks its
arguments against the domain, raising LMADError instead of producing a view that reaches
outside the array.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from .errors import LMADError
from .notation import format_lmad, parse_lmad

Dim = tuple[int, int]


def _as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise LMADError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise LMADError(f"{what} must be an integer, got {value!r}") from None


def _as_shape(shape: Iterable[Any]) -> tuple[int, ...]:
    sizes = tuple(_as_int(size, "a size") for size in shape)
    for size in sizes:
        if size < 1:
            raise LMADError(f"sizes must be positive, got shape {sizes}")
    return sizes


@dataclass(frozen=True, slots=True)
class LMAD:
    """A linear memory access descriptor; equality and hashing are structural."""

    offset: int
    dims: tuple[Dim, ...] = ()

    def __post_init__(self) -> None:
        offset = _as_int(self.offset, "the offset")
        dims = []
        for number, dim in enumerate(self.dims):
            try:
                size, stride = dim
            except (TypeError, ValueError):
                raise LMADError(f"dimension {number} must be a (size, stride) pair, "
                                f"got {dim!r}") from None
            size = _as_int(size, f"the size of dimension {number}")
            if size < 1:
                raise LMADError(f"dimension {number} has size {size}; sizes must be positive")
            dims.append((size, _as_int(stride, f"the stride of dimension {number}")))
        object.__setattr__(self, "offset", offset)
        object.__setattr__(self, "dims", tuple(dims))

    # -- construction and notation -------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> LMAD:
        """Read the notation `2 + {(3:5),(4:1)}`; LMADError, with the position, if malformed."""
        offset, dims = parse_lmad(text)
        return cls(offset, tuple(dims))

    @classmethod
    def row_major(cls, *shape: int) -> LMAD:
        """R(x1,…,xn): the dense row-major layout of an array of the given shape."""
        sizes = _as_shape(shape)
        strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
        return cls(0, tuple(zip(sizes, strides)))

    @classmethod
    def col_major(cls, *shape: int) -> LMAD:
        """C(x1,…,xn): the dense column-major layout of an array of the given shape."""
        sizes = _as_shape(shape)
        strides = [math.prod(sizes[:k]) for k in range(len(sizes))]
        return cls(0, tuple(zip(sizes, strides)))

    def __str__(self) -> str:
        return format_lmad(self.offset, self.dims)

    # -- shape and interpretation ----------------------------------------------------------

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes σ1…σn."""
        return tuple(size for size, _ in self.dims)

    @property
    def strides(self) -> tuple[int, ...]:
        """The strides δ1…δn."""
        return tuple(stride for _, stride in self.dims)

    def domain(self) -> Iterator[tuple[int, ...]]:
        """All valid index tuples, in row-major order."""
        return product(*(range(size) for size in self.shape))

    def apply(self, index: Sequence[int]) -> int:
        """The address L(y1,…,yn) = τ + Σ yi·δi of one index tuple."""
        index = tuple(index)
        if len(index) != self.rank:
            raise LMADError(f"index {index} has {len(index)} components "
                            f"but {self} has rank {self.rank}")
        address = self.offset
        for number, (component, (size, stride)) in enumerate(zip(index, self.dims)):
            component = _as_int(component, "an index component")
            if not 0 <= component < size:
                raise LMADError(f"index {index} is out of range in dimension {number} "
                                f"(size {size}) of {self}")
            address += component * stride
        return address

    def points(self) -> list[int]:
        """The image: the sorted list of distinct addresses reached by the domain."""
        addresses = {self.offset}
        for size, stride in self.dims:
            addresses = {address + step * stride for address in addresses for step in range(size)}
        return sorted(addresses)

    def bounds(self) -> tuple[int, int]:
        """The lowest and highest address reached."""
        spans = [(size - 1) * stride for size, stride in self.dims]
        return (self.offset + sum(min(span, 0) for span in spans),
                self.offset + sum(max(span, 0) for span in spans))

    def unrank(self, flat: int) -> tuple[int, ...]:
        """UNRANK (proc. 3.2): the index tuple at row-major position `flat` of this LMAD's shape."""
        return unrank(self.shape, flat)

    def gather(self, buffer: Sequence[Any]) -> Any:
        """The array this LMAD views in `buffer`, as nested lists (a scalar for rank 0)."""
        return nest([buffer[self.apply(index)] for index in self.domain()], self.shape)

    # -- index-function operations (Fig. 3.6 and §3.4.1) -----------------------------------

    def slice(self, spec: Sequence[Any]) -> LMAD:
        """slice′ with one entry per leading dimension.

        An entry is an int (index that dimension and drop it), a pair (start, count) or a
        triplet (start, count, step); dimensions without an entry are kept whole.
        """
        if len(spec) > self.rank:
            raise LMADError(f"slice {list(spec)} has more entries "
                            f"than the rank {self.rank} of {self}")
        offset, dims = self.offset, []
        for number, (entry, (size, stride)) in enumerate(zip(spec, self.dims)):
            if isinstance(entry, (tuple, list)):
                if len(entry) not in (2, 3):
                    raise LMADError(f"slice entry {entry} must be (start, count) "
                                    "or (start, count, step)")
                start, count, step = (*entry, 1) if len(entry) == 2 else entry
                start, count, step = (_as_int(bound, "a slice bound")
                                      for bound in (start, count, step))
                last = start + (count - 1) * step
                if count < 1 or not (0 <= start < size and 0 <= last < size):
                    raise LMADError(f"slice entry {entry} selects indices outside "
                                    f"dimension {number} (size {size})")
                offset += start * stride
                dims.append((count, step * stride))
            else:
                index = _as_int(entry, "a slice index")
                if not 0 <= index < size:
                    raise LMADError(f"index {index} is out of range "
                                    f"for dimension {number} (size {size})")
                offset += index * stride
        return LMAD(offset, tuple(dims) + self.dims[len(spec):])

    def slice_lmad(self, view: LMAD) -> LMAD:
        """slice_LMAD: view a 1-D LMAD through `view`, whose addresses index its only dimension."""
        if self.rank != 1:
            raise LMADError(f"slice_lmad needs a 1-D LMAD, got rank {self.rank}: {self}")
        return self.slice_lmads([view])

    def slice_lmads(self, views: Sequence[LMAD]) -> LMAD:
        """slice_LMADs: slice each dimension by its own LMAD; the results' dimensions in order."""
        if len(views) != self.rank:
            raise LMADError(f"slice_lmads needs {self.rank} LMADs, one per dimension, "
                            f"got {len(views)}")
        offset = self.offset
        dims: list[Dim] = []
        for number, (view, (size, stride)) in enumerate(zip(views, self.dims)):
            low, high = view.bounds()
            if low < 0 or high >= size:
                raise LMADError(f"{view} reaches {low}..{high}, "
                                f"outside dimension {number} (size {size})")
            offset += view.offset * stride
            dims.extend((inner_size, stride * inner_stride)
                        for inner_size, inner_stride in view.dims)
        return LMAD(offset, tuple(dims))

    def fix(self, dim: int, index: int) -> LMAD:
        """Index dimension `dim` at `index` and drop it (the thesis's fix is dim = 0)."""
        self._check_dim(dim)
        index = _as_int(index, "the index")
        size, stride = self.dims[dim]
        if not 0 <= index < size:
            raise LMADError(f"index {index} is out of range "
                            f"for dimension {dim} (size {size}) of {self}")
        return LMAD(self.offset + index * stride, self.dims[:dim] + self.dims[dim + 1:])

    def transpose(self) -> LMAD:
        """Swap the two outermost dimensions."""
        if self.rank < 2:
            raise LMADError(f"transpose needs rank ≥ 2, got {self}")
        return self.permute([1, 0, *range(2, self.rank)])

    def permute(self, perm: Sequence[int]) -> LMAD:
        """Reorder dimensions: dimension k of the result is dimension perm[k] of this LMAD."""
        perm = [_as_int(k, "a permutation entry") for k in perm]
        if sorted(perm) != list(range(self.rank)):
            raise LMADError(f"{perm} is not a permutation of the {self.rank} dimensions of {self}")
        return LMAD(self.offset, tuple(self.dims[k] for k in perm))

    def reshape(self, new_shape: Sequence[int]) -> LMAD:
        """The elements, in row-major order, in a new shape; LMADError if that is no single LMAD.

        The element at flat position x is the one this LMAD puts at x, so the result is
        ApplyLMADs(R(new_shape), self, ·). It is one LMAD exactly when each new dimension of
        size > 1 stays within one run of joinable dimensions of this LMAD.
        """
        new_shape = _as_shape(new_shape)
        if math.prod(new_shape) != math.prod(self.shape):
            raise LMADError(f"cannot reshape shape {list(self.shape)} to {list(new_shape)}: "
                            "element counts differ")
        runs = self._joined_runs()
        run_weights = [math.prod(size for size, _ in runs[number + 1:])
                       for number in range(len(runs))]
        dims: list[Dim] = []
        weight = 1  # how many flat positions one step of the current new dimension covers
        for size in reversed(new_shape):
            if size == 1:
                # Any stride works for a size-1 dimension; continuing the inner chain makes
                # row-major inputs give row-major results.
                stride = dims[-1][0] * dims[-1][1] if dims else 1
            else:
                stride = self._stride_within_run(runs, run_weights, weight, size, new_shape)
            dims.append((size, stride))
            weight *= size
        return LMAD(self.offset, tuple(reversed(dims)))

    def _joined_runs(self) -> list[Dim]:
        """Dimensions of size > 1 with every joinable neighbouring pair joined, outermost first."""
        runs: list[Dim] = []
        for size, stride in reversed(self.dims):
            if size == 1:
                continue
            if runs and stride == runs[-1][0] * runs[-1][1]:
                inner_size, inner_stride = runs.pop()
                runs.append((size * inner_size, inner_stride))
            else:
                runs.append((size, stride))
        return runs[::-1]

    def _stride_within_run(self, runs: list[Dim], run_weights: list[int], weight: int, size: int,
                           new_shape: tuple[int, ...]) -> int:
        # The new dimension steps `weight` flat positions at a time. Its addresses are affine
        # only if each step is a whole number of steps of one run and all of them stay in it.
        for (run_size, run_stride), run_weight in zip(runs, run_weights):
            if run_weight <= weight < run_weight * run_size:
                if weight % run_weight == 0 and weight * size <= run_weight * run_size:
                    return weight // run_weight * run_stride
                break
        raise LMADError(f"reshaping {self} to {list(new_shape)} is not representable as one LMAD "
                        f"(a new dimension straddles dimensions that cannot be joined)")

    # -- image-preserving operations (§3.5.1) ------------------------------------------------

    def normalize(self) -> LMAD:
        """NORMALIZE (proc. 3.3, erratum E1 fixed): positive strides, decreasing; same image."""
        offset, dims = self.offset, []
        for size, stride in self.dims:
            if stride < 0:
                offset += (size - 1) * stride
                stride = -stride
            dims.append((size, stride))
        dims.sort(key=lambda dim: -dim[1])
        return LMAD(offset, tuple(dims))

    def join(self, dim: int) -> LMAD:
        """Join dimensions dim and dim+1 into one; needs δ_dim = σ_(dim+1)·δ_(dim+1)."""
        self._check_dim(dim + 1)
        (outer_size, outer_stride), (inner_size, inner_stride) = self.dims[dim], self.dims[dim + 1]
        if outer_stride != inner_size * inner_stride:
            raise LMADError(f"cannot join dimensions {dim} and {dim + 1} of {self}: "
                            f"stride {outer_stride} ≠ {inner_size}·{inner_stride}")
        joined = (outer_size * inner_size, inner_stride)
        return LMAD(self.offset, self.dims[:dim] + (joined,) + self.dims[dim + 2:])

    def split(self, dim: int, inner: int) -> LMAD:
        """Split dimension dim (σ:δ) into (σ/inner : inner·δ), (inner : δ); inner must divide σ."""
        self._check_dim(dim)
        inner = _as_int(inner, "the inner size")
        size, stride = self.dims[dim]
        if inner < 1 or size % inner:
            raise LMADError(f"cannot split dimension {dim} of size {size} by {inner}")
        parts = ((size // inner, inner * stride), (inner, stride))
        return LMAD(self.offset, self.dims[:dim] + parts + self.dims[dim + 1:])

    def insert_empty_dim(self, position: int, stride: int = 1) -> LMAD:
        """Insert a size-1 dimension before dimension `position` (position = rank appends)."""
        position = _as_int(position, "the position")
        if not 0 <= position <= self.rank:
            raise LMADError(f"cannot insert a dimension at {position} in {self}")
        return LMAD(self.offset, self.dims[:position] + ((1, stride),) + self.dims[position:])

    def remove_empty_dim(self, position: int) -> LMAD:
        """Remove dimension `position`, which must have size 1."""
        self._check_dim(position)
        if self.dims[position][0] != 1:
            raise LMADError(f"dimension {position} of {self} "
                            f"has size {self.dims[position][0]}, not 1")
        return LMAD(self.offset, self.dims[:position] + self.dims[position + 1:])

    def _check_dim(self, dim: int) -> None:
        if not 0 <= _as_int(dim, "a dimension number") < self.rank:
            raise LMADError(f"{self} has no dimension {dim}")


def unrank(shape: Sequence[int], flat: int) -> tuple[int, ...]:
    """UNRANK (proc. 3.2): the index tuple at row-major position `flat` of `shape`."""
    shape, flat = _as_shape(shape), _as_int(flat, "the flat position")
    count = math.prod(shape)
    if not 0 <= flat < count:
        raise LMADError(f"flat position {flat} is outside the {count} elements "
                        f"of shape {list(shape)}")
    index = []
    for number in range(len(shape)):
        inner = math.prod(shape[number + 1:])
        index.append(flat // inner)
        flat %= inner
    return tuple(index)


def nest(values: Sequence[Any], shape: Sequence[int]) -> Any:
    """nest (Fig. 4.11): a flat list as row-major nested lists (its only element for shape ())."""
    shape = _as_shape(shape)
    if len(values) != math.prod(shape):
        raise LMADError(f"cannot nest {len(values)} values as shape {list(shape)}")
    if not shape:
        return values[0]
    chunk = len(values) // shape[0]
    return [nest(values[k * chunk:(k + 1) * chunk], shape[1:]) for k in range(shape[0])]


def expand(body: Callable[[int], LMAD], lo: int, count: int) -> LMAD:
    """EXPAND (proc. 3.4): one LMAD, with a new outer dimension, for ∪ body(i), lo ≤ i < lo+count.

    `body` gives the LMAD accessed in iteration i. The loop variable may only move the
    offset, and only affinely; otherwise LMADError. As in the thesis, the stride is
    τ(lo+1) − τ(lo), so body(lo+1) is evaluated even when count = 1.
    """
    lo, count = _as_int(lo, "the lower bound"), _as_int(count, "the iteration count")
    if count < 1:
        raise LMADError(f"cannot expand over {count} iterations; the count must be positive")
    samples = [body(i) for i in range(lo, lo + max(count, 2))]
    first = samples[0]
    stride = samples[1].offset - first.offset
    for step, sample in enumerate(samples):
        if sample.dims != first.dims:
            raise LMADError(f"cannot expand: the loop variable occurs in the dimensions "
                            f"({first} at i={lo}, {sample} at i={lo + step})")
        if sample.offset != first.offset + step * stride:
            raise LMADError(f"cannot expand: the offset is not affine in the loop variable "
                            f"({sample} at i={lo + step})")
    return LMAD(first.offset, ((count, stride),) + first.dims)
