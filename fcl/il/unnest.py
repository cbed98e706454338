"""Bounding how deeply IL expressions nest, for programs nested thousands deep.

A deeply nested FCL program (an `if` chain, an arithmetic expression in thousands of
parentheses, a chain of functions inlined into one expression) lowers to IL expressions just as
deep. C compilers refuse those (clang, and so PoCL: "bracket nesting level exceeded maximum of
256"), and every later recursive walk of the IL would have to go that deep. This pass keeps each
expression within LIMIT levels by putting parts of the deeper ones into new variables, declared
just before the statement that reads them:

* a part that is evaluated whenever the statement runs (an operand, an index, a condition) is
  declared as it is;
* a conditional (`c ? a : b`, or `a && b` and `a || b`, whose right side is evaluated only
  sometimes) becomes statements that evaluate only the branch taken. A chain of them, followed
  along its deeper branch (`c1 ? a1 : c2 ? a2 : ... : d`), becomes `if`s nested in each other's
  `else` in groups of LIMIT, each group run only while a flag says that no earlier condition has
  chosen its branch: nested all the way, they would take C as many braces as the chain is
  long; a flag for every link makes LLVM (PoCL) take time and memory quadratic in its length.

Statements whose expressions nest no deeper than LIMIT, so those of all ordinary programs, are
left as they are.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from fcl.errors import Span
from fcl.il import ir
from fcl.il.traverse import expr_fields, map_children, stmt_exprs
from fcl.il.values import ZERO

# In IL levels: the C for one level (`(a + b)`, `(c ? a : b)`, `a[i]`) opens at most two
# brackets, so with this the C stays well within clang's 256.
LIMIT = 64


def unnest(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    return _Unnest(stmts).block(stmts)


class _Unnest:
    def __init__(self, program: list[ir.Stmt]):
        self.program = program
        self.taken: set[str] | None = None  # the program's variable names, once needed
        self.counter = 0
        self.depths: dict[int, tuple[ir.Expr, int]] = {}  # by id; the expression kept alive
        self.span: Span | None = None  # of the statement being rewritten

    def block(self, stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        """stmts rewritten, or stmts itself when nothing in them is too deep."""
        out: list[ir.Stmt] = []
        for s in stmts:
            bodies: dict[str, Any] = {}
            for name in ir.BODIES:
                body = getattr(s, name, None)
                if isinstance(body, list) and (new := self.block(body)) is not body:
                    bodies[name] = new
            out += self.statement(replace(s, **bodies) if bodies else s)
        unchanged = len(out) == len(stmts) and all(a is b for a, b in zip(out, stmts))
        return stmts if unchanged else out

    def statement(self, s: ir.Stmt) -> list[ir.Stmt]:
        """s, after the declarations its deep expressions need (in a while's test, for its
        condition, which is evaluated before each iteration)."""
        names = [name for name in expr_fields(s) if isinstance(getattr(s, name), ir.Expr)]
        values = s.values if isinstance(s, ir.Fail) else []
        if all(self.depth(e) <= LIMIT for e in [getattr(s, name) for name in names] + values):
            return [s]
        self.span = s.span
        before: list[ir.Stmt] = []
        changes: dict[str, Any] = {name: self.strict(getattr(s, name), before)[0]
                                   for name in names}
        if isinstance(s, ir.While):
            return [replace(s, test=s.test + before, **changes)]
        if isinstance(s, ir.Fail) and values:  # its values are evaluated only when it fails
            shown: list[ir.Stmt] = []
            values = [self.strict(e, shown)[0] for e in values]
            failure = replace(s, cond=ir.Const(True, ir.BOOL), values=values)
            return [*before, ir.If(changes["cond"], [*shown, failure], [], span=s.span)]
        return [*before, replace(s, **changes)]

    def depth(self, e: ir.Expr) -> int:
        known = self.depths.get(id(e))
        if known is not None:
            return known[1]
        parts = [getattr(e, name) for name in vars(e) if isinstance(getattr(e, name), ir.Expr)]
        d = 1 + max((self.depth(part) for part in parts), default=0)
        self.depths[id(e)] = (e, d)
        return d

    def strict(self, e: ir.Expr, before: list[ir.Stmt]) -> tuple[ir.Expr, int]:
        """e, evaluated whenever `before` runs to its end, as an expression at most LIMIT
        deep (and that depth), with what it needs declared in `before`."""
        d = self.depth(e)
        if d <= LIMIT:
            return e, d
        if _as_select(e) is not None:
            return self.conditional(e, before), 1
        deepest = 0

        def part(sub: ir.Expr) -> ir.Expr:
            nonlocal deepest
            new, d = self.strict(sub, before)
            if d >= LIMIT:
                new, d = self.declare(new, before), 1
            deepest = max(deepest, d)
            return new

        rebuilt = map_children(e, part)
        self.depths[id(rebuilt)] = (rebuilt, deepest + 1)
        return rebuilt, deepest + 1

    def conditional(self, e: ir.Expr, before: list[ir.Stmt]) -> ir.Var:
        """A variable that statements appended to `before` set to the value of the deep
        conditional e, evaluating only the branches taken (see the module's docstring)."""
        t = ir.type_of(e)
        assert isinstance(t, str)  # conditionals choose between scalars
        result = self.fresh(t)
        before.append(ir.Declare(result, ir.Const(ZERO[t], t), span=self.span))
        flag_at = len(before)
        more: ir.Var | None = None  # no condition so far has chosen its branch; for groups
        chosen_blocks: list[list[ir.Stmt]] = []
        here = before  # where the next condition is evaluated
        links = 0
        link = _as_select(e)
        while link is not None and self.depth(e) > LIMIT:
            if links == LIMIT:  # the `else`s nest no deeper: go on in a new `if (more)`
                more = more or self.fresh(ir.BOOL)
                here, links = [], 0
                before.append(ir.If(more, here, [], span=self.span))
            cond, then, else_ = link
            if self.depth(then) > self.depth(else_):  # go on along the deeper branch
                cond, then, else_ = ir.Un("not", cond, ir.BOOL), else_, then
            cond, _ = self.strict(cond, here)
            chosen: list[ir.Stmt] = []
            self.assign(result, then, chosen)
            chosen_blocks.append(chosen)
            otherwise: list[ir.Stmt] = []
            here.append(ir.If(cond, chosen, otherwise, span=self.span))
            here, links = otherwise, links + 1
            e, link = else_, _as_select(else_)
        self.assign(result, e, here)
        if more is not None:
            before.insert(flag_at, ir.Declare(more, ir.Const(True, ir.BOOL), span=self.span))
            for chosen in chosen_blocks:
                chosen.append(ir.Assign(more, ir.Const(False, ir.BOOL), span=self.span))
        return result

    def assign(self, var: ir.Var, e: ir.Expr, stmts: list[ir.Stmt]) -> None:
        value, _ = self.strict(e, stmts)
        stmts.append(ir.Assign(var, value, span=self.span))

    def declare(self, e: ir.Expr, before: list[ir.Stmt]) -> ir.Var:
        var = self.fresh(ir.type_of(e))
        before.append(ir.Declare(var, e, span=self.span))
        return var

    def fresh(self, t: ir.ILType) -> ir.Var:
        if self.taken is None:
            found: dict[str, ir.Var] = {}
            for s in ir.walk(self.program):
                for e in stmt_exprs(s, targets=True):
                    ir.expr_vars(e, found)
            self.taken = set(found)
        while True:
            self.counter += 1
            name = f"part_{self.counter}"
            if name not in self.taken:
                return ir.Var(name, t)


def _as_select(e: ir.Expr) -> tuple[ir.Expr, ir.Expr, ir.Expr] | None:
    """e as (condition, then, else) when only one of its parts is evaluated, else None."""
    if isinstance(e, ir.Select):
        return e.cond, e.then, e.else_
    if isinstance(e, ir.Bin) and e.op == "&&":
        return e.left, e.right, ir.Const(False, ir.BOOL)
    if isinstance(e, ir.Bin) and e.op == "||":
        return e.left, ir.Const(True, ir.BOOL), e.right
    return None
