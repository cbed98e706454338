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
from fcl.il import ir
from fcl.il.ir import show_expr
from fcl.il.lower import Deferred, Lowerer
from fcl.il.rowchecks import Part, canonical, made_element, made_row, part_of, row_at
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
    key: str | None = None                  # equal for rows known to have this same shape

    def row_end(self, r: ir.Expr) -> ir.Expr:
        return self.start(mk_bin("+", r, ir.Const(1, I), I))


def _c(value: int) -> ir.Const:
    return ir.Const(value, I)


def shape_of(lw: Lowerer, rows: Pull) -> Shape:
    lw.irregular = True  # every irregular array's rows come through here
    count = lw.declare("rows", rows.length)
    r = lw.fresh("r", I)
    with lw.capture() as thrown_away:  # the row's own code is made again where it runs
        length = row_at(rows, r).length
    if not names(length) & declared(thrown_away):
        if r.name not in names(length):
            per_row = lw.declare("rowlen", length)
            return Shape("regular", f"regular rows of {show_expr(per_row)} elements", count,
                         lambda k: mk_bin("*", k, per_row, I),
                         lw.declare("total", mk_bin("*", count, per_row, I)),
                         f"regular {show_expr(rows.length)} {show_expr(length)}")
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
            key = show_expr(rebuild(before, {r.name: ir.Var("row", I)}))
            return Shape("segmented", said, count, start, lw.declare("total", start(count)),
                         f"segmented {show_expr(rows.length)} {key}")
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


def _counted(lw: Lowerer, rows: Pull, count: ir.Expr) -> Shape:
    """A descriptor made by adding up the rows' lengths, for rows whose lengths follow none:
    the lengths written by a work-item per row, then scanned as one flattened row."""
    lengths = lw.fresh("lengths", ir.ArrayType(I))
    lw.emit(ir.Alloc(lengths, count, "grid"))
    r = lw.fresh("r", I)
    with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
        lw.emit(ir.Store(lengths, r, row_at(rows, r).length))
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


