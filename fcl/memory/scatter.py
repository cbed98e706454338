"""A loop step's compact array of changes built where its masked update puts them.

A blocked step (the thesis's NW, ch. 6.1 and 6.8.1) computes the blocks it changes into a
compact array `t`, one block after another, and its masked update (masked.py) moves them into
the matrix: `if (P(e)) m[e] = t[F(e)]`. The thesis builds the blocks in the matrix instead,
through the update's index function. Here F is inverted: its terms that depend on e are taken
as the digits of a mixed-radix number (`16 * ((r - 1) & 15) + ((c - 1) & 15) + 256 * br`, each
digit's range the next factor), so the digits of j give those terms' values; the pairs of a
value's quotient and remainder by the same constant (`x / 16`, `x & 15`) give back the value,
a value one away from another gives that one, and the mask's equations (`br + bc == d`) the
terms F does not have. What comes out is e = G(j). Then, by evaluation over every step of the
loop (its count and the sizes known when compiling):

* every j of t's length maps to an element of the mask whose F is j, and the mask has no
  other elements: F and G are inverse, so the update's index check never fails;
* the kernel making t reads m nowhere G writes.

Where all of that holds, the kernel making t stores element j at m[G(j)] (under a condition
that always holds, for the IL verifier, whose intervals cannot bound G), and t and the update
go; otherwise nothing changes and the plan says why.
"""
from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np

from fcl.il import ir
from fcl.il.lower import clamp_parts
from fcl.il.numeric import evaluate, with_declarations
from fcl.il.simplify import linear, mk_bin, rebuild
from fcl.il.traverse import (
    expr_reads,
    fresh_var,
    map_bodies,
    mentioned,
    names,
    stmt_exprs,
    sub_exprs,
)
from fcl.lmad.core import LMAD
from fcl.memory.copies import allocs, paths
from fcl.memory.decisions import Notes, copied_bytes, note

INT, BOOL = ir.INT, ir.BOOL
MAX_ELEMENTS = 1 << 24  # elements (times steps, one by one) a mask is evaluated over at most


def scattered(loop: ir.SeqFor | ir.While | None, before: list[ir.Stmt], update: ir.ParFor,
              after: list[ir.Stmt], cur: ir.Var, home: ir.Var, notes: Notes
              ) -> list[ir.Stmt] | None:
    """`before`, the statements before the masked `update` of cur (in the body of `loop`, or
    of an unrolled step where loop is None), without the compact array the update gathers
    from, the kernel making it writing into cur instead; None where that cannot be proven
    (noted). `after`: the statements after the update (or the loop). The plan places the
    array in `home`, the array the update makes."""
    *prefix, write = update.body
    if not (isinstance(write, ir.If) and len(write.then) == 1 and not write.else_
            and isinstance(write.then[0], ir.Store)):
        return None
    store, e = write.then[0], update.var
    changed = [leaf for leaf, _ in paths(store.value)
               if not (isinstance(leaf, ir.Index) and leaf.array.name == cur.name)]
    made = allocs(before)
    gathered = sorted({leaf.array.name for leaf in changed
                       if isinstance(leaf, ir.Index) and leaf.array.name in made})
    if len(changed) != 1 or not isinstance(changed[0], ir.Index):
        for name in gathered:
            note(notes, "short-circuit", False, name, cur.name, None,
                 f"{cur.name}'s update takes its changes from {len(changed)} cases "
                 f"({', '.join(gathered)} among them): only an update from one compact array "
                 f"is built in place", before[made[name]].span)
        return None
    t = changed[0].array
    index = changed[0].index
    while (parts := clamp_parts(index)) is not None:
        index = parts[1]
    if t.name not in made:
        return None
    why, making = _maker(before, made[t.name], t, cur)
    if why is None and t.name in mentioned(after):
        why = f"{t.name} is used after the update"
    found = None
    if why is None:
        assert making is not None
        definitions = inlined(prefix)
        gather = rebuild(index, definitions)
        where = rebuild(write.cond, definitions)
        j = fresh_var("j", INT, mentioned([*before, update]))
        found = invert(gather, where, e, j)
        if found is None:
            why = f"the update's index into {t.name}, {ir.show_expr(index)}, is no mixed-radix " \
                  f"number of the element's digits that the planner can invert"
        else:
            why = _disproved(loop, before, making, t, made[t.name], cur, update, gather,
                             where, found[0], j)
    if why is not None:
        note(notes, "short-circuit", False, t.name, cur.name, None, why, before[made[t.name]].span)
        return None
    alloc = before[made[t.name]]
    assert isinstance(alloc, ir.Alloc) and making is not None and found is not None
    inverse, factors = found
    steps = _steps(loop)
    over = "" if loop is None else f" over the loop's {len(steps or [])} steps"
    shown = ir.show_expr(rebuild(inverse, {j.name: ir.Var("j", INT)}))
    note(notes, "short-circuit", True, t.name, home.name, _place(inverse, factors, j, alloc),
         f"{t.name}[j] is {cur.name}[{shown}], the inverse of the update's index "
         f"{ir.show_expr(gather)}, by evaluation{over}; the kernel making {t.name} reads "
         f"{cur.name} nowhere it writes", alloc.span, _saved(steps, before, alloc, t))
    return [_store_in(s, t, cur, inverse, j, update.bound) if s is making else s
            for s in before if s is not alloc]


