"""Print kernels as readable OpenCL C, with a table from generated lines to FCL spans."""
from __future__ import annotations

from fcl.errors import Span
from fcl.il import ir
from fcl.opencl.kernelize import Kernel, Special, StridedFor

C_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.BOOL: "int"}
# Bools are stored in memory as one byte; kernel arguments cannot be bool at all.
MEMORY_TYPES = {ir.INT: "int", ir.DOUBLE: "double", ir.BOOL: "uchar"}
SPECIALS = {"local_id": "get_local_id(0)", "local_size": "get_local_size(0)",
            "group_id": "get_group_id(0)", "num_groups": "get_num_groups(0)",
            "global_id": "get_global_id(0)", "global_size": "get_global_size(0)"}
FAIL_FLAG = "fcl_fail"
ABORT_FLAG = "fcl_abort"


def c_expr(e: ir.Expr) -> str:
    if isinstance(e, ir.Const):
        if e.type == ir.BOOL:
            return "1" if e.value else "0"
        if e.type == ir.DOUBLE:
            text = repr(float(e.value))
            if text in ("inf", "-inf", "nan"):
                return {"inf": "INFINITY", "-inf": "(-INFINITY)", "nan": "NAN"}[text]
            return text if any(c in text for c in ".e") else text + ".0"
        value = int(e.value)
        return "(-2147483647 - 1)" if value == -2**31 else str(value) if value >= 0 else f"({value})"
    if isinstance(e, ir.Var):
        return e.name
    if isinstance(e, Special):
        return f"((int){SPECIALS[e.name]})"
    if isinstance(e, ir.Index):
        return f"{e.array.name}[{c_expr(e.index)}]"
    if isinstance(e, ir.Bin):
        left, right = c_expr(e.left), c_expr(e.right)
        if e.op in ("min", "max"):
            fn = ("f" + e.op) if e.type == ir.DOUBLE else e.op
            return f"{fn}({left}, {right})"
        return f"({left} {e.op} {right})"
    if isinstance(e, ir.Un):
        arg = c_expr(e.arg)
        return {
            "neg": f"(-{arg})", "not": f"(!{arg})",
            "abs": f"fabs({arg})" if e.type == ir.DOUBLE else f"((int)abs({arg}))",
            "sign": f"(({arg} > 0) - ({arg} < 0))", "clz": f"clz({arg})",
            "i2d": f"((double){arg})", "d2i": f"((int){arg})", "b2i": f"((int){arg})",
            "sqrt": f"sqrt({arg})",
        }[e.op]
    if isinstance(e, ir.Select):
        return f"({c_expr(e.cond)} ? {c_expr(e.then)} : {c_expr(e.else_)})"
    raise TypeError(e)


