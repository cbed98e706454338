"""Index arithmetic of tiled kernels: a work-group's number split into tile coordinates, the
order in which work-groups take the tiles, and subscripts through `let`s of the work-item ids
(the style of the original FCL's benchmark programs)."""
import pytest

from fcl.il import ir
from fcl.il.passes import bound
from fcl.il.simplify import rebuild
from runs import compiled_source, run_cl, run_interp

INT = ir.INT
tile, item, n = (ir.Var(name, INT) for name in ("tile", "item", "n"))
out = ir.Var("out", ir.ArrayType(INT))


def checked_source(program: str) -> str:
    """The program's OpenCL for work-groups of 16, once it has printed on OpenCL what the
    interpreter prints."""
    assert run_cl(program, block_size=16)[0] == run_interp(program)
    return compiled_source(program, block_size=16)


def bounded(e: ir.Expr, items: int = 256) -> str:
    """e stored, as the bound pass leaves it, where 0 <= tile < 256 and 0 <= item < items."""
    stmts = [ir.SeqFor(tile, ir.Const(256, INT), [ir.SeqFor(item, ir.Const(items, INT), [
        ir.Store(out, ir.Const(0, INT), e)])])]
    return ir.show_stmts(bound(stmts)).splitlines()[2].strip()


def test_a_work_groups_number_splits_back_into_its_tile_coordinates():
    def op(name: str, left: ir.Expr, right: int | ir.Expr) -> ir.Expr:
        return ir.Bin(name, left, right if isinstance(right, ir.Expr) else ir.Const(right, INT),
                      INT)
    number = op("+", op("*", tile, 256), item)  # tile * 256 + item, as splitGrid numbers them
    assert bounded(op(">>", number, 8)) == "out[0] = tile;"
    assert bounded(op("&", number, 255)) == "out[0] = item;"
    assert bounded(op("/", number, 256)) == "out[0] = tile;"
    assert bounded(op("%", number, 256)) == "out[0] = item;"
    assert bounded(op("/", op("+", op("*", tile, 3), item), 3), items=3) == "out[0] = tile;"
    assert bounded(op(">>", op("+", number, 512), 8)) == "out[0] = (tile + 2);"
    # Where item may reach 256 it carries into the quotient: nothing to take apart.
    assert bounded(op(">>", number, 8), items=257) == "out[0] = (((tile * 256) + item) >> 8);"
    # C's / rounds a negative quotient up; tile * 256 - 512 + item may be negative.
    below = op("-", number, 512)
    assert bounded(op("/", below, 256)) == "out[0] = ((((tile * 256) + item) - 512) / 256);"
    assert bounded(op(">>", below, 8)) == "out[0] = (tile - 2);"  # >> rounds down
    # The low bits of a sum do not depend on its multiples of 256, even when it wraps.
    assert bounded(op("&", op("+", op("*", n, 256), item), 255)) == "out[0] = item;"
    assert bounded(op(">>", op("+", op("*", n, 256), item), 8)) == \
        "out[0] = (((n * 256) + item) >> 8);"


@pytest.mark.parametrize("op, amount, divisor", [("/", 6, 6), ("%", 6, 6), (">>", 2, 4),
                                                 ("&", 3, 4)])
@pytest.mark.parametrize("low, high, offset", [(0, 5, 0), (-2, 3, 0), (0, 9, 7), (0, 3, -9)])
def test_taking_multiples_out_keeps_the_value_for_every_value_in_range(op, amount, divisor,
                                                                       low, high, offset):
    # (3 * d) * m + r + offset over m in [-4, 3] and r in [low, high]: whatever the pass makes
    # of it gives what C gives, value by value (folded with FCL's int semantics).
    m, r, m0, r0 = (ir.Var(name, INT) for name in ("m", "r", "m0", "r0"))  # m0, r0 from 0

    def plus(e: ir.Expr, k: int) -> ir.Expr:
        return ir.Bin("+", e, ir.Const(k, INT), INT)
    whole = ir.Bin(op, plus(ir.Bin("+", ir.Bin("*", m, ir.Const(3 * divisor, INT), INT), r, INT),
                            offset), ir.Const(amount, INT), INT)
    stmts = [ir.SeqFor(m0, ir.Const(8, INT), [ir.SeqFor(r0, ir.Const(high - low + 1, INT), [
        ir.Declare(m, plus(m0, -4)), ir.Declare(r, plus(r0, low)),
        ir.Store(out, ir.Const(0, INT), whole)])])]
    rewritten = next(s for s in ir.walk(bound(stmts)) if isinstance(s, ir.Store)).value
    for m_value in range(-4, 4):
        for r_value in range(low, high + 1):
            values = {name: ir.Const(value, INT) for name, value in (
                ("m", m_value), ("r", r_value), ("m0", m_value + 4), ("r0", r_value - low))}
            assert rebuild(rewritten, values).value == rebuild(whole, values).value


# A 12 x 12 matrix transposed in 4 x 4 tiles, after a definition of `tiles`.
TILES_TRANSPOSED = """fun transposeTile xs = do<block> {
  tile <- forcePull<block> xs ;
  pushM<block> (transpose 4 4 tile) }
val main = do<grid> {
  m <- forcePull<grid> (generate 144 (fn i => i * 7 % 50)) ;
  t <- tiles 4 12 m |> mapPull transposeTile |> transpose 3 3 |> concatGrid<block> 4 12 ;
  forceAndPrint 144 t }
"""


