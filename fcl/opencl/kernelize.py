"""Cut a lowered host program into host statements and OpenCL kernels.

Grid-level `Distribute` (one work-group per iteration) and grid-level `ParFor` (one work-item
per iteration) become kernels launched from the host; everything else stays on the host. Inside
a kernel, block-level loops become strided loops over the work-items of the group followed by a
barrier, and memory allocated at block level becomes exactly-sized local memory.

When the work-group size is known, loops whose bounds are known are shaped for it: a block-level
loop over at most one iteration per work-item is no loop (CPU OpenCL compilers vectorize across
work-items only over straight-line code), and a kernel with at most MAX_GROUPS iterations gets
one work-group each instead of work-groups looping with a barrier at the end of each iteration.
A work-group whose work-items split their index into a row and a column (`i >> k`, `i & 2^k-1`,
as tiles do) becomes a 2-D work-group of 2^k columns: CPU compilers vectorize along dimension 0,
where the tile's rows are then contiguous.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.il.passes import map_exprs
from fcl.il.simplify import _linear, mk_bin
from fcl.opencl.registers import registers
from fcl.opencl.sharing import lifetimes, pack

MAX_GROUPS = 65536        # more iterations than this are virtualized: each group loops
PRIVATE_ARRAY_LIMIT = 64  # thread-level arrays up to this size live in registers


@dataclass(frozen=True, eq=False)
class Special(ir.Expr):
    """A work-item builtin: local_id, local_size, group_id, num_groups, global_id, global_size."""

    name: str
    type: str = ir.INT


@dataclass(eq=False)
class StridedFor(ir.Stmt):
    """for (var = start; var < bound; var += step) body"""

    var: ir.Var
    start: ir.Expr
    bound: ir.Expr
    step: ir.Expr
    body: list[ir.Stmt]


@dataclass(eq=False)
class LocalArray:
    """An array in local memory: `per_item` means one slice of `size` elements per work-item."""

    var: ir.Var
    size: ir.Expr  # in elements, an expression over host values
    per_item: bool
    span: Span | None


@dataclass(eq=False)
class Kernel:
    name: str
    body: list[ir.Stmt]
    params: list[ir.Var] = field(default_factory=list)  # host values, by value or __global
    locals: list[LocalArray] = field(default_factory=list)
    # Local arrays grouped into slots that share memory (per-work-item slices stay apart).
    slots: list[list[LocalArray]] = field(default_factory=list)
    private: list[tuple[ir.Var, int]] = field(default_factory=list)  # arrays in registers
    fails: list[ir.Fail] = field(default_factory=list)     # index into this list = fail code
    span: Span | None = None
    # For one-group-per-iteration kernels: local sizes may depend on the iteration; the host
    # sizes local memory for the largest.
    group_var: ir.Var | None = None
    group_bound: ir.Expr | None = None
    # A `while` may never end: such kernels watch a flag the host sets on an interrupt.
    abortable: bool = False
    # Work-items along dimension 0 of a 2-D work-group (None: 1-D), see the module docstring.
    width: int | None = None
    block_size: int | None = None  # the work-group size, when known at compile time


@dataclass(eq=False)
class Launch(ir.Stmt):
    kernel: Kernel
    groups: ir.Expr  # number of work-groups (an expression over host values)

    def show_il(self) -> str:
        return f"launch {self.kernel.name}<<<{ir.show_expr(self.groups)}>>>;"


class Kernelizer:
    def __init__(self, block_size: int | None = None):
        self.kernels: list[Kernel] = []
        self.block_size = block_size

    def host(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out = []
        for s in stmts:
            if isinstance(s, ir.Distribute) and s.level == "grid":
                out.append(self.distribute_kernel(s))
            elif isinstance(s, ir.ParFor) and s.level == "grid":
                out.append(self.parfor_kernel(s))
            elif isinstance(s, (ir.ParFor, ir.Distribute)):
                raise FCLError(f"a {s.level}-level parallel loop cannot run on the host", s.span)
            elif isinstance(s, ir.SeqFor):
                out.append(ir.SeqFor(s.var, s.bound, self.host(s.body), span=s.span))
            elif isinstance(s, ir.While):
                out.append(ir.While(self.host(s.test), s.cond, self.host(s.body), span=s.span))
            elif isinstance(s, ir.If):
                out.append(ir.If(s.cond, self.host(s.then), self.host(s.else_), span=s.span))
            elif isinstance(s, ir.Benchmark):
                out.append(ir.Benchmark(s.count, self.host(s.body), span=s.span))
            elif isinstance(s, ir.Alloc) and s.level != "grid":
                raise FCLError(f"{s.level}-level memory cannot be allocated on the host", s.span)
            else:
                out.append(s)
        return out

    def _new_kernel(self, span: Span | None) -> Kernel:
        line = f"_line{span.line}" if span is not None else ""
        kernel = Kernel(f"kernel{len(self.kernels)}{line}", [], span=span,
                        block_size=self.block_size)
        self.kernels.append(kernel)
        return kernel

    def distribute_kernel(self, s: ir.Distribute) -> Launch:
        kernel = self._new_kernel(s.span)
        shaper = KernelBody(kernel, self.block_size)
        body = shaper.tiled(shaper.block(s.body, level="block"))
        if self.block_size is not None:
            body = shaper.registers(body)
        kernel.group_var, kernel.group_bound = s.var, s.bound
        if isinstance(s.bound, ir.Const) and s.bound.value <= MAX_GROUPS:
            # One work-group per iteration; nothing follows the last barrier, so it goes.
            while body and isinstance(body[-1], ir.Barrier):
                body.pop()
            kernel.body = [ir.Declare(s.var, Special("group_id"), span=s.span), *body]
            finish(kernel)
            return Launch(kernel, s.bound, span=s.span)
        kernel.body = [StridedFor(s.var, Special("group_id"), s.bound, Special("num_groups"), body,
                                  span=s.span)]
        finish(kernel)
        groups = ir.Bin("min", s.bound, ir.Const(MAX_GROUPS, ir.INT), ir.INT)
        return Launch(kernel, groups, span=s.span)

    def parfor_kernel(self, s: ir.ParFor) -> Launch:
        kernel = self._new_kernel(s.span)
        body = KernelBody(kernel, self.block_size).block(s.body, level="thread")
        kernel.body = [StridedFor(s.var, Special("global_id"), s.bound, Special("global_size"),
                                  body, span=s.span)]
        finish(kernel)
        per_group = Special("local_size")
        groups = ir.Bin("/", ir.Bin("+", s.bound, ir.Bin("-", per_group, ir.Const(1, ir.INT), ir.INT),
                                    ir.INT), per_group, ir.INT)
        groups = ir.Bin("min", groups, ir.Const(MAX_GROUPS, ir.INT), ir.INT)
        return Launch(kernel, groups, span=s.span)


class KernelBody:
    """Rewrites the body of one kernel: block-level loops, local and private memory."""

    def __init__(self, kernel: Kernel, block_size: int | None = None):
        self.kernel = kernel
        self.block_size = block_size
        self.item_vars: set[str] = set()  # variables that are the work-item's local id

    def block(self, stmts: list[ir.Stmt], level: str) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            out += self.stmt(s, level)
        return out

    def stmt(self, s: ir.Stmt, level: str) -> list[ir.Stmt]:
        if isinstance(s, (ir.ParFor, ir.Distribute)):
            if s.level != "block" or level != "block":
                raise FCLError(f"a {s.level}-level parallel loop cannot appear inside "
                               f"{level}-level code", s.span)
            # Either way each iteration is run by one work-item: thread-level code.
            return [*self.items_loop(s, self.block(s.body, "thread")),
                    ir.Barrier("block", span=s.span)]
        if isinstance(s, ir.Alloc):
            return self.alloc(s, level)
        if isinstance(s, ir.SeqFor):
            return [ir.SeqFor(s.var, s.bound, self.block(s.body, level), span=s.span)]
        if isinstance(s, ir.While):
            self.kernel.abortable = True
            return [ir.While(self.block(s.test, level), s.cond, self.block(s.body, level),
                             span=s.span, level=level)]
        if isinstance(s, ir.If):
            return [ir.If(s.cond, self.block(s.then, level), self.block(s.else_, level),
                          span=s.span)]
        if isinstance(s, ir.Fail):
            self.kernel.fails.append(s)
            return [s]
        if isinstance(s, (ir.Print, ir.Benchmark, ir.ReadCSV)):
            raise FCLError("host operations (printing, benchmarking, reading files) cannot "
                           "run inside a kernel", s.span)
        return [s]

    def items_loop(self, s: ir.ParFor | ir.Distribute, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """Iterations [0, bound) spread over the work-items of the group."""
        size = self.block_size
        if size is None:
            return [StridedFor(s.var, Special("local_id"), s.bound, Special("local_size"), body,
                               span=s.span)]
        if isinstance(s.bound, ir.Const) and s.bound.value <= size:
            # Names are unique within a kernel, so the body can share the enclosing C scope.
            self.item_vars.add(s.var.name)
            first = [ir.Declare(s.var, Special("local_id"), span=s.span), *body]
            if s.bound.value == size:
                return first
            return [ir.If(ir.Bin("<", Special("local_id"), s.bound, ir.BOOL), first, [],
                          span=s.span)]
        return [StridedFor(s.var, Special("local_id"), s.bound, ir.Const(size, ir.INT), body,
                           span=s.span)]

    def tiled(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """The body for a 2-D work-group when its work-items use their index as (row, column)
        with one row width only; else unchanged."""
        widths: set[int] = set()

        def visit(e: ir.Expr) -> ir.Expr:
            if _item_split(e, self.item_vars) is not None:
                widths.add(_item_split(e, self.item_vars)[1])
            for f in fields(e):
                if isinstance(getattr(e, f.name), ir.Expr):
                    visit(getattr(e, f.name))
            return e
        map_exprs(body, visit)
        size = self.block_size
        if len(widths) != 1 or self.kernel.abortable or any(a.per_item for a in self.kernel.locals):
            return body
        (width,) = widths
        if not 1 < width < size or size % width:
            return body
        self.kernel.width = width
        x, y = Special("local_x"), Special("local_y")
        linear = ir.Bin("+", ir.Bin("*", y, ir.Const(width, ir.INT), ir.INT), x, ir.INT)

        def rewrite(e: ir.Expr) -> ir.Expr:
            split = _item_split(e, self.item_vars)
            if split is not None and split[1] == width:
                return y if split[0] == ">>" else x
            if isinstance(e, Special) and e.name == "local_id":
                return linear
            if isinstance(e, (ir.Bin, ir.Un, ir.Select, ir.Index)):
                return replace(e, **{f.name: rewrite(getattr(e, f.name)) for f in fields(e)
                                     if isinstance(getattr(e, f.name), ir.Expr)
                                     and not (isinstance(e, ir.Index) and f.name == "array")})
            return e
        body = self.padded(map_exprs(body, rewrite))
        self.kernel.fails = [s for s in ir.walk(body) if isinstance(s, ir.Fail)]
        return body

    def registers(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """Local arrays each work-item only touches at its own index, in registers."""
        if self.kernel.width:
            x, y = Special("local_x"), Special("local_y")
            own = ir.Bin("+", ir.Bin("*", y, ir.Const(self.kernel.width, ir.INT), ir.INT), x,
                         ir.INT)
        else:
            own = Special("local_id")
        definitions = _single_definitions(body)
        return registers(self.kernel, body, own, lambda e: _inline_ints(e, definitions))

    def padded(self, body: list[ir.Stmt]) -> list[ir.Stmt]:
        """Local tiles whose every access is (row, column), the column within a row of the
        work-group's width, and some access walks down a column (neighbouring work-items in x
        at different rows), get one element of padding per row: the column is then spread over
        memory banks (GPUs) and cache sets (CPUs) rather than hitting one. Tiles only read
        along rows stay unpadded: there padding would only shift the rows of a warp that spans
        several (16-wide tiles) into each other's banks."""
        width = self.kernel.width
        tiles = {a.var.name: a for a in self.kernel.locals if not a.per_item
                 and isinstance(a.size, ir.Const) and a.size.value % width == 0}
        for s in ir.walk(body):  # arrays also reached through pointers keep their layout
            if isinstance(s, (ir.Declare, ir.Assign)) and isinstance(s.var.type, ir.ArrayType):
                value = s.init if isinstance(s, ir.Declare) else s.value
                tiles.pop(getattr(value, "name", None), None)
        definitions = _single_definitions(body)
        ranges = {"local_x": (0, width - 1), "local_y": (0, self.block_size // width - 1)}
        for s in ir.walk(body):
            if isinstance(s, ir.SeqFor) and isinstance(s.bound, ir.Const):
                ranges[s.var.name] = (0, int(s.bound.value) - 1)
        places: dict[int, ir.Expr] = {}  # id of an access's index -> its padded index
        column_walks: set[str] = set()   # tiles with an access whose row follows local_x

        def visit(e: ir.Expr) -> ir.Expr:
            if isinstance(e, ir.Index) and e.array.name in tiles:
                split = _row_column(e.index, definitions, ranges, width)
                if split is None:
                    tiles.pop(e.array.name)
                else:
                    row_vars: dict[str, ir.Var] = {}
                    ir.expr_vars(split[0], row_vars)
                    if "<local_x>" in row_vars:
                        column_walks.add(e.array.name)
                    places[id(e.index)] = _work_item_ids(mk_bin("+", mk_bin("*", split[0], ir.Const(
                        width + 1, ir.INT), ir.INT), split[1], ir.INT))
            for f in fields(e):
                if isinstance(getattr(e, f.name), ir.Expr):
                    visit(getattr(e, f.name))
            return e
        map_exprs(body, visit)
        for s in ir.walk(body):
            if isinstance(s, ir.Store):
                visit(ir.Index(s.array, s.index))
        tiles = {name: tile for name, tile in tiles.items() if name in column_walks}
        if not tiles:
            return body

        def pad(e: ir.Expr) -> ir.Expr:
            if isinstance(e, ir.Index):
                index = places[id(e.index)] if e.array.name in tiles else pad(e.index)
                return ir.Index(e.array, index)
            if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
                return replace(e, **{f.name: pad(getattr(e, f.name)) for f in fields(e)
                                     if isinstance(getattr(e, f.name), ir.Expr)})
            return e

        def pad_stores(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
            for s in stmts:
                if isinstance(s, ir.Store) and s.array.name in tiles:
                    s.index = places[id(s.index)]
                elif isinstance(s, ir.Alloc) and s.var.name in tiles:
                    s.size = tiles[s.var.name].size
                for child in ir.children(s):
                    pad_stores(child)
            return stmts
        for tile in tiles.values():
            tile.size = ir.Const(tile.size.value // width * (width + 1), ir.INT)
        return pad_stores(map_exprs(body, pad))

    def alloc(self, s: ir.Alloc, level: str) -> list[ir.Stmt]:
        if s.level == "grid":
            raise FCLError("global memory cannot be allocated inside a kernel", s.span)
        if s.level == "thread" and level == "thread" and isinstance(s.size, ir.Const) \
                and s.size.value <= PRIVATE_ARRAY_LIMIT:
            self.kernel.private.append((s.var, max(int(s.size.value), 1)))
            return []
        per_item = s.level == "thread" and level == "thread"
        self.kernel.locals.append(LocalArray(s.var, s.size, per_item, s.span))
        # Shared arrays keep their allocation in the body: it is where their lifetime starts.
        return [] if per_item else [s]


def _item_split(e: ir.Expr, item_vars: set[str]) -> tuple[str, int] | None:
    """(">>", 2^k) for `i >> k`, ("&", 2^k) for `i & (2^k - 1)`, where i is a local id."""
    if not (isinstance(e, ir.Bin) and e.op in (">>", "&") and isinstance(e.left, ir.Var)
            and e.left.name in item_vars and isinstance(e.right, ir.Const)):
        return None
    k = int(e.right.value)
    if e.op == ">>":
        return (">>", 1 << k) if 0 < k < 31 else None
    return ("&", k + 1) if k > 0 and k & (k + 1) == 0 else None


def _row_column(index: ir.Expr, definitions: dict[str, ir.Expr],
                ranges: dict[str, tuple[int, int]], width: int) -> tuple[ir.Expr, ir.Expr] | None:
    """(row, column) with index = row * width + column and the column in [0, width), if the
    index (with single definitions inlined) is a sum of that form; else None. Work-item ids
    are variables in them (see _inline_ints)."""
    terms, const = _linear(_inline_ints(index, definitions))
    if const % width:
        return None
    row: ir.Expr = ir.Const(const // width, ir.INT)
    column: ir.Expr = ir.Const(0, ir.INT)
    for atom, coef in terms.values():
        if coef % width == 0:
            row = mk_bin("+", row, mk_bin("*", atom, ir.Const(coef // width, ir.INT), ir.INT),
                         ir.INT)
            continue
        name = atom.name.strip("<>") if isinstance(atom, ir.Var) else None
        low, high = ranges.get(name, (-1, width))
        if coef != 1 or not _is_const(column, 0) or low < 0 or high >= width:
            return None
        column = atom
    return row, column


def _is_const(e: ir.Expr, value: int) -> bool:
    return isinstance(e, ir.Const) and e.value == value


def _inline_ints(e: ir.Expr, definitions: dict[str, ir.Expr]) -> ir.Expr:
    """e with int variables replaced by their definitions; work-item ids become variables named
    <local_x> and <local_y> (the IL's sums are normalized over variables only)."""
    if isinstance(e, ir.Var) and e.type == ir.INT and e.name in definitions:
        return _inline_ints(definitions[e.name], definitions)
    if isinstance(e, Special):
        return ir.Var(f"<{e.name}>", ir.INT)
    if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
        return replace(e, **{f.name: _inline_ints(getattr(e, f.name), definitions)
                             for f in fields(e) if isinstance(getattr(e, f.name), ir.Expr)})
    return e


def _work_item_ids(e: ir.Expr) -> ir.Expr:
    """The inverse of _inline_ints's renaming of work-item ids."""
    if isinstance(e, ir.Var) and e.name.startswith("<"):
        return Special(e.name.strip("<>"))
    if isinstance(e, (ir.Bin, ir.Un, ir.Select)):
        return replace(e, **{f.name: _work_item_ids(getattr(e, f.name)) for f in fields(e)
                             if isinstance(getattr(e, f.name), ir.Expr)})
    return e


def finish(kernel: Kernel) -> None:
    """Kernel parameters: the host variables the body uses. Local memory is sized on the host at
    launch, so each size is rewritten over host values (and the group's iteration variable)."""
    bound: set[str] = {a.var.name for a in kernel.locals} | {v.name for v, _ in kernel.private}
    used: dict[str, ir.Var] = {}
    _scan(kernel.body, bound, used)
    kernel.params = sorted(used.values(), key=lambda v: v.name)
    inside = _declared_names(kernel.body)
    definitions = _single_definitions(kernel.body)
    allowed = {kernel.group_var.name} if kernel.group_var is not None else set()
    for local in kernel.locals:
        local.size = _inline(local.size, definitions, inside - allowed, local.span)
    shared = {local.var.name: local for local in kernel.locals if not local.per_item}
    spans = lifetimes(kernel.body, set(shared), (StridedFor, ir.SeqFor, ir.While))
    kernel.slots = [[shared[name] for name in slot] for slot in pack(spans)]


def _single_definitions(stmts: list[ir.Stmt]) -> dict[str, ir.Expr]:
    """Variables declared once and never assigned, with their initial values."""
    declared: dict[str, ir.Expr] = {}
    assigned: set[str] = set()

    def walk(stmts):
        for s in stmts:
            if isinstance(s, ir.Declare):
                declared[s.var.name] = s.init
            elif isinstance(s, ir.Assign):
                assigned.add(s.var.name)
            for child in ir.children(s):
                walk(child)
    walk(stmts)
    return {name: init for name, init in declared.items() if name not in assigned}


def _inline(e: ir.Expr, definitions: dict[str, ir.Expr], inside: set[str], span) -> ir.Expr:
    """e with kernel-local variables replaced by their definitions, so the host can evaluate it."""
    if isinstance(e, ir.Var) and e.name in inside:
        if e.name not in definitions:
            raise FCLError("the size of this array depends on values computed inside the "
                           "kernel, but local memory must be sized before the kernel starts", span)
        return _inline(definitions[e.name], definitions, inside, span)
    if isinstance(e, (ir.Index, Special)):
        raise FCLError("the size of this array depends on values computed inside the kernel, "
                       "but local memory must be sized before the kernel starts", span)
    if isinstance(e, ir.Bin):
        return ir.Bin(e.op, _inline(e.left, definitions, inside, span),
                      _inline(e.right, definitions, inside, span), e.type)
    if isinstance(e, ir.Un):
        return ir.Un(e.op, _inline(e.arg, definitions, inside, span), e.type)
    if isinstance(e, ir.Select):
        return ir.Select(*(_inline(x, definitions, inside, span) for x in (e.cond, e.then, e.else_)),
                         e.type)
    return e


def _declared_names(stmts: list[ir.Stmt]) -> set[str]:
    names: set[str] = set()
    for s in stmts:
        if isinstance(s, ir.Declare):
            names.add(s.var.name)
        for child in ir.children(s):
            names |= _declared_names(child)
        if isinstance(s, (StridedFor, ir.SeqFor)):
            names.add(s.var.name)
    return names


def _scan(stmts: list[ir.Stmt], bound: set[str], used: dict[str, ir.Var]) -> None:
    bound = set(bound)
    for s in stmts:
        exprs: list[ir.Expr] = []
        if isinstance(s, ir.Declare):
            exprs = [s.init]
        elif isinstance(s, ir.Assign):
            exprs = [s.var, s.value]
        elif isinstance(s, ir.Store):
            exprs = [s.array, s.index, s.value]
        elif isinstance(s, StridedFor):
            exprs = [s.start, s.bound, s.step]
        elif isinstance(s, ir.SeqFor):
            exprs = [s.bound]
        elif isinstance(s, ir.While):
            exprs = [s.cond]
        elif isinstance(s, ir.If):
            exprs = [s.cond]
        elif isinstance(s, ir.Fail):
            exprs = [s.cond]
        found: dict[str, ir.Var] = {}
        for e in exprs:
            ir.expr_vars(e, found)
        for name, var in found.items():
            if name not in bound:
                used.setdefault(name, var)
        if isinstance(s, (StridedFor, ir.SeqFor)):
            _scan(s.body, bound | {s.var.name}, used)
        else:
            for child in ir.children(s):
                _scan(child, bound, used)
        if isinstance(s, ir.Declare):
            bound.add(s.var.name)


def kernelize(host_program: list[ir.Stmt], block_size: int | None = None
              ) -> tuple[list[ir.Stmt], list[Kernel]]:
    """Host statements and kernels; with the work-group size the kernels will be launched with,
    loops are shaped for it."""
    k = Kernelizer(block_size)
    host = k.host(host_program)
    return host, k.kernels