class KernelPrinter:
    def __init__(self, line_offset: int):
        self.lines: list[str] = []
        self.table: list[tuple[int, Span]] = []
        self.line_offset = line_offset
        self.spaces: dict[str, str] = {}

    def line(self, text: str, indent: int, span: Span | None) -> None:
        self.lines.append("    " * indent + text)
        if span is not None:
            self.table.append((self.line_offset + len(self.lines), span))

    def kernel(self, k: Kernel) -> None:
        params = []
        for p in k.params:
            if isinstance(p.type, ir.ArrayType):
                self.spaces[p.name] = "__global"
                params.append(f"__global {MEMORY_TYPES[p.type.elem]}* {p.name}")
            else:
                params.append(f"{C_TYPES[p.type]} {p.name}")
        for n, _ in enumerate(k.slots):
            params.append(f"__local uchar* local_slot{n}")
        for local in k.locals:
            self.spaces[local.var.name] = "__local"
            if local.per_item:
                params.append(f"__local {MEMORY_TYPES[local.var.type.elem]}* {local.var.name}_pool")
        if k.fails:
            params.append(f"__global int* {FAIL_FLAG}")
        if k.abortable:
            params.append(f"__global volatile int* {ABORT_FLAG}")
        self.line(f"__kernel void {k.name}({', '.join(params)}) {{", 0, k.span)
        if k.abortable:
            self.line("__local int fcl_stop;", 1, None)
        for n, slot in enumerate(k.slots):
            for local in slot:
                elem = MEMORY_TYPES[local.var.type.elem]
                self.line(f"__local {elem}* {local.var.name} = (__local {elem}*)local_slot{n};", 1,
                          local.span)
        for local in k.locals:
            if local.per_item:
                elem = MEMORY_TYPES[local.var.type.elem]
                self.line(f"__local {elem}* {local.var.name} = {local.var.name}_pool + "
                          f"get_local_id(0) * ({c_expr(local.size)});", 1, local.span)
        for var, size in k.private:
            self.spaces[var.name] = ""
            self.line(f"{MEMORY_TYPES[var.type.elem]} {var.name}[{size}];", 1, None)
        self.fails = k.fails
        self.block(k.body, 1)
        self.line("}", 0, None)

    def block(self, stmts: list[ir.Stmt], indent: int) -> None:
        for s in stmts:
            self.stmt(s, indent)

    def stmt(self, s: ir.Stmt, indent: int) -> None:
        span = s.span
        if isinstance(s, ir.Declare):
            if isinstance(s.var.type, ir.ArrayType):
                space = self.spaces.get(s.init.name, "") if isinstance(s.init, ir.Var) else ""
                self.spaces[s.var.name] = space
                prefix = f"{space} " if space else ""
                self.line(f"{prefix}{MEMORY_TYPES[s.var.type.elem]}* {s.var.name} = "
                          f"{c_expr(s.init)};", indent, span)
            else:
                self.line(f"{C_TYPES[s.var.type]} {s.var.name} = {c_expr(s.init)};", indent, span)
        elif isinstance(s, ir.Assign):
            self.line(f"{s.var.name} = {c_expr(s.value)};", indent, span)
        elif isinstance(s, ir.Store):
            value = c_expr(s.value)
            if s.array.type.elem == ir.BOOL:
                value = f"(uchar){value}"
            self.line(f"{s.array.name}[{c_expr(s.index)}] = {value};", indent, span)
        elif isinstance(s, StridedFor):
            v = s.var.name
            self.line(f"for (int {v} = {c_expr(s.start)}; {v} < {c_expr(s.bound)}; "
                      f"{v} += {c_expr(s.step)}) {{", indent, span)
            self.block(s.body, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.SeqFor):
            v = s.var.name
            self.line(f"for (int {v} = 0; {v} < {c_expr(s.bound)}; {v}++) {{", indent, span)
            self.block(s.body, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.While):
            self.line("while (1) {", indent, span)
            self.block(s.test, indent + 1)
            if s.level == "block":
                # The whole group must agree to stop, or some would wait at a barrier forever.
                self.line("barrier(CLK_LOCAL_MEM_FENCE);", indent + 1, None)
                self.line(f"if (get_local_id(0) == 0) fcl_stop = *{ABORT_FLAG};", indent + 1, None)
                self.line("barrier(CLK_LOCAL_MEM_FENCE);", indent + 1, None)
                self.line(f"if (fcl_stop || !{c_expr(s.cond)}) break;", indent + 1, span)
            else:
                self.line(f"if (*{ABORT_FLAG} || !{c_expr(s.cond)}) break;", indent + 1, span)
            self.block(s.body, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.If):
            self.line(f"if ({c_expr(s.cond)}) {{", indent, span)
            self.block(s.then, indent + 1)
            if s.else_:
                self.line("} else {", indent, None)
                self.block(s.else_, indent + 1)
            self.line("}", indent, None)
        elif isinstance(s, ir.Barrier):
            self.line("barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);", indent, span)
        elif isinstance(s, ir.Fail):
            code = self.fails.index(s) + 1
            self.line(f"if ({c_expr(s.cond)}) atomic_cmpxchg({FAIL_FLAG}, 0, {code});", indent,
                      span)
        elif isinstance(s, ir.Alloc):
            # The memory itself is a kernel argument, sized by the host before the launch.
            self.line(f"/* {s.var.name}: {c_expr(s.size)} x {MEMORY_TYPES[s.var.type.elem]} "
                      f"in local memory */", indent, span)
        else:
            raise TypeError(s)


def opencl_source(kernels: list[Kernel]) -> tuple[str, list[tuple[int, Span]]]:
    """The OpenCL C of all kernels, and (line number, FCL span) pairs for its lines."""
    printer = KernelPrinter(0)
    for k in kernels:
        printer.kernel(k)
        printer.line("", 0, None)
    text = "\n".join(printer.lines)
    if "double" not in text:
        return text, printer.table
    header = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n\n"
    return header + text, [(line + 2, span) for line, span in printer.table]
