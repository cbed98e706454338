"""FCL programs whose costs tests/test_analysis.py checks by hand, shared with the tests that draw
or predict them."""


NAIVE = "do<grid> {\n  xs <- forcePull<grid> (iota 4096);\n" \
        "  forcePull<grid> (transpose 64 64 xs)\n}"


TILED_DEFS = """
fun tiledTranspose tileFn tileDim rows cols elems =
  let tilesPerRow = cols / tileDim
  in splitGrid tileDim cols rows elems
     |> map tileFn
     |> interleave<block> (tileDim * tileDim) (fn ij =>
          let tile = fst ij in
          let k = snd ij in
          let row = tile % tilesPerRow * tileDim + k / tileDim in
          let col = tile / tilesPerRow * tileDim + k % tileDim
          in row * rows + col)
fun plainTile tile =
  do<block> {
    t <- forcePull<block> tile;
    return<block> (push<block> (transpose 32 32 t))
  }
"""


TILED = "do<grid> { xs <- forcePull<grid> (iota (64*64)); " \
        "forceM<grid> (tiledTranspose plainTile 32 64 64 xs) }"


# bench/reduce.fcl's block reduction: 2 * #BlockSize elements per work-group, halved in local
# memory until one is left, the first halving while loading.
REDUCE_DEFS = """
sig step : forall <lvl> 'a. ('a -> 'a -> 'a) -> ['a] -> Program<lvl> ['a]<lvl>
fun step<lvl> f arr =
  let x = halve arr
  in return<lvl> (push<lvl> (zipWith f (fst x) (snd x)))

sig reduce : forall <lvl> 'a. ('a -> 'a -> 'a) -> ['a] -> Program<lvl> ['a]<lvl>
fun reduce<lvl> f arr =
  do<lvl> {
    a <- while<lvl> (fn a => 1 != length a) (step<lvl> f) (step<lvl> f arr);
    return<lvl> (push<lvl> a)
  }

sig reducePart : forall 'a. ('a -> 'a -> 'a) -> 'a -> ['a] -> Program<grid> ['a]<grid>
fun reducePart f neutral arr =
  let chunk = 2 * #BlockSize
  in splitUp chunk (pad chunk neutral arr)
     |> map (reduce<block> f)
     |> concat<block> 1
"""


REDUCE = "do<grid> { xs <- forcePull<grid> (iota 2048); forceM<grid> (reducePart addi 0 xs) }"


SHIFTED = "do<grid> {\n  xs <- forcePull<grid> (iota 4128);\n" \
          "  forcePull<grid> (generate 4096 (fn i => index xs (i + 1)))\n}"