class _Flat:
    """The flat code for irregular arrays of one shape: the shape, and each one's elements and
    combining function (several, where reductions over the same rows are made together)."""

    def __init__(self, lw: Lowerer, shape: Shape, parts: list[Part]):
        self.lw, self.shape, self.parts = lw, shape, parts
        tile = _c(ROW_TILE)
        self.tiles = lw.declare("tiles", mk_bin("/", mk_bin("+", shape.total,
                                                            _c(ROW_TILE - 1), I), tile, I))

    def combine(self, part: Part, acc: ir.Expr, value: ir.Expr) -> ir.Expr:
        return self.lw.apply(self.lw.apply(part.f, acc), value)

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

    def fold(self, part: Part, acc: ir.Var, first: ir.Expr, end: ir.Expr, value: Callable,
             each: Callable | None = None) -> None:
        """acc = f(acc, value(k)) for k in [first, end), in order; each(k, acc) after each."""
        lw, k = self.lw, self.lw.fresh("k", I)
        with lw.capture() as body:
            at = lw.declare("at", mk_bin("+", first, k, I))
            lw.emit(ir.Assign(acc, self.combine(part, acc, value(at))))
            if each is not None:
                each(at, acc)
        # The interpreter makes a row's elements, and their checks, before it combines them.
        lw.emit(ir.SeqFor(k, mk_bin("-", end, first, I), body, lockstep=True))

    def piece(self, part: Part, row: Pull, begins: ir.Expr, ends: ir.Expr, t: ir.Expr,
              each: Callable | None) -> ir.Var:
        """The fold of row r's piece in tile t, from its first element, by this work-item."""
        lw = self.lw
        first = lw.declare("first", mk_bin("*", t, _c(ROW_TILE), I))
        end = lw.declare("end", mk_bin("min", ends, mk_bin("+", first, _c(ROW_TILE), I), I))
        running = lw.fresh("piece", part.elem)
        lw.emit(ir.Declare(running, made_element(lw, part, row, mk_bin("-", first, begins, I))))
        if each is not None:
            each(first, running)
        self.fold(part, running, mk_bin("+", first, _c(1), I), end,
                  lambda at: made_element(lw, part, row, mk_bin("-", at, begins, I)), each)
        return running

    def stage_tile(self, t: ir.Var) -> tuple[ir.Expr, ir.Expr, ir.Var, ir.Var, list[ir.Var]]:
        """Work-group t's tile in local memory: each work-item makes elements of it (reads
        side by side), finding each one's row among the few the tile holds. Gives the tile's
        first position, its length, its first and last rows and each part's elements."""
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
        tiles = [lw.fresh("tile", ir.ArrayType(part.elem)) for part in self.parts]
        for values in tiles:
            lw.emit(ir.Alloc(values, _c(ROW_TILE), "block"))
        u = lw.fresh("u", I)
        with lw.capture() as stage:
            row = lw.fresh("row", I)
            lw.emit(ir.Declare(row, ir.Index(rows_of, u)))
            begins = lw.declare("begins", shape.start(row))
            with lw.capture() as element, lw.parallel(checks.GLOBAL, row):
                for part, values in zip(self.parts, tiles):
                    made = made_row(lw, part, row, checked=True)
                    lw.emit(ir.Store(values, u, made_element(lw, part, made, mk_bin(
                        "-", mk_bin("+", first, u, I), begins, I), side_by_side=True)))
            # Always so; said to the prover, which then drops the checks of the row's index
            # into its descriptor (`offsets[r]`) that the row's element makes.
            lw.emit(ir.If(mk_bin("&&", mk_bin(">=", row, _c(0), B),
                                 mk_bin("<", row, shape.rows, B), B), element, []))
        lw.emit(ir.ParFor("block", u, count, stage))
        return first, count, low, high, tiles

    def piece_bounds(self, r: ir.Expr, first: ir.Expr, count: ir.Expr
                     ) -> tuple[ir.Expr, ir.Expr]:
        """Where row r's piece of the tile [first, first + count) lies in it: [from, to)."""
        lw, shape = self.lw, self.shape
        start = lw.declare("from", mk_bin("-", mk_bin("max", shape.start(r), first, I),
                                          first, I))
        end = lw.declare("to", mk_bin("-", mk_bin(
            "min", shape.row_end(r), mk_bin("+", first, count, I), I), first, I))
        return start, end

    def each_piece(self, tile: tuple[ir.Expr, ir.Expr, ir.Var, ir.Var, list[ir.Var]],
                   continued: Callable | None = None, started: Callable | None = None,
                   each_continued: Callable | None = None,
                   each_started: Callable | None = None) -> None:
        """A work-item per row's piece of a staged tile folds it, for each part, in order: the
        piece of the row that began in an earlier tile from its first element, a row that
        begins here from z. each_continued(n, k, acc) and each_started(n, k, acc) see part n's
        fold at the tile's element k; continued(n, acc) and started(n, row, acc) at the end of
        the piece."""
        lw, shape = self.lw, self.shape
        first, count, low, high, tiles = tile
        p = lw.fresh("p", I)

        def seen(callback: Callable | None, n: int) -> Callable | None:
            return None if callback is None else (lambda k, acc: callback(n, k, acc))
        with lw.capture() as body:
            r = lw.fresh("row", I)
            lw.emit(ir.Declare(r, mk_bin("+", low, p, I)))
            begins = lw.declare("begins", shape.start(r))
            start, end = self.piece_bounds(r, first, count)
            accs = [lw.fresh("acc", part.elem) for part in self.parts]
            for part, acc in zip(self.parts, accs):
                lw.emit(ir.Declare(acc, part.z))
            with lw.parallel(checks.GLOBAL, r):
                with lw.capture() as continues:  # the row began in an earlier tile
                    for n, (part, acc, values) in enumerate(zip(self.parts, accs, tiles)):
                        lw.emit(ir.Assign(acc, ir.Index(values, start)))
                        if each_continued is not None:
                            each_continued(n, start, acc)
                        self.fold(part, acc, mk_bin("+", start, _c(1), I), end,
                                  lambda k, values=values: ir.Index(values, k),
                                  seen(each_continued, n))
                        if continued is not None:
                            continued(n, acc)
                with lw.capture() as starts_here:
                    for n, (part, acc, values) in enumerate(zip(self.parts, accs, tiles)):
                        self.fold(part, acc, start, end,
                                  lambda k, values=values: ir.Index(values, k),
                                  seen(each_started, n))
                        if started is not None:
                            started(n, r, acc)
            lw.emit(ir.If(mk_bin("<", start, end, B),
                          [ir.If(mk_bin("<", begins, first, B), continues, starts_here)], []))
        lw.emit(ir.ParFor("block", p, mk_bin("+", mk_bin("-", high, low, I), _c(1), I), body))

    def said(self, how: str) -> str:
        together = f" ({len(self.parts)} reductions of these rows made together)" \
            if len(self.parts) > 1 else ""
        return f"{self.shape.said}, {how}{together}"

    def tile_pieces(self) -> list[tuple[ir.Var, ir.Var]]:
        """A work-group per tile folds each row's piece in it, for each part: heads[t], the
        piece of the row that tile t begins inside (from its first element); firsts[r], row
        r's first piece, from z (for rows that are not empty)."""
        lw = self.lw
        pieces = []
        for part in self.parts:
            heads = lw.fresh("heads", ir.ArrayType(part.elem))
            firsts = lw.fresh("firsts", ir.ArrayType(part.elem))
            lw.emit(ir.Alloc(heads, self.tiles, "grid"))
            lw.emit(ir.Alloc(firsts, self.shape.rows, "grid"))
            pieces.append((heads, firsts))
        t = lw.fresh("t", I)
        with lw.capture() as body:
            self.each_piece(self.stage_tile(t),
                            lambda n, acc: lw.emit(ir.Store(pieces[n][0], t, acc)),
                            lambda n, row, acc: lw.emit(ir.Store(pieces[n][1], row, acc)))
        lw.emit(ir.Distribute("grid", t, self.tiles, body, note=self.said(
            f"flattened: a work-group per tile of {ROW_TILE} elements reads them side by side "
            "into local memory, then a work-item per row's piece folds it")))
        return pieces

    def write_tile(self, first: ir.Expr, count: ir.Expr, local: ir.Var, target: ir.Var
                   ) -> None:
        """A work-item per element copies a tile from local memory to its place in `target`."""
        lw, u = self.lw, self.lw.fresh("u", I)
        at = mk_bin("+", first, u, I)
        # Always inside; the test says so to the IL verifier, whose ranges cannot follow `count`.
        lw.emit(ir.ParFor("block", u, count, [ir.If(mk_bin("<", at, self.shape.total, B), [
            ir.Store(target, at, ir.Index(local, u))], [])]))

    def each_row(self, pieces: list[tuple[ir.Var, ir.Var]] | None, before_tile: Callable,
                 done: Callable, each: Callable | None = None) -> None:
        """One work-item per row: for each part, acc = z folded with the row's first piece,
        then with the pieces of the tiles that begin inside the row: from tile_pieces, or, not
        flattened (None), folded here. before_tile(n, t, acc), each(n, position, value) and
        done(n, r, acc) see part n's way."""
        lw, shape = self.lw, self.shape
        r = lw.fresh("r", I)
        with lw.capture() as body, lw.parallel(checks.GLOBAL, r):
            begins = lw.declare("begins", shape.start(r))
            ends = lw.declare("ends", shape.row_end(r))
            tile = _c(ROW_TILE)
            first_tile = lw.declare("tile", mk_bin("/", begins, tile, I))
            last_tile = mk_bin("/", mk_bin("-", ends, _c(1), I), tile, I)
            later = mk_bin("-", last_tile, first_tile, I)
            count = lw.declare("later", mk_bin("max", ir.Select(
                mk_bin(">", ends, begins, B), later, _c(0), I), _c(0), I))
            for n, part in enumerate(self.parts):
                done(n, r, self.part_of_row(n, part, r, begins, ends, first_tile, count,
                                            pieces, before_tile, each))
        how = "flattened: a work-item per row combines its pieces, one per tile" \
            if pieces is not None \
            else \
            "not flattened (for a CPU, or --no-flatten): a work-item per row folds the whole row"
        lw.emit(ir.ParFor("grid", r, shape.rows, body, note=self.said(how)))

    def part_of_row(self, n: int, part: Part, r: ir.Var, begins: ir.Expr, ends: ir.Expr,
                    first_tile: ir.Expr, count: ir.Expr,
                    pieces: list[tuple[ir.Var, ir.Var]] | None, before_tile: Callable,
                    each: Callable | None) -> ir.Var:
        """Part n's value of row r (see each_row)."""
        lw, tile = self.lw, _c(ROW_TILE)
        acc = lw.fresh("acc", part.elem)
        lw.emit(ir.Declare(acc, part.z))
        seen = None if each is None else (lambda at, value: each(n, at, value))
        if pieces is not None:
            lw.emit(ir.If(mk_bin(">", ends, begins, B),
                          [ir.Assign(acc, ir.Index(pieces[n][1], r))], []))
        else:
            piece_end = lw.declare("piece", mk_bin(
                "min", ends, mk_bin("*", mk_bin("+", first_tile, _c(1), I), tile, I), I))
            row = made_row(lw, part, r, checked=True)
            self.fold(part, acc, begins, piece_end,
                      lambda at: made_element(lw, part, row, mk_bin("-", at, begins, I)), seen)
        k = lw.fresh("k", I)
        with lw.capture() as step:
            t = lw.declare("t", mk_bin("+", mk_bin("+", first_tile, _c(1), I), k, I))
            before_tile(n, t, acc)
            if pieces is not None:
                lw.emit(ir.Assign(acc, self.combine(part, acc, ir.Index(pieces[n][0], t))))
            else:
                running = None if seen is None else \
                    (lambda at, value: seen(at, self.combine(part, acc, value)))
                lw.emit(ir.Assign(acc, self.combine(
                    part, acc, self.piece(part, row, begins, ends, t, running))))
        lw.emit(ir.SeqFor(k, count, step))
        return acc


