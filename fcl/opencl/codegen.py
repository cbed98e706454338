"""Print kernels as readable OpenCL C, with a table from generated lines to FCL spans.

Names come from the IL, one statement per line. Booleans are `int` in registers and arguments
(kernel arguments cannot be `bool`) and `uchar` in memory. Integer `/` and `%` truncate toward
zero and shift counts are masked, in OpenCL C as in the IL, so most operators print as they are.
"""
from __future__ import annotations

from fcl.errors import Span
from fcl.il import ir
from fcl.il.kernels import (FlagFailure, Kernel, LocalAlloc, StridedFor, WorkItemQuery,
                            split_program)

REGISTER_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.BOOL: "int"}
MEMORY_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.BOOL: "uchar"}
FAILURE_FLAG = "fcl_failure"
BARRIER = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
FP64_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable"
LineTable = list[tuple[int, Span]]  # (1-based line of the OpenCL source, FCL span)


def compile_source(host_program: list[ir.Stmt]) -> tuple[str, LineTable]:
    """The OpenCL C of all kernels of a host program, and its line table."""
    return kernel_source(split_program(host_program).kernels)


def kernel_source(kernels: list[Kernel]) -> tuple[str, LineTable]:
    printer = _Printer()
    for kernel in kernels:
        printer.kernel(kernel)
    lines, table = printer.lines, printer.table
    if printer.uses_double:
        lines = [FP64_PRAGMA, ""] + lines
        table = [(line + 2, span) for line, span in table]
    return "\n".join(lines) + "\n", table


class _Printer:
    def __init__(self):
        self.lines: list[str] = []
        self.table: LineTable = []
        self.uses_double = False
        self.address_spaces: dict[str, str] = {}  # array variable -> "__global ", "__local ", ""

    def emit(self, text: str, indent: int, span: Span | None = None) -> None:
        self.lines.append("    " * indent + text)
        if span is not None:
            self.table.append((len(self.lines), span))

    def register_type(self, t: str) -> str:
        self.uses_double |= t == ir.DOUBLE
        return REGISTER_TYPES[t]

    def memory_type(self, t: str) -> str:
        self.uses_double |= t == ir.DOUBLE
        return MEMORY_TYPES[t]

    def pointer(self, name: str, elem: str, space: str) -> str:
        self.address_spaces[name] = space
        return f"{space}{self.memory_type(elem)}* {name}"

    # ---- kernels and statements
    def kernel(self, k: Kernel) -> None:
        if self.lines:
            self.emit("", 0)
        params = [self.pointer(p.name, p.type.elem, "__global ") if isinstance(p.type, ir.ArrayType)
                  else f"{self.register_type(p.type)} {p.name}" for p in k.params]
        params += [self.pointer(a.param_name, a.var.type.elem, "__local ") for a in k.local_allocs]
        if k.flags_failures:
            params.append(f"__global int* {FAILURE_FLAG}")
        head = f"__kernel void {k.name}({', '.join(params)}) {{"
        if len(head) <= 100:
            self.emit(head, 0, k.span)
        else:
            self.emit(f"__kernel void {k.name}(", 0, k.span)
            for i, param in enumerate(params):
                self.emit(param + ("," if i < len(params) - 1 else ") {"), 2)
        self.block(k.body, 1)
        self.emit("}", 0)

    def block(self, stmts: list[ir.Stmt], indent: int) -> None:
        for s in stmts:
            self.stmt(s, indent)

    def stmt(self, s: ir.Stmt, indent: int) -> None:
        span = s.span
        if isinstance(s, ir.Declare):
            if isinstance(s.var.type, ir.ArrayType):
                space = self.address_spaces[_array_root(s.init).name]
                self.emit(f"{self.pointer(s.var.name, s.var.type.elem, space)} = "
                          f"{self.expr(s.init)};", indent, span)
            else:
                self.emit(f"{self.register_type(s.var.type)} {s.var.name} = {self.expr(s.init)};",
                          indent, span)
        elif isinstance(s, ir.Assign):
            self.emit(f"{s.var.name} = {self.expr(s.value)};", indent, span)
        elif isinstance(s, ir.Store):
            self.emit(f"{s.array.name}[{self.expr(s.index)}] = {self.expr(s.value)};", indent, span)
        elif isinstance(s, ir.Alloc):  # thread level, small and of constant size
            self.address_spaces[s.var.name] = ""
            self.emit(f"{self.memory_type(s.var.type.elem)} {s.var.name}[{max(1, s.size.value)}];",
                      indent, span)
        elif isinstance(s, LocalAlloc):
            self.local_alloc(s, indent)
        elif isinstance(s, StridedFor):
            v = s.var.name
            self.emit(f"for (int {v} = {self.expr(s.start)}; {v} < {self.expr(s.bound)}; "
                      f"{v} += {self.expr(s.step)}) {{", indent, span)
            self.close(s.body, indent)
        elif isinstance(s, ir.SeqFor):
            v = s.var.name
            self.emit(f"for (int {v} = 0; {v} < {self.expr(s.bound)}; {v}++) {{", indent, span)
            self.close(s.body, indent)
        elif isinstance(s, ir.While):
            self.loop(s, indent)
        elif isinstance(s, ir.If):
            self.emit(f"if ({self.condition(s.cond)}) {{", indent, span)
            self.block(s.then, indent + 1)
            if s.else_:
                self.emit("} else {", indent)
                self.block(s.else_, indent + 1)
            self.emit("}", indent)
        elif isinstance(s, ir.Barrier):
            self.emit(BARRIER, indent, span)
        elif isinstance(s, FlagFailure):
            self.emit(f"if ({self.condition(s.cond)}) atomic_cmpxchg({FAILURE_FLAG}, 0, {s.code});",
                      indent, span)
        else:
            raise TypeError(f"no OpenCL for {type(s).__name__} inside a kernel")

    def close(self, body: list[ir.Stmt], indent: int) -> None:
        self.block(body, indent + 1)
        self.emit("}", indent)

    def loop(self, s: ir.While, indent: int) -> None:
        """A while loop whose test statements run before every check of its condition."""
        if not s.test:
            self.emit(f"while ({self.condition(s.cond)}) {{", indent, s.span)
            self.close(s.body, indent)
            return
        self.emit("while (1) {", indent, s.span)
        self.block(s.test, indent + 1)
        self.emit(f"if (!{self.expr(s.cond)}) break;", indent + 1, s.span)
        self.close(s.body, indent)

    def local_alloc(self, s: LocalAlloc, indent: int) -> None:
        elem = s.var.type.elem
        if s.per_work_item:
            self.emit(f"{self.pointer(s.var.name, elem, '__local ')} = {s.param_name} + "
                      f"get_local_id(0) * {self.expr(s.size)};", indent, s.span)
        else:
            self.emit(f"// {s.var.name}: {ir.show_expr(s.size)} {self.memory_type(elem)}s of local "
                      "memory, a kernel argument", indent, s.span)

    # ---- expressions
    def condition(self, e: ir.Expr) -> str:
        """`e` for `if (...)`: without its own outer parentheses, which make clang warn."""
        text = self.expr(e)
        return text[1:-1] if _parenthesized(text) else text

    def expr(self, e: ir.Expr) -> str:
        self.uses_double |= ir.type_of(e) == ir.DOUBLE
        if isinstance(e, ir.Const):
            return _constant(e)
        if isinstance(e, ir.Var):
            return e.name
        if isinstance(e, WorkItemQuery):
            return f"get_{e.name}(0)"
        if isinstance(e, ir.Index):
            return f"{e.array.name}[{self.expr(e.index)}]"
        if isinstance(e, ir.Bin):
            left, right = self.expr(e.left), self.expr(e.right)
            double_args = ir.type_of(e.left) == ir.DOUBLE
            if e.op in ("min", "max"):
                return f"{'f' if double_args else ''}{e.op}({left}, {right})"
            if e.op == "%" and double_args:
                return f"fmod({left}, {right})"
            return f"({left} {e.op} {right})"
        if isinstance(e, ir.Un):
            return _unary(e, self.expr(e.arg))
        if isinstance(e, ir.Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.then)} : {self.expr(e.else_)})"
        raise TypeError(f"no OpenCL for the expression {e!r}")


