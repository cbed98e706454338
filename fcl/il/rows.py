"""Irregular arrays, flattened: `reduceRows`, `scanRows` and `concatRows` over rows of
different lengths.

An irregular array is a pull array of rows (`[['a]]`) whose rows may differ in length, such
as `segments offsets xs`. Its shape is found from the program before any code is made, by
looking at the length of a symbolic row r:

- regular: the length does not depend on r (`splitUp n xs`): row r starts at r * n, and no
  descriptor is needed;
- segmented: the length is S(r + 1) - S(r) for an expression S of r (`offsets[r+1] -
  offsets[r]`): row r starts at S(r) - S(0), read where the descriptor already lies, so
  arrays built on the same offsets share one descriptor;
- counted: anything else; the lengths are written by a work-item per row and added up by a
  flattened scan of them, as one row.

A kernel makes every row once with its checks; then the flat code shares out work by elements,
not rows, in the order fcl.rowtiles fixes. A work-group per tile of ROW_TILE elements of the
rows' concatenation marks each position with its row, reads the elements side by side into
local memory, and folds each row's piece of the tile there; a work-item per row then combines
its pieces, one per tile. Not flattened (`--no-flatten`), a work-item per row folds its whole
row in the same order.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fcl import checks
from fcl.errors import FCLError
from fcl.il import ir
from fcl.il.ir import show_expr
from fcl.il.lower import Lowerer
from fcl.il.simplify import difference, linear, mk_bin, mk_select, rebuild
from fcl.il.traverse import declared, expr_reads, names
from fcl.il.values import ZERO, Prim, Pull
from fcl.rowtiles import ROW_TILE

I, B = ir.INT, ir.BOOL  # noqa: E741  # the code below reads as types


@dataclass(frozen=True)
class Shape:
    kind: str                               # "regular", "segmented" or "counted"
    said: str                               # the shape in words, for the kernels' notes
    rows: ir.Expr                           # how many rows
    start: Callable[[ir.Expr], ir.Expr]     # where row r begins in the concatenation, r <= rows
    total: ir.Expr                          # the elements of all rows

    def row_end(self, r: ir.Expr) -> ir.Expr:
        return self.start(mk_bin("+", r, ir.Const(1, I), I))


def _c(value: int) -> ir.Const:
    return ir.Const(value, I)


def shape_of(lw: Lowerer, rows: Pull) -> Shape:
    count = lw.declare("rows", rows.length)
    r = lw.fresh("r", I)
    with lw.capture() as thrown_away:  # the row's own code is made again where it runs
        length = _row(rows, r).length
    if not names(length) & declared(thrown_away):
        if r.name not in names(length):
            per_row = lw.declare("rowlen", length)
            return Shape("regular", f"regular rows of {show_expr(per_row)} elements", count,
                         lambda k: mk_bin("*", k, per_row, I),
                         lw.declare("total", mk_bin("*", count, per_row, I)))
        before = _earlier_start(length, r)
        if before is not None:
            base = lw.declare("base", rebuild(before, {r.name: _c(0)}))

            def start(k: ir.Expr) -> ir.Expr:
                return mk_bin("-", rebuild(before, {r.name: k}), base, I)
            held = sorted({read.array.name for read in expr_reads(before)})
            formula = show_expr(before)
            said = f"rows segmented by {' and '.join(held)}" if held else \
                f"rows starting at {formula}" if len(formula) <= 60 else \
                "rows starting where a formula of the row says"
            return Shape("segmented", said, count, start, lw.declare("total", start(count)))
    return _counted(lw, rows, count)


def _earlier_start(length: ir.Expr, r: ir.Var) -> ir.Expr | None:
    """S(r), where a row's length is S(r + 1) - S(r): the terms it subtracts (the simplifier
    may have spread them through the sum), if adding one to r in them gives the rest."""
    terms, _ = linear(length)
    subtracted = [(atom, -coef) for atom, coef in terms.values() if coef < 0]
    if not subtracted or any(r.name not in names(atom) for atom, _ in subtracted):
        return None
    before: ir.Expr = _c(0)
    for atom, coef in subtracted:
        before = mk_bin("+", before, mk_bin("*", atom, _c(coef), I), I)
    after = rebuild(before, {r.name: mk_bin("+", r, _c(1), I)})
    return before if difference(mk_bin("-", after, before, I), length) == 0 else None


def _row(rows: Pull, r: ir.Expr) -> Pull:
    row = rows.fn(r)
    if not isinstance(row, Pull):
        raise FCLError("internal: a row of an irregular array is not a pull array")
    return row


def _counted(lw: Lowerer, rows: Pull, count: ir.Expr) -> Shape:
    """A descriptor made by adding up the rows' lengths, for rows whose lengths follow none:
    the lengths written by a work-item per row, then scanned as one flattened row."""
    lengths = lw.fresh("lengths", ir.ArrayType(I))
    lw.emit(ir.Alloc(lengths, count, "grid"))
    r = lw.fresh("r", I)
    with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
        lw.emit(ir.Store(lengths, r, _row(rows, r).length))
    lw.emit(ir.ParFor("grid", r, count, body, note="the rows' lengths follow no descriptor: "
                      "each work-item writes its row's length, to be added up"))
    add = Prim("addi", 2, lambda a, b: mk_bin("+", a, b, I))
    ends = scan_rows(lw, add, _c(0), Pull(_c(1), lambda _: Pull(
        count, lambda i: ir.Index(lengths, i))), I)

    def start(j: ir.Expr) -> ir.Expr:
        return mk_select(mk_bin("==", j, _c(0), B), _c(0),
                         ends.fn(mk_bin("-", j, _c(1), I)), I)
    return Shape("counted", f"rows segmented by the lengths added up in {lengths.name}",
                 count, start, lw.declare("total", start(count)))


def _fails(stmts: list[ir.Stmt]) -> bool:
    return any(isinstance(s, ir.Fail) or any(_fails(getattr(s, name, None) or [])
                                             for name in ir.BODIES) for s in stmts)


class _Flat:
    """The flat code for one irregular array: its shape, its elements, the combining function."""

    def __init__(self, lw: Lowerer, rows: Pull, f, z: ir.Expr, elem: str):
        self.lw, self.rows, self.f, self.z, self.elem = lw, rows, f, z, elem
        self.shape = shape_of(lw, rows)
        self.check_rows()
        tile = _c(ROW_TILE)
        self.tiles = lw.declare("tiles", mk_bin("/", mk_bin("+", self.shape.total,
                                                            _c(ROW_TILE - 1), I), tile, I))

    def check_rows(self) -> None:
        """Each row made once, with its checks (a negative length, where offsets decrease),
        before any kernel relies on the rows' starts rising: a failure stops the program there,
        as in the interpreter, which makes every row first."""
        lw, r = self.lw, self.lw.fresh("r", I)
        with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
            self.row(r)
        self.rows_checked = _fails(body)
        if self.rows_checked:
            lw.emit(ir.ParFor("grid", r, self.shape.rows, body, note=(
                f"{self.shape.said}: each row checked before they are combined")))

    def combine(self, acc: ir.Expr, value: ir.Expr) -> ir.Expr:
        return self.lw.apply(self.lw.apply(self.f, acc), value)

    def row(self, r: ir.Expr, checked: bool = False) -> Pull:
        """Row r, made once by the work-item that reads it, with its checks unless `checked`
        says that check_rows made them (the elements' own checks stay)."""
        lw = self.lw
        with lw.capture() as made:
            row = _row(self.rows, r)
        for s in made:
            if not (checked and self.rows_checked and isinstance(s, ir.Fail)):
                lw.emit(s)
        return row

    def row_of(self, position: ir.Expr, lowest: ir.Expr | None = None,
               above: ir.Expr | None = None) -> ir.Var:
        """The row holding the element at `position` (the last of the rows that begin there),
        searched for among rows [lowest, above)."""
        lw, shape = self.lw, self.shape
        row = lw.fresh("row", I)
        if shape.kind == "regular":
            lw.emit(ir.Declare(row, mk_bin("/", position, shape.start(_c(1)), I)))
            return row
        low, high, middle = lw.fresh("low", I), lw.fresh("high", I), lw.fresh("mid", I)
        lw.emit(ir.Declare(low, _c(0) if lowest is None else lowest))
        lw.emit(ir.Declare(high, shape.rows if above is None else above))
        lw.emit(ir.While([], mk_bin(">", mk_bin("-", high, low, I), _c(1), B), [
            ir.Declare(middle, mk_bin("/", mk_bin("+", low, high, I), _c(2), I)),
            ir.If(mk_bin("<=", shape.start(middle), position, B),
                  [ir.Assign(low, middle)], [ir.Assign(high, middle)])], level="thread"))
        lw.emit(ir.Declare(row, low))
        return row

    def fold(self, acc: ir.Var, first: ir.Expr, end: ir.Expr, value: Callable,
             each: Callable | None = None) -> None:
        """acc = f(acc, value(k)) for k in [first, end), in order; each(k, acc) after each."""
        lw, k = self.lw, self.lw.fresh("k", I)
        with lw.capture() as body:
            at = lw.declare("at", mk_bin("+", first, k, I))
            lw.emit(ir.Assign(acc, self.combine(acc, value(at))))
            if each is not None:
                each(at, acc)
        lw.emit(ir.SeqFor(k, mk_bin("-", end, first, I), body))

    def piece(self, row: Pull, begins: ir.Expr, ends: ir.Expr, t: ir.Expr,
              each: Callable | None) -> ir.Var:
        """The fold of row r's piece in tile t, from its first element, by this work-item."""
        lw = self.lw
        first = lw.declare("first", mk_bin("*", t, _c(ROW_TILE), I))
        end = lw.declare("end", mk_bin("min", ends, mk_bin("+", first, _c(ROW_TILE), I), I))
        running = lw.fresh("piece", self.elem)
        lw.emit(ir.Declare(running, row.fn(mk_bin("-", first, begins, I))))
        if each is not None:
            each(first, running)
        self.fold(running, mk_bin("+", first, _c(1), I), end,
                  lambda at: row.fn(mk_bin("-", at, begins, I)), each)
        return running

    def stage_tile(self, t: ir.Var) -> tuple[ir.Expr, ir.Expr, ir.Var, ir.Var, ir.Var]:
        """Work-group t's tile in local memory: each work-item makes elements of it (reads
        side by side), finding each one's row among the few the tile holds. Gives the tile's
        first position, its length, its first and last rows and the elements."""
        lw, shape = self.lw, self.shape
        first = lw.declare("first", mk_bin("*", t, _c(ROW_TILE), I))
        count = lw.declare("count", mk_bin("-", mk_bin(
            "min", shape.total, mk_bin("+", first, _c(ROW_TILE), I), I), first, I))
        low = self.row_of(first)
        high = self.row_of(mk_bin("-", mk_bin("+", first, count, I), _c(1), I), low)
        # Each position's row, marked by a work-item per row's piece (in local memory): the
        # reads of the elements that follow are then side by side, whatever the rows.
        rows_of = lw.fresh("rowof", ir.ArrayType(I))
        lw.emit(ir.Alloc(rows_of, _c(ROW_TILE), "block"))
        p, k = lw.fresh("p", I), lw.fresh("k", I)
        with lw.capture() as mark:
            r = lw.declare("row", mk_bin("+", low, p, I))
            start, end = self.piece_bounds(r, first, count)
            lw.emit(ir.SeqFor(k, mk_bin("-", end, start, I),
                              [ir.Store(rows_of, mk_bin("+", start, k, I), r)]))
        lw.emit(ir.ParFor("block", p, mk_bin("+", mk_bin("-", high, low, I), _c(1), I), mark))
        values = lw.fresh("tile", ir.ArrayType(self.elem))
        lw.emit(ir.Alloc(values, _c(ROW_TILE), "block"))
        u = lw.fresh("u", I)
        with lw.capture() as stage:
            row = lw.fresh("row", I)
            lw.emit(ir.Declare(row, ir.Index(rows_of, u)))
            begins = lw.declare("begins", shape.start(row))
            with lw.capture() as element, lw.parallel(checks.GLOBAL, row):
                lw.emit(ir.Store(values, u, self.row(row, checked=True).fn(
                    mk_bin("-", mk_bin("+", first, u, I), begins, I))))
            # Always so; said to the prover, which then drops the checks of the row's index
            # into its descriptor (`offsets[r]`) that the row's element makes.
            lw.emit(ir.If(mk_bin("&&", mk_bin(">=", row, _c(0), B),
                                 mk_bin("<", row, shape.rows, B), B), element, []))
        lw.emit(ir.ParFor("block", u, count, stage))
        return first, count, low, high, values

    def piece_bounds(self, r: ir.Expr, first: ir.Expr, count: ir.Expr
                     ) -> tuple[ir.Expr, ir.Expr]:
        """Where row r's piece of the tile [first, first + count) lies in it: [from, to)."""
        lw, shape = self.lw, self.shape
        start = lw.declare("from", mk_bin("-", mk_bin("max", shape.start(r), first, I),
                                          first, I))
        end = lw.declare("to", mk_bin("-", mk_bin(
            "min", shape.row_end(r), mk_bin("+", first, count, I), I), first, I))
        return start, end

    def each_piece(self, tile: tuple[ir.Expr, ir.Expr, ir.Var, ir.Var, ir.Var],
                   continued: Callable | None = None, started: Callable | None = None,
                   each_continued: Callable | None = None,
                   each_started: Callable | None = None) -> None:
        """A work-item per row's piece of a staged tile folds it, in order: the piece of the
        row that began in an earlier tile from its first element, a row that begins here from
        z. each_continued(k, acc) and each_started(k, acc) see the fold at the tile's element
        k; continued(acc) and started(row, acc) at the end of the piece."""
        lw, shape = self.lw, self.shape
        first, count, low, high, values = tile
        p = lw.fresh("p", I)
        with lw.capture() as body:
            r = lw.fresh("row", I)
            lw.emit(ir.Declare(r, mk_bin("+", low, p, I)))
            begins = lw.declare("begins", shape.start(r))
            start, end = self.piece_bounds(r, first, count)
            acc = lw.fresh("acc", self.elem)
            lw.emit(ir.Declare(acc, self.z))
            with lw.parallel(checks.GLOBAL, r):
                with lw.capture() as continues:  # the row began in an earlier tile
                    lw.emit(ir.Assign(acc, ir.Index(values, start)))
                    if each_continued is not None:
                        each_continued(start, acc)
                    self.fold(acc, mk_bin("+", start, _c(1), I), end,
                              lambda k: ir.Index(values, k), each_continued)
                    if continued is not None:
                        continued(acc)
                with lw.capture() as starts_here:
                    self.fold(acc, start, end, lambda k: ir.Index(values, k), each_started)
                    if started is not None:
                        started(r, acc)
            lw.emit(ir.If(mk_bin("<", start, end, B),
                          [ir.If(mk_bin("<", begins, first, B), continues, starts_here)], []))
        lw.emit(ir.ParFor("block", p, mk_bin("+", mk_bin("-", high, low, I), _c(1), I), body))

    def tile_pieces(self) -> tuple[ir.Var, ir.Var]:
        """A work-group per tile folds each row's piece in it: heads[t], the piece of the row
        that tile t begins inside (from its first element); firsts[r], row r's first piece,
        from z (for rows that are not empty)."""
        lw = self.lw
        heads = lw.fresh("heads", ir.ArrayType(self.elem))
        firsts = lw.fresh("firsts", ir.ArrayType(self.elem))
        lw.emit(ir.Alloc(heads, self.tiles, "grid"))
        lw.emit(ir.Alloc(firsts, self.shape.rows, "grid"))
        t = lw.fresh("t", I)
        with lw.capture() as body:
            self.each_piece(self.stage_tile(t), lambda acc: lw.emit(ir.Store(heads, t, acc)),
                            lambda row, acc: lw.emit(ir.Store(firsts, row, acc)))
        lw.emit(ir.Distribute("grid", t, self.tiles, body, note=(
            f"{self.shape.said}, flattened: a work-group per tile of {ROW_TILE} elements reads "
            "them side by side into local memory, then a work-item per row's piece folds it")))
        return heads, firsts

    def write_tile(self, first: ir.Expr, count: ir.Expr, local: ir.Var, target: ir.Var
                   ) -> None:
        """A work-item per element copies a tile from local memory to its place in `target`."""
        lw, u = self.lw, self.lw.fresh("u", I)
        at = mk_bin("+", first, u, I)
        # Always inside; the test says so to the IL verifier, whose ranges cannot follow `count`.
        lw.emit(ir.ParFor("block", u, count, [ir.If(mk_bin("<", at, self.shape.total, B), [
            ir.Store(target, at, ir.Index(local, u))], [])]))

    def each_row(self, pieces: tuple[ir.Var, ir.Var] | None, before_tile: Callable,
                 done: Callable, each: Callable | None = None) -> None:
        """One work-item per row: acc = z folded with the row's first piece, then with the
        pieces of the tiles that begin inside the row: from tile_pieces, or, not flattened
        (None), folded here. before_tile(t, acc), each(position, value) and done(r, acc) see
        the way."""
        lw, shape = self.lw, self.shape
        r = lw.fresh("r", I)
        with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
            begins = lw.declare("begins", shape.start(r))
            ends = lw.declare("ends", shape.row_end(r))
            tile = _c(ROW_TILE)
            first_tile = lw.declare("tile", mk_bin("/", begins, tile, I))
            acc = lw.fresh("acc", self.elem)
            lw.emit(ir.Declare(acc, self.z))
            if pieces is not None:
                lw.emit(ir.If(mk_bin(">", ends, begins, B),
                              [ir.Assign(acc, ir.Index(pieces[1], r))], []))
            else:
                piece_end = lw.declare("piece", mk_bin(
                    "min", ends, mk_bin("*", mk_bin("+", first_tile, _c(1), I), tile, I), I))
                row = self.row(r, checked=True)
                self.fold(acc, begins, piece_end, lambda at: row.fn(mk_bin("-", at, begins, I)),
                          each)
            last_tile = mk_bin("/", mk_bin("-", ends, _c(1), I), tile, I)
            later = mk_bin("-", last_tile, first_tile, I)
            count = lw.declare("later", mk_bin("max", ir.Select(
                mk_bin(">", ends, begins, B), later, _c(0), I), _c(0), I))
            k = lw.fresh("k", I)
            with lw.capture() as step:
                t = lw.declare("t", mk_bin("+", mk_bin("+", first_tile, _c(1), I), k, I))
                before_tile(t, acc)
                if pieces is not None:
                    lw.emit(ir.Assign(acc, self.combine(acc, ir.Index(pieces[0], t))))
                else:
                    seen = None if each is None else \
                        (lambda at, running: each(at, self.combine(acc, running)))
                    lw.emit(ir.Assign(acc, self.combine(
                        acc, self.piece(row, begins, ends, t, seen))))
            lw.emit(ir.SeqFor(k, count, step))
            done(r, acc)
        how = "flattened: a work-item per row combines its pieces, one per tile" \
            if pieces is not None \
            else \
            "not flattened (--no-flatten): a work-item per row folds the whole row"
        lw.emit(ir.ParFor("grid", r, shape.rows, body, note=f"{shape.said}, {how}"))


def reduce_rows(lw: Lowerer, f, z: ir.Expr, rows: Pull, elem: str) -> Pull:
    flat = _Flat(lw, rows, f, z, elem)
    pieces = flat.tile_pieces() if lw.flatten else None
    result = lw.fresh("reduced", ir.ArrayType(elem))
    lw.emit(ir.Alloc(result, flat.shape.rows, "grid"))
    flat.each_row(pieces, lambda t, acc: None, lambda r, acc: lw.emit(ir.Store(result, r, acc)))
    return Pull(flat.shape.rows, lambda i: ir.Index(result, i))


def scan_rows(lw: Lowerer, f, z: ir.Expr, rows: Pull, elem: str) -> Pull:
    """Each row's inclusive scan, in the rows' concatenation. An element of a row's first piece
    is the fold from z; in a later tile t, f(carry[t], the fold of the tile's piece up to it),
    carry[t] being the row's fold before tile t (as reduceRows combines it)."""
    flat = _Flat(lw, rows, f, z, elem)
    shape = flat.shape
    scanned = lw.fresh("scanned", ir.ArrayType(elem))
    if not lw.flatten:
        lw.emit(ir.Alloc(scanned, shape.total, "grid"))
        flat.each_row(None, lambda t, acc: None, lambda r, acc: None,
                      lambda at, value: lw.emit(ir.Store(scanned, at, value)))
        return Pull(shape.total, lambda i: ir.Index(scanned, i))
    pieces = flat.tile_pieces()
    carries = lw.fresh("carries", ir.ArrayType(elem))
    lw.emit(ir.Alloc(carries, flat.tiles, "grid"))
    # Every such t is below the tile count; the test says so to the IL verifier, whose
    # ranges cannot follow a row's tiles.
    flat.each_row(pieces,
                  lambda t, acc: lw.emit(ir.If(mk_bin("<", t, flat.tiles, B),
                                               [ir.Store(carries, t, acc)], [])),
                  lambda r, acc: None)
    lw.emit(ir.Alloc(scanned, shape.total, "grid"))
    t = lw.fresh("t", I)
    with lw.capture() as body:
        tile = flat.stage_tile(t)
        first, count = tile[0], tile[1]
        out = lw.fresh("out", ir.ArrayType(elem))
        lw.emit(ir.Alloc(out, _c(ROW_TILE), "block"))
        flat.each_piece(tile, each_continued=lambda k, acc: lw.emit(ir.Store(
            out, k, flat.combine(ir.Index(carries, t), acc))),
            each_started=lambda k, acc: lw.emit(ir.Store(out, k, acc)))
        flat.write_tile(first, count, out, scanned)
    lw.emit(ir.Distribute("grid", t, flat.tiles, body, note=(
        f"{shape.said}, flattened: a work-group per tile of {ROW_TILE} elements scans each "
        "row's piece in local memory, from the row's value before the tile")))
    return Pull(shape.total, lambda i: ir.Index(scanned, i))


def concat_rows(lw: Lowerer, rows: Pull, elem: str) -> Pull:
    """The rows' elements, one row after another: each tile staged and written out as it is,
    or, not flattened, the scan whose step keeps the element (a work-item per row)."""
    second = Prim("second", 2, lambda kept, element: element)
    if not lw.flatten:
        return scan_rows(lw, second, ir.Const(ZERO[elem], elem), rows, elem)
    flat = _Flat(lw, rows, second, ir.Const(ZERO[elem], elem), elem)
    shape = flat.shape
    elements = lw.fresh("elements", ir.ArrayType(elem))
    lw.emit(ir.Alloc(elements, shape.total, "grid"))
    t = lw.fresh("t", I)
    with lw.capture() as body:
        first, count, _, _, values = flat.stage_tile(t)
        flat.write_tile(first, count, values, elements)
    lw.emit(ir.Distribute("grid", t, flat.tiles, body, note=(
        f"{shape.said}, flattened: a work-group per tile of {ROW_TILE} elements reads them "
        "side by side, then writes them out")))
    return Pull(shape.total, lambda i: ir.Index(elements, i))
