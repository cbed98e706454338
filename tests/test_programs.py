"""Small FCL programs in tests/programs/, one per builtin, prelude function and language construct,
run on the reference interpreter; each one's stdout is compared with what Python/numpy computes.

The expectations below are written independently of the implementation: each mirrors the
program's inputs in Python and computes the result with plain integer arithmetic or numpy.
"""
import functools
import io
import itertools
import operator
import re
from pathlib import Path

import numpy as np
import pytest

from fcl.errors import Source
from fcl.interp.eval import RunConfig
from fcl.pipeline import CompileOptions, main_root, run_interpreter, run_opencl
from fcl.rowtiles import ROW_TILE
from fcl.session import Session
from fcl.types.builtins import BUILTINS

PROGRAMS = Path(__file__).parent / "programs"


def run(name: str, block_size: int = 256, backend: str = "interp") -> tuple[str, str]:
    """stdout and stderr of tests/programs/<name> run with the prelude; `backend` is interp,
    opencl (kernels shaped for the device), or opencl:gpu / opencl:cpu (shaped for a GPU or a
    CPU, whatever the device: both shapes run on every device)."""
    session = Session.new()
    path = PROGRAMS / name
    session.add_file(Source(str(path), path.read_text()))
    out, err = io.StringIO(), io.StringIO()
    if backend == "interp":
        run_interpreter(session, main_root(session),
                        RunConfig(block_size=block_size, out=out, err=err))
    else:
        target = backend.partition(":")[2] or "auto"
        run_opencl(session, main_root(session), CompileOptions(block_size, target=target),
                   out=out, err=err)
    return out.getvalue(), err.getvalue()


# ---- what forceAndPrint prints, and C's 32-bit integer arithmetic ----------------------------

def ints(xs) -> str:
    return "[" + ",".join(f"{int(x)}" for x in xs) + "]\n"


def doubles(xs) -> str:
    return "[" + ",".join(f"{float(x):.5f}" for x in xs) + "]\n"


def wrap(x: int) -> int:
    """x reduced to a signed 32-bit int, as C on the GPU does."""
    return (int(x) + 2**31) % 2**32 - 2**31


def c_div(a: int, b: int) -> int:
    """C's `/`: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def c_mod(a: int, b: int) -> int:
    """C's `%`: a - b * (a / b), so the sign follows the dividend."""
    return a - b * c_div(a, b)


def lines(*parts: str) -> str:
    return "".join(parts)


# ---- expectations ----------------------------------------------------------------------------

# The operand tables written out in the programs.
OPERANDS = [-2**31, -100, -7, -1, 0, 1, 3, 7, 2**31 - 1]
DIVIDENDS = [-2**31 + 1, -100, -7, -1, 0, 1, 7, 100, 2**31 - 1]
DIVISORS = [-100, -7, -2, -1, 1, 2, 3, 8]


def pairs(op, xs=OPERANDS, ys=OPERANDS) -> list[int]:
    return [op(x, y) for x in xs for y in ys]


DOUBLES = [-2.5, -1.0, 0.0, 0.1, 1.0, 3.75, 1.5e3]
SHIFTED_LEFT = [1, -1, 5, -2**31, 2**31 - 1, 0x12345678]
SHIFTED_RIGHT = [1, -1, -100, -2**31, 2**31 - 1, 0x12345678]
SHIFT_COUNTS = [0, 1, 4, 31, 32, 33, -1]


def twice(text: str) -> str:
    """Programs that print a builtin's results and then the same through its operator or alias."""
    return text + text


def compare(op) -> str:
    return twice(ints(pairs(lambda a, b: int(op(a, b)))))


def double_pairs(op) -> list:
    return pairs(op, DOUBLES, DOUBLES)


def shift_left(x: int, n: int) -> int:
    return wrap(x << (n & 31))


def shift_right(x: int, n: int) -> int:
    return x >> (n & 31)  # Python's >> on negative ints is arithmetic, like OpenCL's on int


def clz(x: int) -> int:
    return 32 - (x & 0xFFFFFFFF).bit_length()


