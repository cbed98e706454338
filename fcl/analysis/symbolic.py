"""An access's index as a formula in the work-group id, the work-item's local id and loop counters.

The kernel's variables that are defined once are replaced by their definitions (a value read
from memory shows as the read, `arr_3[i_6]`), then sums are normalized, so `ix_23` reads as,
say, `group * 256 + item`.
"""
from __future__ import annotations

import re

from fcl.codegen.kernel import Kernel, Special, StridedFor, WideInt
from fcl.il import ir
from fcl.il.simplify import linear, mk_bin, mk_un
from fcl.il.traverse import map_children, single_definitions

SPECIAL_NAMES = {"local_id": "item", "local_x": "item.x", "local_y": "item.y",
                 "group_id": "group", "local_size": "block_size", "num_groups": "groups",
                 "global_id": "global_item", "global_size": "global_size"}
PRECEDENCE = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7,
              ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
BITWISE = {"&", "|", "^", "<<", ">>"}
MAX_SIZE = 60  # inlined definitions that would make the formula longer than this stay named


def definitions(kernel: Kernel) -> dict[str, ir.Expr]:
    """Variables of the kernel declared once and never assigned, with their values (the
    counter of a loop run once by each work-item is its start)."""
    found = single_definitions(kernel.body)
    if kernel.group_var is not None:
        found.setdefault(kernel.group_var.name, Special("group_id"))
    for s in ir.walk(kernel.body):
        if isinstance(s, StridedFor) and s.once:
            found.setdefault(s.var.name, s.start)
    return found


def loops(kernel: Kernel, names: dict[str, str] | None = None) -> dict[str, str]:
    """What each loop counter of the kernel runs over, as text (the program's variables by
    their FCL `names`)."""
    defs = definitions(kernel)
    ranges = {}
    for s in ir.walk(kernel.body):
        if isinstance(s, StridedFor) and not s.once:
            start, step, bound = (show(_renamed(_expand(e, defs, set()), names or {}))
                                  for e in (s.start, s.step, s.bound))
            ranges[s.var.name] = f"{s.var.name} = {start}, + {step} while < {bound}"
        elif isinstance(s, ir.SeqFor):
            bound = show(_renamed(_expand(s.bound, defs, set()), names or {}))
            ranges[s.var.name] = f"{s.var.name} = 0 … {bound} - 1"
    return ranges


def formula(e: ir.Expr, kernel: Kernel, names: dict[str, str] | None = None
            ) -> tuple[str, list[str]]:
    """The index `e` in terms of the work-item, its work-group and loop counters, and what
    the loop counters it mentions run over; the program's variables by their FCL `names`
    (fcl.codegen.kernel.array_labels), and without the guards that keep a faulty index or
    divisor in range (the run-time checks report those)."""
    text = show(_renamed(_unguarded(_expand(e, definitions(kernel), set())), names or {}))
    return text, [r for name, r in loops(kernel, names).items() if _mentions(text, name)]


def _unguarded(e: ir.Expr) -> ir.Expr:
    """e without `x < 0 || x >= n ? 0 : x` (a checked index) and `d == 0 ? 1 : d` (a checked
    divisor): x and d."""
    e = map_children(e, _unguarded)
    if isinstance(e, ir.Select):
        kept = ir.expr_key(e.else_)
        c = e.cond
        if isinstance(e.then, ir.Const) and e.then.value == 0 and _out_of_range(c, kept):
            return e.else_
        if isinstance(e.then, ir.Const) and e.then.value == 1 and isinstance(c, ir.Bin) \
                and c.op == "==" and ir.expr_key(c.left) == kept:
            return e.else_
    return e


def _out_of_range(c: ir.Expr, index: str) -> bool:
    """Whether c is a range check of the index `index` (by key): `x < 0`, `x >= n`, or both."""
    if isinstance(c, ir.Bin) and c.op == "||":
        return _out_of_range(c.left, index) and _out_of_range(c.right, index)
    return isinstance(c, ir.Bin) and c.op in ("<", ">=") and ir.expr_key(c.left) == index