MOST_TOGETHER = 4  # reductions made together: each needs its own tile of local memory


@dataclass
class _Reductions:
    """Reductions of rows of one shape, made together when the code after the first lets them
    wait (fcl.il.lower.Deferred): one kernel marks each tile's rows and reads all their
    elements; one work-item per row combines every part's pieces."""
    lw: Lowerer
    shape: Shape
    parts: list[Part]
    results: list[ir.Var]  # each part's

    def make(self) -> None:
        lw = self.lw
        made: set[str] = set()
        for part in self.parts:
            for kernel in part.checks:
                # A part's check kernel can be an earlier part's over again (the same rows of
                # another array): then it cannot fail where that one did not.
                text = canonical(kernel)
                if text not in made:
                    made.add(text)
                    lw.emit(kernel)
        flat = _Flat(lw, self.shape, self.parts)
        pieces = flat.tile_pieces() if lw.flatten else None
        for result in self.results:
            lw.emit(ir.Alloc(result, self.shape.rows, "grid"))
        flat.each_row(pieces, lambda n, t, acc: None,
                      lambda n, r, acc: lw.emit(ir.Store(self.results[n], r, acc)))

    def takes(self, shape: Shape, part: Part, arrays: set[str]) -> bool:
        """Whether `part` can be made with these: rows of the same shape, reading nothing
        these make, and checks that fail in the same order together as apart (the first
        reduction's elements unchecked, or the new one checking nothing)."""
        return (shape.key is not None and shape.key == self.shape.key
                and len(self.parts) < MOST_TOGETHER and not part.mentions & arrays
                and not (any(p.element_fails for p in self.parts)
                         and (bool(part.checks) or part.element_fails)))


