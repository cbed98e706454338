"""Which global arrays' loaded values each value of a kernel depends on: a load whose index needs
an element just loaded (x[col[j]]), a store of a loaded value, an access under a branch decided
by a loaded value. The cost model lets a warp keep its independent global requests on their way
together; a request that needs one of them waits for it (memory-level parallelism, docs/costs.md).

Flow-insensitive, as a fixpoint over the kernel's assignments: a variable depends on every array
any of its assignments (or the branches around them) read, which may count more than a given
execution needs but never less.
"""
from __future__ import annotations

from fcl.il import ir
from fcl.il.traverse import stmt_exprs, sub_exprs

Arrays = frozenset[str]
NONE: Arrays = frozenset()


class LoadedValues:
    def __init__(self, body: list[ir.Stmt], global_arrays: set[str]):
        self.global_arrays = global_arrays
        self.roots: dict[str, str] = {}    # array aliases -> the memory they name
        self.of: dict[str, Arrays] = {}    # variables and arrays -> the global arrays behind them
        self.changed = True
        while self.changed:
            self.changed = False
            self._walk(body, NONE)

    def root(self, name: str) -> str:
        return self.roots.get(name, name)

    def expr(self, e: ir.Expr) -> Arrays:
        """The global arrays whose loaded elements e needs, its own reads included."""
        if isinstance(e, ir.Index):
            root = self.root(e.array.name)
            own = frozenset({root}) if root in self.global_arrays else NONE
            return own | self.of.get(root, NONE) | self.expr(e.index)
        if isinstance(e, ir.Var):
            return self.of.get(e.name, NONE)
        found = NONE
        for part in sub_exprs(e):
            found |= self.expr(part)
        return found

    def _add(self, name: str, arrays: Arrays) -> None:
        known = self.of.get(name, NONE)
        if not arrays <= known:
            self.of[name] = known | arrays
            self.changed = True

    def _walk(self, stmts: list[ir.Stmt], control: Arrays) -> None:
        for s in stmts:
            if isinstance(s, (ir.Declare, ir.Assign)):
                value = s.init if isinstance(s, ir.Declare) else s.value
                if isinstance(s.var.type, ir.ArrayType) and isinstance(value, ir.Var):
                    self.roots[s.var.name] = self.root(value.name)
                else:
                    self._add(s.var.name, self.expr(value) | control)
            elif isinstance(s, ir.Store):  # an array holds what was stored into it
                self._add(self.root(s.array.name),
                          self.expr(s.value) | self.expr(s.index) | control)
            else:
                inner = control
                for e in stmt_exprs(s):
                    inner |= self.expr(e)
                for body in ir.children(s):
                    self._walk(body, inner)
