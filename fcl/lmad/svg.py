"""LMAD memory diagrams as SVG (the grid view of reference notes §2.9).

Memory is drawn as a grid `pitch` addresses wide. A cell the LMAD reaches is filled with
the colour of its outer index i₁ and has a tooltip listing the index tuples that reach it;
a cell reached more than once (self-overlap) gets a red border. Every cell shows its address.
"""
from __future__ import annotations

import math
from html import escape

from .core import LMAD
from .errors import LMADError

CELL = 30
MARGIN = 10
HEADER = 24
MAX_CELLS = 20_000
MAX_INDEX_TUPLES = 1_000_000
MAX_DEFAULT_PITCH = 32
TOOLTIP_TUPLES = 8


def default_pitch(lmad: LMAD) -> int:
    """The largest |stride| in 2..32; else a strip as wide as the image (at most 32)."""
    candidates = [abs(stride) for size, stride in lmad.dims
                  if size > 1 and 1 < abs(stride) <= MAX_DEFAULT_PITCH]
    if candidates:
        return max(candidates)
    low, high = lmad.bounds()
    return min(high - low + 1, MAX_DEFAULT_PITCH)


def _colour(outer: int) -> str:
    # Golden-angle hue steps keep neighbouring outer indices visually distinct.
    return f"hsl({outer * 137.508 % 360:.1f},70%,72%)"


def render_svg(lmad: LMAD, pitch: int | None = None) -> str:
    """An SVG grid diagram of the addresses `lmad` reaches, `pitch` cells per row."""
    pitch = default_pitch(lmad) if pitch is None else pitch
    if pitch < 1:
        raise LMADError(f"the pitch must be positive, got {pitch}")
    low, high = lmad.bounds()
    first_row, last_row = low // pitch, high // pitch
    rows = last_row - first_row + 1
    if rows * pitch > MAX_CELLS:
        raise LMADError(f"the diagram would have {rows * pitch} cells (limit {MAX_CELLS}); "
                        "choose another pitch")
    if math.prod(lmad.shape) > MAX_INDEX_TUPLES:
        raise LMADError(f"{lmad} has more than {MAX_INDEX_TUPLES} index tuples to draw")
    reached: dict[int, list[tuple[int, ...]]] = {}
    for index in lmad.domain():
        reached.setdefault(lmad.apply(index), []).append(index)
    header = f"{lmad}  (pitch {pitch})"
    # 14px monospace needs about 9px per character; a narrow grid must not clip the header.
    width = 2 * MARGIN + max(pitch * CELL, len(header) * 9)
    height = 2 * MARGIN + HEADER + rows * CELL
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace">',
        f'<text x="{MARGIN}" y="{MARGIN + 14}" font-size="14">{escape(header)}</text>',
    ]
    for row in range(rows):
        for column in range(pitch):
            address = (first_row + row) * pitch + column
            x, y = MARGIN + column * CELL, MARGIN + HEADER + row * CELL
            parts.append(_cell(x, y, address, reached.get(address, [])))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _cell(x: int, y: int, address: int, indices: list[tuple[int, ...]]) -> str:
    if indices:
        fill = _colour(indices[0][0] if indices[0] else 0)
        stroke, stroke_width = ("#d00000", 2.5) if len(indices) > 1 else ("#555555", 1)
        shown = ", ".join(str(list(index)) for index in indices[:TOOLTIP_TUPLES])
        more = f" and {len(indices) - TOOLTIP_TUPLES} more" if len(indices) > TOOLTIP_TUPLES else ""
        title = f"<title>{address}: {escape(shown + more)}</title>"
    else:
        fill, stroke, stroke_width, title = "#ffffff", "#cccccc", 1, ""
    label_colour = "#000000" if indices else "#aaaaaa"
    return (f'<g>{title}<rect x="{x}" y="{y}" width="{CELL}" height="{CELL}" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{stroke_width}"/>'
            f'<text x="{x + CELL // 2}" y="{y + CELL // 2 + 4}" font-size="10" '
            f'text-anchor="middle" fill="{label_colour}">{address}</text></g>')
