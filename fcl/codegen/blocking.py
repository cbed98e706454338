"""Register blocking: a reduction into rows of private accumulators, held in OpenCL vectors.

serial.py's `interchange` leaves a tiled matrix product's reduction, in a serial kernel, as

    for k < K: for row < R: for col < W: acc[row * W + col] = acc[row * W + col] + f(k, row, col)

with `acc` a private array. The C compiler vectorizes the column loop but loads and stores the
accumulators in every step of k: LLVM 15 leaves its loop of two vector iterations a loop, and the
array in memory. The `blocking` step (`carried.register_blocks`) marks such a nest
(`RegisterBlocked`), and `emit` prints it with the k loop inside a loop over blocks of rows: each
block's accumulators are vectors of 32 bytes (8 ints or floats, 4 doubles) loaded before the k
loop, updated in registers and stored after it. f's reads along the column become vector loads;
what does not depend on the column stays scalar (an element of A's row, read once per row of the
block and step of k). The vectors are OpenCL's own, so no C compiler's vectoriser is relied on.

Every element still takes its steps of k in the program's order, and each step's operations are
the program's, in uint for ints (which wrap) and with contraction off for doubles: results keep
their bits. Other nests are left alone, and the kernel's other loops are printed as before.
On the bench's 512 x 512 product (bench/README.md, "Register blocking") the kernel took 0.45 of
its time on PoCL 3.1.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fcl.il import ir
from fcl.il.numeric import evaluate
from fcl.il.simplify import mk_bin, rebuild
from fcl.il.traverse import expr_reads, names

VECTOR_BYTES = 32  # one AVX register; wider vectors crash LLVM 14 in some kernels (bench/README)
REGISTERS = 8  # accumulator vectors per block: with the column's loads, they fit 16 registers
ELEMENT = {ir.INT: ("uint", 4), ir.FLOAT: ("float", 4), ir.DOUBLE: ("double", 8)}
# Operations printed on vectors: those of ints wrap in uint; floating ones as the program's.
VECTOR_OPS = {ir.INT: frozenset(("+", "-", "*", "&", "|", "^")),
              ir.FLOAT: frozenset(("+", "-", "*", "/")), ir.DOUBLE: frozenset(("+", "-", "*", "/"))}


@dataclass(eq=False)
class RegisterBlocked(ir.Stmt):
    """`body`, one loop nest, printed with its accumulators in vector registers as `found`
    (what `nest` made of it) says (see the module docstring); the verifier and traced kernels
    see the nest itself."""

    body: list[ir.Stmt]
    found: Nest
    carry: Carry | None = None

    def show_il(self, indent: int) -> str:
        n = self.found
        head = f"blocked in registers: {n.block} rows x {n.width} of {n.acc.name}, " \
               f"vectors of {n.lanes}"
        if self.carry is not None:
            head += f", running totals of {self.carry.total.name} through {self.carry.loop.name}"
        return ir.show_block(head, self.body, indent)


@dataclass(frozen=True)
class Carry:
    """A loop around the nest (fcl.codegen.carried): each of its steps sets the accumulators
    to `init`, runs the nest, and combines them into `total` (`total op acc`, or `acc op total`
    unless total_left), the running totals held in vectors through the loop."""

    loop: ir.Var
    bound: ir.Expr
    init: ir.Expr
    total: ir.Var
    op: str
    total_left: bool


@dataclass(frozen=True)
class Nest:
    """`for red < red_bound: for row < rows: for col < width: acc[row * width + col] = acc[...]
    op value` (or `value op acc[...]`), the rows' and columns' int declarations inlined into
    `value`."""

    red: ir.Var
    red_bound: ir.Expr
    row: ir.Var
    rows: int
    col: ir.Var
    width: int
    acc: ir.Var
    op: str
    acc_left: bool
    value: ir.Expr
    lanes: int
    block: int


def nest(s: ir.Stmt) -> Nest | None:
    """The nest s is (see Nest), when its accumulators can be blocked; else None."""
    if not isinstance(s, ir.SeqFor) or len(s.body) != 1:
        return None
    grid = grid_store(s.body[0])
    if grid is None:
        return None
    acc, elem, rows, width = grid.store.array, ir.elem_of(grid.store.array), grid.rows, grid.width
    if elem not in ELEMENT:
        return None
    lanes = VECTOR_BYTES // ELEMENT[elem][1]
    if width % lanes:
        return None
    block = next((b for b in (4, 2, 1) if rows % b == 0 and b * width // lanes <= REGISTERS),
                 None)
    if block is None:
        return None
    value = grid.store.value
    if not (isinstance(value, ir.Bin) and value.op in VECTOR_OPS[elem] and value.type == elem):
        return None
    acc_left = isinstance(value.left, ir.Index) and value.left.array.name == acc.name
    update, rest = (value.left, value.right) if acc_left else (value.right, value.left)
    if not (isinstance(update, ir.Index) and update.array.name == acc.name
            and grid.at_own(update.index)):
        return None
    rest = rebuild(rest, grid.definitions)
    loops = {s.var.name, grid.row.name, grid.col.name}
    if acc.name in names(rest) or names(s.bound) & loops \
            or not vectorizable(rest, grid.col.name, elem):
        return None
    return Nest(s.var, s.bound, grid.row, rows, grid.col, width, acc, value.op,
                acc_left, rest, lanes, block)


@dataclass(frozen=True)
class Grid:
    """`for row < rows: for col < width: array[row * width + col] = value`, with int
    declarations (no reads) before the column loop and the store; `definitions` inlines them."""

    row: ir.Var
    rows: int
    col: ir.Var
    width: int
    store: ir.Store
    definitions: dict[str, ir.Expr]

    def at_own(self, index: ir.Expr) -> bool:
        """Whether `index`, read inside the nest, is the element the store writes."""
        return ir.expr_key(rebuild(index, self.definitions)) == \
            ir.expr_key(rebuild(self.store.index, self.definitions))


def grid_store(s: ir.Stmt) -> Grid | None:
    """The Grid s is, its store's index checked row-major by evaluation; else None."""
    if not isinstance(s, ir.SeqFor) or not isinstance(s.bound, ir.Const):
        return None
    definitions: dict[str, ir.Expr] = {}
    *row_decls, col_loop = s.body
    if not isinstance(col_loop, ir.SeqFor) or not isinstance(col_loop.bound, ir.Const) \
            or not _int_declarations(row_decls, definitions):
        return None
    *col_decls, store = col_loop.body
    if not isinstance(store, ir.Store) or store.combine is not None \
            or not _int_declarations(col_decls, definitions):
        return None
    rows, width = int(s.bound.value), int(col_loop.bound.value)
    own = rebuild(store.index, definitions)
    if rows < 1 or width < 1 or store.array.name in names(own) \
            or not _is_row_major(own, s.var, col_loop.var, rows, width):
        return None
    return Grid(s.var, rows, col_loop.var, width, store, definitions)