def reduce_rows(lw: Lowerer, f, z: ir.Expr, rows: Pull, elem: str) -> Pull:
    """Each row folded, in the order of fcl.rowtiles. The kernels wait (fcl.il.lower.Deferred)
    for a next reduction of rows of the same shape to join them."""
    shape = shape_of(lw, rows)
    part = part_of(lw, shape.rows, shape.said, rows, f, z, elem)
    result = lw.fresh("reduced", ir.ArrayType(elem))
    waiting = lw.waiting()
    if waiting is not None and isinstance(waiting.owner, _Reductions) \
            and waiting.owner.takes(shape, part, waiting.names):
        waiting.owner.parts.append(part)
        waiting.owner.results.append(result)
        waiting.names.add(result.name)
    else:
        group = _Reductions(lw, shape, [part], [result])
        lw.defer(Deferred(group.make, {result.name}, owner=group))
    return Pull(shape.rows, lambda i: ir.Index(result, i))


def scan_rows(lw: Lowerer, f, z: ir.Expr, rows: Pull, elem: str) -> Pull:
    """Each row's inclusive scan, in the rows' concatenation. An element of a row's first piece
    is the fold from z; in a later tile t, f(carry[t], the fold of the tile's piece up to it),
    carry[t] being the row's fold before tile t (as reduceRows combines it)."""
    shape = shape_of(lw, rows)
    part = part_of(lw, shape.rows, shape.said, rows, f, z, elem)
    lw.emit_all(part.checks)
    flat = _Flat(lw, shape, [part])
    scanned = lw.fresh("scanned", ir.ArrayType(elem))
    if not lw.flatten:
        lw.emit(ir.Alloc(scanned, shape.total, "grid"))
        flat.each_row(None, lambda n, t, acc: None, lambda n, r, acc: None,
                      lambda n, at, value: lw.emit(ir.Store(scanned, at, value)))
        return Pull(shape.total, lambda i: ir.Index(scanned, i))
    pieces = flat.tile_pieces()
    carries = lw.fresh("carries", ir.ArrayType(elem))
    lw.emit(ir.Alloc(carries, flat.tiles, "grid"))
    # Every such t is below the tile count; the test says so to the IL verifier, whose
    # ranges cannot follow a row's tiles.
    flat.each_row(pieces,
                  lambda n, t, acc: lw.emit(ir.If(mk_bin("<", t, flat.tiles, B),
                                                  [ir.Store(carries, t, acc)], [])),
                  lambda n, r, acc: None)
    lw.emit(ir.Alloc(scanned, shape.total, "grid"))
    t = lw.fresh("t", I)
    with lw.capture() as body:
        tile = flat.stage_tile(t)
        first, count = tile[0], tile[1]
        out = lw.fresh("out", ir.ArrayType(elem))
        lw.emit(ir.Alloc(out, _c(ROW_TILE), "block"))
        flat.each_piece(tile, each_continued=lambda n, k, acc: lw.emit(ir.Store(
            out, k, flat.combine(part, ir.Index(carries, t), acc))),
            each_started=lambda n, k, acc: lw.emit(ir.Store(out, k, acc)))
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
    shape = shape_of(lw, rows)
    part = part_of(lw, shape.rows, shape.said, rows, second, ir.Const(ZERO[elem], elem), elem)
    lw.emit_all(part.checks)
    flat = _Flat(lw, shape, [part])
    elements = lw.fresh("elements", ir.ArrayType(elem))
    lw.emit(ir.Alloc(elements, shape.total, "grid"))
    t = lw.fresh("t", I)
    with lw.capture() as body:
        first, count, _, _, tiles = flat.stage_tile(t)
        flat.write_tile(first, count, tiles[0], elements)
    lw.emit(ir.Distribute("grid", t, flat.tiles, body, note=(
        f"{shape.said}, flattened: a work-group per tile of {ROW_TILE} elements reads them "
        "side by side, then writes them out")))
    return Pull(shape.total, lambda i: ir.Index(elements, i))
