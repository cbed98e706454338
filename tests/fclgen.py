"""Hypothesis strategies for random well-typed FCL programs, each with a Python model.

Every generated piece is a pair (FCL source text, Python function computing its meaning), so a
generated program comes with its expected output: the interpreter is checked against the model,
and the OpenCL back end against the interpreter. SEEDS are hand-written valid programs with their
output, which the fuzzer mutates.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st


def wrap(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod(a: int, b: int) -> int:
    return a - c_div(a, b) * b


@dataclass
class Piece:
    text: str
    model: Callable


# ---- scalar int expressions over one variable `x` ----------------------------------------------

def _leaf():
    return st.one_of(
        st.just(Piece("x", lambda x: x)),
        st.integers(-20, 20).map(lambda k: Piece(f"({k})", lambda x, k=k: k)),
    )


def _combine(children):
    binary = st.tuples(children, children, st.sampled_from(["+", "-", "*", "min", "max", "&", "^"]))

    def build_binary(t):
        a, b, op = t
        if op in ("min", "max"):
            return Piece(f"({op}i {a.text} {b.text})",
                         lambda x, a=a, b=b, f=min if op == "min" else max:
                         f(a.model(x), b.model(x)))
        fn = {"+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q,
              "&": lambda p, q: p & q, "^": lambda p, q: p ^ q}[op]
        return Piece(f"({a.text} {op} {b.text})",
                     lambda x, a=a, b=b, fn=fn: wrap(fn(a.model(x), b.model(x))))

    division = st.tuples(children, st.integers(1, 9), st.sampled_from(["/", "%"])).map(
        lambda t: Piece(f"({t[0].text} {t[2]} {t[1]})",
                        lambda x, a=t[0], k=t[1], op=t[2]:
                        c_div(a.model(x), k) if op == "/" else c_mod(a.model(x), k)))
    shift = st.tuples(children, st.integers(0, 4), st.sampled_from(["<<", ">>"])).map(
        lambda t: Piece(f"({t[0].text} {t[2]} {t[1]})",
                        lambda x, a=t[0], k=t[1], op=t[2]:
                        wrap(a.model(x) << k) if op == "<<" else a.model(x) >> k))
    conditional = st.tuples(children, children, children).map(
        lambda t: Piece(f"(if {t[0].text} < {t[1].text} then {t[1].text} else {t[2].text})",
                        lambda x, c=t[0], a=t[1], b=t[2]:
                        a.model(x) if c.model(x) < a.model(x) else b.model(x)))
    return st.one_of(binary.map(build_binary), division, shift, conditional)


int_exprs = st.recursive(_leaf(), _combine, max_leaves=6)


# ---- block-level programs over one chunk `c` of length k ---------------------------------------
# Each is (text of a function `fn c => ...` of type [int] -> Program<block> [int]<block>,
# output length as a function of k, model list -> list).

@dataclass
class BlockPiece:
    text: str
    out_len: Callable[[int], int]
    model: Callable[[list], list]


def _map_block(e: Piece) -> BlockPiece:
    return BlockPiece(f"(fn c => pushM<block> (mapPull (fn x => {e.text}) c))", lambda k: k,
                      lambda xs: [e.model(x) for x in xs])


def _reverse_block(e: Piece) -> BlockPiece:
    return BlockPiece(
        f"(fn c => do<block> {{ a <- forcePull<block> (mapPull (fn x => {e.text}) c) ;"
        f" pushM<block> (reverse a) }})",
        lambda k: k, lambda xs: [e.model(x) for x in xs][::-1])


def _tree_sum(_: Piece) -> BlockPiece:
    # Halving while-loop, as in the thesis's reduction; k is a power of two.
    text = ("(fn c => do<block> { s <- while<block> (fn a => lengthPull a != 1)"
            " (fn a => let h = halve a in pushM<block> (zipWith addi (fst h) (snd h)))"
            " (pushM<block> c) ; pushM<block> s })")
    return BlockPiece(text, lambda k: 1, lambda xs: [wrap(sum(xs))])


def _prefix_sums(_: Piece) -> BlockPiece:
    text = ("(fn c => generate (lengthPull c)"
            " (fn i => return<thread> (foldl addi 0 (take (i + 1) c)))"
            " |> concat<thread> 1)")
    return BlockPiece(text, lambda k: k,
                      lambda xs: [wrap(sum(xs[:i + 1])) for i in range(len(xs))])


def _power_add(e: Piece, rounds: int) -> BlockPiece:
    text = (f"(fn c => do<block> {{ a <- power<block> {rounds}"
            f" (fn it => fn a => pushM<block> (mapPull (fn x => x + it) a)) (pushM<block> c) ;"
            f" pushM<block> (mapPull (fn x => {e.text}) a) }})")
    return BlockPiece(text, lambda k: k,
                      lambda xs: [e.model(wrap(x + rounds * (rounds - 1) // 2)) for x in xs])


def _per_item_fold(e: Piece) -> BlockPiece:
    # Each work-item folds over the whole chunk with its own weights: a reduction of the same
    # length for every work-item (which serial CPU kernels run outside their loop).
    text = (f"(fn c => do<block> {{ t <- forcePull<block> c ;"
            f" generate (lengthPull t) (fn j => return<thread> (foldl addi j"
            f" (generate (lengthPull t) (fn it => let x = index t it in {e.text} * (j - it)))))"
            f" |> concat<thread> 1 }})")

    def model(xs):
        values = [e.model(x) for x in xs]
        return [wrap(j + sum(v * (j - it) for it, v in enumerate(values)))
                for j in range(len(xs))]
    return BlockPiece(text, lambda k: k, model)


def _thread_scan(_: Piece) -> BlockPiece:
    # Each work-item scans a pair of elements sequentially (thread-level seqfor).
    text = ("(fn c => splitUp 2 c |> mapPull (fn p => return<thread> (scanl addi 0 p))"
            " |> concat<thread> 3)")

    def model(xs):
        out = []
        for j in range(0, len(xs) - 1, 2):
            out += [0, xs[j], wrap(xs[j] + xs[j + 1])]
        return out
    return BlockPiece(text, lambda k: k // 2 * 3, model)


def _interleave_reversed(e: Piece) -> BlockPiece:
    # Sub-arrays of 2 written in reverse order inside the block: a non-concat index function.
    text = (f"(fn c => splitUp 2 c |> mapPull (fn p => return<thread> (push<thread> "
            f"(mapPull (fn x => {e.text}) p))) |> interleave<thread> 2 (fn ij => "
            f"(lengthPull c / 2 - 1 - fst ij) * 2 + snd ij))")

    def model(xs):
        pairs = [[e.model(x) for x in xs[j:j + 2]] for j in range(0, len(xs) - 1, 2)]
        return [v for pair in reversed(pairs) for v in pair]
    return BlockPiece(text, lambda k: k // 2 * 2, model)


block_programs = st.one_of(
    int_exprs.map(_map_block),
    int_exprs.map(_reverse_block),
    int_exprs.map(_tree_sum),
    int_exprs.map(_prefix_sums),
    st.tuples(int_exprs, st.integers(0, 3)).map(lambda t: _power_add(*t)),
    int_exprs.map(_thread_scan),
    int_exprs.map(_per_item_fold),
    int_exprs.map(_interleave_reversed),
)


@dataclass
class Program:
    text: str
    expected: str


@st.composite
def programs(draw) -> Program:
    """A grid-level program: chunks of a generated input, a block program per chunk, concat."""
    log_k = draw(st.integers(1, 4))
    k = 2 ** log_k
    chunks = draw(st.integers(1, 5))
    seed = draw(int_exprs)
    block = draw(block_programs)
    inputs = [seed.model(i) for i in range(k * chunks)]
    out_len = block.out_len(k)
    expected = []
    for c in range(chunks):
        expected += block.model(inputs[c * k:(c + 1) * k])
    text = (f"val main = do<grid> {{\n"
            f"  xs <- forcePull<grid> (generate {k * chunks} (fn x => {seed.text})) ;\n"
            f"  ys <- splitUp {k} xs |> mapPull {block.text} |> concat<block> {out_len} ;\n"
            f"  forceAndPrint {len(expected)} ys\n"
            f"}}\n")
    return Program(text, "[" + ",".join(str(v) for v in expected) + "]\n")


SEEDS = {
    "squares": ("""\
