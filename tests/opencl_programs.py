"""Programs of tests/test_opencl.py, each aimed at one part of the OpenCL back end, shared with
the tests that run every such program elsewhere (under Oclgrind)."""


SUM_CHUNK = """
fun sumChunk<lvl> xs = do<lvl> {
  s <- while<lvl> (fn a => lengthPull a != 1)
         (fn a => let h = halve a in pushM<lvl> (zipWith addi (fst h) (snd h)))
         (pushM<lvl> xs) ;
  pushM<lvl> s }
"""
CHUNKED_SUMS = SUM_CHUNK + """val main = do<grid> {
  xs <- forcePull<grid> (generate 4096 (fn i => i % 7)) ;
  sums <- splitUp 64 xs |> mapPull sumChunk<block> |> concat<block> 1 ;
  forceAndPrint 64 sums }
"""


THREAD_SCANS = """
val main = do<grid> {
  ys <- generate 4 (fn b => generate 32 (fn t => return<thread> (scanl addi 0 \
(generate 5 (fn k => b * 100 + t + k))))
                             |> concat<thread> 6)
        |> concat<block> (32 * 6) ;
  forceAndPrint (4 * 32 * 6) ys }
"""


TILED_TRANSPOSE = """
fun transposeTile xs = do<block> {
  tile <- forcePull<block> xs ;
  pushM<block> (transpose 4 4 tile) }
val main = do<grid> {
  m <- forcePull<grid> (generate 64 (fn i => i)) ;
  t <- splitGrid 4 8 8 m |> mapPull transposeTile |> transpose 2 2 |> concatGrid<block> 4 8 ;
  forceAndPrint 64 t }
"""


DOUBLES_AND_POWER = """
val main = do<grid> {
  xs <- generate 8 (fn b => do<block> {
          a <- power<block> 3 (fn k => fn a => pushM<block> (mapPull (fn x => addd x (i2d k)) a))
                 (pushM<block> (generate 16 (fn i => divd (i2d (b * 16 + i)) 3.0))) ;
          pushM<block> a })
        |> concat<block> 16 ;
  forceAndPrintDouble 128 xs }
"""


GRID_LOOP_SCALAR = """
fun sum8 c = return<block> (push<block> (foldl addi 0 c |> fn acc => generate 1 (fn i => 0)))
fun reducePart xs = splitUp 8 (pad 8 0 xs) |> mapPull (fn c => do<block> {
    s <- force<block> (push<block> (generate 1 (fn i => index (generate 1 (fn k => 0)) 0))) ;
    return<block> (mapPush<block> (fn i => fn z => z + index c 0 + index c 1 + index c 2 + index c 3
                                     + index c 4 + index c 5 + index c 6 + index c 7) \
(push<block> s)) })
  |> concat<block> 1
val main = do<grid> {
  xs <- forcePull<grid> (generate 1000 (fn i => i)) ;
  total <- while<grid> (fn a => lengthPull a != 1) reducePart (reducePart xs) ;
  let n = index total 0 ;
  forceAndPrint 3 (push<grid> (generate (n % 10 + 3) (fn i => n + i))) }
"""


THREE_STAGES = """
val main = do<grid> {
  ys <- generate 4 (fn b => do<block> {
          a <- forcePull<block> (generate 64 (fn i => i + b)) ;
          c <- forcePull<block> (generate 64 (fn i => index a (63 - i) * 2)) ;
          d <- forcePull<block> (generate 64 (fn i => index c ((i + 1) % 64) + 1)) ;
          pushM<block> (generate 64 (fn i => index d (63 - i))) })
        |> concat<block> 64 ;
  forceAndPrint 256 ys }
"""


BIG_THREAD_ARRAYS = """
val main = do<grid> {
  ys <- generate 2 (fn b => generate 16 (fn t => do<thread> {
          a <- forcePull<thread> (generate 100 (fn k => b * 1000 + t * 100 + k)) ;
          return<thread> (push<thread> (generate 2 (fn k => index a (99 - k)))) })
        |> concat<thread> 2)
        |> concat<block> 32 ;
  forceAndPrint 64 ys }
"""


PER_ITEM_LENGTHS = """
val main = do<grid> {
  xs <- forcePull<grid> (generate 4 (fn i => i * 30));
  r <- concat<block> 8 (generate 2 (fn b => concat<thread> 2 (generate 4 (fn t => do<thread> {
         a <- forcePull<thread> (generate (t + 1) (fn i => i + b)) ;
         c <- forcePull<thread> (generate (min (index xs t + 1) 80) (fn i => i * 2)) ;
         return<thread> (push<thread> (generate 2 (fn k => index a t + index c (length c - 1))))
       }))));
  forceAndPrint 16 r }
"""