def _renamed(e: ir.Expr, names: dict[str, str]) -> ir.Expr:
    if not names:
        return e
    if isinstance(e, ir.Var):
        return ir.Var(names[e.name], e.type) if e.name in names else e
    e = map_children(e, lambda inner: _renamed(inner, names))
    if isinstance(e, ir.Index):  # map_children keeps an array read's array as it is
        return ir.Index(ir.Var(names.get(e.array.name, e.array.name), e.array.type), e.index)
    return e


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def _expand(e: ir.Expr, defs: dict[str, ir.Expr], seen: set[str]) -> ir.Expr:
    if isinstance(e, WideInt):  # how the back end computes it is no part of the formula
        return _expand(e.expr, defs, seen)
    if isinstance(e, Special):  # as a variable, so that sums of them normalize
        return ir.Var(SPECIAL_NAMES.get(e.name, e.name), ir.INT)
    if isinstance(e, ir.Var) and e.name in defs and e.name not in seen:
        value = _expand(defs[e.name], defs, seen | {e.name})
        return value if _size(value) <= MAX_SIZE else e
    if isinstance(e, ir.Bin):
        return mk_bin(e.op, _expand(e.left, defs, seen), _expand(e.right, defs, seen), e.type)
    if isinstance(e, ir.Un):
        return mk_un(e.op, _expand(e.arg, defs, seen), e.type)
    if isinstance(e, ir.Select):
        return ir.Select(_expand(e.cond, defs, seen), _expand(e.then, defs, seen),
                         _expand(e.else_, defs, seen), e.type)
    if isinstance(e, ir.Index):
        return ir.Index(e.array, _expand(e.index, defs, seen))
    return e


def _specials_named(e: ir.Expr) -> ir.Expr:
    """e with work-item builtins as variables of their display names."""
    if isinstance(e, WideInt):
        return _specials_named(e.expr)
    if isinstance(e, Special):
        return ir.Var(SPECIAL_NAMES.get(e.name, e.name), ir.INT)
    if isinstance(e, ir.Bin):
        return ir.Bin(e.op, _specials_named(e.left), _specials_named(e.right), e.type)
    if isinstance(e, ir.Un):
        return ir.Un(e.op, _specials_named(e.arg), e.type)
    if isinstance(e, ir.Select):
        return ir.Select(_specials_named(e.cond), _specials_named(e.then),
                         _specials_named(e.else_), e.type)
    if isinstance(e, ir.Index):
        return ir.Index(e.array, _specials_named(e.index))
    return e


def _term(atom: ir.Expr, coef: int) -> str:
    return show(atom, PRECEDENCE["+"] + 1) if coef == 1 else \
        f"{show(atom, PRECEDENCE['*'])} * {coef}"


def _size(e: ir.Expr) -> int:
    return len(show(e))


def show(e: ir.Expr, context: int = 0) -> str:
    """Infix text with only the parentheses precedence needs; sums read as `a + b - c + 3`,
    or `1023 - a` when no term is positive."""
    if isinstance(e, WideInt):
        return show(e.expr, context)
    if isinstance(e, Special):
        return SPECIAL_NAMES.get(e.name, e.name)
    if isinstance(e, ir.Bin) and e.op in ("+", "-") and e.type == ir.INT:
        terms, const = linear(_specials_named(e))
        plus = [_term(atom, coef) for atom, coef in terms.values() if coef > 0]
        minus = [_term(atom, -coef) for atom, coef in terms.values() if coef < 0]
        parts = plus[:1] + [f"+ {t}" for t in plus[1:]] if plus else [str(const)] if const else []
        parts += [f"- {t}" for t in minus]
        if plus and const:
            parts.append(f"+ {const}" if const > 0 else f"- {-const}")
        text = " ".join(parts) if parts else "0"
        if not plus and not const:
            text = "-" + text[2:]
        return f"({text})" if PRECEDENCE["+"] < context else text
    if isinstance(e, ir.Bin) and e.op in PRECEDENCE:
        level = PRECEDENCE[e.op]
        # Operands of shifts and bitwise operators get parentheses though C needs none:
        # `a + b >> 2` misleads readers.
        inner = PRECEDENCE["*"] + 1 if e.op in BITWISE else level
        text = f"{show(e.left, inner)} {e.op} {show(e.right, max(inner, level + 1))}"
        return f"({text})" if level < context else text
    if isinstance(e, ir.Bin):
        return f"{e.op}({show(e.left)}, {show(e.right)})"
    if isinstance(e, ir.Un):
        return f"-{show(e.arg, 11)}" if e.op == "neg" else f"{e.op}({show(e.arg)})"
    if isinstance(e, ir.Index):
        return f"{e.array.name}[{show(e.index)}]"
    if isinstance(e, ir.Select):
        text = f"{show(e.cond, 1)} ? {show(e.then, 1)} : {show(e.else_, 1)}"
        return f"({text})" if context else text
    return ir.show_expr(e)