def inlined(stmts: list[ir.Stmt]) -> dict[str, ir.Expr]:
    """The values of the statements' declarations, each with the earlier ones substituted."""
    definitions: dict[str, ir.Expr] = {}
    for s in stmts:
        if isinstance(s, ir.Declare):
            definitions[s.var.name] = rebuild(s.init, definitions)
    return definitions


def _maker(before: list[ir.Stmt], at: int, t: ir.Var, cur: ir.Var
           ) -> tuple[str | None, ir.Stmt | None]:
    """(why not, None) or (None, the one statement after t's allocation that writes t)."""
    users = [s for s in before[at + 1:] if t.name in mentioned([s])]
    if len(users) != 1:
        return f"{t.name} is used by {len(users)} statements before the update", None
    making = users[0]
    stores = [s for s in ir.walk([making]) if isinstance(s, ir.Store) and s.array.name == t.name]
    reads = [r for s in ir.walk([making]) for x in stmt_exprs(s) for r in expr_reads(x)
             if r.array.name == t.name]
    if len(stores) != 1 or reads or t.name in names(stores[0].index) \
            or t.name in names(stores[0].value):
        return f"the kernel making {t.name} does more with it than store each element once", None
    if any(isinstance(s, ir.Store) and s.array.name == cur.name for s in ir.walk([making])):
        return f"the kernel making {t.name} writes {cur.name}", None
    later = before[before.index(making) + 1:]
    if cur.name in mentioned(later):
        return f"{cur.name} is used between the kernel making {t.name} and the update", None
    return None, making


# ---- the inverse -------------------------------------------------------------------------------