-- squares, printed from one grid-level push
fun square x = x * x
val main = forceAndPrint 5 (push<grid> (generate 5 square))
""", "[0,1,4,9,16]\n"),
    "reverse chunks": ("""\
(* per-block reversal of chunks of 4, (* nested *) concatenated at grid level *)
fun rev4<lvl> chunk = pushM<lvl> (reverse chunk)
val main = do<grid> {
  ys <- splitUp 4 (iota 12) |> mapPull rev4<block> |> concat<block> 4 ;
  forceAndPrint 12 ys
}
""", "[3,2,1,0,7,6,5,4,11,10,9,8]\n"),
    "block reduction": ("""\
-- block-level tree reduction by halving, one block per chunk of 8
sig sumBlock : [int] -> Program<block> [int]<block>
fun sumBlock xs =
  let step = fn arr => pushM<block> (zipWith (fn a => fn b => a + b) (fst (halve arr)) \
(snd (halve arr)))
  in do<block> {
       r <- while<block> (fn arr => lengthPull arr > 1) step (pushM<block> xs) ;
       pushM<block> (take 1 r)
     }
val main = do<grid> {
  sums <- concat<block> 1 (mapPull sumBlock (splitUp 8 (iota 16))) ;
  forceAndPrint 2 sums
}
""", "[28,92]\n"),
    "thread folds": ("""\
