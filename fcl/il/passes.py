"""Optimisation passes over the IL, each a function from statements to statements.

    propagate   variables declared once and never assigned, with a constant or another such
                variable as value, are replaced by that value (then expressions are refolded)
    bound       integer ranges of loop variables and of what is computed from them decide
                comparisons, and turn division and remainder of non-negative values by powers
                of two into shifts and masks
    prune       statements with a constant condition keep only the branch that runs
    sweep       declarations and assignments of variables nothing depends on are dropped

`optimize` runs them to a fixed point. Every expression in the IL is pure, so dropping an
unused computation never changes what a program does.
"""
from __future__ import annotations

from dataclasses import fields, replace

from fcl.il import ir
from fcl.il.simplify import mk_bin, mk_un


def optimize(stmts: list[ir.Stmt], rounds: int = 4) -> list[ir.Stmt]:
    for _ in range(rounds):
        before = ir.show_stmts(stmts)
        stmts = sweep(prune(bound(propagate(stmts))))
        if ir.show_stmts(stmts) == before:
            break
    return stmts


# ---- traversal helpers -------------------------------------------------------------------------

BODIES, _walk = ir.BODIES, ir.walk


def _read_fields(s: ir.Stmt) -> list[str]:
    """The fields holding expressions the statement reads (arrays stored to count as read)."""
    writes = {"var"} if isinstance(s, (ir.Declare, ir.Assign, ir.Alloc)) else \
        {"length"} if isinstance(s, ir.ReadCSV) else set()
    return [f.name for f in fields(s) if f.name not in writes and f.name not in BODIES
            and (isinstance(getattr(s, f.name), ir.Expr) or
                 (isinstance(getattr(s, f.name), list) and getattr(s, f.name)
                  and isinstance(getattr(s, f.name)[0], ir.Expr)))]


def _result_exprs(value) -> list[ir.Expr]:
    if isinstance(value, ir.Expr):
        return [value]
    if isinstance(value, ir.ArrayResult):
        return [value.array, value.length]
    return [e for v in value or () for e in _result_exprs(v)]


def _map_result(value, fn):
    if isinstance(value, ir.Expr):
        return fn(value)
    if isinstance(value, ir.ArrayResult):
        return ir.ArrayResult(value.array, fn(value.length))
    return None if value is None else tuple(_map_result(v, fn) for v in value)


def _exprs(s: ir.Stmt) -> list[ir.Expr]:
    if isinstance(s, ir.Result):
        return _result_exprs(s.value)
    found = []
    for name in _read_fields(s):
        value = getattr(s, name)
        found += value if isinstance(value, list) else [value]
    return found


def map_exprs(stmts: list[ir.Stmt], fn) -> list[ir.Stmt]:
    """The statements with every expression they read rewritten by fn."""
    out = []
    for s in stmts:
        changes = {name: map_exprs(getattr(s, name), fn) for name in BODIES
                   if isinstance(getattr(s, name, None), list)}
        if isinstance(s, ir.Result):
            changes["value"] = _map_result(s.value, fn)
        for name in _read_fields(s):
            value = getattr(s, name)
            changes[name] = [fn(v) for v in value] if isinstance(value, list) else fn(value)
        new = replace(s, **changes) if changes else s
        new.span = s.span
        out.append(new)
    return out


def rebuild(e: ir.Expr, substitute) -> ir.Expr:
    """e with variables substituted and constant parts refolded."""
    if isinstance(e, ir.Var):
        return substitute.get(e.name, e)
    if isinstance(e, ir.Index):
        array = substitute.get(e.array.name, e.array)
        return ir.Index(array if isinstance(array, ir.Var) else e.array, rebuild(e.index, substitute))
    if isinstance(e, ir.Bin):
        return mk_bin(e.op, rebuild(e.left, substitute), rebuild(e.right, substitute), e.type)
    if isinstance(e, ir.Un):
        return mk_un(e.op, rebuild(e.arg, substitute), e.type)
    if isinstance(e, ir.Select):
        cond = rebuild(e.cond, substitute)
        then, else_ = rebuild(e.then, substitute), rebuild(e.else_, substitute)
        if isinstance(cond, ir.Const):
            return then if cond.value else else_
        return ir.Select(cond, then, else_, e.type)
    return e


