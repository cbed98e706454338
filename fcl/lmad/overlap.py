"""Proving that LMADs do not overlap ([M] §3.6; reference notes §2.8).

Every answer errs on the safe side for a compiler that wants to write through a view:
`disjoint` says True only when the two images provably share no address, and
`self_overlaps` says False only when no address is provably reached twice.

The multi-dimensional test is the SOSI procedure of §3.6.2 on numeric LMADs:

1. normalise both LMADs and turn them into sums of strided intervals (SOSIs), merging
   dimensions of equal stride ([0,a]·δ + [0,b]·δ = [0,a+b]·δ exactly);
2. give both the same strides, always including 1 so any offset can be distributed;
3. move the lower bounds into the offsets; if the ranges or the residues modulo the gcd of
   the strides never meet (the corrected 1-D predicate, generalised), they are disjoint;
   otherwise translate both by the smaller offset and distribute the rest greedily, largest
   stride first (which keeps the inner upper bounds, and so self-overlap, small);
4. while a SOSI self-overlaps by condition (3.2), split the offending dimension in two
   and require both pieces to be disjoint from the other SOSI;
5. with no self-overlap, Lemma 3.6.1 makes the test exact: the SOSIs are disjoint iff some
   pair of matching intervals is.

Generalisation of the thesis (E3): instead of always peeling the last element of the
dimension after the violated one, the split cuts that dimension where the lower piece stops
violating (3.2); peeling one element is the special case that the NW proof uses. Each
split shrinks the total interval width, so the recursion ends; a budget on splits bounds its
cost, and running out of budget answers "may overlap". Within the budget the answer is exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .core import LMAD
from .errors import LMADError

# Bounds on one proof's splits: nested ones, and all of them.
MAX_SPLIT_DEPTH = 24
MAX_SPLITS = 400


@dataclass(frozen=True)
class SOSI:
    """A sum of strided intervals `τ + [l1,u1]·δ1 + … + [ln,un]·δn`; strides > 0, decreasing."""

    offset: int
    strides: tuple[int, ...]
    lows: tuple[int, ...]
    highs: tuple[int, ...]

    @classmethod
    def from_lmad(cls, lmad: LMAD) -> SOSI:
        """toInterval (Fig. 3.8) of the normalised LMAD, dropping dimensions that add nothing."""
        normal = lmad.normalize()
        widths: dict[int, int] = {}
        for size, stride in normal.dims:
            if size > 1 and stride > 0:
                widths[stride] = widths.get(stride, 0) + size - 1
        strides = tuple(sorted(widths, reverse=True))
        return cls(normal.offset, strides, (0,) * len(strides), tuple(widths[s] for s in strides))

    def __str__(self) -> str:
        terms = [str(self.offset)] if self.offset or not self.strides else []
        terms += [f"[{low},{high}]*{stride}"
                  for stride, low, high in zip(self.strides, self.lows, self.highs)]
        return " + ".join(terms)

    def points(self) -> list[int]:
        """The image, by enumeration (for tests and diagrams)."""
        addresses = {self.offset}
        for stride, low, high in zip(self.strides, self.lows, self.highs):
            addresses = {address + step * stride
                         for address in addresses for step in range(low, high + 1)}
        return sorted(addresses)

    def with_strides(self, strides: tuple[int, ...]) -> SOSI:
        """Step 3: the same SOSI over a superset of its strides, with [0,0] in the new ones."""
        intervals = dict(zip(self.strides, zip(self.lows, self.highs)))
        return SOSI(self.offset, strides,
                    tuple(intervals.get(s, (0, 0))[0] for s in strides),
                    tuple(intervals.get(s, (0, 0))[1] for s in strides))

    def rebased(self, translation: int = 0) -> SOSI:
        """The SOSI moved by `translation`, with every lower bound moved into the offset."""
        base = sum(low * stride for low, stride in zip(self.lows, self.strides))
        return SOSI(self.offset + base + translation, self.strides, (0,) * len(self.strides),
                    tuple(high - low for low, high in zip(self.lows, self.highs)))

    def distributed(self) -> SOSI:
        """Step 4: the same image with the offset moved into the intervals, largest stride first."""
        if self.offset < 0 or (self.offset and self.strides[-1] != 1):
            raise LMADError(f"cannot distribute the offset of {self}")
        rest, lows, highs = self.offset, [], []
        for stride, low, high in zip(self.strides, self.lows, self.highs):
            shift, rest = divmod(rest, stride)
            lows.append(low + shift)
            highs.append(high + shift)
        return SOSI(0, self.strides, tuple(lows), tuple(highs))

    def self_overlap_dim(self) -> int | None:
        """The outermost dimension i where (3.2), δi > Σ_(k>i) uk·δk, fails; None if none."""
        inner_reach = 0
        violated = None
        for dim in reversed(range(len(self.strides))):
            if self.strides[dim] <= inner_reach:
                violated = dim
            inner_reach += self.highs[dim] * self.strides[dim]
        return violated

    def split(self, dim: int) -> tuple[SOSI, SOSI]:
        """Step 5: two SOSIs whose union is this one, cut in the first wide dimension after `dim`.

        The cut is where the lower piece stops violating (3.2) at `dim`, but at least one
        element from either end, so both pieces are non-empty and narrower.
        """
        widening = [k for k in range(dim + 1, len(self.strides)) if self.highs[k] > self.lows[k]]
        if not widening:
            raise LMADError(f"{self} has no interval to split after dimension {dim}; "
                            "rebase and distribute it first")
        cut_dim = widening[0]
        others = sum(self.highs[k] * self.strides[k]
                     for k in range(dim + 1, len(self.strides)) if k != cut_dim)
        fitting_high = (self.strides[dim] - 1 - others) // self.strides[cut_dim]
        cut = min(max(fitting_high, self.lows[cut_dim]), self.highs[cut_dim] - 1)
        lower = self._with_interval(cut_dim, self.lows[cut_dim], cut)
        upper = self._with_interval(cut_dim, cut + 1, self.highs[cut_dim])
        return lower, upper

    def _with_interval(self, dim: int, low: int, high: int) -> SOSI:
        lows, highs = list(self.lows), list(self.highs)
        lows[dim], highs[dim] = low, high
        return SOSI(self.offset, self.strides, tuple(lows), tuple(highs))


def disjoint_1d(a: LMAD, b: LMAD) -> bool:
    """The 1-D predicate of [M] §3.6.1, erratum E2 fixed (spans, not sizes); sound, not complete.

    Both LMADs must have rank ≤ 1; a rank-0 LMAD is the point τ.
    """
    if a.rank > 1 or b.rank > 1:
        raise LMADError(f"disjoint_1d needs LMADs of rank ≤ 1, got {a} and {b}")
    (start_a, size_a, stride_a), (start_b, size_b, stride_b) = (_as_progression(x) for x in (a, b))
    common = math.gcd(stride_a, stride_b)
    gap = start_a - start_b
    no_common_residue = gap % common != 0 if common else gap != 0
    return (no_common_residue
            or start_a > start_b + (size_b - 1) * stride_b
            or start_b > start_a + (size_a - 1) * stride_a)


def _as_progression(lmad: LMAD) -> tuple[int, int, int]:
    normal = lmad.normalize()
    size, stride = normal.dims[0] if normal.dims else (1, 0)
    return normal.offset, size, stride


def disjoint(a: LMAD, b: LMAD) -> bool:
    """True only if the images of a and b provably share no address (False means "may overlap").

    Its first check generalises `disjoint_1d`, so it proves at least what that proves.
    """
    first, second = SOSI.from_lmad(a), SOSI.from_lmad(b)
    strides = tuple(sorted(set(first.strides) | set(second.strides) | {1}, reverse=True))
    return _SplitBudget().prove_disjoint(first.with_strides(strides),
                                         second.with_strides(strides), 0)


def self_overlaps(lmad: LMAD) -> bool:
    """True if two index tuples may reach the same address; False only when proved impossible.

    Tuples x ≠ y first differing in dimension q (say x_q > y_q) collide iff
    0 = (x_q − y_q)·δq + Σ_(k>q) (x_k − y_k)·δk, i.e. iff 0 lies in the image of the
    difference LMAD δq − Σ_(k>q) (σk−1)·δk + {(σq−1 : δq), (2σk−1 : δk) for k > q}.
    """
    origin = LMAD(0)
    for q, (size, stride) in enumerate(lmad.dims):
        if size == 1:
            continue
        inner = lmad.dims[q + 1:]
        difference = LMAD(stride - sum((s - 1) * d for s, d in inner),
                          ((size - 1, stride),) + tuple((2 * s - 1, d) for s, d in inner))
        if not disjoint(difference, origin):
            return True
    return False


class _SplitBudget:
    """Counts the splits of one disjointness proof, so pathological inputs give up early."""

    def __init__(self) -> None:
        self.splits_left = MAX_SPLITS

    def prove_disjoint(self, first: SOSI, second: SOSI, depth: int) -> bool:
        """Steps 4–6 for two SOSIs over the same strides."""
        first, second = first.rebased(), second.rebased()
        if _separated(first, second):
            return True
        # Translating both by the same amount keeps whether they overlap (the identity of §3.6.2).
        base = min(first.offset, second.offset)
        first, second = first.rebased(-base).distributed(), second.rebased(-base).distributed()
        for this, other in ((first, second), (second, first)):
            dim = this.self_overlap_dim()
            if dim is not None:
                if depth >= MAX_SPLIT_DEPTH or self.splits_left <= 0:
                    return False
                self.splits_left -= 1
                return all(self.prove_disjoint(piece, other, depth + 1)
                           for piece in this.split(dim))
        return any(high_a < low_b or high_b < low_a
                   for low_a, high_a, low_b, high_b
                   in zip(first.lows, first.highs, second.lows, second.highs))


def _separated(first: SOSI, second: SOSI) -> bool:
    """The corrected 1-D predicate for two rebased SOSIs: their ranges or residues never meet."""
    reach_first = first.offset + sum(h * s for h, s in zip(first.highs, first.strides))
    reach_second = second.offset + sum(h * s for h, s in zip(second.highs, second.strides))
    moving = [s for s, h_first, h_second in zip(first.strides, first.highs, second.highs)
              if h_first or h_second]
    common = math.gcd(*moving)
    gap = first.offset - second.offset
    return ((gap % common != 0 if common else gap != 0)
            or reach_first < second.offset or reach_second < first.offset)
