"""The global memory plan drawn: one bar per block, each array that lives in it a coloured span
at its place (an arrow where its elements run backwards), with the decisions listed below."""
from __future__ import annotations

import math
from html import escape

import numpy as np

from fcl.lmad.core import LMAD
from fcl.memory.plan import MemoryPlan, plan_text

WIDTH = 640        # the bar of the largest block
LEFT = 110         # room for the block's name
ROW = 22           # one array's span
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
CHAR = 6.6         # the width of a character of the 11-pixel font, to size the drawing


def plan_svg(plan: MemoryPlan) -> str:
    longest = max((b.length or 1 for b in plan.blocks), default=1)
    parts: list[str] = []
    y = 10
    colour = 0
    for block in plan.blocks:
        length = block.length or 1
        bar = max(40.0, WIDTH * length / longest)
        times = "" if block.times == 1 else (" each iteration" if block.times is None
                                             else f" x {block.times}")
        parts.append(f"<text x='4' y='{y + 14}' font-weight='bold'>{escape(block.name)}</text>"
                     f"<text x='{LEFT + bar + 6:.1f}' y='{y + 14}'>{escape(block.elem)}"
                     f"[{block.length if block.length is not None else '?'}]{times}</text>"
                     f"<rect x='{LEFT}' y='{y + 2}' width='{bar:.1f}' height='16' fill='#eee' "
                     f"stroke='#555'/>")
        y += ROW
        for placed in block.arrays:
            fill = PALETTE[colour % len(PALETTE)]
            colour += 1
            label = f"{placed.array}: {placed.place}" if placed.place is not None \
                else f"{placed.array}: all of it"
            if placed.place is not None and block.length:
                for first, size in _runs(placed.place):
                    x = LEFT + bar * first / length
                    w = max(2.0, bar * size / length)
                    parts.append(f"<rect x='{x:.1f}' y='{y + 2}' width='{w:.1f}' height='14' "
                                 f"fill='{fill}' opacity='0.85'><title>{escape(label)}</title>"
                                 f"</rect>")
                if placed.place.rank == 1 and placed.place.dims[0][1] < 0:
                    label += "  \u2190 backwards"
            parts.append(f"<text x='{LEFT + 6}' y='{y + 30}'>{escape(label)}</text>")
            y += ROW + 16
        y += 6
    lines = plan_text(plan).splitlines()
    notes = lines[lines.index("decisions:"):] if "decisions:" in lines else []
    for line in [lines[0], *notes]:
        parts.append(f"<text x='4' y='{y + 14}'>{escape(line.strip())}</text>")
        y += 18
    text_width = max(len(line) for line in [lines[0], *notes]) * CHAR + 10
    width = max(LEFT + WIDTH + 160, text_width)
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{y + 8}' "
            f"font-family='monospace' font-size='11'>{''.join(parts)}</svg>")


MAX_RUNS = 4096  # runs of a place drawn apiece; more are drawn as the span they cover


def _runs(place: LMAD) -> list[tuple[int, int]]:
    """(first element, count) of each run of consecutive elements a place covers (a block of
    rows, several runs: NW's blocks in the matrix, fcl/memory/scatter.py)."""
    if place.rank == 1:
        ((size, stride),) = place.dims
        return [(min(place.offset, place.offset + (size - 1) * stride), size)]
    low, high = place.bounds()
    if math.prod(place.shape) > MAX_RUNS * 64:
        return [(low, high - low + 1)]
    points = np.unique(np.asarray(place.points(), np.int64))
    starts = np.flatnonzero(np.diff(points, prepend=points[0] - 2) != 1)
    ends = np.append(starts[1:], points.size)
    if starts.size > MAX_RUNS:
        return [(low, high - low + 1)]
    return [(int(points[a]), int(b - a)) for a, b in zip(starts, ends)]