def invert(gather: ir.Expr, where: ir.Expr, e: ir.Var, j: ir.Var
           ) -> tuple[ir.Expr, list[int]] | None:
    """G with gather(G(j)) = j for the elements e where `where` holds, built as the module
    docstring says (unchecked: _disproved evaluates it), and the factors of j's digits, the
    lowest first; None where the shape is not one it knows."""
    terms, const = linear(gather)
    digits = sorted(((coef, atom) for atom, coef in terms.values() if e.name in names(atom)),
                    key=lambda ca: ca[0])
    rest: ir.Expr = ir.Const(const, INT)
    for atom, coef in terms.values():
        if e.name not in names(atom):
            rest = mk_bin("+", rest, mk_bin("*", atom, ir.Const(coef, INT), INT), INT)
    if not digits or digits[0][0] != 1:
        return None
    number = mk_bin("-", j, rest, INT)  # the sum of the digits' terms
    known: dict[str, ir.Expr] = {}
    for k, (coef, atom) in enumerate(digits):
        value = mk_bin("/", number, ir.Const(coef, INT), INT) if coef != 1 else number
        if k + 1 < len(digits):
            size = _range(atom)
            if size is None or digits[k + 1][0] != coef * size:
                return None
            value = mk_bin("%", value, ir.Const(size, INT), INT)
        known[ir.expr_key(atom)] = value
    expr_of: dict[str, ir.Expr] = {}
    pairs = _pairs([gather, where], expr_of)
    equations = [mk_bin("-", a, b, INT) for a, b in _equalities(where)]
    goal = ir.expr_key(e)
    for _ in range(4 * (len(pairs) + len(equations)) + 4):
        if goal in known:
            return known[goal], [coef for coef, _ in digits]
        progress = False
        for whole, (quotient, remainder, divisor) in pairs.items():
            if whole not in known and quotient in known and remainder in known:
                known[whole] = mk_bin("+", mk_bin("*", known[quotient], ir.Const(divisor, INT),
                                                  INT), known[remainder], INT)
                progress = True
        for x in list(known):
            progress |= _solved(expr_of.get(x), known[x], e, known, expr_of)
        for equation in equations:
            progress |= _solved(equation, ir.Const(0, INT), e, known, expr_of)
        if not progress:
            return None
    return None


def _range(atom: ir.Expr) -> int | None:
    """n where atom is `x & (n - 1)` (n a power of two) or `x % n`: its values lie in [0, n)
    (for x >= 0; the evaluation checks the rest)."""
    if isinstance(atom, ir.Bin) and isinstance(atom.right, ir.Const):
        n = int(atom.right.value)
        if atom.op == "&" and n > 0 and (n + 1) & n == 0:
            return n + 1
        if atom.op == "%" and n > 0:
            return n
    return None


def _pairs(exprs: list[ir.Expr], expr_of: dict[str, ir.Expr]
           ) -> dict[str, tuple[str, str, int]]:
    """For each x of which both `x / n` (or `x >> s`) and `x % n` (or `x & (n - 1)`) occur:
    the keys of the two, and n, by x's key (expr_of gets each expression by its key)."""
    quotients: dict[str, tuple[str, int]] = {}
    remainders: dict[str, tuple[str, int]] = {}
    for x in exprs:
        for node in _nodes(x):  # every sub-expression
            if not (isinstance(node, ir.Bin) and isinstance(node.right, ir.Const)):
                continue
            n, whole = int(node.right.value), ir.expr_key(node.left)
            expr_of[whole] = node.left
            expr_of[ir.expr_key(node)] = node
            if node.op == "/" and n > 0:
                quotients[whole] = (ir.expr_key(node), n)
            elif node.op == ">>" and 0 <= n < 31:
                quotients[whole] = (ir.expr_key(node), 1 << n)
            elif (size := _range(node)) is not None:
                remainders[whole] = (ir.expr_key(node), size)
    return {whole: (q, remainders[whole][0], n) for whole, (q, n) in quotients.items()
            if whole in remainders and remainders[whole][1] == n}


def _nodes(x: ir.Expr):
    yield x
    for child in sub_exprs(x):
        yield from _nodes(child)


def _equalities(where: ir.Expr) -> list[tuple[ir.Expr, ir.Expr]]:
    """The equations `a == b` that must all hold where `where` does (its conjuncts)."""
    return [(c.left, c.right) for c in _conjuncts(where)
            if isinstance(c, ir.Bin) and c.op == "==" and ir.type_of(c.left) == INT]


