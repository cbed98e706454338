"""The host's side of sequences (fcl.il.streams): the loop over a sequence's chunks.

Each chunk's source elements go to the device into one of two buffers per source, on a queue of
their own, while the kernels of the chunk before run on the main queue from the other buffer
(double buffering); a chunk's kernels wait for its data, the next chunk's data waits for the
kernels that last read its buffer. The chunk's size comes from the run's device-memory budget:
what the program holds already, two chunks of each source and the buffers a chunk's kernels make
must fit. With `overlap` off, each chunk's data is moved before its kernels, on the main queue.

Sources are numpy arrays (memmaps too, read from disk as chunks need them), iterators of numpy
arrays (drawn from as chunks need them) and .npy files (memory-mapped).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from fcl import checks
from fcl.errors import FCLError, Span
from fcl.hostio import open_npy
from fcl.il import ir
from fcl.il.streams import FOLD_TILE
from fcl.runtime.buffers import DeviceArray, HostArray
from fcl.runtime.device import DTYPES
from fcl.viz.timeline import Timeline

# Chunks of at most this many elements when the budget allows more: small enough that moving
# the next chunk overlaps the kernels of this one, large enough to fill a GPU.
DEFAULT_CHUNK = 1 << 20


@dataclass(frozen=True)
class StreamOptions:
    """How a run streams: its device-memory budget in bytes (None: the device's memory), the
    chunk size in elements (None: from the budget; a fold's is rounded up to whole tiles), and
    whether moving data overlaps the kernels."""
    budget: int | None = None
    chunk: int | None = None
    overlap: bool = True

    def __post_init__(self):
        if self.chunk is not None and self.chunk < 1:
            raise ValueError(f"a chunk holds a positive number of elements, not {self.chunk} "
                             f"(a fold's, a multiple of {FOLD_TILE}: it is rounded up)")
        if self.budget is not None and self.budget <= 0:
            raise ValueError(f"a device-memory budget is a positive number of bytes, not "
                             f"{self.budget}")

    @staticmethod
    def from_environment() -> StreamOptions:
        """The default: FCL_DEVICE_MEMORY's budget (as `64M`), if it is set."""
        budget = os.environ.get("FCL_DEVICE_MEMORY")
        return StreamOptions(parse_bytes(budget) if budget else None)


SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_bytes(text: str | int) -> int:
    """A number of bytes written as 4096, 64K, 512M or 2G (powers of 1024)."""
    if isinstance(text, int):
        return text
    word = text.strip().upper().removesuffix("B").removesuffix("I")
    number, suffix = (word[:-1], word[-1]) if word and word[-1] in SUFFIXES else (word, "")
    try:
        value = float(number) * SUFFIXES[suffix]
    except ValueError:
        raise ValueError(f"{text!r} is not a number of bytes (as 4096, 64K, 512M or 2G)") \
            from None
    return int(value)


class Elements:
    """A sequence argument's elements for the host: read from a numpy array (or memmap) by
    position, or drawn from an iterator of arrays, with what later chunks may read again (a
    window's overlap) kept."""

    def __init__(self, what, dtype: np.dtype, span: Span | None):
        self.dtype, self.span = np.dtype(dtype), span
        self.array: np.ndarray | None = None
        self.pieces: Iterator | None = None
        self.kept = np.empty(0, self.dtype)  # drawn from the iterator, from self.kept_from on
        self.kept_from = 0
        self.length: int | None = None  # known once the iterator is done
        if isinstance(what, np.ndarray):
            self._check(what, "")
            self.array, self.length = what, len(what)
        else:
            self.pieces = iter(what)

    def _check(self, array, what: str) -> None:
        if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype != self.dtype:
            got = (f"an array of {array.dtype} with shape {array.shape}"
                   if isinstance(array, np.ndarray) else type(array).__name__)
            raise FCLError(f"a sequence of {self.dtype} needs 1-D arrays of {self.dtype}{what}; "
                           f"got {got}", self.span)

    def available(self, end: int) -> int:
        """How many elements there are up to `end` (fewer only where the sequence ends)."""
        if self.length is not None:
            return min(end, self.length)
        assert self.pieces is not None
        have = self.kept_from + len(self.kept)
        parts = [self.kept]
        while have < end:
            piece = next(self.pieces, None)
            if piece is None:
                self.length = have
                break
            self._check(piece, " from its iterator")
            parts.append(piece)
            have += len(piece)
        if len(parts) > 1:
            self.kept = np.concatenate(parts)
        return min(end, have)

    def peek(self, start: int, end: int) -> np.ndarray:
        """Elements [start, end) (at most what there is), with nothing let go."""
        end = self.available(end)
        if self.array is not None:
            return self.array[start:end]
        return self.kept[start - self.kept_from:end - self.kept_from]

    def read(self, start: int, end: int) -> np.ndarray:
        """Elements [start, end), contiguous; what is before `start` is not read again."""
        if self.array is not None:
            return np.ascontiguousarray(self.array[start:end])
        self.kept = self.kept[start - self.kept_from:]
        self.kept_from = start
        return self.kept[:end - start]


@dataclass
class _Loop:
    """A stream's loop while it runs."""
    stream: ir.Stream
    sources: list[Elements]
    length: int | None        # elements of the sequence, where known before the end
    chunk: int                # elements per chunk
    slots: list[list[DeviceArray]]  # per source, its buffers
    arrays_before: int        # the run's arrays before the loop's own buffers
    arrays_kept: int          # ... and with them: a chunk's arrays are released after it
    start: int = 0            # the current chunk's first element
    count: int = 0            # and its elements
    index: int = -1           # the current chunk's number in the loop
    label: int = -1           # ... and in the run, as the timeline numbers chunks
    moved: dict[int, tuple[list, list]] = field(default_factory=dict)  # chunk: events, data
    done: dict[int, cl.Event] = field(default_factory=dict)  # a slot: its last kernels' end
    collected: list[tuple[np.ndarray, cl.Event]] = field(default_factory=list)
    # Irregular rows: the elements each buffer of rows' elements holds, and, by the lengths'
    # source, the element at which each chunk's first row begins.
    capacity: int = 0
    offsets: dict[int | str | None, dict[int, int]] = field(default_factory=dict)
    counted: dict[int, int] = field(default_factory=dict)  # the last chunk counted: its count
    span: Span | None = None


class Streams:
    """A run's stream loops, driven by its ir.Chunk and ir.Collect statements."""

    def __init__(self, run, options: StreamOptions):
        self.run, self.options = run, options
        device = run.device
        self.transfers = cl.CommandQueue(
            device.context, device.device,
            properties=cl.command_queue_properties.PROFILING_ENABLE) \
            if options.overlap else device.queue
        self.loops: dict[int, _Loop] = {}
        self.events: list[tuple[int, str, cl.Event]] = []  # (chunk, what, event)
        self.current: _Loop | None = None
        self.finished: dict[int, _Loop] = {}  # ended loops whose collected parts wait
        self.chunk_size, self.elements = 0, 0  # the last loop's, and all loops' elements
        self.labels = 0  # chunks begun in the run
        self.moved = {"to device": 0, "to host": 0}  # bytes, for the cost model (explain)
        self.drawn: set[int] = set()  # iterator arguments read (once: nothing keeps them)

    # ---- statements
    def chunk(self, s: ir.Chunk) -> None:
        env, number = self.run.env, s.stream.number
        if s.what == "count":
            env[s.var.name] = np.int32(self._next(s))
        elif s.what == "start":
            env[s.var.name] = np.int32(self.loops[number].start)
        elif s.what == "data":
            loop = self.loops[number]
            slot = loop.slots[int(s.source)][loop.index % len(loop.slots[int(s.source)])]
            n = len(loop.moved[loop.index][1][int(s.source)])
            env[s.var.name] = DeviceArray(slot.buffer, slot.dtype, n)
            assert s.length is not None
            env[s.length.name] = np.int32(n)
        else:
            self._collected(s)

    def collect(self, s: ir.Collect) -> None:
        loop = self.loops[s.stream.number]
        array = self.run.array(s.array)
        host = np.empty(int(self.run.eval(s.count)), dtype=array.dtype)
        event = cl.enqueue_copy(self.run.device.queue, host, array.buffer, is_blocking=False)
        loop.collected.append((host, event))
        self.moved["to host"] += host.nbytes
        self.events.append((loop.label, "to host", event))

    def timeline(self) -> Timeline:
        """The timeline of the run's chunks so far (waits for them)."""
        self.run.device.queue.finish()
        if self.transfers is not self.run.device.queue:
            self.transfers.finish()
        times = [(chunk, what, event.profile.start, event.profile.end)
                 for chunk, what, event in self.events]
        origin = min((start for _, _, start, _ in times), default=0)
        rows = [(chunk, what, (start - origin) / 1e6, (end - origin) / 1e6)
                for chunk, what, start, end in times]
        memory = self.run.memory
        return Timeline(rows, self.chunk_size, self.elements, memory.limit, memory.peak,
                        self.options.overlap)

    def kernel(self, name: str, event) -> None:
        """A kernel launched: on the timeline if a stream's chunk is running."""
        if self.current is not None:
            self.events.append((self.current.label, name, event))

    # ---- the loop
    def _next(self, s: ir.Chunk) -> int:
        number = s.stream.number
        loop = self.loops.get(number)
        run = self.run
        if loop is None:
            loop = self.loops[number] = self._begin(s)
        else:
            loop.done[loop.index % 2] = cl.enqueue_marker(run.device.queue)
            run.memory.release_arrays_since(loop.arrays_kept)
        loop.index += 1
        loop.label = self.labels
        loop.start += loop.count
        loop.count = self._count(loop, loop.start)
        self.elements += loop.count
        if loop.count == 0:
            self.current = None
            # The last chunk's kernels may still read the buffers, which the pool may hand to
            # the next stream's moves, on the other queue: wait for them first.
            run.device.queue.finish()
            run.memory.release_arrays_since(loop.arrays_before)
            del self.loops[number]
            self.finished[number] = loop
            return 0
        self.current = loop
        self.labels += 1
        if loop.index not in loop.moved:
            self._move(loop, loop.index, loop.start, loop.count)
        events, _ = loop.moved[loop.index]
        if self.options.overlap:
            next_start = loop.start + loop.count
            next_count = self._count(loop, next_start)
            if next_count:
                self._move(loop, loop.index + 1, next_start, next_count)
            if events:
                cl.enqueue_barrier(run.device.queue, wait_for=events)
        for old in [k for k in loop.moved if k < loop.index]:
            del loop.moved[old]
        return loop.count

    def _begin(self, s: ir.Chunk) -> _Loop:
        run, stream = self.run, s.stream
        sources = [self._elements(src, s.span) for src in stream.sources]
        bound = int(run.eval(s.bound))
        lengths = [bound] if bound >= 0 else []
        for src, elements in zip(stream.sources, sources):
            if elements.length is not None and src.role != "rows":
                lengths.append(max(0, (elements.length - src.extra) // src.scale))
        if len(set(lengths)) > 1:
            raise FCLError(f"zipWithSeq was given sequences of {lengths[0]} and "
                           f"{next(n for n in lengths if n != lengths[0])} elements: they must "
                           "be as long", s.span)
        length = lengths[0] if lengths else None
        chunk, capacity = self._chunk_size(stream, length, s.span)
        self.chunk_size = chunk
        before = len(run.memory.arrays)
        copies = 2 if self.options.overlap else 1
        slots = [[run.memory.new_array(DTYPES[src.elem], _slot_size(src, chunk, capacity),
                                       s.span)
                  for _ in range(copies)] for src in stream.sources]
        loop = _Loop(stream, sources, length, chunk, slots, before, len(run.memory.arrays))
        loop.capacity, loop.span = capacity, s.span
        for src in stream.sources:
            if src.role == "rows":
                loop.offsets.setdefault(src.by, {0: 0})
        return loop

    def _elements(self, src: ir.StreamSource, span: Span | None) -> Elements:
        wanted = np.dtype(np.bool_) if src.elem == ir.BOOL else np.dtype(DTYPES[src.elem])
        if isinstance(src.where, str):
            return Elements(open_npy(src.where, wanted, src.span or span), wanted, span)
        given = self.run.arguments[src.where]
        if not isinstance(given, np.ndarray):
            if src.where in self.drawn:
                raise FCLError(checks.ITERATOR_READ_AGAIN.format(src.where + 1), span)
            self.drawn.add(src.where)
        return Elements(given, wanted, span)

    def _chunk_size(self, stream: ir.Stream, length: int | None,
                    span: Span | None) -> tuple[int, int]:
        """(sequence elements per chunk, the elements of irregular rows a chunk's buffer holds):
        the option's chunk, or as many as the budget leaves room for (a multiple of the
        stream's tile: a fold's), at most DEFAULT_CHUNK and no more than the sequence needs.
        Rows' elements, if any, get half the room."""
        tile = stream.tile
        memory = self.run.memory
        copies = 2 if self.options.overlap else 1
        rows = [src for src in stream.sources if src.role == "rows"]
        per_element = stream.bytes_per_element + sum(
            copies * src.scale * ir.ITEM_BYTES[src.elem] for src in stream.sources
            if src.role != "rows")
        fixed = sum(copies * (src.extra + (src.role == "starts")) * ir.ITEM_BYTES[src.elem]
                    for src in stream.sources)
        # The budget counts the bytes asked for; a few spare for rounding a size up.
        room = memory.limit - memory.allocated - fixed - 64 * (1 + len(stream.sources))
        row_room = room // 2 if rows else 0
        capacity = row_room // (copies * sum(ir.ITEM_BYTES[src.elem] for src in rows)) \
            if rows else 0
        if self.options.chunk is not None:
            return -(-self.options.chunk // tile) * tile, capacity
        fits = int((room - row_room) / per_element) // tile * tile if per_element \
            else DEFAULT_CHUNK
        if fits < tile or fits < 1:
            raise FCLError(f"the device-memory budget of {memory.limit} bytes leaves room for "
                           f"fewer than {max(tile, 1)} elements per chunk (each takes "
                           f"{per_element:g} bytes; {memory.allocated} are in use)", span,
                           ["raise the budget (device_memory), or free arrays before streaming"])
        chunk = min(fits, DEFAULT_CHUNK)
        if length is not None:
            chunk = min(chunk, max(tile, -(-length // tile) * tile))
        return chunk, capacity

    def _count(self, loop: _Loop, start: int) -> int:
        """The elements of the chunk from `start` (0 where the sequence ends): as many as a
        chunk holds, the sources have, and, for irregular rows, as many whole rows as their
        buffers hold."""
        if start in loop.counted:  # the next chunk's, counted while this one ran
            return loop.counted[start]
        end = start + loop.chunk
        if loop.length is not None:
            end = min(end, loop.length)
        pairs = list(zip(loop.stream.sources, loop.sources))
        for src, elements in pairs:
            if src.role != "rows":
                have = elements.available(src.scale * end + src.extra)
                end = min(end, max(start, (have - src.extra) // src.scale))
        for src, elements in pairs:
            if src.role == "rows" and end > start:
                end = start + self._whole_rows(loop, src, elements, start, end)
        if end == start:
            self._check_rows_end(loop, start)
        loop.counted = {start: max(0, end - start)}
        return loop.counted[start]

    def _row_lengths(self, loop: _Loop, by, start: int, end: int) -> np.ndarray:
        lengths = next(e for src, e in zip(loop.stream.sources, loop.sources)
                       if src.where == by and src.role == "starts")
        found = lengths.peek(start, end).astype(np.int64)
        if found.size and found.min() < 0:
            row = start + int(np.argmax(found < 0))
            raise FCLError(f"segmentsSeq: row {row} has the negative length "
                           f"{int(found[row - start])}", loop.span)
        return found

    def _whole_rows(self, loop: _Loop, src: ir.StreamSource, elements: Elements, start: int,
                    end: int) -> int:
        """How many of the rows [start, end) fit in a chunk's buffer of `src`'s elements (all
        of them but the first that does not), with the element where they end noted. The
        lengths are summed a piece at a time, twice as many each time, until the buffer is
        full: a chunk of long rows reads few of them."""
        offsets = loop.offsets[src.by]
        base = offsets[start]
        count, total, piece = 0, 0, 4096
        while start + count < end:
            lengths = self._row_lengths(loop, src.by, start + count,
                                        min(end, start + count + piece))
            ends = total + np.cumsum(lengths)
            fits = int(np.searchsorted(ends, loop.capacity, side="right"))
            if fits < len(lengths):
                if count + fits == 0:
                    raise FCLError(f"segmentsSeq: row {start} has {int(lengths[0])} elements, "
                                   "more than a chunk holds within the budget "
                                   f"({loop.capacity})", loop.span,
                                   ["raise the budget (device_memory)"])
                count, total = count + fits, int(ends[fits - 1]) if fits else total
                break
            count, total, piece = count + len(lengths), int(ends[-1]), piece * 2
        have = elements.available(base + total)
        if have < base + total:
            raise FCLError(f"segmentsSeq: the rows' lengths add up to more than the "
                           f"{have} elements given", loop.span)
        offsets[start + count] = base + total
        return count

    def _check_rows_end(self, loop: _Loop, start: int) -> None:
        """At the end of irregular rows, their elements must end too."""
        for src, elements in zip(loop.stream.sources, loop.sources):
            if src.role == "rows":
                used = loop.offsets[src.by].get(start, 0)
                if elements.available(used + 1) > used:
                    total = elements.available(2**62)
                    raise FCLError(f"segmentsSeq: the rows' lengths add up to {used}, but "
                                   f"{total} elements were given", loop.span)

    def _move(self, loop: _Loop, index: int, start: int, count: int) -> None:
        """Enqueue the copies of chunk `index`'s source elements into their buffers."""
        events, data = [], []
        for position, (src, elements) in enumerate(zip(loop.stream.sources, loop.sources)):
            if src.role == "starts":
                lengths = self._row_lengths(loop, src.where, start, start + count)
                part = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
                elements.read(start, start)  # an iterator's lengths before it are let go
            elif src.role == "rows":
                offsets = loop.offsets[src.by]
                part = elements.read(offsets[start], offsets[start + count])
            else:
                first, end = src.scale * start, src.scale * (start + count) + src.extra
                part = elements.read(first, min(end, elements.available(end)))
            slots = loop.slots[position]
            slot = slots[index % len(slots)]
            waits = [loop.done[index % 2]] if index % 2 in loop.done and len(slots) > 1 else []
            if part.dtype == np.bool_:  # the device keeps bools as bytes
                part = part.view(np.uint8)
            self.moved["to device"] += part.nbytes
            if part.size:
                event = cl.enqueue_copy(self.transfers, slot.buffer, part,  # type: ignore[arg-type]
                                        is_blocking=not self.options.overlap, wait_for=waits)
                events.append(event)
                self.events.append((loop.label + index - loop.index, "to device", event))
            data.append(part)  # kept alive until the copy is done
        loop.moved[index] = (events, data)

    def _collected(self, s: ir.Chunk) -> None:
        run = self.run
        loop = self.finished.pop(s.stream.number)
        parts = [host for host, _ in loop.collected]
        _wait([event for _, event in loop.collected])
        dtype = DTYPES[ir.elem_of(s.var)]
        whole = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
        assert s.length is not None
        run.env[s.var.name] = HostArray(whole)  # on the device only if a kernel reads it
        run.env[s.length.name] = np.int32(len(whole))


def _wait(events: list) -> None:
    if events:  # OpenCL refuses an empty list
        cl.wait_for_events(events)


def _slot_size(src: ir.StreamSource, chunk: int, capacity: int) -> int:
    """The elements of a buffer of `src` for chunks of `chunk` sequence elements."""
    if src.role == "rows":
        return capacity
    return src.scale * chunk + src.extra + (src.role == "starts")