-- thread-level sequential folds inside a block, and a branch per element
fun sums xs = generate 1 (fn t => return<thread> (foldl (fn a => fn b => a + b) 0 xs)) \
|> concat<thread> 1
val main = do<grid> {
  forceAndPrint 3 (push<grid> (generate 3 (fn i => if i < 1 then 10 else i - 20))) ;
  folded <- splitUp 3 (range 1 6) |> mapPull sums |> concat<block> 1 ;
  forceAndPrint 2 folded
}
""", "[10,-19,-18]\n[6,15]\n"),
    "doubles and pairs": ("""\
-- doubles, pairs, lets and a signature that specialises the inferred type
sig swap : (int, double) -> (double, int)
fun swap p = (snd p, fst p)
val scale = 0.5
val main =
  let halves = generate 4 (fn i => muld scale (fst (swap (i, i2d i))))
  in forceAndPrintDouble 4 (push<grid> halves)
""", "[0.00000,0.50000,1.00000,1.50000]\n"),
    "levels and power": ("""\
-- a level-polymorphic helper used at two levels, and power with an index
fun twice<l> xs = pushM<l> (mapPull (fn x => 2 * x) xs)
val main = do<grid> {
  a <- power<grid> 3 (fn k => fn xs => twice<grid> (mapPull (fn x => x + k) xs)) \
(twice<grid> (iota 4)) ;
  b <- forceM<grid> (concat<block> 2 (mapPull twice<block> (splitUp 2 a))) ;
  forceAndPrint 4 (push<grid> b)
}
""", "[16,48,80,112]\n"),
}


# ---- programs for the memory planner: forced parts, concatenations, slices, loop updates ------

@dataclass
class Part:
    """A forced grid array: its FCL (a `name <- ...` line) and its values."""
    text: str
    values: list[int]


@st.composite
def memory_programs(draw) -> Program:
    """Forced parts concatenated (in either order, a part maybe reversed), a slice of the
    result, updated a few elements at a time in a `power` loop (computed in place, or gathered
    from an array computed apart), and printed; a part may be used
    again after the concatenation (which keeps it out of the result's memory)."""
    sizes = [draw(st.integers(1, 40)) for _ in range(2)]
    exprs = [draw(int_exprs) for _ in range(2)]
    parts = [[e.model(x) for x in range(n)] for e, n in zip(exprs, sizes)]
    lines = [f"  p{k} <- forcePull<grid> (generate {n} (fn x => {e.text})) ;"
             for k, (e, n) in enumerate(zip(exprs, sizes))]
    first, second = draw(st.permutations([0, 1]))
    reverse_second = draw(st.booleans())
    n1, n2 = sizes[first], sizes[second]
    late = f"index p{second} ({n2 - 1} - (i - {n1}))" if reverse_second \
        else f"index p{second} (i - {n1})"
    lines.append(f"  c <- forcePull<grid> (generate {n1 + n2} (fn i => if i < {n1} then "
                 f"index p{first} i else {late})) ;")
    joined = parts[first] + (parts[second][::-1] if reverse_second else parts[second])
    start = draw(st.integers(0, len(joined) - 1))
    length = draw(st.integers(1, len(joined) - start))
    lines.append(f"  s <- forcePull<grid> (generate {length} (fn i => index c (i + {start}))) ;")
    sliced = joined[start:start + length]
    rounds = draw(st.sampled_from([0, 1, 2, 3, 17, 20]))  # more than 16: a loop, not unrolled
    # The elements changed: a range, or a mask (every m-th element); each change may read its
    # left neighbour too, which another work-item may change.
    upto, every, left = draw(st.integers(0, length)), draw(st.integers(2, 4)), draw(st.booleans())
    if draw(st.booleans()):
        where, changes = f"i < {upto}", (lambda i: i < upto)
    else:
        where, changes = f"i % {every} == {upto % every}", (lambda i: i % every == upto % every)
    neighbour = f" + index xs ((i + {length - 1}) % {length})" if left else ""
    updated = list(sliced)
    if draw(st.booleans()):
        lines.append(f"  u <- power<grid> {rounds} (fn k => fn xs => return<grid> (push<grid> "
                     f"(generate {length} (fn i => if {where} then index xs i + k + 1"
                     f"{neighbour} else index xs i)))) (return<grid> (push<grid> s)) ;")
        for k in range(rounds):
            updated = [wrap(v + k + 1 + (updated[(i - 1) % length] if left else 0))
                       if changes(i) else v for i, v in enumerate(updated)]
    else:
        # Every m-th element from r gathered from a compact array computed apart, which reads
        # the elements at some offset (at r: those it goes into) (fcl/memory/scatter.py).
        r, at = upto % every, draw(st.integers(0, every - 1))
        count = len(range(r, length, every))
        lines.append(f"  u <- power<grid> {rounds} (fn k => fn xs => do<grid> {{ "
                     f"t <- forcePull<grid> (generate {count} (fn j => "
                     f"index xs ((j * {every} + {at}) % {length}) + k)) ; "
                     f"return<grid> (push<grid> (generate {length} (fn i => "
                     f"if i % {every} == {r} then index t (i / {every}) else index xs i))) }}) "
                     f"(return<grid> (push<grid> s)) ;")
        for k in range(rounds):
            t = [wrap(updated[(j * every + at) % length] + k) for j in range(count)]
            updated = [t[i // every] if i % every == r else v for i, v in enumerate(updated)]
    lines.append(f"  forceAndPrint {length} (push<grid> u)")
    expected = [updated]
    if draw(st.booleans()):  # a part used again: it cannot live inside c
        lines[-1] += " ;"
        lines.append(f"  forceAndPrint {sizes[0]} (push<grid> p0)")
        expected.append(parts[0])
    text = "val main = do<grid> {\n" + "\n".join(lines) + "\n}\n"
    shown = "".join("[" + ",".join(map(str, values)) + "]\n" for values in expected)
    return Program(text, shown)
