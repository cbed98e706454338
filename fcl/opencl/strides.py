"""Row strides of 2-D work-groups' global accesses passed as kernel arguments.

PoCL runs a 16 x 16 work-group as a loop over its rows around a loop over its columns. LLVM
unrolls the loop of 16 columns and vectorizes the loop over rows, eight rows at a time: when the
row stride of a global access is a constant (a matrix width known at compile time), each of the
16 unrolled accesses becomes a gather or a scatter over eight rows; when the stride is a value
the compiler cannot see, the loop over rows stays scalar and each row's 16 neighbouring elements
are one vector access. The original repository's 4096 x 4096 transpose took 1.1 times the
reference kernel's time with the constant stride and 0.7 times with an argument
(bench/README.md). A GPU reads a kernel argument from constant memory for the same cost.

Only size_t subscripts (WideInt, see widen.py) are rewritten: there the ids are visible, and the
argument is never negative. Analyses see the constant still, in the WideInt's `expr`.
"""
from __future__ import annotations

from fcl.il import ir
from fcl.il.traverse import map_bodies, map_children, map_stmt_exprs, sub_exprs
from fcl.opencl.kernel import Kernel, Special, WideInt, global_arrays


def stride_arguments(kernel: Kernel) -> None:
    """In a 2-D work-group's kernel, each constant multiplying an expression over the row id in
    a global array's size_t subscript becomes an int argument (kernel.constants)."""
    if not kernel.width:
        return
    in_global = global_arrays(kernel)
    arguments: dict[int, ir.Var] = {}

    def argument(value: int) -> ir.Var:
        if value not in arguments:
            # The IL's own names end in _N: this one cannot clash with them.
            arguments[value] = ir.Var(f"fcl_stride{value}", ir.INT)
        return arguments[value]

    def stride(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Bin) and e.op == "*":
            for factor, const in ((e.left, e.right), (e.right, e.left)):
                if isinstance(const, ir.Const) and const.type == ir.INT and const.value > 1 \
                        and _mentions_row(factor):
                    return ir.Bin("*", stride(factor), argument(int(const.value)), ir.INT)
        if isinstance(e, ir.Bin) and e.op in ("+", "*"):
            return map_children(e, stride)
        return e

    def subscript(array: ir.Var, index: ir.Expr) -> ir.Expr:
        if array.name not in in_global or not isinstance(index, WideInt) or index.truncate:
            return expr(index)
        return WideInt(index.expr, stride(index.wide), truncate=False)

    def expr(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Index):
            return ir.Index(e.array, subscript(e.array, e.index))
        return map_children(e, expr)

    def stmt(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.Store):
            new: ir.Stmt = ir.Store(s.array, subscript(s.array, s.index), expr(s.value),
                                    span=s.span)
        else:
            new = map_stmt_exprs(s, expr)
        return map_bodies(new, lambda body: [stmt(child) for child in body])

    kernel.body = [stmt(s) for s in kernel.body]
    kernel.constants = [(var, value) for value, var in sorted(arguments.items())]


def _mentions_row(e: ir.Expr) -> bool:
    if isinstance(e, Special):
        return e.name == "local_y"
    return any(_mentions_row(part) for part in sub_exprs(e))