# The original FCL's benchmark programs build the output tile by tile, naming each coordinate:
# work-group g reads input tile (g % 3, g / 3), so neighbouring work-groups read down a column
# of input tiles (12 elements apart), unless the compiler swaps the coordinates.
LETS_TRANSPOSE = """
fun tiles size width xs =
  let perRow = width / size in
  generate (perRow * perRow) (fn g =>
    let tileRow = g / perRow in
    let tileCol = g % perRow in
    generate (size * size) (fn t =>
      let x = tileCol * size + t % size in
      let y = tileRow * size + t / size in
      let ix = y * width + x
      in index xs ix))
""" + TILES_TRANSPOSED

# The same transpose with output tiles placed by hand, so that work-group g reads input tile
# (g / 3, g % 3): neighbouring work-groups already read along a row of tiles.
ROWS_TRANSPOSE = """
fun transposeTile xs = do<block> {
  tile <- forcePull<block> xs ;
  pushM<block> (transpose 4 4 tile) }
val main = do<grid> {
  m <- forcePull<grid> (generate 144 (fn i => i * 7 % 50)) ;
  t <- splitGrid 4 12 12 m |> mapPull transposeTile
       |> interleave<block> 16 (fn ij =>
            let g = fst ij in
            let k = snd ij in
            (g % 3 * 4 + k / 4) * 12 + g / 3 * 4 + k % 4) ;
  forceAndPrint 144 t }
"""


@pytest.mark.parametrize("program, coordinates", [
    (LETS_TRANSPOSE, ["int tileRow_5 = (b_4 / 3);", "int tileCol_6 = (b_4 % 3);"]),
    (ROWS_TRANSPOSE, ["arr_1[(((((b_4 / 3) * 4) + get_local_id(1)) * fcl_stride12) + "
                      "(((b_4 % 3) * 4) + get_local_id(0)))]"])], ids=["swapped", "kept"])
def test_neighbouring_work_groups_read_neighbouring_tiles(program, coordinates):
    # Work-group b reads input tile (b / 3, b % 3): b + 1 reads the next tile of the row.
    text = checked_source(program)
    assert all(c in text for c in coordinates)


SHIFTED_READ = """
val main = do<grid> {
  xs <- forcePull<grid> (generate 64 (fn i => i * 3)) ;
  ys <- splitUp 16 xs |> mapPull (fn c => do<block> {
          t <- forcePull<block> c ;
          pushM<block> (generate 16 (fn i => let j = i in
                                             if j >= 1 then index t (j - 1) else 0)) })
        |> concat<block> 16 ;
  forceAndPrint 64 ys }
"""


def test_subscripts_that_might_be_negative_keep_int_arithmetic():
    # `j - 1` over a copy of the id may be -1 as far as the ranges know (the test is beside
    # it): `(int)(get_local_id(0) - 1)` would hide what `j - 1`, which cannot wrap, tells the
    # compiler, so that subscript keeps the int variable.
    text = checked_source(SHIFTED_READ)
    assert "get_local_id(0) - 1" not in text and " - 1)]" in text


# The original's splitGrid names every coordinate, the work-item's own included, and indexes
# with a variable holding the whole subscript.
IDS_NAMED_TRANSPOSE = """
fun tiles size width xs =
  let perRow = width / size in
  generate (perRow * perRow) (fn g =>
    generate (size * size) (fn t =>
      let col = t % size in
      let row = t / size in
      let ix = (g / perRow * size + row) * width + g % perRow * size + col
      in index xs ix))
""" + TILES_TRANSPOSED


def test_tile_subscripts_see_through_named_ids_and_pass_their_row_stride():
    # In a 2-D work-group the read `xs[ix]` is one size_t expression over the ids, whatever
    # variables named its parts, and its row stride (12, the matrix's width) is an argument:
    # PoCL vectorizes a constant stride over rows into gathers (fcl/codegen/strides.py).
    text = checked_source(IDS_NAMED_TRANSPOSE)
    kernel = text.split("__kernel")[2]
    assert "int fcl_stride12" in kernel.splitlines()[0]
    read = kernel.split("= arr_1[")[1].split("];")[0]
    assert "get_local_id(1) * fcl_stride12" in read and "get_local_id(0)" in read
    assert "(int)" not in read and "12" not in read.replace("fcl_stride12", "")
    # The variables themselves stay int copies: only global subscripts see through them.
    assert "int ix_9 = (((((b_4 / 3) * 48) + (row_8 * 12))" in kernel


STRIDED_ROWS = """
val main = do<grid> {
  xs <- forcePull<grid> (generate 512 (fn i => i)) ;
  ys <- splitUp 16 (generate 32 (fn i => i)) |> mapPull (fn c => do<block> {
          t <- forcePull<block> (generate 16 (fn i => index xs (index c i * 16))) ;
          pushM<block> t })
        |> concat<block> 16 ;
  forceAndPrint 32 ys }
"""


def test_one_dimensional_work_groups_keep_their_constant_strides():
    # PoCL vectorizes a 1-D work-group along its items: a constant there is no gather's.
    text = checked_source(STRIDED_ROWS)
    assert "fcl_stride" not in text and "* 16)]" in text