def _solved(x: ir.Expr | None, value: ir.Expr, e: ir.Var, known: dict[str, ir.Expr],
            expr_of: dict[str, ir.Expr]) -> bool:
    """Whether x = value, x linear in one unknown term over e with factor 1 or -1, gave that
    term's value (added to known)."""
    if x is None:
        return False
    terms, const = linear(x)
    unknown = [(atom, coef) for key, (atom, coef) in terms.items()
               if coef and e.name in names(atom) and key not in known]
    if len(unknown) != 1 or unknown[0][1] not in (1, -1):
        return False
    atom, coef = unknown[0]
    other: ir.Expr = ir.Const(const, INT)
    for key, (term, factor) in terms.items():
        if term is atom or not factor:
            continue
        part = known.get(key, term) if e.name in names(term) else term
        other = mk_bin("+", other, mk_bin("*", part, ir.Const(factor, INT), INT), INT)
    solved = mk_bin("-", value, other, INT)
    known[ir.expr_key(atom)] = solved if coef == 1 else mk_bin("-", ir.Const(0, INT), solved, INT)
    expr_of.setdefault(ir.expr_key(atom), atom)
    return True


# ---- the proof by evaluation ------------------------------------------------------------------

def _steps(loop: ir.SeqFor | ir.While | None) -> list[dict[str, int]] | None:
    """The loop variable's value at each step (one step of none for an unrolled step); None
    where the count is not known when compiling."""
    if loop is None:
        return [{}]
    if not (isinstance(loop, ir.SeqFor) and isinstance(loop.bound, ir.Const)):
        return None
    return [{loop.var.name: d} for d in range(int(loop.bound.value))]


def _disproved(loop: ir.SeqFor | ir.While | None, before: list[ir.Stmt], making: ir.Stmt,
               t: ir.Var, at: int, cur: ir.Var, update: ir.ParFor, gather: ir.Expr,
               where: ir.Expr, inverse: ir.Expr, j: ir.Var) -> str | None:
    """Why G is not proven the inverse over every step, or t's maker (t allocated at `at` in
    before) not apart from what G writes; None when both hold."""
    steps = _steps(loop)
    if steps is None or not isinstance(update.bound, ir.Const):
        return "the loop's count or the array's length is not known when compiling"
    n = int(update.bound.value)
    declared: list[ir.Stmt] = [s for s in before if isinstance(s, ir.Declare)]
    loop_var = loop.var.name if isinstance(loop, ir.SeqFor) else None
    counts = mask_counts(where, update.var.name, n, loop_var, len(steps), declared)
    if counts is None:
        return f"the update's mask over {n} elements in {len(steps)} steps is not one the " \
               f"planner counts by evaluation"
    alloc = before[at]
    assert isinstance(alloc, ir.Alloc)
    e = update.var.name
    for d, values in enumerate(steps):
        env = with_declarations(declared, values)
        when = f"at step {d} " if values else ""
        length = evaluate(alloc.size, env)
        if length is None:
            return f"{t.name}'s length is not plain arithmetic"
        length = int(length)
        if counts[d] != length:
            return f"{when}the update changes {counts[d]} elements, where {t.name} has {length}"
        js = np.arange(length, dtype=np.int64)
        places = evaluate(inverse, {**env, j.name: js})
        if places is None:
            return "the inverse is not plain arithmetic"
        places = np.broadcast_to(places, js.shape)
        if length and (places.min() < 0 or places.max() >= n):
            return f"{when}the inverse leaves {cur.name}"
        back = evaluate(gather, {**env, e: places})
        inside = evaluate(where, {**env, e: places})
        if back is None or inside is None or not np.all(np.broadcast_to(inside, js.shape)) \
                or not np.array_equal(np.broadcast_to(back, js.shape), js):
            return f"{when}the inverse of the update's index is not exact"
        read = _read_places(making, cur, env)
        if read is None:
            return f"where the kernel making {t.name} reads {cur.name} is not plain arithmetic"
        if length and np.intersect1d(read, places).size:
            return f"{when}the kernel making {t.name} reads {cur.name} where it would write"
    return None