def _int_declarations(stmts: list[ir.Stmt], definitions: dict[str, ir.Expr]) -> bool:
    """Record int declarations of arithmetic (no array read) in `definitions`; False when a
    statement is anything else."""
    for t in stmts:
        if not (isinstance(t, ir.Declare) and t.var.type == ir.INT
                and next(expr_reads(t.init), None) is None):
            return False
        definitions[t.var.name] = rebuild(t.init, definitions)
    return True


def _is_row_major(index: ir.Expr, row: ir.Var, col: ir.Var, rows: int, width: int) -> bool:
    """Whether `index` is row * width + col for every row and column, by evaluation."""
    if names(index) - {row.name, col.name}:
        return False
    grid_row, grid_col = np.meshgrid(np.arange(rows), np.arange(width), indexing="ij")
    got = evaluate(index, {row.name: grid_row, col.name: grid_col})
    return got is not None and bool(np.all(np.asarray(got) == grid_row * width + grid_col))


def column_base(index: ir.Expr, col: str) -> ir.Expr | None:
    """The element of column 0, when `index` is it plus the column (the column in no other
    part of it); else None."""
    base = mk_bin("-", index, ir.Var(col, ir.INT), ir.INT)
    return None if col in names(base) else base


def vectorizable(e: ir.Expr, col: str, elem: str) -> bool:
    """Whether e can be computed for consecutive columns in vectors of `elem` (see vector_text)."""
    if col not in names(e):
        return ir.type_of(e) == elem
    if isinstance(e, ir.Index):
        return ir.elem_of(e.array) == elem and column_base(e.index, col) is not None
    if isinstance(e, ir.Bin):
        return e.type == elem and e.op in VECTOR_OPS[elem] and \
            vectorizable(e.left, col, elem) and vectorizable(e.right, col, elem)
    return False


