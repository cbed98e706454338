"""An LMAD described in words: normal form, shape, points, overlap — for `fcl lmad`, the
kernel's `%lmad` and its playground."""
from __future__ import annotations

import math

from .core import LMAD
from .errors import LMADError
from .overlap import disjoint, self_overlaps

MAX_POINTS = 1_000_000  # enumerating more would stall a notebook


def report(text: str, show_points: bool = False) -> tuple[list[LMAD], list[str]]:
    """One LMAD, or two separated by `;`, parsed and described (two also compared)."""
    lmads = [LMAD.parse(part) for part in text.split(";")]
    if len(lmads) > 2:
        raise LMADError("give one LMAD, or two separated by `;` to compare them")
    lines = [line for lmad in lmads for line in describe(lmad, show_points)]
    return lmads, lines + (compare(*lmads) if len(lmads) == 2 else [])


def describe(lmad: LMAD, show_points: bool = False) -> list[str]:
    """`name: value` lines about one LMAD."""
    tuples = _enumerable(lmad)
    points = lmad.points()
    overlap = f" (self-overlapping: {tuples} index tuples)" if len(points) < tuples else ""
    lines = [f"lmad:        {lmad}",
             f"normalized:  {lmad.normalize()}",
             f"shape:       {''.join(f'[{size}]' for size in lmad.shape) or '[]'}",
             f"points:      {len(points)}{overlap}"]
    if show_points:
        lines.append(f"sorted:      {' '.join(map(str, points))}")
    if not overlap:
        proved = not self_overlaps(lmad)
        lines.append("self-overlap: none" + ("" if proved else
                                             " (though the non-overlap test could not prove it)"))
    return lines


def _enumerable(lmad: LMAD) -> int:
    """The LMAD's number of index tuples, if few enough to enumerate its points."""
    tuples = math.prod(lmad.shape)
    if tuples > MAX_POINTS:
        raise LMADError(f"{lmad} has {tuples} index tuples; at most {MAX_POINTS} can be listed")
    return tuples


def compare(first: LMAD, second: LMAD) -> list[str]:
    """Whether two LMADs share addresses: the points counted, and what the non-overlap test
    (which may fail to prove disjointness, never claims it wrongly) concludes."""
    for lmad in (first, second):
        _enumerable(lmad)
    shared = sorted(set(first.points()) & set(second.points()))
    proved = disjoint(first, second)
    if shared:
        listed = " ".join(map(str, shared[:16])) + (" …" if len(shared) > 16 else "")
        return [f"overlap:     yes, {len(shared)} shared address{'es' * (len(shared) > 1)}: "
                f"{listed}"]
    return ["overlap:     no shared address",
            "proof:       " + ("the non-overlap test proves them disjoint" if proved else
                               "the non-overlap test cannot prove it (it is conservative)")]
