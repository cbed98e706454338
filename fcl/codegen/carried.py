"""A running total kept in registers through the loop that adds a blocked reduction to it.

The thesis's tiled matrix product (bench/matmul.fcl, `matmulRect`) is a `power` loop whose
step copies a tile of A and one of B into local memory, sums their products into fresh
accumulators and adds those to the running total, kept in two local arrays taking turns. In a
serial kernel, after `interchange` and `split`:

    seqfor (k < K) {
      tileA[..] = A[..]; tileB[..] = B[..]            (whole tiles, row-major)
      seqfor (j < rows * width) acc[j] = c
      for red: for row: for col: acc[..] = acc[..] op f(tileA, tileB, ..)   (blocking.nest)
      for row: for col: next[..] = cur[..] op2 acc[..]
      swap cur and next
    }

Blocked as it stands, every step loads and stores the accumulators and the totals, and copies
the tiles: on a CPU as much time as the sums (bench/README.md, "Running totals in
registers"). Where the step is exactly that, `blocking` prints the k loop inside its loop over
blocks of rows instead (blocking.Carry): a block's totals are vectors loaded from cur before
the loop and stored into cur after it, and each step starts its accumulators at c, runs the
reduction and combines them into the totals. Each element takes the program's operations in
the program's order, so doubles keep their bits. The tiles' elements are read where they were
copied from: arrays the kernel never writes. cur is no longer swapped with next, so after the
loop it holds the totals; nothing after the loop may read next, the tiles or acc.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from fcl.codegen.blocking import (
    VECTOR_OPS,
    Carry,
    Grid,
    Nest,
    RegisterBlocked,
    grid_store,
    nest,
    vectorizable,
)
from fcl.codegen.kernel import Kernel
from fcl.il import ir
from fcl.il.numeric import evaluate
from fcl.il.simplify import linear, mk_bin, rebuild
from fcl.il.traverse import map_bodies, map_children, mentioned, names


def register_blocks(kernel: Kernel) -> Kernel:
    """The `blocking` step: the serial kernel with each loop `carried` recognises, and each
    other nest that blocking.nest recognises reading a private accumulator array, marked for
    printing with its accumulators in registers; other kernels as they are."""
    if not kernel.serial:
        return kernel
    private = {var.name for var, _ in kernel.private}

    def block(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for k, s in enumerate(stmts):
            found = nest(s) if isinstance(s, ir.SeqFor) else None
            with_totals = carried(s, stmts[:k], stmts[k + 1:], kernel.body, private)
            if with_totals is not None:
                out.append(with_totals)
            elif found is not None and found.acc.name in private:
                out.append(RegisterBlocked([s], found, span=s.span))
            else:
                out.append(map_bodies(s, block))
        return out
    return replace(kernel, body=block(kernel.body))


def carried(s: ir.Stmt, before: list[ir.Stmt], after: list[ir.Stmt], kernel: list[ir.Stmt],
            private: set[str]) -> RegisterBlocked | None:
    """s as a blocked nest with running totals (see the module docstring), when it is such a
    loop: `before` and `after` are the statements around it in its block, `kernel` the
    kernel's body and `private` its private arrays; else None."""
    if not isinstance(s, ir.SeqFor) or len(s.body) < 6:
        return None
    *steps, combine_loop, swap_decl, swap_cur, swap_next = s.body
    swapped = _swap(swap_decl, swap_cur, swap_next)
    combine = grid_store(combine_loop)
    if swapped is None or combine is None or len(steps) < 2:
        return None
    cur, nxt = swapped
    *copies, init_loop, reduction = steps
    found = nest(reduction)
    if found is None or found.acc.name not in private or combine.store.array.name != nxt.name \
            or (found.rows, found.width) != (combine.rows, combine.width):
        return None
    total = _combined(combine, cur, found)
    init = _initial(init_loop, found)
    tiles = _tiles(copies, {t.array.name for t in ir.walk(kernel) if isinstance(t, ir.Store)})
    if total is None or init is None or tiles is None:
        return None
    value = _forwarded(found, tiles)
    aliases = _aliases(before)
    if value is None or cur.name not in aliases or nxt.name not in aliases \
            or not vectorizable(value, found.col.name, ir.elem_of(found.acc)):
        return None
    # What the loop no longer leaves as it did: read by nothing after it (cur holds the totals).
    changed = {found.acc.name, nxt.name, *tiles, aliases[cur.name], aliases[nxt.name]}
    if changed & (mentioned(after) | names(value)) or cur.name in names(value) \
            or {found.acc.name, *tiles} & mentioned(_without(kernel, s)):
        return None
    op, total_left = total
    return RegisterBlocked([s], replace(found, value=value),
                           Carry(s.var, s.bound, init, cur, op, total_left), span=s.span)


def _without(stmts: list[ir.Stmt], s: ir.Stmt) -> list[ir.Stmt]:
    """The statements with s taken out, wherever it is nested."""
    return [map_bodies(t, lambda body: _without(body, s)) for t in stmts if t is not s]


def _swap(decl: ir.Stmt, cur: ir.Stmt, nxt: ir.Stmt) -> tuple[ir.Var, ir.Var] | None:
    """(cur, next) for `t = cur; cur = next; next = t`."""
    if isinstance(decl, ir.Declare) and isinstance(decl.init, ir.Var) \
            and isinstance(cur, ir.Assign) and isinstance(cur.value, ir.Var) \
            and isinstance(nxt, ir.Assign) and isinstance(nxt.value, ir.Var) \
            and cur.var.name == decl.init.name and nxt.var.name == cur.value.name \
            and nxt.value.name == decl.var.name and cur.var.name != nxt.var.name:
        return cur.var, nxt.var
    return None


