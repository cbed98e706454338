"""The imperative IL between the typed FCL program and OpenCL (plain, printable dataclasses).

The lowering (`fcl.il.lower`) evaluates the monomorphic program at compile time and emits these
statements, still organized by level as in the original compiler: `Distribute` hands iterations
to the units one level down (grid -> work-groups), `ParFor` spreads iterations over the units of
a level (block -> the work-items of a group, grid -> all work-items), `SeqFor`/`While` are
sequential. `fcl.codegen.kernelize` then cuts the host program and its kernels apart.

Every statement and variable may carry the FCL span it came from, so generated code can be
mapped back to source lines.
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from fcl.errors import Span

# ---- types ---------------------------------------------------------------------------------------
INT, DOUBLE, FLOAT, BOOL = "int", "double", "float", "bool"
FLOATING = (DOUBLE, FLOAT)
ITEM_BYTES = {INT: 4, DOUBLE: 8, FLOAT: 4, BOOL: 1}  # an element's bytes in device memory
# The numpy type of a value of each type (the interpreter's, the host's, Python's arguments).
NUMPY_TYPES = {INT: np.int32, DOUBLE: np.float64, FLOAT: np.float32, BOOL: np.bool_}
LEVELS = ("thread", "block", "grid")


@dataclass(frozen=True)
class ArrayType:
    elem: str  # INT, DOUBLE, FLOAT or BOOL


ILType = str | ArrayType


# ---- expressions -------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Expr:
    def show_il(self) -> str:
        """How an expression defined by a later stage (the back end's) reads in the IL."""
        raise TypeError(self)

    def key_il(self) -> str:
        """The key (expr_key) of an expression defined by a later stage."""
        raise TypeError(self)


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: int | float | bool
    type: str


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str
    type: ILType


@dataclass(frozen=True, eq=False)
class Index(Expr):
    """array[index], reading element `index` of an array variable."""

    array: Var
    index: Expr


# Binary operators: + - * / % (C semantics on int), == != < <= > >=, & | ^ << >>,
# && || on bools, min max. Unary: neg, not, abs, sign, clz, b2i, sqrt, and the conversions
# between int (i), double (d) and float (f).
BINARY_OPS = {"+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^", "<<", ">>",
              "&&", "||", "min", "max"}
CONVERSIONS = {"i2d", "d2i", "i2f", "f2i", "d2f", "f2d"}
UNARY_OPS = {"neg", "not", "abs", "sign", "clz", "b2i", "sqrt", *CONVERSIONS}
COMPARISONS = {"==", "!=", "<", "<=", ">", ">="}


@dataclass(frozen=True, eq=False)
class Bin(Expr):
    op: str
    left: Expr
    right: Expr
    type: str


@dataclass(frozen=True, eq=False)
class Un(Expr):
    op: str
    arg: Expr
    type: str


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """cond ? then : else_"""

    cond: Expr
    then: Expr
    else_: Expr
    type: str


def elem_of(array: Var) -> str:
    """The element type of an array variable."""
    if not isinstance(array.type, ArrayType):
        raise TypeError(f"{array.name} is not an array")
    return array.type.elem


def type_of(e: Expr) -> ILType:
    if isinstance(e, Var):
        return e.type
    if isinstance(e, Index):
        return elem_of(e.array)
    return e.type  # type: ignore[attr-defined]


# ---- statements --------------------------------------------------------------------------------

@dataclass(eq=False)
class Stmt:
    span: Span | None = field(default=None, kw_only=True, repr=False)

    def show_il(self, indent: int) -> str:
        """How a statement defined by a later stage (the back end's) reads in the IL, indented
        `indent` levels (see show_block)."""
        raise TypeError(self)


@dataclass(eq=False)
class Declare(Stmt):
    var: Var
    init: Expr


@dataclass(eq=False)
class Assign(Stmt):
    var: Var
    value: Expr


@dataclass(eq=False)
class Alloc(Stmt):
    """A fresh array of `size` elements in the memory of `level`: grid = global memory,
    block = local memory of the work-group, thread = memory private to a work-item."""

    var: Var
    size: Expr
    level: str
    # A field of an array of records (fcl.records): (the record array's name, the field's
    # position, the number of fields), for the layout step (fcl.memory.layouts).
    record: tuple[str, int, int] | None = field(default=None, kw_only=True)
    # The FCL name the program binds the array to (`xs <- forcePull ...`; a record array's
    # field k is `xs.k`), for the views: the kernels keep the generated name. Memory that holds
    # several of the program's arrays in turn has all their names (joined_label).
    label: str | None = field(default=None, kw_only=True)


LABEL_SEPARATOR = " / "


def joined_label(*labels: str | None) -> str | None:
    """The label of memory holding arrays of these labels in turn (None where none has one)."""
    named = [label for label in labels if label]
    return LABEL_SEPARATOR.join(named) if named else None


@dataclass(eq=False)
class Store(Stmt):
    """array[index] = value; with `combine` ("add", "min" or "max"), array[index] = combine(
    array[index], value) as one atomic operation: work-items may combine into one element in
    any order (a histogram's bins; the operation is associative and commutative)."""
    array: Var
    index: Expr
    value: Expr
    combine: str | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class ParFor(Stmt):
    """for var in [0, bound) in parallel over the units of `level`; ends with a barrier.
    `note` says what the loop is for where the code alone does not (shown with its kernel)."""

    level: str
    var: Var
    bound: Expr
    body: list[Stmt]
    note: str = field(default="", kw_only=True)


@dataclass(eq=False)
class Distribute(Stmt):
    """for var in [0, bound), each iteration run by one unit one level below `level`
    (at grid level: one work-group per iteration). At block level with `warp` (its lanes),
    each iteration is a warp's code: its lane loops are the `lanes` SeqFors, its arrays are the
    warp's, and one work-item may run all its lanes (fcl.codegen.warps)."""

    level: str
    var: Var
    bound: Expr
    body: list[Stmt]
    warp: int = field(default=0, kw_only=True)
    note: str = field(default="", kw_only=True)  # as ParFor's


@dataclass(eq=False)
class SeqFor(Stmt):
    """for var in [0, bound), in order; with `lanes`, iteration i is a warp's lane i's
    element, in any order (see Distribute). With `lockstep`, the interpreter runs each of the
    body's checks for every iteration before the next check (a row's elements, fcl.il.rows):
    of two checks that fail, the earlier in the body is the one reported."""

    var: Var
    bound: Expr
    body: list[Stmt]
    lanes: bool = field(default=False, kw_only=True)
    lockstep: bool = field(default=False, kw_only=True)


@dataclass(eq=False)
class While(Stmt):
    """Run `test` statements, then the body while `cond` holds (test runs before each check).
    Inside kernels, `level` says who runs it in step: a whole work-group or one work-item."""

    test: list[Stmt]
    cond: Expr
    body: list[Stmt]
    level: str | None = field(default=None, kw_only=True)


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    else_: list[Stmt]


@dataclass(eq=False)
class Barrier(Stmt):
    """All units of `level` wait for each other (block: a work-group barrier)."""

    level: str


# Host-only statements.

@dataclass(eq=False)
class Print(Stmt):
    """Print the first `count` elements of a global array as `[a,b,c]`."""

    count: Expr
    array: Var


@dataclass(eq=False)
class Benchmark(Stmt):
    count: Expr
    body: list[Stmt]


@dataclass(eq=False)
class Input(Stmt):
    """Data from outside the program, set once by the host: the ints of a CSV file
    (`readIntCSV`, `source` its path), or an entry point's argument (`source` its position, see
    fcl.python), an array or a scalar. `length` is an array's, declared 0 before, as is a
    scalar `var`: both count as assigned here."""

    var: Var
    length: Var | None
    source: str | int
    # Of an argument that is an array of records: the field it is (fcl.records), -1 otherwise.
    leaf: int = field(default=-1, kw_only=True)
    label: str | None = field(default=None, kw_only=True)  # the parameter's name (as Alloc's)


def input_sets(s: Input) -> list[Var]:
    """The variables an Input sets after their declaration: an array's length, or a scalar."""
    return [s.var] if s.length is None else [s.length]


@dataclass(eq=False)
class Result(Stmt):
    """Hand the program's result to the host: `value` is a nested structure of scalar
    expressions, (array, length) pairs for arrays in global memory, tuples and None (unit)."""

    value: object


@dataclass(frozen=True)
class StreamSource:
    """Where a sequence's elements come from a chunk at a time: an entry point's argument
    (`where` its position) or a .npy file (its path). A chunk of n sequence elements needs the
    source's elements [scale * first, scale * (first + n) + extra) (windows overlap). Irregular
    rows (`segmentsSeq`) take two: their lengths, which reach the device as the chunk's n + 1
    row starts (`role` "starts"), and their elements, as many as the chunk's rows hold (`role`
    "rows", `by` the lengths' `where`)."""

    where: int | str
    elem: str
    scale: int = 1
    extra: int = 0
    role: str = "elements"
    by: int | str | None = None
    span: Span | None = field(default=None, compare=False)  # where a file is named

    @property
    def key(self) -> tuple[int | str, str]:
        """What a chunk's buffer holds: one per source and role."""
        return (self.where, self.role)


@dataclass(frozen=True, eq=False)
class Stream:
    """A loop over a sequence's chunks (fcl.il.streams): its sources, the bytes of device memory
    each element of a chunk takes besides its sources' (the buffers its kernels make), and the
    multiple of which a chunk's size must be (a fold's tile)."""

    number: int
    sources: tuple[StreamSource, ...]
    bytes_per_element: float
    tile: int = 1


@dataclass(eq=False)
class Chunk(Input):
    """Set by the host at each step of a stream's loop: the chunk's element count (`what`
    "count", 0 when the sequence is done; `bound` is the sequence's length where the program
    knows it, else -1), the index of its first element ("start"), or a source's elements
    ("data", `source` its position in the stream's). After the loop ("collected"), the array
    its Collects copied back."""

    stream: Stream = field(kw_only=True)
    what: str = field(kw_only=True)
    bound: Expr = field(kw_only=True, default_factory=lambda: Const(-1, INT))


@dataclass(eq=False)
class Collect(Print):
    """Copy a chunk's `count` results back to the host, after the earlier chunks'."""

    stream: Stream = field(kw_only=True)


@dataclass(eq=False)
class Fail(Stmt):
    """Stop with an FCL runtime error (raised at `span`) when `cond` holds, its message's `{}`
    placeholders filled with `values` (see fcl.checks). The last values are the indices of the
    parallel loops around it, of the kinds `places` (checks.where's order). A check made inside
    a prelude function is raised at the user's call, `inside` naming the prelude's line."""

    cond: Expr
    message: str
    values: list[Expr] = field(default_factory=list)
    hint: str = ""
    places: tuple[str, ...] = ()
    inside: Span | None = field(default=None, kw_only=True, repr=False)

    def place_value(self, kind: str) -> int | None:
        """The position in `values` of the index of the loop of `kind` around it (None if no
        such loop is)."""
        if kind not in self.places:
            return None
        return len(self.values) - len(self.places) + self.places.index(kind)


# ---- traversal ---------------------------------------------------------------------------------

BODIES = ("body", "then", "else_", "test")  # the fields that hold nested statements


def children(s: Stmt) -> list[list[Stmt]]:
    """The statement lists nested in s (loop bodies, branches, a while's test)."""
    return [getattr(s, name) for name in BODIES if isinstance(getattr(s, name, None), list)]


def walk(stmts: list[Stmt]):
    """Every statement, nested ones included, in program order."""
    for s in stmts:
        yield s
        for child in children(s):
            yield from walk(child)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(node: Any) -> tuple[str, ...]:
    """The dataclass fields of an IL node, by name (dataclasses.fields, once per class: the
    passes ask it of every node they visit)."""
    names = _FIELD_NAMES.get(type(node))
    if names is None:
        names = _FIELD_NAMES[type(node)] = tuple(f.name for f in fields(node))
    return names


def expr_vars(e: Expr, out: dict[str, Var]) -> None:
    """Collect the variables an expression mentions (name -> Var)."""
    if isinstance(e, Var):
        out.setdefault(e.name, e)
        return
    for name in field_names(e):
        value = getattr(e, name)
        if isinstance(value, Expr):
            expr_vars(value, out)


# ---- structural keys ---------------------------------------------------------------------------
# The analyses (fcl.il.ranges, fcl.il.prove) keep facts about whole expressions by a key: equal
# keys, equal expressions. A variable's key is its name; any other expression's is `#n`, numbered
# by its structure (operator, type and its parts' keys) and kept on the expression, so a key costs
# O(1) per node whatever the depth, where the text of a 10,000-deep expression is ~10^5 characters
# (and a key per level ~10^9). The numbering lives as long as a `key_scope` (one compilation):
# within it, structurally equal expressions always get the same key, and numbers are never
# reused, so a key kept from an earlier scope matches nothing of a later one.


class _KeyScope:
    numbers = itertools.count()  # shared by all scopes: no key is ever given twice

    def __init__(self) -> None:
        self.id = next(self.numbers)
        self.by_structure: dict[tuple, str] = {}
        self.by_key: dict[str, Expr] = {}


_scope: contextvars.ContextVar[_KeyScope | None] = contextvars.ContextVar("fcl_keys",
                                                                          default=None)


@contextlib.contextmanager
def key_scope() -> Iterator[None]:
    """Number structures afresh for what runs inside (kept if a scope is already open)."""
    if _scope.get() is not None:
        yield
        return
    token = _scope.set(_KeyScope())
    try:
        yield
    finally:
        _scope.reset(token)


_outside = _KeyScope()  # for callers outside any scope (tests, tools), renewed when large
OUTSIDE_LIMIT = 100_000


def expr_key(e: Expr) -> str:
    """A key for e's structure (see above)."""
    global _outside
    if isinstance(e, Var):
        return e.name
    if not isinstance(e, (Const, Index, Bin, Un, Select)):
        return e.key_il()
    scope = _scope.get()
    if scope is None:
        if len(_outside.by_structure) > OUTSIDE_LIMIT:
            _outside = _KeyScope()
        scope = _outside
    memo = structural_memo(e, scope)
    if "key" in memo:
        return memo["key"]
    structure: tuple
    if isinstance(e, Bin):
        structure = ("b", e.op, e.type, expr_key(e.left), expr_key(e.right))
    elif isinstance(e, Const):  # repr tells -0.0 from 0.0, which compare equal as keys
        structure = ("c", e.type, repr(e.value))
    elif isinstance(e, Index):
        structure = ("i", e.array.name, expr_key(e.index))
    elif isinstance(e, Un):
        structure = ("u", e.op, e.type, expr_key(e.arg))
    else:
        assert isinstance(e, Select)
        structure = ("s", e.type, expr_key(e.cond), expr_key(e.then), expr_key(e.else_))
    key = scope.by_structure.get(structure)
    if key is None:
        key = scope.by_structure[structure] = f"#{next(_KeyScope.numbers)}"
        scope.by_key[key] = e
    memo["key"] = key
    return key


def structural_memo(e: Expr, scope: _KeyScope | None = None) -> dict:
    """A dict kept on e for the current key scope (or `scope`): answers that depend only on e's
    structure and keys (its key; a linear form, whose atoms are keyed)."""
    scope = scope or _scope.get() or _outside
    kept = e.__dict__.get("_memo")
    if kept is None or kept[0] != scope.id:
        kept = (scope.id, {})
        object.__setattr__(e, "_memo", kept)  # a memo on a frozen expression, not a change
    return kept[1]


def keyed(key: str) -> Expr | None:
    """The expression a key of the current scope stands for (None: a variable's, or unknown)."""
    return (_scope.get() or _outside).by_key.get(key)


def float_text(value: float) -> str:
    """The shortest decimal text that reads back as the float (32-bit) `value`."""
    return str(np.float32(value))


# ---- printing ----------------------------------------------------------------------------------

def show_expr(e: Expr) -> str:
    if isinstance(e, Const):
        if e.type == BOOL:
            return "true" if e.value else "false"
        if e.type == FLOAT:
            return f"{float_text(e.value)}f"
        return repr(float(e.value)) if e.type == DOUBLE else str(int(e.value))
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Index):
        return f"{e.array.name}[{show_expr(e.index)}]"
    if isinstance(e, Bin):
        if e.op in ("min", "max"):
            return f"{e.op}({show_expr(e.left)}, {show_expr(e.right)})"
        return f"({show_expr(e.left)} {e.op} {show_expr(e.right)})"
    if isinstance(e, Un):
        return f"{e.op}({show_expr(e.arg)})"
    if isinstance(e, Select):
        return f"({show_expr(e.cond)} ? {show_expr(e.then)} : {show_expr(e.else_)})"
    return e.show_il()