def mask_counts(where: ir.Expr, e: str, n: int, loop: str | None, steps: int,
                declared: list[ir.Stmt], limit: int | None = MAX_ELEMENTS) -> list[int] | None:
    """How many of the n elements e the mask `where` holds for at each step of the loop
    (`loop` its variable, None for one step; `declared`: the declarations around the mask):
    the conjuncts that do not change with the step evaluated once, and then either one
    equation `S(e) == step` counted for all steps at once, or the rest evaluated step by step.
    None where the mask is not plain arithmetic, or n (times the steps, step by step) is over
    `limit`."""
    if limit is not None and n > limit:
        return None
    changing = set() if loop is None else {loop}
    for s in declared:
        if isinstance(s, ir.Declare) and names(s.init) & changing:
            changing.add(s.var.name)
    elements = np.arange(n, dtype=np.int64)
    fixed: list[ir.Expr] = []
    moving: list[ir.Expr] = []
    for c in _conjuncts(where):
        (moving if names(c) & changing else fixed).append(c)
    base = np.ones(n, bool)
    for c in fixed:
        value = evaluate(c, {e: elements})
        if value is None:
            return None
        base &= np.broadcast_to(np.asarray(value, bool), base.shape)
    chosen = elements[base]
    if loop is None or not moving:
        return [int(chosen.size)] * steps
    if len(moving) == 1 and isinstance(moving[0], ir.Bin) and moving[0].op == "==":
        sides = (moving[0].left, moving[0].right)
        step = next((k for k, x in enumerate(sides)
                     if isinstance(x, ir.Var) and x.name == loop), None)
        if step is not None and not names(sides[1 - step]) & changing:
            values = evaluate(sides[1 - step], {e: chosen})
            if values is None:
                return None
            values = np.broadcast_to(np.asarray(values, np.int64), chosen.shape)
            inside = values[(values >= 0) & (values < steps)]
            return np.bincount(inside, minlength=steps).tolist()
    if limit is not None and steps * chosen.size > limit:
        return None
    counts = []
    for d in range(steps):
        env = with_declarations(declared, {loop: d, e: chosen})
        held = np.ones(chosen.size, bool)
        for c in moving:
            value = evaluate(c, env)
            if value is None:
                return None
            held &= np.broadcast_to(np.asarray(value, bool), held.shape)
        counts.append(int(np.count_nonzero(held)))
    return counts


def _conjuncts(where: ir.Expr) -> list[ir.Expr]:
    if isinstance(where, ir.Select) and isinstance(where.else_, ir.Const) \
            and where.else_.value is False:
        return _conjuncts(where.cond) + _conjuncts(where.then)
    if isinstance(where, ir.Bin) and where.op == "&&":
        return _conjuncts(where.left) + _conjuncts(where.right)
    return [where]