def blocked_lines(s: RegisterBlocked, scalar: Callable[[ir.Expr, bool], str]
                  ) -> list[tuple[int, str]]:
    """The OpenCL C of a blocked nest, as (relative indent, line); `scalar(e, subscript)`
    prints an expression as the kernel's other statements are printed."""
    n = s.found
    vtype, _ = ELEMENT[ir.elem_of(n.acc)]
    vector = f"{vtype}{n.lanes}"
    loads = n.width // n.lanes
    first = ir.Var(f"{n.row.name}_block", ir.INT)
    acc = n.acc.name

    def name(r: int, h: int) -> str:
        return f"{acc}_v{r}_{h}"

    def load(array: ir.Var, base: str, h: int) -> str:
        # Consecutive scalars, which the code generator loads as one vector: pip's PoCL calls
        # a function for each vloadN, and the accumulators then live in memory across it.
        cast = "(uint)" if ir.elem_of(array) == ir.INT else ""
        offsets = (h * n.lanes + i for i in range(n.lanes))
        elements = ", ".join(f"{cast}{array.name}[{base}{f' + {k}' if k else ''}]"
                             for k in offsets)
        return f"(({vector})({elements}))"

    def store(value: str, array: ir.Var, base: str, h: int) -> str:
        if ir.elem_of(array) == ir.INT:
            value = f"as_int{n.lanes}({value})"
        return f"vstore{n.lanes}({value}, {h}, {array.name} + {base});"

    def vector_text(e: ir.Expr, h: int) -> str:
        if n.col.name not in names(e):
            text = scalar(e, False)
            return f"(uint){text}" if ir.type_of(e) == ir.INT else text
        if isinstance(e, ir.Index):
            base = column_base(e.index, n.col.name)
            assert base is not None
            return load(e.array, scalar(base, True), h)
        assert isinstance(e, ir.Bin)
        return f"({vector_text(e.left, h)} {e.op} {vector_text(e.right, h)})"

    lines = [(0, f"for (int {first.name} = 0; {first.name} < {n.rows}; "
                 f"{first.name} += {n.block}) {{")]
    rows = [ir.Bin("+", first, ir.Const(r, ir.INT), ir.INT) if r else first
            for r in range(n.block)]
    bases = [scalar(ir.Bin("*", row, ir.Const(n.width, ir.INT), ir.INT), True) for row in rows]
    names_of = [(r, h) for r in range(n.block) for h in range(loads)]
    carry, depth = s.carry, 1
    if carry is None:
        lines += [(1, f"{vector} {name(r, h)} = {load(n.acc, bases[r], h)};") for r, h in names_of]
    else:
        total = carry.total.name
        lines += [(1, f"{vector} {total}_v{r}_{h} = {load(carry.total, bases[r], h)};")
                  for r, h in names_of]
        loop = carry.loop.name
        lines.append((1, f"for (int {loop} = 0; {loop} < {scalar(carry.bound, False)}; "
                         f"{loop}++) {{"))
        init = vector_text(carry.init, 0)
        lines += [(2, f"{vector} {name(r, h)} = ({vector})({init});") for r, h in names_of]
        depth = 2
    red = n.red.name
    lines.append((depth, f"for (int {red} = 0; {red} < {scalar(n.red_bound, False)}; "
                         f"{red}++) {{"))
    for r, row in enumerate(rows):
        value = rebuild(n.value, {n.row.name: row})
        for h in range(loads):
            step = vector_text(value, h)
            parts = (name(r, h), step) if n.acc_left else (step, name(r, h))
            lines.append((depth + 1, f"{name(r, h)} = {parts[0]} {n.op} {parts[1]};"))
    lines.append((depth, "}"))
    if carry is None:
        lines += [(1, store(name(r, h), n.acc, bases[r], h)) for r, h in names_of]
    else:
        for r, h in names_of:
            parts = (f"{total}_v{r}_{h}", name(r, h))
            left, right = parts if carry.total_left else parts[::-1]
            lines.append((2, f"{total}_v{r}_{h} = {left} {carry.op} {right};"))
        lines.append((1, "}"))
        lines += [(1, store(f"{total}_v{r}_{h}", carry.total, bases[r], h)) for r, h in names_of]
    lines.append((0, "}"))
    return lines