def _show_result(value) -> str:
    if value is None:
        return "()"
    if isinstance(value, Expr):
        return show_expr(value)
    if isinstance(value, ArrayResult):
        return f"{value.array.name}[0:{show_expr(value.length)}]"
    return "(" + ", ".join(_show_result(v) for v in value) + ")"


@dataclass(frozen=True, eq=False)
class ArrayResult:
    array: Var
    length: Expr


def show_type(t: ILType) -> str:
    return f"{t.elem}[]" if isinstance(t, ArrayType) else t


def show_stmts(stmts: list[Stmt], indent: int = 0) -> str:
    return "\n".join(_show(s, indent) for s in stmts)


def show_block(head: str, body: list[Stmt], indent: int) -> str:
    pad = "  " * indent
    inner = show_stmts(body, indent + 1)
    return f"{pad}{head} {{\n{inner}\n{pad}}}" if body else f"{pad}{head} {{}}"


def _show(s: Stmt, indent: int) -> str:
    pad = "  " * indent
    if isinstance(s, Declare):
        return f"{pad}{show_type(s.var.type)} {s.var.name} = {show_expr(s.init)};"
    if isinstance(s, Assign):
        return f"{pad}{s.var.name} = {show_expr(s.value)};"
    if isinstance(s, Alloc):
        named = f"  -- {s.label}" if s.label else ""
        return (f"{pad}{s.var.name} = allocate<{s.level}>({elem_of(s.var)}, "
                f"{show_expr(s.size)});{named}")
    if isinstance(s, Store) and s.combine is not None:
        return f"{pad}atomic_{s.combine}({s.array.name}[{show_expr(s.index)}], " \
               f"{show_expr(s.value)});"
    if isinstance(s, Store):
        return f"{pad}{s.array.name}[{show_expr(s.index)}] = {show_expr(s.value)};"
    if isinstance(s, ParFor):
        shown = show_block(f"parfor<{s.level}> ({s.var.name} < {show_expr(s.bound)})", s.body,
                           indent)
        return f"{pad}-- {s.note}\n{shown}" if s.note else shown
    if isinstance(s, Distribute):
        level = f"{s.level}, warps of {s.warp}" if s.warp else s.level
        shown = show_block(f"distribute<{level}> ({s.var.name} < {show_expr(s.bound)})",
                           s.body, indent)
        return f"{pad}-- {s.note}\n{shown}" if s.note else shown
    if isinstance(s, SeqFor):
        loop = "lanes" if s.lanes else "seqfor"
        return show_block(f"{loop} ({s.var.name} < {show_expr(s.bound)})", s.body, indent)
    if isinstance(s, While):
        test = show_stmts(s.test, indent + 1)
        head = show_block(f"while ({show_expr(s.cond)})", s.body, indent)
        return (f"{pad}test {{\n{test}\n{pad}}}\n" if s.test else "") + head
    if isinstance(s, If):
        text = show_block(f"if ({show_expr(s.cond)})", s.then, indent)
        return text + (" else " + show_block("", s.else_, indent).lstrip() if s.else_ else "")
    if isinstance(s, Barrier):
        return f"{pad}synchronize<{s.level}>;"
    if isinstance(s, Print):
        kind = elem_of(s.array).capitalize()
        return f"{pad}print{kind}Array({show_expr(s.count)}, {s.array.name});"
    if isinstance(s, Benchmark):
        return show_block(f"benchmark({show_expr(s.count)})", s.body, indent)
    if isinstance(s, Input):
        targets = s.var.name if s.length is None else f"({s.var.name}, {s.length.name})"
        source = (f'readIntCSV("{s.source}")' if isinstance(s.source, str)
                  else f"argument({s.source})")
        return f"{pad}{targets} = {source};"
    if isinstance(s, Result):
        return f"{pad}result({_show_result(s.value)});"
    if isinstance(s, Fail):
        return f'{pad}failIf({show_expr(s.cond)}, "{s.message}");'
    return s.show_il(indent)  # statements defined by later stages