def _read_places(making: ir.Stmt, cur: ir.Var, env: dict) -> np.ndarray | None:
    """Every element of cur the maker reads, over all its loops' iterations (each read's index
    without its clamp, whatever conditions are around it: a superset)."""
    found: list[np.ndarray] = [np.zeros(0, np.int64)]

    def visit(stmts: list[ir.Stmt], env: dict) -> bool:
        for s in stmts:
            env = with_declarations([s], env)
            for x in stmt_exprs(s):
                for read, conds in _guarded_reads(x, cur.name, []):
                    index = read.index
                    while (parts := clamp_parts(index)) is not None:
                        index = parts[1]
                    value = evaluate(index, env)
                    held = [evaluate(c if holds else ir.Un("not", c, BOOL), env)
                            for c, holds in conds]
                    if value is None or any(h is None for h in held):
                        return False
                    value = np.asarray(value, np.int64)
                    taken = np.ones(np.broadcast_shapes(value.shape, *(np.shape(h) for h in held)),
                                    bool)
                    for h in held:
                        taken &= np.broadcast_to(np.asarray(h, bool), taken.shape)
                    found.append(np.broadcast_to(value, taken.shape)[taken])
            if isinstance(s, (ir.ParFor, ir.SeqFor, ir.Distribute)) \
                    and cur.name in mentioned(s.body):
                bound = evaluate(s.bound, env)
                if bound is None:
                    return False
                # Each iteration up to the largest bound: a superset where bounds differ.
                inner = {k: (np.asarray(v)[..., None] if isinstance(v, np.ndarray) else v)
                         for k, v in env.items()}
                inner[s.var.name] = np.arange(int(np.max(bound)), dtype=np.int64)
                if not visit(s.body, inner):
                    return False
            elif isinstance(s, ir.If) and not (visit(s.then, env) and visit(s.else_, env)):
                return False
        return True

    if not visit([making], env):
        return None
    return np.unique(np.concatenate(found))


def _guarded_reads(x: ir.Expr, array: str, conds: list[tuple[ir.Expr, bool]]
                   ) -> list[tuple[ir.Index, list[tuple[ir.Expr, bool]]]]:
    """The reads of `array` in x, each with the select conditions it is read under."""
    if isinstance(x, ir.Select):
        return _guarded_reads(x.cond, array, conds) \
            + _guarded_reads(x.then, array, [*conds, (x.cond, True)]) \
            + _guarded_reads(x.else_, array, [*conds, (x.cond, False)])
    found = [(x, conds)] if isinstance(x, ir.Index) and x.array.name == array else []
    for child in sub_exprs(x):
        found += _guarded_reads(child, array, conds)
    return found


def _store_in(s: ir.Stmt, t: ir.Var, cur: ir.Var, inverse: ir.Expr, j: ir.Var,
              length: ir.Expr) -> ir.Stmt:
    """s with its store into t at j storing into cur at G(j), under `G(j) < length`."""
    def moved(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for x in stmts:
            if isinstance(x, ir.Store) and x.array.name == t.name:
                place = rebuild(inverse, {j.name: x.index})
                out.append(ir.If(mk_bin("<", place, length, BOOL),
                                 [replace(x, array=cur, index=place)], [], span=x.span))
            else:
                out.append(map_bodies(x, moved))
        return out
    return moved([s])[0]


def _place(inverse: ir.Expr, factors: list[int], j: ir.Var, alloc: ir.Alloc) -> LMAD | None:
    """Where G puts t's elements, as an LMAD (its digits' strides) when t's length is known and
    G is such an LMAD (an unrolled step's); else None."""
    if not isinstance(alloc.size, ir.Const):
        return None
    length = int(alloc.size.value)
    at = [evaluate(inverse, {j.name: k}) for k in [0, *factors]]
    if length <= 0 or any(a is None or np.ndim(a) for a in at) or length % factors[-1]:
        return None
    sizes = [b // a for a, b in itertools.pairwise(factors)] + [length // factors[-1]]
    dims = tuple((size, int(at[k + 1]) - int(at[0]))
                 for k, size in reversed(list(enumerate(sizes))))
    place = LMAD(int(at[0]), dims)
    every = evaluate(inverse, {j.name: np.arange(length, dtype=np.int64)})
    return place if every is not None and place.points() == list(np.ravel(every)) else None


def _saved(steps: list[dict[str, int]] | None, before: list[ir.Stmt], alloc: ir.Alloc,
           t: ir.Var) -> int | None:
    """The bytes the update's moves of t's elements read and wrote, over the steps."""
    declared: list[ir.Stmt] = [s for s in before if isinstance(s, ir.Declare)]
    total = 0
    for at in steps or []:
        length = evaluate(alloc.size, with_declarations(declared, at))
        if length is None:
            return None
        total += int(length)
    return copied_bytes(total, t)
