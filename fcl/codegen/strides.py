"""Row strides of 2-D work-groups' global accesses passed as kernel arguments.

PoCL runs a 16 x 16 work-group as a loop over its rows around a loop over its columns. LLVM
unrolls the loop of 16 columns and vectorizes the loop over rows, eight rows at a time: when the
row stride of a global access is a constant (a matrix width known at compile time), each of the
16 unrolled accesses becomes a gather or a scatter over eight rows; when the stride is a value
the compiler cannot see, the loop over rows stays scalar and each row's 16 neighbouring elements
are one vector access. The original repository's 4096 x 4096 transpose took 1.1 times the
reference kernel's time with the constant stride and 0.7 times with an argument
(bench/README.md). A GPU reads a kernel argument from constant memory for the same cost.

widen.py applies this to the size_t part of the global subscripts it widens: there the ids are
visible, and the argument is never negative. Analyses see the constant still, in the WideInt's
`expr`.
"""
from __future__ import annotations

from fcl.codegen.kernel import Special
from fcl.il import ir
from fcl.il.traverse import map_children, sub_exprs


class StrideArguments:
    """The int arguments standing for a kernel's row strides, by value."""

    def __init__(self) -> None:
        self.arguments: dict[int, ir.Var] = {}

    def rewrite(self, e: ir.Expr) -> ir.Expr:
        """e, a size_t subscript, with each constant multiplying an expression over the row id
        replaced by an argument."""
        if isinstance(e, ir.Bin) and e.op == "*":
            for factor, const in ((e.left, e.right), (e.right, e.left)):
                if isinstance(const, ir.Const) and const.type == ir.INT and const.value > 1 \
                        and _mentions_row(factor):
                    return ir.Bin("*", self.rewrite(factor), self._argument(int(const.value)),
                                  ir.INT)
        if isinstance(e, ir.Bin) and e.op in ("+", "*"):
            return map_children(e, self.rewrite)
        return e

    def constants(self) -> list[tuple[ir.Var, int]]:
        """(argument, value) pairs, for Kernel.constants."""
        return [(var, value) for value, var in sorted(self.arguments.items())]

    def _argument(self, value: int) -> ir.Var:
        if value not in self.arguments:
            # The IL's own names end in _N: this one cannot clash with them.
            self.arguments[value] = ir.Var(f"fcl_stride{value}", ir.INT)
        return self.arguments[value]


def _mentions_row(e: ir.Expr) -> bool:
    if isinstance(e, Special):
        return e.name == "local_y"
    return any(_mentions_row(part) for part in sub_exprs(e))
