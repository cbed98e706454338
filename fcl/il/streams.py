"""Sequences (Accelerate's streaming, seed 003): arrays longer than device memory, made and
consumed a chunk at a time.

A sequence exists only at compile time, as a function from an element's position in the chunk
being processed to its value, with the host sources that the chunk's elements come from. This is
the paper's lifting: `mapSeq f` and `zipWithSeq f` compose f into the element function, so that
a chunk's elements are made by one parallel loop, whatever the chunk's size. `foldSeq` and
`collect` end a sequence: they write a loop over chunks (ir.Chunk statements, set by the host,
fcl.runtime.streams) whose body runs the chunk's kernels; the host picks the chunk's size from the
device's memory and moves the next chunk's sources while the kernels of this one run.

A fold's order is fixed so that it does not depend on the chunk size, which depends on the
device: the sequence is cut into tiles of FOLD_TILE elements (the last filled up with z, which
must be f's neutral element), each folded as a tree, f(x[i], x[i + 128]) for i < 128, then
those 64 apart, and so on, as a work-group does in local memory; the tiles' values are folded
from z left to right, the accumulator carried from chunk to chunk. Chunks hold whole tiles; the
interpreter folds in the same order.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from fcl import checks
from fcl.errors import FCLError
from fcl.il import ir
from fcl.il.simplify import mk_bin
from fcl.il.values import Prog, Pull, elem_type, il_type
from fcl.rowtiles import ROW_TILE
from fcl.types.types import TSeq, Type, chase, result_type

I, B = ir.INT, ir.BOOL  # noqa: E741  # read as types
FOLD_TILE = ROW_TILE  # elements folded by one work-item; a chunk holds whole tiles


@dataclass
class ChunkView:
    """The chunk being processed, as the loop body sees it: its first element's position in the
    sequence, and each source's elements (from the chunk's first on)."""
    start: ir.Expr
    buffers: dict[tuple[int | str, str], ir.Var] = field(default_factory=dict)  # by source key


@dataclass(eq=False)
class SeqVal:
    """A sequence at compile time. `length` is its length where the program knows it (a
    sequence of an array's elements), None where host sources give it; `elem(view, k)` is
    element k of the chunk `view`; `plain`, the source whose elements it is as they are."""
    sources: tuple[ir.StreamSource, ...]
    length: ir.Expr | None
    elem: Callable[[ChunkView, ir.Expr], object]
    plain: ir.StreamSource | None = None


def builtins(lw, t: Type) -> dict[str, tuple[int, Callable]]:
    """The sequence builtins, as fcl.il.builtins's table: name: (arity, implementation)."""
    def stream_in(xs: Pull):
        return SeqVal((), xs.length, lambda view, k: xs.fn(mk_bin("+", view.start, k, I)))

    def map_seq(f, s: SeqVal):
        return SeqVal(s.sources, s.length, lambda view, k: lw.apply(f, s.elem(view, k)))

    def map_seq_m(f, s: SeqVal):
        return SeqVal(s.sources, s.length,
                      lambda view, k: lw.run(lw.apply(f, s.elem(view, k))))

    def zip_with_seq(f, a: SeqVal, b: SeqVal):
        length = a.length if a.length is not None else b.length
        if a.length is not None and b.length is not None and lw.checks:
            lw.fail(mk_bin("!=", a.length, b.length, B), checks.SEQ_LENGTHS, [a.length, b.length])
        sources = _merged(a.sources + b.sources)
        return SeqVal(sources, length, lambda view, k: lw.apply(lw.apply(f, a.elem(view, k)),
                                                                 b.elem(view, k)))

    def windows(size, step, s: SeqVal):
        if not (isinstance(size, ir.Const) and isinstance(step, ir.Const)) \
                or size.value < 1 or step.value < 1:
            raise FCLError("windows needs a size and a step that are positive constants (a "
                           "chunk's windows reach into the next chunk by size - step elements)",
                           lw.user_span())
        n, m = int(size.value), int(step.value)
        if any(src.role != "elements" for src in s.sources):
            raise FCLError("windows of a sequence made of irregular rows are not supported: "
                           "take the windows of their lengths, say, and zip them with the rows",
                           lw.user_span())
        sources = tuple(replace(src, scale=src.scale * m, extra=src.scale * (n - m) + src.extra)
                        for src in s.sources)
        length = None
        if s.length is not None:
            enough = mk_bin(">=", s.length, size, B)
            count = mk_bin("+", mk_bin("/", mk_bin("-", s.length, size, I), step, I),
                           ir.Const(1, I), I)
            length = lw.declare("windows", ir.Select(enough, count, ir.Const(0, I), I))

        def elem(view: ChunkView, k: ir.Expr):
            first = mk_bin("*", k, step, I)
            return Pull(size, lambda i: s.elem(view, mk_bin("+", first, i, I)))
        return SeqVal(sources, length, elem)

    def fold_seq(f, z, s: SeqVal):
        def run():
            return _fold(lw, f, z, s, _elem_type(z))
        return Prog(run, lw.user_span())

    def collect(s: SeqVal):
        def run():
            return _collect(lw, s, elem_type(result_type(t)))
        return Prog(run, lw.user_span())

    def stream_file(path):
        elem = chase(result_type(t))
        assert isinstance(elem, TSeq)
        return _plain(ir.StreamSource(path, il_type(elem.elem), span=lw.user_span()))

    def segments_seq(lengths: SeqVal, values: SeqVal):
        if lengths.plain is None or values.plain is None:
            raise FCLError("segmentsSeq takes sequences read from the host as they are (a "
                           "sequence argument or streamFile): a chunk's rows must be cut before "
                           "anything runs on the device", lw.user_span())
        starts = ir.StreamSource(lengths.plain.where, ir.INT, role="starts")
        elements = ir.StreamSource(values.plain.where, values.plain.elem, role="rows",
                                   by=lengths.plain.where)

        def elem(view: ChunkView, k: ir.Expr):
            first = ir.Index(view.buffers[starts.key], k)
            after = ir.Index(view.buffers[starts.key], mk_bin("+", k, ir.Const(1, I), I))
            return Pull(mk_bin("-", after, first, I),
                        lambda i: ir.Index(view.buffers[elements.key], mk_bin("+", first, i, I)))
        return SeqVal((starts, elements), None, elem)

    return {"streamIn": (1, stream_in), "streamFile": (1, stream_file), "mapSeq": (2, map_seq),
            "mapSeqM": (2, map_seq_m), "zipWithSeq": (3, zip_with_seq), "windows": (3, windows),
            "foldSeq": (3, fold_seq), "collect": (1, collect), "segmentsSeq": (2, segments_seq)}


def argument(position: int, elem: str) -> SeqVal:
    """An entry point's sequence argument (fcl.python): numpy arrays, memmaps or iterators."""
    return _plain(ir.StreamSource(position, elem))


def _plain(source: ir.StreamSource) -> SeqVal:
    return SeqVal((source,), None, lambda view, k: ir.Index(view.buffers[source.key], k),
                  source)


def _merged(sources: tuple[ir.StreamSource, ...]) -> tuple[ir.StreamSource, ...]:
    """The sources of zipped sequences, one per place they come from: a chunk's buffer holds
    what every use of it reads (windows of one step, the widest's extra elements)."""
    found: dict[tuple[int | str, str], ir.StreamSource] = {}
    for src in sources:
        old = found.get(src.key)
        if old is not None and old.scale != src.scale:
            raise FCLError("zipWithSeq cannot combine windows of different steps over one "
                           "source: their chunks would need different elements")
        if old is None or src.extra > old.extra:
            found[src.key] = src
    return tuple(found.values())


def _elem_type(z) -> str:
    t = ir.type_of(z) if isinstance(z, ir.Expr) else None
    if not isinstance(t, str):
        raise FCLError("internal: foldSeq folds ints, doubles or bools")
    return t


def _loop(lw, s: SeqVal, bytes_per_element: float,
          body: Callable[[ChunkView, ir.Var, ir.Stream], None], tile: int = 1) -> ir.Stream:
    """The loop over the chunks of s, each a multiple of `tile` elements but the last:
    body(view, count, stream) writes a chunk's code."""
    lw.counter += 1
    stream = ir.Stream(lw.counter, s.sources, bytes_per_element, tile)
    count, start = lw.fresh("chunk", I), lw.fresh("first", I)
    view = ChunkView(start)
    lengths = {}
    for src in s.sources:
        view.buffers[src.key] = lw.fresh("chunkdata", ir.ArrayType(src.elem))
        lengths[src.key] = lw.fresh("chunkdatalen", I)
    for var in (count, start, *lengths.values()):
        lw.emit(ir.Declare(var, ir.Const(0, I)))
    bound = s.length if s.length is not None else ir.Const(-1, I)
    with lw.capture() as test:
        lw.emit(ir.Chunk(count, None, -1, stream=stream, what="count", bound=bound))
    with lw.capture() as chunk:
        lw.emit(ir.Chunk(start, None, -1, stream=stream, what="start"))
        for position, src in enumerate(s.sources):
            lw.emit(ir.Chunk(view.buffers[src.key], lengths[src.key], position,
                             stream=stream, what="data"))
        body(view, count, stream)
    lw.emit(ir.While(test, mk_bin(">", count, ir.Const(0, I), B), chunk))
    return stream


def _fold(lw, f, z: ir.Expr, s: SeqVal, elem: str):
    """foldSeq: per chunk, a work-group folds each tile as a tree in local memory, then one
    work-item folds the tiles' values into the accumulator, which stays on the device from
    chunk to chunk."""
    acc = lw.fresh("folded", ir.ArrayType(elem))
    lw.emit(ir.Alloc(acc, ir.Const(1, I), "grid"))
    first = lw.fresh("t", I)
    lw.emit(ir.ParFor("grid", first, ir.Const(1, I), [ir.Store(acc, ir.Const(0, I), z)]))
    tile = ir.Const(FOLD_TILE, I)

    def body(view: ChunkView, count: ir.Var, stream: ir.Stream) -> None:
        tiles = lw.declare("tiles", mk_bin("/", mk_bin("+", count, ir.Const(FOLD_TILE - 1, I), I),
                                           tile, I))
        values = lw.fresh("tilevalues", ir.ArrayType(elem))
        lw.emit(ir.Alloc(values, tiles, "grid"))
        t = lw.fresh("t", I)
        with lw.capture() as per_tile, lw.parallel(checks.GROUP, t):
            staged = lw.fresh("tile", ir.ArrayType(elem))
            lw.emit(ir.Alloc(staged, tile, "block"))
            i = lw.fresh("i", I)
            with lw.capture() as load, lw.parallel(checks.LOCAL, i):
                at = lw.declare("at", mk_bin("+", mk_bin("*", t, tile, I), i, I))
                with lw.capture() as inside:
                    element = s.elem(view, at)
                    assert isinstance(element, ir.Expr)  # foldSeq's type: base types
                    lw.emit(ir.Store(staged, i, element))
                lw.emit(ir.If(mk_bin("<", at, count, B), inside, [ir.Store(staged, i, z)]))
            lw.emit(ir.ParFor("block", i, tile, load))
            half = FOLD_TILE // 2
            while half:  # pairs `half` apart, halved until one value is left
                j = lw.fresh("j", I)
                with lw.capture() as combine, lw.parallel(checks.LOCAL, j):
                    other = mk_bin("+", j, ir.Const(half, I), I)
                    lw.emit(ir.Store(staged, j, lw.apply(lw.apply(f, ir.Index(staged, j)),
                                                          ir.Index(staged, other))))
                lw.emit(ir.ParFor("block", j, ir.Const(half, I), combine))
                half //= 2
            k = lw.fresh("k", I)
            lw.emit(ir.ParFor("block", k, ir.Const(1, I),
                              [ir.Store(values, t, ir.Index(staged, ir.Const(0, I)))]))
        lw.emit(ir.Distribute("grid", t, tiles, per_tile,
                              note=f"a work-group folds a tile of {FOLD_TILE} elements as a "
                                   "tree"))
        _carry(lw, f, acc, values, tiles, elem)

    _loop(lw, s, ir.ITEM_BYTES[elem] / FOLD_TILE, body, FOLD_TILE)
    return lw.declare("folded", ir.Index(acc, ir.Const(0, I)))


def _carry(lw, f, acc: ir.Var, values: ir.Var, tiles: ir.Expr, elem: str) -> None:
    """The tiles' values folded into the accumulator, in order: a work-group moves them into
    local memory FOLD_TILE at a time, side by side, and one work-item folds each batch there
    (the fold is sequential; its loads need not be)."""
    g = lw.fresh("g", I)
    tile = ir.Const(FOLD_TILE, I)
    zero = ir.Const(0, I)
    with lw.capture() as group, lw.parallel(checks.GROUP, g):
        batch = lw.fresh("batch", ir.ArrayType(elem))
        running = lw.fresh("running", ir.ArrayType(elem))
        lw.emit(ir.Alloc(batch, tile, "block"))
        lw.emit(ir.Alloc(running, ir.Const(1, I), "block"))
        one = lw.fresh("k", I)
        lw.emit(ir.ParFor("block", one, ir.Const(1, I),
                          [ir.Store(running, zero, ir.Index(acc, zero))]))
        r = lw.fresh("round", I)
        with lw.capture() as each_round:
            i = lw.fresh("i", I)
            with lw.capture() as load:
                at = lw.declare("at", mk_bin("+", mk_bin("*", r, tile, I), i, I))
                lw.emit(ir.If(mk_bin("<", at, tiles, B),
                              [ir.Store(batch, i, ir.Index(values, at))], []))
            lw.emit(ir.ParFor("block", i, tile, load))
            k = lw.fresh("k", I)
            with lw.capture() as fold:
                value = lw.fresh("value", elem)
                lw.emit(ir.Declare(value, ir.Index(running, zero)))
                n = ir.Bin("min", tile, mk_bin("-", tiles, mk_bin("*", r, tile, I), I), I)
                lw.seq_loop(n, lambda j: lw.emit(ir.Assign(
                    value, lw.apply(lw.apply(f, value), ir.Index(batch, j)))))
                lw.emit(ir.Store(running, zero, value))
            lw.emit(ir.ParFor("block", k, ir.Const(1, I), fold))
        rounds = mk_bin("/", mk_bin("+", tiles, ir.Const(FOLD_TILE - 1, I), I), tile, I)
        lw.emit(ir.SeqFor(r, rounds, each_round))
        last = lw.fresh("k", I)
        lw.emit(ir.ParFor("block", last, ir.Const(1, I),
                          [ir.Store(acc, zero, ir.Index(running, zero))]))
    lw.emit(ir.Distribute("grid", g, ir.Const(1, I), group,
                          note="a work-group folds the chunk's tiles into the accumulator, "
                               f"{FOLD_TILE} at a time from local memory"))


def _collect(lw, s: SeqVal, elem: str) -> Pull:
    """collect: each chunk's elements made into a buffer and copied back to the host behind
    the earlier chunks'; after the loop, the whole array is the program's."""
    result, length = lw.fresh("collected", ir.ArrayType(elem)), lw.fresh("collectedlen", I)
    lw.emit(ir.Declare(length, ir.Const(0, I)))

    def body(view: ChunkView, count: ir.Var, stream: ir.Stream) -> None:
        out = lw.fresh("chunkout", ir.ArrayType(elem))
        lw.emit(ir.Alloc(out, count, "grid"))
        k = lw.fresh("k", I)
        with lw.capture() as each, lw.parallel(checks.GLOBAL, k):
            value = s.elem(view, k)
            assert isinstance(value, ir.Expr)  # collect's type: a sequence of base types
            lw.emit(ir.Store(out, k, value))
        lw.emit(ir.ParFor("grid", k, count, each))
        lw.emit(ir.Collect(count, out, stream=stream))

    stream = _loop(lw, s, ir.ITEM_BYTES[elem], body)
    lw.emit(ir.Chunk(result, length, -1, stream=stream, what="collected"))
    return Pull(length, lambda i: ir.Index(result, i))