def _unary(e: ir.Un, arg: str) -> str:
    double_arg = ir.type_of(e.arg) == ir.DOUBLE
    if e.op == "abs":
        return f"fabs({arg})" if double_arg else f"((int)abs({arg}))"  # abs(int) is a uint
    if e.op == "sign":
        sign = f"(({arg} > 0) - ({arg} < 0))"
        return f"((double){sign})" if e.type == ir.DOUBLE else sign
    return {"neg": f"(-{arg})", "not": f"(!{arg})", "clz": f"clz({arg})", "sqrt": f"sqrt({arg})",
            "i2d": f"((double){arg})", "d2i": f"((int){arg})", "b2i": f"((int){arg})"}[e.op]


def _constant(c: ir.Const) -> str:
    if c.type == ir.BOOL:
        return "1" if c.value else "0"
    if c.type == ir.DOUBLE:
        text = repr(float(c.value))
        special = {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}
        if text in special:
            return special[text]
        return f"({text})" if text.startswith("-") else text
    value = int(c.value)
    if value == -2**31:
        return "(-2147483647 - 1)"  # 2147483648 alone does not fit an int
    return f"({value})" if value < 0 else str(value)


def _parenthesized(text: str) -> bool:
    """Whether all of `text` is one parenthesized expression."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return ch == ")" and i == len(text) - 1
    return False


def _array_root(e: ir.Expr) -> ir.Var:
    """The array variable an array-valued expression (a variable or a choice) starts from."""
    return _array_root(e.then) if isinstance(e, ir.Select) else e
