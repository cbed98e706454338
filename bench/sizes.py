"""The sizes of the bench's inputs (full, and tiny for a check of the harness), and where its
files are."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent


@dataclass
class Sizes:
    block: int      # work-group size of the 1-D kernels (#BlockSize)
    n: int          # elements of copy, reverse, reduce and scan
    side: int       # transpose: a side x side matrix
    tile: int       # transpose and matmul tiles: tile x tile, tile * tile == block
    per_item: int   # scan: elements per work-item
    scan_n: int
    matmul: tuple[int, int, int]  # hA, wA, wB
    bytes_bins: int = 256      # histograms of n values: few bins (the values of bytes) ...
    many_bins: int = 1 << 20   # ... and many
    smvm_rows: int = 1 << 16   # sparse matrix-vector products: rows (and columns) ...
    smvm_per_row: int = 64     # ... and nonzeros per row, on average


FULL = Sizes(block=256, n=1 << 22, side=2048, tile=16, per_item=8, scan_n=1 << 22,
             matmul=(512, 512, 512))


# For tests: every kernel runs, on inputs small enough to check on any device in moments.
TINY = Sizes(block=16, n=1024, side=32, tile=4, per_item=2, scan_n=1024, matmul=(16, 12, 8),
             bytes_bins=16, many_bins=1000, smvm_rows=64, smvm_per_row=8)


def pad_to(values: np.ndarray, multiple: int) -> np.ndarray:
    return np.concatenate([values, np.zeros(-len(values) % multiple, values.dtype)])