GRID_MAPS = """
val main = do<grid> {
  xs <- forcePull<grid> (generate 1000 (fn i => 2 * i)) ;
  ys <- forcePull<grid> (map (fn x => x + 1) xs) ;
  forceAndPrint 1000 (push<grid> ys) }
"""


POWER_LOOP = """
val main = do<grid> {
  ys <- generate 3 (fn b => do<block> {
          s <- power<block> 40 (fn k => fn xs => pushM<block> (generate 32 (fn i =>
                 index xs ((i + k) % 32) + b)))
               (pushM<block> (generate 32 (fn i => i)));
          pushM<block> s })
        |> concat<block> 32 ;
  forceAndPrint 96 ys }
"""


# Arithmetic over local ids is emitted in size_t and truncated once: negative intermediate
# values, products of them and bitwise operations must still give C's int results.
LOCAL_ID_ARITHMETIC = """
fun shuffleTile xs = do<block> {
  tile <- forcePull<block> xs ;
  pushM<block> (generate 16 (fn i =>
    index tile (((((i & 3) - 2) * ((i >> 2) - 3) + 6) % 16 + 16) % 16) \
+ (((i >> 2) ^ 5) - 7) * 9)) }
val main = do<grid> {
  m <- forcePull<grid> (generate 64 (fn i => i * 3)) ;
  t <- splitGrid 4 8 8 m |> mapPull shuffleTile |> concatGrid<block> 4 8 ;
  forceAndPrint 64 t }
"""


# A block-level `power` whose steps read each element only at its own position: its double
# buffer becomes one register per work-item (matmul's accumulator). POWER_LOOP reads elsewhere
# (`(i + k) % 32`): its buffers stay in local memory.
OWN_ACCUMULATOR = """
val main = do<grid> {
  ys <- generate 2 (fn b => do<block> {
          s <- power<block> 40 (fn k => fn xs => pushM<block> (generate 32 (fn i =>
                 index xs i * 3 + i * k + b)))
               (pushM<block> (generate 32 (fn i => i)));
          pushM<block> s })
        |> concat<block> 32 ;
  forceAndPrint 64 ys }
"""


# A kernel that computes each element of a fresh array from the same element of an array that
# nothing reads afterwards writes into that array instead (a fresh one costs a read of every
# cache line it is written to on a CPU): the scan's final adjustment.
ADJUST_IN_PLACE = """
val main = do<grid> {
  xs <- forcePull<grid> (generate 64 (fn i => i * 3)) ;
  ys <- generate 4 (fn c => return<block> (push<block> (generate 16 (fn j =>
          index xs (c * 16 + j) + c)))) |> concat<block> 16 ;
  forceAndPrint 64 ys }
"""


# Every program above, by name.
OPENCL_PROGRAMS = {
    "CHUNKED_SUMS": CHUNKED_SUMS,
    "THREAD_SCANS": THREAD_SCANS,
    "TILED_TRANSPOSE": TILED_TRANSPOSE,
    "DOUBLES_AND_POWER": DOUBLES_AND_POWER,
    "GRID_LOOP_SCALAR": GRID_LOOP_SCALAR,
    "THREE_STAGES": THREE_STAGES,
    "BIG_THREAD_ARRAYS": BIG_THREAD_ARRAYS,
    "PER_ITEM_LENGTHS": PER_ITEM_LENGTHS,
    "GRID_MAPS": GRID_MAPS,
    "POWER_LOOP": POWER_LOOP,
    "LOCAL_ID_ARITHMETIC": LOCAL_ID_ARITHMETIC,
    "OWN_ACCUMULATOR": OWN_ACCUMULATOR,
    "ADJUST_IN_PLACE": ADJUST_IN_PLACE,
}


# Chunks of 8 summed by work-groups: 1027 of them for 8216 ints, more than a serial kernel's
# work-groups (kernelize.SERIAL_GROUPS), and a number that the compiler knows only when the
# length does.
CHUNK_SUMS_OF = SUM_CHUNK + """
sig sums : [int] -> Program <grid> [int]<grid>
fun sums xs = splitUp 8 (pad 8 0 xs) |> mapPull sumChunk<block> |> concat<block> 1
"""
MANY_CHUNK_SUMS = CHUNK_SUMS_OF + """
val main = do<grid> {
  xs <- forcePull<grid> (generate 8216 (fn i => (i * 37) % 101 - 50)) ;
  ys <- sums xs ;
  forceAndPrint 1027 ys }
"""
