"""2-D work-groups for kernels that work on tiles, and padding of their local tiles.

A work-group whose work-items split their index into a row and a column (`i >> k`,
`i & 2^k-1`, as tiles do) becomes a 2-D work-group of 2^k columns: CPU compilers vectorize
along dimension 0, where the tile's rows are then contiguous.

Local tiles whose every access is (row, column), the column within a row of the work-group's
width, and some access walks down a column (neighbouring work-items in x at different rows),
get one element of padding per row: the column is then spread over memory banks (GPUs) and
cache sets (CPUs) rather than hitting one. Tiles only read along rows stay unpadded: there
padding would only shift the rows of a warp that spans several (16-wide tiles) into each
other's banks.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fcl.codegen.kernel import (
    Kernel,
    LocalArray,
    Special,
    group_body,
    inline_ints,
    item_split,
    own_index,
    split_widths,
    work_item_ids,
)
from fcl.il import ir
from fcl.il.ranges import Ranges, interval, note
from fcl.il.simplify import linear, mk_bin
from fcl.il.traverse import (
    array_reads,
    assigned,
    map_bodies,
    map_children,
    map_exprs,
    map_stmt_exprs,
    names,
    single_definitions,
)


def tiles(kernel: Kernel) -> Kernel:
    """The kernel for a 2-D work-group (its width recorded) when its work-items use their index
    as (row, column) with one row width only; else unchanged (and a serial kernel always)."""
    if kernel.group_var is None or kernel.serial:
        return kernel
    body, rewrap = group_body(kernel)
    size = kernel.block_size
    items = {s.var.name for s in ir.walk(body)
             if isinstance(s, ir.Declare) and isinstance(s.init, Special)
             and s.init.name == "local_id"}
    widths = split_widths(body, items)
    if size is None or len(widths) != 1 or kernel.abortable \
            or any(a.per_item for a in kernel.locals):
        return kernel
    (width,) = widths
    if not 1 < width < size or size % width:
        return kernel
    kernel = replace(kernel, width=width)
    x, y = Special("local_x"), Special("local_y")
    linear_id = own_index(kernel)

    def rewrite(e: ir.Expr) -> ir.Expr:
        split = item_split(e, items)
        if split is not None and split[1] == width:
            return y if split[0] == ">>" else x
        if isinstance(e, Special) and e.name == "local_id":
            return linear_id
        if isinstance(e, (ir.Bin, ir.Un, ir.Select, ir.Index)):
            return map_children(e, rewrite)
        return e
    return padded(kernel, map_exprs(body, rewrite), rewrap)


def padded(kernel: Kernel, body: list[ir.Stmt],
           rewrap: Callable[[list[ir.Stmt]], list[ir.Stmt]]) -> Kernel:
    """The kernel with the group body `body` (put back by `rewrap`), and the local tiles that
    need it padded (see the module docstring)."""
    width = kernel.width
    assert width is not None and kernel.block_size is not None
    tiled = {a.var.name: a for a in kernel.locals if not a.per_item
             and isinstance(a.size, ir.Const) and a.size.value % width == 0}
    for s in ir.walk(body):  # arrays also reached through pointers keep their layout
        if isinstance(s, (ir.Declare, ir.Assign)) and isinstance(s.var.type, ir.ArrayType):
            value = s.init if isinstance(s, ir.Declare) else s.value
            name = getattr(value, "name", None)
            if name is not None:
                tiled.pop(name, None)
    definitions = single_definitions(body)
    ranges: Ranges = {"<local_x>": (0, width - 1),
                      "<local_y>": (0, kernel.block_size // width - 1)}
    changed = assigned(body)
    for s in ir.walk(body):
        note(s, ranges, changed, lambda e: interval(e, ranges))

    def split(index: ir.Expr) -> tuple[ir.Expr, ir.Expr] | None:
        return _row_column(index, definitions, ranges, width)

    column_walks: set[str] = set()  # tiles with an access whose row follows local_x

    def visit(array: str, index: ir.Expr) -> None:
        if array in tiled:
            found = split(index)
            if found is None:
                tiled.pop(array)
            elif "<local_x>" in names(found[0]):
                column_walks.add(array)

    for read in array_reads(body):
        visit(read.array.name, read.index)
    for s in ir.walk(body):
        if isinstance(s, ir.Store):
            visit(s.array.name, s.index)
    chosen = {name: tile for name, tile in tiled.items() if name in column_walks}
    if not chosen:
        return replace(kernel, body=rewrap(body))

    def place(index: ir.Expr) -> ir.Expr:
        found = split(index)
        assert found is not None  # every access of a chosen tile splits
        row, column = found
        return work_item_ids(mk_bin("+", mk_bin("*", row, ir.Const(width + 1, ir.INT), ir.INT),
                                    column, ir.INT))

    def pad(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Index):
            return ir.Index(e.array, place(e.index) if e.array.name in chosen else pad(e.index))
        if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
            return map_children(e, pad)
        return e

    sizes: dict[str, ir.Expr] = {}
    for name, tile in chosen.items():
        assert isinstance(tile.size, ir.Const)  # only tiles of a known size were chosen
        sizes[name] = ir.Const(int(tile.size.value) // width * (width + 1), ir.INT)
    locals_ = [LocalArray(a.var, sizes[a.var.name], a.per_item, a.span)
               if a.var.name in sizes else a for a in kernel.locals]

    def pad_block(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            new: ir.Stmt
            if isinstance(s, ir.Store) and s.array.name in chosen:
                new = replace(s, index=place(s.index), value=pad(s.value))
            elif isinstance(s, ir.Alloc) and s.var.name in chosen:
                new = replace(s, size=sizes[s.var.name])
            else:
                new = map_stmt_exprs(s, pad)
            out.append(map_bodies(new, pad_block))
        return out
    return replace(kernel, body=rewrap(pad_block(body)), locals=locals_)


def _row_column(index: ir.Expr, definitions: dict[str, ir.Expr],
                ranges: Ranges, width: int) -> tuple[ir.Expr, ir.Expr] | None:
    """(row, column) with index = row * width + column and the column in [0, width), if the
    index (with single definitions inlined) is a sum of that form; else None. Work-item ids
    are variables in them (see inline_ints)."""
    terms, const = linear(inline_ints(index, definitions))
    if const % width:
        return None
    row: ir.Expr = ir.Const(const // width, ir.INT)
    column: ir.Expr = ir.Const(0, ir.INT)
    for atom, coef in terms.values():
        if coef % width == 0:
            row = mk_bin("+", row, mk_bin("*", atom, ir.Const(coef // width, ir.INT), ir.INT),
                         ir.INT)
            continue
        low, high = ranges.get(atom.name, (-1, width)) if isinstance(atom, ir.Var) else (-1, width)
        if coef != 1 or not (isinstance(column, ir.Const) and column.value == 0) \
                or low < 0 or high >= width:
            return None
        column = atom
    return row, column
