"""`reduceRows`, `scanRows` and `concatRows` in the interpreter: each row combined in the order of
fcl.rowtiles, with numpy over all rows (or tiles) at once, one element position at a time."""
from __future__ import annotations

import numpy as np

from fcl import checks
from fcl.interp.lanes import Ctx, Vec, expand, lift_full
from fcl.interp.values import Buffer, Program, dtype_of
from fcl.rowtiles import ROW_TILE
from fcl.types.types import TProgram, TPull, chase, result_type


class _Rows:
    """The rows' elements in one flat array, where each row begins, and f over numpy arrays."""

    def __init__(self, it, f, rows, lanes: Ctx, dtype, span):
        self.it, self.f, self.dtype, self.span = it, f, dtype, span
        count = int(lift_full(rows.length, lanes, np.int64)[0])
        self.row_lanes, r = expand(lanes, count, checks.GLOBAL)
        row = rows.fn(r, self.row_lanes)
        lengths = lift_full(row.length, self.row_lanes, np.int64)
        self._raise_faults()
        elements, j = expand(self.row_lanes, row.length)
        self.values = lift_full(row.fn(j, elements), elements, dtype)
        self._raise_faults()
        self.starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.count, self.total = count, int(self.starts[-1])
        # The row of each element.
        self.row_of = np.repeat(np.arange(count), lengths)
        self.tile_count = -(-self.total // ROW_TILE)

    def _raise_faults(self) -> None:
        self.it.faults.end_round()
        self.it.faults.raise_first()

    def combine(self, rows: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """f(a[k], b[k]) in the lanes of rows[k] (a failure names the row's work-item)."""
        if rows.size == 0:
            return a
        lanes = Ctx(rows.size, self.row_lanes, rows)
        out = self.it.apply(self.it.apply(self.f, Vec(lanes, a), lanes, self.span),
                            Vec(lanes, b), lanes, self.span)
        result = lift_full(out, lanes, self.dtype)
        self._raise_faults()
        return result

    def first_pieces(self, z, store=None) -> np.ndarray:
        """Each row's fold from z over its elements in the tile where it begins."""
        starts, ends = self.starts[:-1], self.starts[1:]
        piece_ends = np.minimum(ends, (starts // ROW_TILE + 1) * ROW_TILE)
        acc = np.full(self.count, z, dtype=self.dtype)
        for k in range(ROW_TILE):
            active = np.flatnonzero(starts + k < piece_ends)
            if active.size == 0:
                break
            at = starts[active] + k
            acc[active] = self.combine(active, acc[active], self.values[at])
            if store is not None:
                store[at] = acc[active]
        return acc

    def continued_tiles(self) -> np.ndarray:
        """The tiles that begin inside a row (a row begun in an earlier tile)."""
        firsts = np.arange(self.tile_count, dtype=np.int64) * ROW_TILE
        return np.flatnonzero(self.starts[self.row_of[firsts]] < firsts)

    def tile_pieces(self, tiles: np.ndarray, emit=None) -> np.ndarray:
        """The fold of each tile's piece of the row it continues (from its first element);
        emit(tiles, positions, running values) sees each step."""
        firsts = tiles * ROW_TILE
        rows = self.row_of[firsts]
        ends = np.minimum(self.starts[rows + 1], firsts + ROW_TILE)
        acc = self.values[firsts].copy()
        if emit is not None:
            emit(np.arange(tiles.size), firsts, acc)
        for k in range(1, ROW_TILE):
            active = np.flatnonzero(firsts + k < ends)
            if active.size == 0:
                break
            at = firsts[active] + k
            acc[active] = self.combine(rows[active], acc[active], self.values[at])
            if emit is not None:
                emit(active, at, acc[active])
        return acc

    def across_tiles(self, acc: np.ndarray, heads: np.ndarray, before=None) -> np.ndarray:
        """Each row's value combined with the pieces of the tiles that begin inside it."""
        starts, ends = self.starts[:-1], self.starts[1:]
        first_tiles = starts // ROW_TILE
        later = np.where(ends > starts, (ends - 1) // ROW_TILE - first_tiles, 0)
        for k in range(int(later.max(initial=0))):
            active = np.flatnonzero(later > k)
            tiles = first_tiles[active] + 1 + k
            if before is not None:
                before(tiles, acc[active])
            acc[active] = self.combine(active, acc[active], heads[tiles])
        return acc


def _elem(t) -> np.dtype:
    program = chase(result_type(t))
    assert isinstance(program, TProgram)
    array = chase(program.result)
    assert isinstance(array, TPull)
    return dtype_of(array.elem)


def reduce_rows(interp, t, span, ctx, f, z, rows):
    dtype = _elem(t)

    def run(lanes, it):
        flat = _Rows(it, f, rows, lanes, dtype, span)
        acc = flat.first_pieces(lift_full(z, lanes, dtype)[0])
        heads = np.zeros(flat.tile_count, dtype=dtype)
        continued = flat.continued_tiles()
        heads[continued] = flat.tile_pieces(continued)
        result = flat.across_tiles(acc, heads)
        return Buffer(result, np.int64(0), np.int32(flat.count))
    return Program(run)


def scan_rows(interp, t, span, ctx, f, z, rows):
    dtype = _elem(t)

    def run(lanes, it):
        flat = _Rows(it, f, rows, lanes, dtype, span)
        scanned = np.zeros(flat.total, dtype=dtype)
        acc = flat.first_pieces(lift_full(z, lanes, dtype)[0], scanned)
        heads = np.zeros(flat.tile_count, dtype=dtype)
        continued = flat.continued_tiles()
        heads[continued] = flat.tile_pieces(continued)
        carries = np.zeros(flat.tile_count, dtype=dtype)

        def keep(tiles, values):
            carries[tiles] = values
        flat.across_tiles(acc, heads, keep)
        rows_of_tiles = flat.row_of[continued * ROW_TILE]

        def emit(which, at, running):
            scanned[at] = flat.combine(rows_of_tiles[which], carries[continued[which]], running)
        flat.tile_pieces(continued, emit)
        return Buffer(scanned, np.int64(0), np.int32(flat.total))
    return Program(run)


def concat_rows(interp, t, span, ctx, rows):
    dtype = _elem(t)

    def run(lanes, it):
        flat = _Rows(it, None, rows, lanes, dtype, span)
        return Buffer(flat.values, np.int64(0), np.int32(flat.total))
    return Program(run)