def floats_expected() -> str:
    """tests/programs/floats.fcl, computed with numpy's float32: each operation rounded to a
    float."""
    f = np.float32
    operands = np.array(DOUBLES, f)
    a, b = np.repeat(operands, 7), np.tile(operands, 7)

    def bits(x) -> list[int]:
        return [int(v) for v in np.asarray(x, f) * f(2**24)]
    lanes = np.arange(7, dtype=np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        return lines(
            doubles(a + b), doubles(a - b), doubles(a * b), doubles(a / np.where(b == 0, f(3), b)),
            doubles(np.fmin(a, b)), doubles(np.fmax(a, b)),
            *(ints(op(a, b)) for op in (np.equal, np.less, np.less_equal, np.greater,
                                        np.greater_equal)),
            doubles(-operands), doubles(np.abs(operands)),
            ints(bits((lanes + 1).astype(f) / f(7))), ints(bits(np.sqrt((lanes + 1).astype(f)))),
            ints(bits(lanes.astype(f) * f(0.1) + f(0.2))),
            ints(bits([f(0.1) + f(0.2), f(0.1) * f(3), np.sqrt(f(2))])),
            ints(np.arange(16777217, 16777221).astype(f).astype(np.int64)),
            ints([-2**31, -2**31, -2**31, 0, 2**31 - 1, 0]),
            ints(np.trunc(operands[:4] + f(-0.5))),
            ints(bits((np.arange(1, 4) / 3.0).astype(f))),
            doubles((np.arange(1, 4, dtype=f) / f(3)).astype(np.float64)))


def div_expected(op) -> str:
    cross = ints(pairs(op, DIVIDENDS, DIVISORS))
    return lines(cross, cross, ints(op(x, 8) for x in DIVIDENDS),
                 ints(op(x, -3) for x in DIVIDENDS), ints([op(-2**31, 8), op(-7, 2)]))


def scatter(n: int, placed) -> list[int]:
    """An n-element array built from (position, value) pairs, as interleave writes it."""
    out = [None] * n
    for pos, value in placed:
        assert out[pos] is None, f"two elements placed at {pos}"
        out[pos] = value
    return out


def tag(i: int, x: int) -> int:
    return 1000 * i + x


def index_expected() -> str:
    squares = [i * i for i in range(10)]
    return lines(ints(squares[i * 7 % 10] for i in range(10)), ints(squares[::-1]),
                 ints(10 * (i % 3) + i for i in range(4)))


def map_push_expected() -> str:
    blocks = [[10 * b + j for j in range(3)] for b in range(4)]
    in_order = [x for block in blocks for x in block]
    reversed_blocks = scatter(12, (((3 - b) * 3 + j, blocks[b][j])
                                   for b in range(4) for j in range(3)))
    sums = [tag(k, s) for b in range(2) for t in range(2)
            for k, s in enumerate(np.cumsum([b + t + k for k in range(4)]))]
    return lines(ints(tag(i, 7 - i) for i in range(5)),
                 ints(tag(p, x) for p, x in enumerate(in_order)),
                 ints(tag(p, x) for p, x in enumerate(reversed_blocks)),
                 ints(sums), ints(k * (b + 1) for b in range(2) for k in range(4)))


def tree_reduce(f, xs):
    """The warp level's reduction order: lane i takes lane i + d's value, d = 1, 2, 4, ..."""
    lanes, d = list(xs), 1
    while d < len(lanes):
        lanes = [f(x, lanes[i + d]) if i % (2 * d) == 0 and i + d < len(lanes) else x
                 for i, x in enumerate(lanes)]
        d *= 2
    return lanes[:1]


def tree_scan(f, xs):
    """The warp level's scan order (Hillis and Steele): lane i takes lane i - d's value."""
    lanes, d = list(xs), 1
    while d < len(lanes):
        lanes = [f(lanes[i - d], x) if i >= d else x for i, x in enumerate(lanes)]
        d *= 2
    return lanes


def warp_expected() -> str:
    xs = [i * 7 % 13 for i in range(256)]
    per_warp = []
    for w in range(8):
        lane = xs[32 * w:32 * w + 32]
        per_warp += [sum(lane), tree_scan(operator.add, lane)[31], lane[6 ^ 1], lane[1],
                     lane[30], lane[5], sum(x % 3 == 0 for x in lane),
                     int(any(x > 100 for x in lane)), int(all(x >= 0 for x in lane)), lane[0]]
    squares = [i * i % 1000 for i in range(1024)]
    sums = [sum(squares[256 * b:256 * b + 256]) for b in range(4)]
    ds = [1.0e16 if i % 4 == 0 else -1.0e16 if i % 4 == 2 else float(i) for i in range(64)]
    orders = []
    for w in range(2):
        lane = ds[32 * w:32 * w + 32]
        orders += [tree_reduce(operator.add, lane)[0], lane[-1], lane[0],
                   tree_reduce(operator.add, lane[:5])[0], tree_scan(operator.add, lane[:5])[4]]
    return lines(ints(per_warp), ints(sums), doubles(orders), ints([32]),
                 ints([0, 0, 1, 2, 2, 3]))


def rows_in_tiles(rows, tile: int = ROW_TILE):
    """The rows' pieces in the order of fcl.rowtiles: the part of each row in each tile of
    `tile` consecutive elements of the rows' concatenation."""
    start = 0
    for row in rows:
        pieces: dict[int, list] = {}
        for k, x in enumerate(row):
            pieces.setdefault((start + k) // tile, []).append(x)
        start += len(row)
        yield list(pieces.values())


def scanned_rows(f, z, rows):
    """Each row's inclusive scan from z, combined in the order of fcl.rowtiles."""
    for pieces in rows_in_tiles(rows):
        acc, out = z, []
        for x in pieces[0] if pieces else []:
            acc = f(acc, x)
            out.append(acc)
        for piece in pieces[1:]:
            out += [f(acc, running) for running in itertools.accumulate(piece, f)]
            acc = out[-1]
        yield out


def reduce_rows(f, z, rows):
    return [scan[-1] if scan else z for scan in scanned_rows(f, z, rows)]


def scan_rows(f, z, rows):
    return [x for scan in scanned_rows(f, z, rows) for x in scan]


def complex_expected() -> str:
    cs = [complex(0.01 * i - 1.5, 0.002 * i) for i in range(256)]
    escapes = []
    for c in cs:
        z = 0j
        for _ in range(12):
            if z.real * z.real + z.imag * z.imag > 4.0:
                continue
            w = complex(z.real * z.real - z.imag * z.imag, z.real * z.imag + z.imag * z.real)
            z = complex(w.real + c.real, w.imag + c.imag)
        escapes.append(min(4.0, z.real * z.real + z.imag * z.imag))
    turned = [c * 1j for c in cs]
    return lines(doubles(escapes[i * 16] for i in range(16)),
                 doubles(turned[i * 32].real + turned[i * 32].imag for i in range(8)))


def records_expected() -> str:
    moved = []
    for i in range(8):
        x, v = float(i) + float(i + 1), float(i + 1)
        moved.append((20.0 - x, -v) if x > 10.0 else (x, v))
    parts = [x + x * x + (x > 2) for chunk in range(4)
             for x in reversed(range(4 * chunk, 4 * chunk + 4))]
    values = [i * 7 % 5 for i in range(16)]
    folds = [sum(values[k:k + 4]) * 1000 + max(values[k:k + 4]) for k in range(0, 16, 4)]
    return lines(doubles(p[0] for p in moved), doubles(p[1] for p in moved), ints(parts),
                 ints(folds))


def streams_expected() -> str:
    signal = [(i * 37) % 101 - 50 for i in range(5000)]
    edges = [signal[4 * k] + signal[4 * k + 7] - signal[4 * k + 3]
             for k in range((5000 - 8) // 4 + 1)]
    spikes = [1.0e16 if x == 0 else -1.0e16 if x == 1 else float(x) for x in signal]
    # fcl.il.streams: tiles of 256 (filled up with 0) each folded as a tree, pairs 128 apart,
    # then 64 ...; the tiles' values folded from 0.
    tiles = []
    for first in range(0, 5000, 256):
        tile = spikes[first:first + 256] + [0.0] * (256 - len(spikes[first:first + 256]))
        half = 128
        while half:
            tile[:half] = [tile[i] + tile[i + half] for i in range(half)]
            half //= 2
        tiles.append(tile[0])
    peaks = [max(signal[3 * k:3 * k + 5]) for k in range(20)]
    return lines(ints([sum(x * x for x in signal)]), ints([len(edges)]), ints(edges[:40]),
                 doubles([sum(tiles, 0.0)]), ints(peaks), ints(x * (x + 1) for x in signal[:30]))


def rows_expected() -> str:
    offsets = [0 if r < 2 else 3 * r if r < 4 else (r - 3) * 300 for r in range(7)]
    n = offsets[-1]
    cols = [e * 7 % 10 for e in range(n)]
    vals = [1.0e16 if e % 50 == 0 else -1.0e16 if e % 50 == 25 else float(e % 5)
            for e in range(n)]
    x = [float(i + 1) for i in range(10)]

    def rows(xs):
        return [xs[offsets[r]:offsets[r + 1]] for r in range(6)]
    products = [v * x[c] for v, c in zip(vals, cols, strict=True)]
    halves = [row[:len(row) // 2] for row in rows(cols)]
    return lines(doubles(reduce_rows(operator.add, 0.0, rows(products))),
                 ints(scan_rows(operator.add, 1, rows(cols))),
                 ints(max(cols[7 * r:7 * r + 7]) for r in range(5)),
                 ints([x for half in halves for x in half][290:310]),
                 ints(itertools.accumulate((len(half) for half in halves), initial=0)))


def interleave_expected() -> str:
    columns = scatter(12, ((4 * j + b, 10 * b + j) for b in range(4) for j in range(3)))
    strided = scatter(32, ((16 * b + 15 - (8 * k + t), 100 * b + 10 * t + k)
                           for b in range(2) for t in range(8) for k in range(2)))
    return lines(ints(columns), ints(strided), ints(tag(p, x) for p, x in enumerate(columns)))


def interleave_seq_expected() -> str:
    chunks = scatter(24, ((12 * b + (2 - i) * 4 + j, 100 * b + 10 * i + j)
                          for b in range(2) for i in range(3) for j in range(4)))
    rounds = scatter(12, ((3 * j + r, 100 * r + 10 * (j // 2) + j % 2)
                          for r in range(3) for j in range(4)))
    return lines(ints(chunks), ints(rounds))


def uneven_loop(t: int) -> list[int]:
    arr = [0] * 4
    for i in range(4 + t):
        arr[i % 4] = i if i < 4 else arr[i % 4] + 10
    return arr


def seqfor_expected() -> str:
    fibs = [1, 1]
    while len(fibs) < 10:
        fibs.append(fibs[-1] + fibs[-2])
    return lines(ints(scatter(5, ((4 - i, i * i) for i in range(5)))), ints(fibs),
                 ints(x for t in range(6) for x in uneven_loop(t)))


def power_expected() -> str:
    def affine(xs):
        for k in range(3):
            xs = [2 * x + k for x in xs]
        return xs
    grid = [10 * i for i in range(5)]
    for _ in range(3):
        grid = [x + 1 for x in grid[::-1]]
    return lines(ints(x for b in range(2) for x in affine([10 * b + j for j in range(4)])),
                 ints(sum(range(2 ** (b + 1))) for b in range(4)), ints(grid))


def collatz_steps(x: int) -> int:
    steps = 0
    while x != 1:
        x, steps = (x // 2 if x % 2 == 0 else 3 * x + 1), steps + 1
    return steps


def while_expected() -> str:
    def doubling(xs):
        while xs[0] < 100:
            xs = [2 * x for x in xs]
        return xs
    return lines(ints(x for b in range(5) for x in doubling([(b + 1) * (j + 1) for j in range(2)])),
                 ints(collatz_steps(x) for x in range(1, 21)),
                 ints([sum(i * i for i in range(16))]))


def blocksize_expected(block_size: int) -> str:
    return lines(ints([block_size]), ints(x for b in range(3) for x in (block_size, 3, b)))


def tiles_of(matrix: np.ndarray, size: int) -> list[np.ndarray]:
    """The size x size tiles of a matrix, tile by tile in row-major order, each flattened."""
    rows, cols = matrix.shape
    return [matrix[r:r + size, c:c + size].flatten()
            for r in range(0, rows, size) for c in range(0, cols, size)]


def untile(tiles, size: int, rows: int, cols: int) -> np.ndarray:
    """The inverse of tiles_of."""
    matrix = np.zeros((rows, cols), dtype=np.int64)
    per_row = cols // size
    for i, tile in enumerate(tiles):
        r, c = i // per_row * size, i % per_row * size
        matrix[r:r + size, c:c + size] = np.reshape(tile, (size, size))
    return matrix


def scan_left(f, init, xs) -> list:
    return list(itertools.accumulate(xs, f, initial=init))


def let_scalars() -> int:
    a = 6
    b = a * 7
    a = b + 1
    return 2 * a


def do_expected() -> str:
    blocks = []
    for b in range(2):
        xs = [b * 4 + j for j in range(4)]
        blocks += [x + xs[0] + xs[3] for x in xs]
    return lines(ints([1, 1]), ints(blocks), ints(blocks[::-1][:3]))


def operators_expected() -> str:
    def f(x):
        return x + 1
    # Python's precedence differs from FCL's, so FCL's grouping is written out.
    return lines(
        ints([1 + (2 * 3), (10 - 4) - 3, (100 // 10) // 5, (17 % 5) * 2, f(2) * 3, 1 << (2 + 1),
              int((6 & 3) == 2), int((1 + 2) < 4), f(f(3)), f(5 - 2), ((12 | 3) ^ 5) & 6, -2]),
        ints(int((i != 0 and 10 // i > 2) or i == 5) for i in range(6)),
        ints(int(i == 0 or (12 // i == 4)) for i in range(4)))


# program -> its expected stdout. blocksize, readIntCSV and benchmark have tests of their own.
EXPECTED = {
    # ---- scalar builtins: every operand pair of a table, per lane, then uniform operands
    "addi.fcl": lambda: lines(twice(ints(pairs(lambda a, b: wrap(a + b)))), ints([-2**31])),
    "subi.fcl": lambda: lines(twice(ints(pairs(lambda a, b: wrap(a - b)))), ints([2**31 - 1])),
    "muli.fcl": lambda: lines(twice(ints(pairs(lambda a, b: wrap(a * b)))),
                              ints([0, wrap(46341 * 46341)])),
    "divi.fcl": lambda: div_expected(c_div),
    "modi.fcl": lambda: div_expected(c_mod),
    "mini.fcl": lambda: twice(ints(pairs(min))),
    "maxi.fcl": lambda: twice(ints(pairs(max))),
    "andi.fcl": lambda: twice(ints(pairs(lambda a, b: a & b))),
    "ori.fcl": lambda: twice(ints(pairs(lambda a, b: a | b))),
    "xor.fcl": lambda: twice(ints(pairs(lambda a, b: a ^ b))),
    "eqi.fcl": lambda: compare(lambda a, b: a == b),
    "neqi.fcl": lambda: compare(lambda a, b: a != b),
    "lti.fcl": lambda: compare(lambda a, b: a < b),
    "lei.fcl": lambda: compare(lambda a, b: a <= b),
    "gti.fcl": lambda: compare(lambda a, b: a > b),
    "gei.fcl": lambda: compare(lambda a, b: a >= b),
    "negatei.fcl": lambda: lines(ints(wrap(-x) for x in OPERANDS), ints([-5])),
    "absi.fcl": lambda: lines(ints(wrap(abs(x)) for x in OPERANDS), ints([5])),
    "signi.fcl": lambda: lines(ints(np.sign(OPERANDS)), ints([-1])),
    "sll.fcl": lambda: lines(twice(ints(pairs(shift_left, SHIFTED_LEFT, SHIFT_COUNTS))),
                             ints([wrap(3 << 30)])),
    "srl.fcl": lambda: lines(twice(ints(pairs(shift_right, SHIFTED_RIGHT, SHIFT_COUNTS))),
                             ints([-4])),
    "clz.fcl": lambda: lines(
        ints(clz(x) for x in [0, 1, 2, 255, 256, 0xFFFFFF, 0x1000000, 0x3FFFFFFF, 2**31 - 1, -1,
                              -2**31]),
        ints(clz(wrap(1 << k)) for k in range(32)),
        ints(clz(wrap((1 << k) - 1)) for k in range(32)), ints([clz(4096)])),
    "powi.fcl": lambda: lines(ints(pairs(lambda b, e: wrap(b**e), [-3, -2, 0, 1, 2, 3, 10],
                                         [0, 1, 2, 5, 10, 31])), ints([343])),
    "b2i.fcl": lambda: lines(ints(int(i % 3 == 0) for i in range(6)), ints([1, 1])),
    "not.fcl": lambda: lines(ints(int(not i < 4) for i in range(6)), ints([2])),
    "i2d.fcl": lambda: lines(doubles((i - 3) * 715827882 for i in range(7)),
                             doubles([-2**31, 2**31 - 1])),
    "d2i.fcl": lambda: lines(ints(np.trunc([-2.99, -2.5, -0.5, 0.0, 0.5, 2.5, 2.99, 1.0e9])),
                             ints([-7]), ints([2**31 - 1, -2**31, 0, 2**31 - 1]),
                             ints([-2**31, -2**31, -2**31, 0, 2**31 - 1, 0])),
    "addd.fcl": lambda: doubles(double_pairs(lambda a, b: a + b)),
    "subd.fcl": lambda: doubles(double_pairs(lambda a, b: a - b)),
    "muld.fcl": lambda: doubles(double_pairs(lambda a, b: a * b)),
    "divd.fcl": lambda: doubles(double_pairs(lambda a, b: a / (b or 3.0))),
    "mind.fcl": lambda: doubles(double_pairs(min)),
    "maxd.fcl": lambda: doubles(double_pairs(max)),
    "eqd.fcl": lambda: ints(double_pairs(lambda a, b: a == b)),
    "ltd.fcl": lambda: ints(double_pairs(lambda a, b: a < b)),
    "led.fcl": lambda: ints(double_pairs(lambda a, b: a <= b)),
    "gtd.fcl": lambda: ints(double_pairs(lambda a, b: a > b)),
    "ged.fcl": lambda: ints(double_pairs(lambda a, b: a >= b)),
    "negated.fcl": lambda: doubles(-x for x in DOUBLES),
    "absd.fcl": lambda: doubles(abs(x) for x in DOUBLES),
    "floats.fcl": floats_expected,
    "sqrt.fcl": lambda: lines(doubles(np.sqrt([i * i + i for i in range(10)])),
                              doubles([np.sqrt(2.0)])),
    # ---- array and program builtins
    "index.fcl": index_expected,
    "histogram.fcl": lambda: lines(
        ints(sum(1 for i in range(100) if i * i % 10 == d) for d in range(10)),
        ints(max([i * i for i in range(100) if i * i % 10 == d], default=-1) for d in range(10))),
    "generate.fcl": lambda: lines(ints(3 * i - 5 for i in range(6)),
                                  ints(100 * r + c for r in range(3) for c in range(4)),
                                  ints(i * i for i in range(5))),
    "lengthPull.fcl": lambda: lines(ints([13, 13, 0, 13 // 4, 13, 13]),
                                    ints(3 * i for i in range(5))),
    "lengthPush.fcl": lambda: lines(ints([7, 4 * 3, 5 + 1, 4 * 3]), ints(b + 2 for b in range(3))),
    "mapPull.fcl": lambda: lines(twice(ints((i - 3) ** 2 for i in range(8))),
                                 ints(10 * (i - 3) + 1 for i in range(8)),
                                 ints(2 * r for r in range(4))),
    "mapPush.fcl": map_push_expected,
    "push_force_thread.fcl": lambda: ints(10 * (8 * b + t) + 3 - k
                                          for b in range(2) for t in range(8) for k in range(4)),
    "push_force_block.fcl": lambda: ints(np.roll(np.arange(20).reshape(4, 5) ** 2, -1, axis=1)
                                         .flatten()),
    "push_force_grid.fcl": lambda: ints(3 * (9 - i) + 1 for i in range(10)),
    "return_bind.fcl": lambda: lines(ints(2 * i for i in range(5)), ints([1 + 2 + 3 + 4, 4]),
                                     ints(x * x for x in range(9))),
    "interleave.fcl": interleave_expected,
    "interleaveSeq.fcl": interleave_seq_expected,
    "seqfor.fcl": seqfor_expected,
    "warp.fcl": warp_expected,
    "rows.fcl": rows_expected,
    "streams.fcl": streams_expected,
    "records.fcl": records_expected,
    "complex.fcl": complex_expected,
    "power.fcl": power_expected,
    "while.fcl": while_expected,
    "forceAndPrint.fcl": lambda: lines(ints((i - 2) * 1000000 for i in range(6)),
                                       ints([-2000000, -1000000]), ints([3000000 + 6])),
    "forceAndPrintDouble.fcl": lambda: lines(doubles((i - 2) / 3.0 for i in range(6)),
                                             doubles([123456.789, 0.000004, -0.000006]),
                                             doubles([1.0])),
    # ---- the prelude
    "prelude_id.fcl": lambda: ints(3 * i for i in range(4)),
    "prelude_const.fcl": lambda: ints([9] * 4),
    "prelude_iota.fcl": lambda: lines(ints(range(7)), ints([0])),
    "prelude_range.fcl": lambda: lines(ints(range(-3, 4)), ints([5])),
    "prelude_zipWith.fcl": lambda: lines(ints(10 * x + y for x, y in zip(range(5), range(1, 9))),
                                         ints([4])),
    "prelude_zipWithPush.fcl": lambda: lines(ints(100 * i - i for i in range(6)),
                                             ints((j + 1) * (b + 2) for b in range(2)
                                                  for j in range(4))),
    "prelude_backpermute.fcl": lambda: ints(10 * (i % 3) + i // 3 for i in range(12)),
    "prelude_splitAt.fcl": lambda: lines(ints(range(10, 13)), ints(range(13, 18))),
    "prelude_halve.fcl": lambda: lines(ints(range(3)), ints(range(3, 6)), ints(range(3)),
                                       ints(range(3, 7))),
    "prelude_evenOdds.fcl": lambda: lines(ints(range(10, 17)[::2]), ints(range(10, 17)[1::2])),
    "prelude_splitUp.fcl": lambda: lines(ints([11 // 3]), ints([3, 6, 9]), ints([7, 8, 9])),
    "prelude_coalesce.fcl": lambda: lines(ints([12 // 3]),
                                          ints(np.arange(12).reshape(3, 4).T.flatten())),
    "prelude_concat.fcl": lambda: lines(ints(10 * b + j for b in range(4) for j in range(3)),
                                        ints(100 * b + 10 * t + k for b in range(2)
                                             for t in range(3) for k in range(2))),
    "prelude_concatSeq.fcl": lambda: lines(ints(100 * b + 10 * i + j for b in range(2)
                                                for i in range(3) for j in range(2)),
                                           ints(100 * r + 10 * b + j for r in range(3)
                                                for b in range(2) for j in range(2))),
    "prelude_concatMap.fcl": lambda: ints(x * x + j for x in range(1, 5) for j in range(3)),
    "prelude_pushM.fcl": lambda: lines(ints(range(1, 9)), ints(range(3))),
    "prelude_forceM.fcl": lambda: lines(ints(x + b for b in range(2) for x in [6, 4, 2, 0]),
                                        ints(b - j for b in range(2) for j in range(2))),
    "prelude_forcePull.fcl": lambda: lines(ints(10 * b + 2 - j for b in range(2) for j in range(3)),
                                           ints(range(4, 8))),
    "prelude_liftM.fcl": lambda: lines(ints(b + j for b in range(2) for j in range(3)), ints([9])),
    "prelude_take.fcl": lambda: ints(range(5, 8)),
    "prelude_drop.fcl": lambda: lines(ints(range(8, 11)), ints([0])),
    "prelude_last.fcl": lambda: ints(list(range(r, 3 * r + 1))[-1] for r in range(4)),
    "prelude_bit.fcl": lambda: ints(wrap(1 << i) for i in range(32)),
    "prelude_testBit.fcl": lambda: ints((0xAAAAAAAA >> i & 1) + 2 * (0xF0 >> i & 1)
                                        for i in range(32)),
    "prelude_foldl.fcl": lambda: ints(functools.reduce(operator.sub, range(1, t + 3), 100 * b)
                                      for b in range(2) for t in range(4)),
    "prelude_scanl1.fcl": lambda: ints(x for b in range(2) for t in range(2) for x in
                                       itertools.accumulate(range(4 * b + t, 4 * b + t + 4),
                                                            lambda acc, x: 2 * acc + x)),
    "prelude_scanl.fcl": lambda: ints(x for b in range(2) for t in range(2)
                                      for x in scan_left(operator.sub, 10 * (2 * b + t),
                                                         range(1, 5))),
    "prelude_pad.fcl": lambda: lines(ints([1, 2, 3, 4, 5, -1, -1, -1]), ints([1, 2, 3, 4]),
                                     ints([0])),
    "prelude_computeInSingleBlock.fcl": lambda: ints(x * x for x in range(1, 7)),
    "prelude_reverse.fcl": lambda: lines(ints(range(5, 0, -1)), ints([0])),
    "prelude_transpose.fcl": lambda: ints(np.arange(12).reshape(3, 4).T.flatten()),
    "prelude_splitGrid.fcl": lambda: lines(ints([6]), ints(np.concatenate(
        tiles_of(np.arange(24).reshape(4, 6), 2)))),
    "prelude_concatGrid.fcl": lambda: lines(
        ints(untile([[100 * i + j for j in range(4)] for i in range(6)], 2, 4, 6).flatten()),
        ints(range(1, 25))),
    # ---- language constructs
    "lang_let.fcl": lambda: lines(ints([let_scalars(), 10 + let_scalars()]), ints([7]),
                                  ints(2 * (100 * b + j) for b in range(2) for j in range(3))),
    "lang_letpoly.fcl": lambda: lines(ints([21 + 21, int(1.5 * 1.5 * 4), 3 + 2]),
                                      ints(9 * i + 2 for i in range(4))),
    "lang_lambda.fcl": lambda: lines(ints(10 + i * i for i in range(5)),
                                     ints(i + 100 * i for i in range(5)),
                                     ints(10 + 3 * i for i in range(4)),
                                     ints(x + 4 for x in range(4))),
    "lang_pairs.fcl": lambda: lines(ints(7 * i // 3 for i in range(5)),
                                    ints(7 * i % 3 for i in range(5)),
                                    ints([1, 5, 1, 5])),
    "lang_if.fcl": lambda: lines(ints(np.sign(np.arange(7) - 3)),
                                 ints([-1] + [60 // i for i in range(1, 6)]),
                                 doubles([0.5, 1.25, 0.5]), ints([0, 1, 0]), ints([1, 5])),
    "lang_operators.fcl": operators_expected,
    "lang_do.fcl": do_expected,
    "lang_levels.fcl": lambda: lines(
        *[ints(10 * b + 100 * t + i * i for b in range(2) for t in range(2) for i in range(2))] * 2,
        ints(b + i * i for b in range(2) for i in range(3)), ints(5 + i * i for i in range(4)),
        ints(b + i * i for b in range(3) for i in range(2)),
        ints(10 * b + t for b in range(2) for t in (2, 1, 0))),
    "lang_comments.fcl": lambda: ints([1, 2, 3]),
    "lang_literals.fcl": lambda: lines(ints([31, 31, 15, 15, -17, 254, 2**31 - 1, 1]),
                                       doubles([1500.0, 200.0, 0.001, -1.25, 0.5, -0.25])),
    "lang_signatures.fcl": lambda: ints([3, 81, 41]),
}


def program_cases() -> list:
    """(backend, name) for each program on each back end, OpenCL with the kernels of both device
    kinds. On OpenCL each builds a program (0.1-0.5 s on a loaded machine): `make test-fast` runs
    every sixth with each kind, `make test` all."""
    fast = {"interp": range(1), "opencl:gpu": range(1), "opencl:cpu": range(3, 4)}
    return [(backend, name) if i % (1 if backend == "interp" else 6) in fast[backend]
            else pytest.param(backend, name, marks=pytest.mark.slow)
            for backend in fast for i, name in enumerate(sorted(EXPECTED))]


@pytest.mark.parametrize("backend, name", program_cases())
def test_program_prints_what_python_computes(name, backend):
    out, _ = run(name, backend=backend)
    assert out == EXPECTED[name]()


@pytest.mark.parametrize("backend", ["interp", "opencl:gpu", "opencl:cpu"])
@pytest.mark.parametrize("block_size", [256, 64])
def test_block_size_is_the_configured_one(block_size, backend):
    out, _ = run("blocksize.fcl", block_size, backend)
    assert out == blocksize_expected(block_size)


def test_read_int_csv_reads_a_file_the_test_writes(tmp_path, monkeypatch):
    values = [3, -14, 15, 92, -6, 0, 53, 58, 979]
    # Commas, spaces and newlines all separate values, as in the original's C reader.
    (tmp_path / "numbers.csv").write_text("3,-14, 15\n92 -6,0\n53,58,979\n")
    monkeypatch.chdir(tmp_path)  # the program names the file relative to the working directory
    out, _ = run("readIntCSV.fcl")
    assert out == lines(ints([len(values)]), ints(2 * v for v in values),
                        ints(np.reshape(values, (3, 3))[:, ::-1].flatten()))


def test_benchmark_runs_the_program_and_reports_the_time_per_run():
    out, err = run("benchmark.fcl")
    # The body prints the first two of its 1000 elements on each of its 3 timed runs and on the
    # warm-up run, as in the original.
    assert out == lines(ints([1, 2]) * 4, ints([7]))
    assert re.fullmatch(r"Benchmark \(3 repetitions\): \d+\.\d{6} ms per run", err.splitlines()[0])


SEPARATE_TESTS = {"blocksize.fcl", "readIntCSV.fcl", "benchmark.fcl", "streamFile.fcl"}


def test_every_program_is_checked():
    assert {p.name for p in PROGRAMS.glob("*.fcl")} == set(EXPECTED) | SEPARATE_TESTS


def without_comments(text: str) -> str:
    """FCL source with its `--` line comments and nested `(* *)` block comments removed."""
    kept, depth, i = [], 0, 0
    while i < len(text):
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif depth and text.startswith("*)", i):
            depth, i = depth - 1, i + 2
        elif depth:
            i += 1
        elif text.startswith("--", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
        else:
            kept.append(text[i])
            i += 1
    return "".join(kept)


def test_every_builtin_and_prelude_function_is_used_by_some_program():
    used = set()
    for path in PROGRAMS.glob("*.fcl"):
        used |= set(re.findall(r"#?[A-Za-z][A-Za-z0-9_#']*", without_comments(path.read_text())))
    prelude = {decl.name for decl in Session.new().decls}
    assert set(BUILTINS) - used == set()
    assert prelude - used == set()
