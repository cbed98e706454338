"""Sequences in the interpreter: the whole sequence at once, in the order of fcl.il.streams.

The OpenCL back end streams a sequence in chunks sized to the device; the interpreter, the
oracle, makes every element in one parallel step (its inputs are small) and folds in the same
tiles, so that both print the same bits for an operator that is only associative.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fcl import checks
from fcl.errors import FCLError
from fcl.hostio import open_npy
from fcl.il.streams import FOLD_TILE
from fcl.interp.lanes import Ctx, Vec, elementwise, expand, host_int, lift_full
from fcl.interp.values import Buffer, Program, PullArray, dtype_of
from fcl.types.types import TProgram, TPull, TSeq, Type, chase, result_type


class ReadOnce:
    """An entry point's iterator argument: a loop over chunks may read it once (the OpenCL back
    end draws its pieces as the chunks need them, and keeps none)."""

    def __init__(self, position: int):
        self.position, self.read = position, False

    def take(self, span) -> None:
        if self.read:
            raise FCLError(checks.ITERATOR_READ_AGAIN.format(self.position + 1), span)
        self.read = True


class Sequence:
    """`length` elements; `elem(ctx, k)` is element k (a Vec of positions in ctx); `data`, the
    elements where they are a host source's as they are (what segmentsSeq takes); `once`, the
    iterators they are drawn from."""

    def __init__(self, length: int, elem: Callable, data: np.ndarray | None = None,
                 irregular: bool = False, once: tuple[ReadOnce, ...] = ()):
        self.length, self.elem, self.data = length, elem, data
        self.irregular = irregular  # made of irregular rows (segmentsSeq)
        self.once = once

    @staticmethod
    def of_array(data: np.ndarray) -> Sequence:
        return Sequence(len(data), lambda ctx, k: elementwise(
            lambda k: np.take(data, k.astype(np.int64) if isinstance(k, np.ndarray) else k),
            k, ctx=ctx), data)


def argument(value, dtype, position: int) -> Sequence:
    """An entry point's sequence argument (at `position`): an array (or memmap), or an iterator
    of arrays."""
    if isinstance(value, np.ndarray):
        return Sequence.of_array(np.asarray(value))
    pieces = list(value)
    for piece in pieces:
        if not isinstance(piece, np.ndarray) or piece.ndim != 1 or piece.dtype != dtype:
            raise FCLError(f"a sequence of {np.dtype(dtype)} needs 1-D arrays of "
                           f"{np.dtype(dtype)} from its iterator; got "
                           + (f"an array of {piece.dtype} with shape {piece.shape}"
                              if isinstance(piece, np.ndarray) else type(piece).__name__))
    sequence = Sequence.of_array(np.concatenate(pieces) if pieces else np.empty(0, dtype))
    sequence.once = (ReadOnce(position),)
    return sequence


def _stream_in(interp, t, span, ctx, xs: PullArray):
    return Sequence(host_int(xs.length, ctx), lambda c, k: xs.fn(k, c))


def _stream_file(interp, t, span, ctx, path: str):
    seq = chase(t)
    while not isinstance(seq, TSeq):
        seq = chase(result_type(seq))
    dtype = np.dtype(dtype_of(seq.elem))
    data = open_npy(path, dtype, span)
    return Sequence.of_array(data)


def _map_seq(interp, t, span, ctx, f, s: Sequence):
    return Sequence(s.length, lambda c, k: interp.apply(f, s.elem(c, k), c, span),
                    irregular=s.irregular, once=s.once)


def _map_seq_m(interp, t, span, ctx, f, s: Sequence):
    return Sequence(s.length, lambda c, k: interp.apply(f, s.elem(c, k), c, span).run(c, interp),
                    irregular=s.irregular, once=s.once)


def _zip_with_seq(interp, t, span, ctx, f, a: Sequence, b: Sequence):
    if a.length != b.length:
        raise FCLError(checks.SEQ_LENGTHS.format(a.length, b.length), span)
    return Sequence(a.length, lambda c, k: interp.apply(
        interp.apply(f, a.elem(c, k), c, span), b.elem(c, k), c, span),
        irregular=a.irregular or b.irregular, once=tuple(dict.fromkeys(a.once + b.once)))


def _windows(interp, t, span, ctx, size, step, s: Sequence):
    if s.irregular:
        raise FCLError("windows of a sequence made of irregular rows are not supported: "
                       "take the windows of their lengths, say, and zip them with the rows", span)
    n, m = host_int(size, ctx), host_int(step, ctx)
    if n < 1 or m < 1:
        raise FCLError("windows needs a size and a step that are positive constants (a "
                       "chunk's windows reach into the next chunk by size - step elements)", span)
    count = (s.length - n) // m + 1 if s.length >= n else 0

    def elem(c: Ctx, k):
        return PullArray(np.int32(n), lambda i, inner: s.elem(
            inner, elementwise(lambda k, i: k * m + i, k, i, ctx=inner)))
    return Sequence(count, elem, once=s.once)


def _segments_seq(interp, t, span, ctx, lengths: Sequence, values: Sequence):
    if lengths.data is None or values.data is None:
        raise FCLError("segmentsSeq takes sequences read from the host as they are (a "
                       "sequence argument or streamFile): a chunk's rows must be cut before "
                       "anything runs on the device", span)
    counts = np.asarray(lengths.data, dtype=np.int64)
    if counts.size and counts.min() < 0:
        row = int(np.argmax(counts < 0))
        raise FCLError(f"segmentsSeq: row {row} has the negative length {int(counts[row])}",
                       span)
    starts = np.concatenate([[0], np.cumsum(counts)])
    if starts[-1] > len(values.data):  # as the OpenCL back end, which meets it chunk by chunk
        raise FCLError(f"segmentsSeq: the rows' lengths add up to more than the "
                       f"{len(values.data)} elements given", span)
    if starts[-1] < len(values.data):
        raise FCLError(f"segmentsSeq: the rows' lengths add up to {int(starts[-1])}, but "
                       f"{len(values.data)} elements were given", span)
    data = np.asarray(values.data)

    def elem(c: Ctx, k):
        first = elementwise(lambda k: starts[k].astype(np.int64), k, ctx=c)
        n = elementwise(lambda k: (starts[k + 1] - starts[k]).astype(np.int32), k, ctx=c)
        return PullArray(n, lambda i, inner: elementwise(
            lambda f, i: np.take(data, f + i), first, i, ctx=inner))
    return Sequence(len(counts), elem, irregular=True,
                    once=tuple(dict.fromkeys(lengths.once + values.once)))


def _elements(interp, span, lanes: Ctx, s: Sequence, dtype) -> np.ndarray:
    """Every element of s, made in one parallel step (a work-item each)."""
    for source in s.once:
        source.take(span)
    items, k = expand(lanes, s.length, checks.GLOBAL)
    values = lift_full(s.elem(items, k), items, dtype)
    interp.faults.end_round()
    interp.faults.raise_first()
    return values


def _fold_seq(interp, t, span, ctx, f, z, s: Sequence):
    dtype = dtype_of(_program_result(t))

    def combine(lanes: Ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = interp.apply(interp.apply(f, Vec(lanes, a), lanes, span), Vec(lanes, b), lanes,
                           span)
        result = lift_full(out, lanes, dtype)
        interp.faults.end_round()
        interp.faults.raise_first()
        return result

    def run(lanes, it):
        values = _elements(it, span, lanes, s, dtype)
        start = lift_full(z, lanes, dtype)[0]
        tiles = -(-len(values) // FOLD_TILE)
        # Each tile, filled up with z, folded as a work-group's tree: pairs `half` apart.
        tree = np.full(tiles * FOLD_TILE, start, dtype=dtype)
        tree[:len(values)] = values
        tree = tree.reshape(tiles, FOLD_TILE)
        group_lanes, _ = expand(lanes, tiles, checks.GROUP)
        half = FOLD_TILE // 2
        while half and tiles:
            items, _ = expand(group_lanes, half, checks.LOCAL)
            pairs = combine(items, tree[:, :half].ravel(), tree[:, half:2 * half].ravel())
            tree[:, :half] = pairs.reshape(tiles, half)
            half //= 2
        one = Ctx(1, lanes, np.zeros(1, dtype=np.int64))
        running = np.full(1, start, dtype=dtype)
        for value in tree[:, 0]:  # the tiles' values in order, from z
            running = combine(one, running, np.full(1, value, dtype=dtype))
        return running[0]
    return Program(run)


def _collect(interp, t, span, ctx, s: Sequence):
    array = _program_result(t)
    assert isinstance(array, TPull)
    dtype = dtype_of(array.elem)

    def run(lanes, it):
        values = _elements(it, span, lanes, s, dtype)
        return Buffer(values, np.int64(0), np.int32(len(values)))
    return Program(run)


def _program_result(t) -> Type:
    program = chase(result_type(t))
    assert isinstance(program, TProgram)
    return chase(program.result)


BUILTINS = {
    "streamIn": (1, _stream_in),
    "streamFile": (1, _stream_file),
    "mapSeq": (2, _map_seq),
    "mapSeqM": (2, _map_seq_m),
    "zipWithSeq": (3, _zip_with_seq),
    "windows": (3, _windows),
    "segmentsSeq": (2, _segments_seq),
    "foldSeq": (3, _fold_seq),
    "collect": (1, _collect),
}
