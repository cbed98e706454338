"""Draw the FCL kernel's logo: `python -m tools.make_logos` rewrites fcl_kernel/resources/logo-*.

The logo is FCL's level hierarchy: a grid (the dark square) of 2 x 2 blocks, each of 2 x 2
threads. The shapes are defined once here and written both as SVG and, through a small
pure-Python rasteriser, as the 32 x 32 and 64 x 64 PNGs Jupyter frontends ask for, so the
project needs no imaging library and the three files cannot drift apart
(tests/test_install.py regenerates them and compares).
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Literal

RESOURCES = Path(__file__).resolve().parent.parent / "fcl_kernel" / "resources"

SIZE = 64  # the design's own units; the PNGs scale it
GRID = ("#1f3a5f", 0, 0, SIZE, 12)  # colour, x, y, side, corner radius
BLOCK_SIDE, BLOCK_RADIUS, BLOCK_COLOUR = 22, 4, "#4f8fd6"
BLOCK_ORIGINS = [(x, y) for y in (8, 34) for x in (8, 34)]
THREAD_RADIUS, THREAD_COLOUR = 3.5, "#f2c14e"
THREAD_OFFSETS = [(dx, dy) for dy in (5.5, 16.5) for dx in (5.5, 16.5)]

# Painted in order, later shapes on top: ("rect", colour, x, y, side, radius) or
# ("circle", colour, cx, cy, r).
Rect = tuple[Literal["rect"], str, float, float, float, float]
Circle = tuple[Literal["circle"], str, float, float, float]
Shape = Rect | Circle
SHAPES: list[Shape] = [("rect", *GRID)]
for bx, by in BLOCK_ORIGINS:
    SHAPES.append(("rect", BLOCK_COLOUR, bx, by, BLOCK_SIDE, BLOCK_RADIUS))
    SHAPES.extend(("circle", THREAD_COLOUR, bx + dx, by + dy, THREAD_RADIUS)
                  for dx, dy in THREAD_OFFSETS)


def svg() -> str:
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" '
             f'viewBox="0 0 {SIZE} {SIZE}">']
    for shape in SHAPES:
        if shape[0] == "rect":
            _, colour, x, y, side, radius = shape
            parts.append(f'<rect x="{x}" y="{y}" width="{side}" height="{side}" rx="{radius}" '
                         f'fill="{colour}"/>')
        else:
            _, colour, cx, cy, r = shape
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{colour}"/>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _inside(shape: Shape, x: float, y: float) -> bool:
    if shape[0] == "circle":
        _, _, cx, cy, r = shape
        return (x - cx) ** 2 + (y - cy) ** 2 <= r * r
    _, _, left, top, side, radius = shape
    if not (left <= x <= left + side and top <= y <= top + side):
        return False
    # Distance past the inner square whose corners are the centres of the rounding arcs.
    dx = max(left + radius - x, 0, x - (left + side - radius))
    dy = max(top + radius - y, 0, y - (top + side - radius))
    return dx * dx + dy * dy <= radius * radius


def _rgb(colour: str) -> tuple[int, int, int]:
    red, green, blue = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return red, green, blue


def png(pixels: int, samples: int = 4) -> bytes:
    """The logo as a `pixels` x `pixels` RGBA PNG, anti-aliased with samples^2 points a pixel."""
    scale = SIZE / pixels
    rows = []
    for py in range(pixels):
        row = bytearray([0])  # filter type 0 (none) for this scanline
        for px in range(pixels):
            total = [0, 0, 0, 0]  # r, g, b summed over the covered samples, and their count
            for sy in range(samples):
                for sx in range(samples):
                    x = (px + (sx + 0.5) / samples) * scale
                    y = (py + (sy + 0.5) / samples) * scale
                    top = next((s for s in reversed(SHAPES) if _inside(s, x, y)), None)
                    if top is not None:
                        for i, c in enumerate(_rgb(top[1])):
                            total[i] += c
                        total[3] += 1
            covered = total[3]
            if covered:
                row += bytes(round(c / covered) for c in total[:3])
            else:
                row += b"\0\0\0"
            row.append(round(255 * covered / samples ** 2))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", pixels, pixels, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


def logos() -> dict[str, bytes]:
    """File name -> contents, for every logo file."""
    return {"logo-svg.svg": svg().encode(), "logo-32x32.png": png(32),
            "logo-64x64.png": png(64)}


def main() -> None:
    for name, data in logos().items():
        (RESOURCES / name).write_bytes(data)


if __name__ == "__main__":
    main()