def _assigned(stmts: list[ir.Stmt]) -> set[str]:
    """Variables changed after their declaration."""
    return ({s.var.name for s in _walk(stmts) if isinstance(s, ir.Assign)} |
            {s.length.name for s in _walk(stmts) if isinstance(s, ir.ReadCSV)})


# ---- the passes --------------------------------------------------------------------------------

def propagate(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    assigned = _assigned(stmts)
    substitute: dict[str, ir.Expr] = {}
    for s in _walk(stmts):
        if isinstance(s, ir.Declare) and s.var.name not in assigned:
            init = rebuild(s.init, substitute)
            if isinstance(init, ir.Const) or (isinstance(init, ir.Var) and init.name not in assigned):
                substitute[s.var.name] = init
    if not substitute:
        return stmts
    rewritten = map_exprs(stmts, lambda e: rebuild(e, substitute))
    return _drop(rewritten, set(substitute), (ir.Declare,))


Interval = tuple[int, int]
INT_MIN, INT_MAX = -2**31, 2**31 - 1


def bound(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """Rewrite expressions with what the ranges of integer variables tell (see the module
    docstring). A loop variable lies in [0, bound); a variable declared once and never assigned
    lies in the range of its initial value. Names are unique, so one table serves all scopes."""
    assigned = _assigned(stmts)
    ranges: dict[str, Interval] = {}

    def visit(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out = []
        for s in stmts:
            changes = {name: _ranged(getattr(s, name), ranges) for name in _read_fields(s)
                       if isinstance(getattr(s, name), ir.Expr)}
            new = replace(s, **changes) if changes else s
            new.span = s.span
            if isinstance(new, ir.Declare) and new.var.type == ir.INT \
                    and new.var.name not in assigned:
                found = interval(new.init, ranges)
                if found is not None:
                    ranges[new.var.name] = found
            if isinstance(new, (ir.SeqFor, ir.ParFor, ir.Distribute)):
                limit = interval(new.bound, ranges)
                ranges[new.var.name] = (0, max(limit[1] - 1, 0) if limit else INT_MAX)
            for name in BODIES:
                if isinstance(getattr(new, name, None), list):
                    setattr(new, name, visit(getattr(new, name)))
            out.append(new)
        return out

    return visit(stmts)


def _ranged(e: ir.Expr, ranges: dict[str, Interval]) -> ir.Expr:
    """e with the rewrites its operands' ranges allow, bottom-up."""
    if isinstance(e, ir.Index):
        return ir.Index(e.array, _ranged(e.index, ranges))
    if isinstance(e, ir.Un):
        return mk_un(e.op, _ranged(e.arg, ranges), e.type)
    if isinstance(e, ir.Select):
        cond = _ranged(e.cond, ranges)
        then, else_ = _ranged(e.then, ranges), _ranged(e.else_, ranges)
        if isinstance(cond, ir.Const):
            return then if cond.value else else_
        return ir.Select(cond, then, else_, e.type)
    if isinstance(e, ir.Var):
        known = ranges.get(e.name)
        return ir.Const(known[0], ir.INT) if known and known[0] == known[1] else e
    if not isinstance(e, ir.Bin):
        return e
    left, right = _ranged(e.left, ranges), _ranged(e.right, ranges)
    a, b = interval(left, ranges), interval(right, ranges)
    if a is not None and b is not None:
        if e.op in ir.COMPARISONS:
            decided = _decide(e.op, a, b)
            if decided is not None:
                return ir.Const(decided, ir.BOOL)
        if e.op in ("min", "max") and (a[1] <= b[0] or b[1] <= a[0]):
            return left if (a[1] <= b[0]) == (e.op == "min") else right
    if e.op in ("/", "%") and e.type == ir.INT and a is not None and a[0] >= 0 \
            and isinstance(right, ir.Const) and right.value > 1 \
            and right.value & (right.value - 1) == 0:
        if e.op == "/":
            return mk_bin(">>", left, ir.Const(right.value.bit_length() - 1, ir.INT), ir.INT)
        return mk_bin("&", left, ir.Const(right.value - 1, ir.INT), ir.INT)
    return mk_bin(e.op, left, right, e.type)


def _decide(op: str, a: Interval, b: Interval) -> bool | None:
    if op in ("<", ">="):
        known = True if a[1] < b[0] else False if a[0] >= b[1] else None
        return known if known is None or op == "<" else not known
    if op in (">", "<="):
        known = True if a[0] > b[1] else False if a[1] <= b[0] else None
        return known if known is None or op == ">" else not known
    if a[1] < b[0] or b[1] < a[0]:  # == and != of disjoint ranges
        return op == "!="
    return None


def interval(e: ir.Expr, ranges: dict[str, Interval]) -> Interval | None:
    """Bounds on an int expression's value (None: unknown); none where C arithmetic could wrap."""
    if isinstance(e, ir.Const):
        return (int(e.value), int(e.value)) if e.type == ir.INT else None
    if isinstance(e, ir.Var):
        return ranges.get(e.name)
    if isinstance(e, ir.Un) and e.op == "clz":
        return (0, 32)
    if isinstance(e, ir.Select):
        a, b = interval(e.then, ranges), interval(e.else_, ranges)
        return (min(a[0], b[0]), max(a[1], b[1])) if a and b else None
    if not isinstance(e, ir.Bin) or e.type != ir.INT:
        return None
    a, b = interval(e.left, ranges), interval(e.right, ranges)
    if e.op == "&" and (a and a[0] >= 0 or b and b[0] >= 0):
        return (0, min(x[1] for x in (a, b) if x and x[0] >= 0))
    if a is None or b is None:
        return None
    if e.op in ("+", "-", "*"):
        corners = [{"+": x + y, "-": x - y, "*": x * y}[e.op] for x in a for y in b]
        found = (min(corners), max(corners))
    elif e.op in ("min", "max"):
        pick = min if e.op == "min" else max
        found = (pick(a[0], b[0]), pick(a[1], b[1]))
    elif e.op == "/" and b[0] > 0:  # monotone in each operand: the extremes are at corners
        corners = [_trunc_div(x, y) for x in a for y in b]
        found = (min(corners), max(corners))
    elif e.op == "%" and b[0] > 0 and a[0] >= 0:
        found = (0, min(a[1], b[1] - 1))
    elif e.op == ">>" and a[0] >= 0 and 0 <= b[0] and b[1] < 32:
        found = (a[0] >> b[1], a[1] >> b[0])
    else:
        return None
    return found if INT_MIN <= found[0] and found[1] <= INT_MAX else None


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // y
    return q if x >= 0 else -q


def prune(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        for name in BODIES:
            if isinstance(getattr(s, name, None), list):
                setattr(s, name, prune(getattr(s, name)))
        if isinstance(s, ir.If) and isinstance(s.cond, ir.Const):
            out += s.then if s.cond.value else s.else_
        elif isinstance(s, ir.Fail) and isinstance(s.cond, ir.Const) and not s.cond.value:
            continue
        elif isinstance(s, (ir.SeqFor, ir.ParFor, ir.Distribute)) and isinstance(s.bound, ir.Const) \
                and s.bound.value <= 0:
            continue
        elif isinstance(s, ir.Assign) and isinstance(s.value, ir.Var) and s.value.name == s.var.name:
            continue
        else:
            out.append(s)
    return out


def sweep(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """Drop declarations and assignments of variables no other statement needs."""
    defining: dict[str, list[ir.Expr]] = {}
    live: dict[str, ir.Var] = {}
    for s in _walk(stmts):
        if isinstance(s, (ir.Declare, ir.Assign)) and not isinstance(s.var.type, ir.ArrayType):
            defining.setdefault(s.var.name, []).append(s.init if isinstance(s, ir.Declare)
                                                       else s.value)
        else:
            for e in _exprs(s):
                ir.expr_vars(e, live)
            if isinstance(s, (ir.Declare, ir.Assign)):
                live[s.var.name] = s.var
            if isinstance(s, ir.ReadCSV):
                live[s.length.name] = s.length
    frontier = list(live)
    while frontier:
        name = frontier.pop()
        for e in defining.get(name, []):
            found: dict[str, ir.Var] = {}
            ir.expr_vars(e, found)
            for v in found.keys() - live.keys():
                live[v] = found[v]
                frontier.append(v)
    return _drop(stmts, set(defining) - live.keys(), (ir.Declare, ir.Assign))


def _drop(stmts: list[ir.Stmt], names: set[str], kinds: tuple[type, ...]) -> list[ir.Stmt]:
    """The statements without those of `kinds` that define one of `names`, at any depth."""
    out = []
    for s in stmts:
        if isinstance(s, kinds) and s.var.name in names:
            continue
        for name in BODIES:
            if isinstance(getattr(s, name, None), list):
                setattr(s, name, _drop(getattr(s, name), names, kinds))
        out.append(s)
    return out