def _aliases(before: list[ir.Stmt]) -> dict[str, str]:
    """The array variables declared as another array before the loop (cur = buf), with it."""
    return {t.var.name: t.init.name for t in before
            if isinstance(t, ir.Declare) and isinstance(t.init, ir.Var)
            and isinstance(t.var.type, ir.ArrayType)}


def _combined(combine: Grid, cur: ir.Var, found: Nest) -> tuple[str, bool] | None:
    """(op, whether cur is on the left) for `next[e] = cur[e] op acc[e]` (or acc op cur)."""
    value, elem = combine.store.value, ir.elem_of(found.acc)
    if not (isinstance(value, ir.Bin) and value.op in VECTOR_OPS[elem] and value.type == elem
            and ir.elem_of(cur) == elem):
        return None
    for total, acc, total_left in ((value.left, value.right, True),
                                   (value.right, value.left, False)):
        if isinstance(total, ir.Index) and total.array.name == cur.name \
                and isinstance(acc, ir.Index) and acc.array.name == found.acc.name \
                and combine.at_own(total.index) and combine.at_own(acc.index):
            return value.op, total_left
    return None


def _initial(loop: ir.Stmt, found: Nest) -> ir.Expr | None:
    """c, for `seqfor (j < rows * width) acc[j] = c`."""
    if isinstance(loop, ir.SeqFor) and len(loop.body) == 1 \
            and isinstance(loop.bound, ir.Const) \
            and int(loop.bound.value) == found.rows * found.width:
        store = loop.body[0]
        if isinstance(store, ir.Store) and store.array.name == found.acc.name \
                and store.combine is None and isinstance(store.index, ir.Var) \
                and store.index.name == loop.var.name and isinstance(store.value, ir.Const):
            return store.value
    return None


def _tiles(copies: list[ir.Stmt], written: set[str]) -> dict[str, Grid] | None:
    """Each local tile the step allocates and copies whole from a global array nothing in the
    kernel writes, by its name; None if the step does anything else first."""
    sizes: dict[str, int] = {}
    tiles: dict[str, Grid] = {}
    for t in copies:
        if isinstance(t, ir.Alloc) and t.level == "block" and isinstance(t.size, ir.Const):
            sizes[t.var.name] = int(t.size.value)
            continue
        grid = grid_store(t)
        if grid is None:
            return None
        tile, source = grid.store.array.name, grid.store.value
        if sizes.get(tile) != grid.rows * grid.width or tile in tiles \
                or not isinstance(source, ir.Index) or source.array.name in written \
                or source.array.name in sizes:
            return None
        tiles[tile] = grid
    return tiles if tiles and set(tiles) == set(sizes) else None


def _forwarded(found: Nest, tiles: dict[str, Grid]) -> ir.Expr | None:
    """The nest's value with each tile's element read where it was copied from; None where a
    tile's index is no row and column of the tile over the nest's loops."""
    failed = False

    def forward(e: ir.Expr) -> ir.Expr:
        nonlocal failed
        e = map_children(e, forward)
        if not (isinstance(e, ir.Index) and e.array.name in tiles):
            return e
        tile = tiles[e.array.name]
        at = _row_and_column(e.index, tile, found)
        if at is None:
            failed = True
            return e
        source = rebuild(tile.store.value, tile.definitions)
        assert isinstance(source, ir.Index)
        return ir.Index(source.array, rebuild(source.index, {tile.row.name: at[0],
                                                             tile.col.name: at[1]}))

    value = forward(found.value)
    return None if failed else value


def _row_and_column(index: ir.Expr, tile: Grid, found: Nest) -> tuple[ir.Expr, ir.Expr] | None:
    """(row, column) of the tile with row * width + column = index, the terms of index whose
    factor the width divides making the row, checked by evaluation over the nest's loops."""
    if not isinstance(found.red_bound, ir.Const) \
            or names(index) - {found.red.name, found.row.name, found.col.name}:
        return None
    terms, const = linear(index)
    row: ir.Expr = ir.Const(const // tile.width, ir.INT)
    col: ir.Expr = ir.Const(const % tile.width, ir.INT)
    for atom, coef in terms.values():
        if coef % tile.width == 0:
            row = mk_bin("+", row, mk_bin("*", atom, ir.Const(coef // tile.width, ir.INT),
                                          ir.INT), ir.INT)
        else:
            col = mk_bin("+", col, mk_bin("*", atom, ir.Const(coef, ir.INT), ir.INT), ir.INT)
    grid = np.meshgrid(np.arange(int(found.red_bound.value)), np.arange(found.rows),
                       np.arange(found.width), indexing="ij")
    env = dict(zip((found.red.name, found.row.name, found.col.name), grid))
    rows, cols = evaluate(row, env), evaluate(col, env)
    if rows is None or cols is None:
        return None
    rows, cols = np.broadcast_to(rows, grid[0].shape), np.broadcast_to(cols, grid[0].shape)
    inside = (rows >= 0) & (rows < tile.rows) & (cols >= 0) & (cols < tile.width)
    return (row, col) if bool(np.all(inside)) else None
