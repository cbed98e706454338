"""The builtins' type schemes and one-line docs (reference §2.1, thesis Fig. 5.4).

Schemes are written in FCL's own type syntax. The order of a scheme's type variables matters:
it decides the letters in printed types, as in the original compiler.
"""
from __future__ import annotations

from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.types.types import BT, GT, RT

I2I, D2D, II2I, DD2D, II2B, DD2B = ("int -> int", "double -> double", "int -> int -> int",
                                    "double -> double -> double", "int -> int -> bool",
                                    "double -> double -> bool")
F2F, FF2F, FF2B = "float -> float", "float -> float -> float", "float -> float -> bool"

# name: (scheme, kinds of its type variables, doc)
BUILTINS: dict[str, tuple[str, dict[str, int], str]] = {
    "fst": ("forall 'a 'b. ('a, 'b) -> 'a", {}, "first component of a pair"),
    "snd": ("forall 'a 'b. ('a, 'b) -> 'b", {}, "second component of a pair"),
    "negatei": (I2I, {}, "integer negation"),
    "negated": (D2D, {}, "double negation"),
    "absi": (I2I, {}, "absolute value of an int"),
    "absd": (D2D, {}, "absolute value of a double"),
    "signi": (I2I, {}, "sign of an int: -1, 0 or 1"),
    "i2d": ("int -> double", {}, "convert an int to a double"),
    "d2i": ("double -> int", {}, "convert a double to an int, truncating toward zero"),
    "b2i": ("bool -> int", {}, "1 for true, 0 for false"),
    "clz": (I2I, {}, "number of leading zero bits of a 32-bit int"),
    "not": ("bool -> bool", {}, "boolean negation"),
    "sqrt": (D2D, {}, "square root of a double"),
    # float: 32 bits, IEEE single precision, rounded as numpy's float32 on every back end.
    "negatef": (F2F, {}, "float negation"),
    "absf": (F2F, {}, "absolute value of a float"),
    "sqrtf": (F2F, {}, "square root of a float, correctly rounded"),
    "i2f": ("int -> float", {}, "convert an int to the nearest float"),
    "f2i": ("float -> int", {}, "convert a float to an int as `d2i` converts a double"),
    "d2f": ("double -> float", {}, "convert a double to the nearest float"),
    "f2d": ("float -> double", {}, "convert a float to a double (exactly)"),
    "addf": (FF2F, {}, "float addition"),
    "subf": (FF2F, {}, "float subtraction"),
    "mulf": (FF2F, {}, "float multiplication"),
    "divf": (FF2F, {}, "float division, correctly rounded"),
    "minf": (FF2F, {}, "smaller of two floats"),
    "maxf": (FF2F, {}, "larger of two floats"),
    "eqf": (FF2B, {}, "float equality"),
    "ltf": (FF2B, {}, "float less-than"),
    "lef": (FF2B, {}, "float less-or-equal"),
    "gtf": (FF2B, {}, "float greater-than"),
    "gef": (FF2B, {}, "float greater-or-equal"),
    "addi": (II2I, {}, "int addition (`+`)"),
    "subi": (II2I, {}, "int subtraction (`-`)"),
    "muli": (II2I, {}, "int multiplication (`*`)"),
    "divi": (II2I, {}, "int division truncating toward zero (`/`)"),
    "modi": (II2I, {}, "int remainder with the sign of the dividend (`%`)"),
    "mini": (II2I, {}, "smaller of two ints"),
    "maxi": (II2I, {}, "larger of two ints"),
    "min": (II2I, {}, "smaller of two ints (the thesis's name for `mini`)"),
    "max": (II2I, {}, "larger of two ints"),
    "powi": (II2I, {}, "int power `powi b e` = b^e (e >= 0)"),
    "addd": (DD2D, {}, "double addition"),
    "subd": (DD2D, {}, "double subtraction"),
    "muld": (DD2D, {}, "double multiplication"),
    "divd": (DD2D, {}, "double division"),
    "mind": (DD2D, {}, "smaller of two doubles"),
    "maxd": (DD2D, {}, "larger of two doubles"),
    "eqi": (II2B, {}, "int equality (`==`)"),
    "neqi": (II2B, {}, "int inequality (`!=`)"),
    "lti": (II2B, {}, "int less-than (`<`)"),
    "lei": (II2B, {}, "int less-or-equal (`<=`)"),
    "gti": (II2B, {}, "int greater-than (`>`)"),
    "gei": (II2B, {}, "int greater-or-equal (`>=`)"),
    "eqd": (DD2B, {}, "double equality"),
    "ltd": (DD2B, {}, "double less-than"),
    "led": (DD2B, {}, "double less-or-equal"),
    "gtd": (DD2B, {}, "double greater-than"),
    "ged": (DD2B, {}, "double greater-or-equal"),
    "andi": (II2I, {}, "bitwise and (`&`)"),
    "ori": (II2I, {}, "bitwise or (`|`)"),
    "xor": (II2I, {}, "bitwise exclusive or (`^`)"),
    "sll": (II2I, {}, "shift left (`<<`)"),
    "srl": (II2I, {}, "arithmetic shift right (`>>`)"),
    "index": ("forall 'a. ['a] -> int -> 'a", {"a": GT},
              "element i of a pull array (bounds-checked)"),
    "lengthPull": ("forall 'a. ['a] -> int", {"a": GT}, "length of a pull array"),
    "take": ("forall 'a. int -> ['a] -> ['a]", {"a": GT},
             "`take n xs`: the first n elements of xs, which must have at least n (checked once, "
             "not at every element)"),
    "length": ("forall 'a. ['a] -> int", {"a": GT}, "length of a pull array (= lengthPull)"),
    "lengthPush": ("forall <l> 'a. ['a]<l> -> int", {"a": RT}, "length of a push array"),
    "generate": ("forall 'a. int -> (int -> 'a) -> ['a]", {"a": GT},
                 "`generate n f` is the pull array [f 0, ..., f (n-1)]"),
    "mapPull": ("forall 'a 'b. ('a -> 'b) -> ['a] -> ['b]", {"a": GT, "b": GT},
                "apply a function to every element of a pull array"),
    "map": ("forall 'a 'b. ('a -> 'b) -> ['a] -> ['b]", {"a": GT, "b": GT},
            "apply a function to every element of a pull array (= mapPull)"),
    "mapPush": ("forall <l> 'a 'b. (int -> 'a -> 'b) -> ['a]<l> -> ['b]<l>", {"a": RT, "b": RT},
                "map over a push array; the function also gets each element's index"),
    "force": ("forall <l> 'a. ['a]<l> -> Program<l> ['a]", {"a": RT},
              "write a push array to memory (registers, local or global by level)"),
    "push": ("forall <l> 'a. ['a] -> ['a]<l>", {"a": RT},
             "give a pull array an iteration scheme at a level"),
    "return": ("forall <l> 'a. 'a -> Program<l> 'a", {"a": GT}, "a program that yields a value"),
    "bind": ("forall <l> 'a 'b. Program<l> 'a -> ('a -> Program<l> 'b) -> Program<l> 'b",
             {"a": GT, "b": GT}, "run a program, then the program its result selects"),
    "interleave": ("forall <l> 'a. int -> ((int, int) -> int) -> [Program<l> ['a]<l>] "
                   "-> Program<1+l> ['a]<1+l>", {"a": RT},
                   "run sub-programs one level down in parallel; f (i, j) places element j of "
                   "sub-array i"),
    "interleaveSeq": ("forall <l> 'a. int -> ((int, int) -> int) -> [Program<l> ['a]<l>] "
                      "-> Program<l> ['a]<l>", {"a": RT},
                      "like interleave, but runs the sub-programs one after the other"),
    "seqfor": ("forall 'a. int -> int -> ((int -> 'a) -> int -> (int, 'a)) -> ['a]<thread>",
               {"a": RT}, "`seqfor size iters step`: a sequential loop writing (index, value) "
                          "pairs to an array of `size` elements, zeroed first; `seqfor init iters "
                          "step` (the thesis's form, `init : ['a]<thread>`) starts from the "
                          "elements of `init` instead"),
    "power": ("forall <l> 'a. int -> (int -> ['a] -> Program<l> ['a]<l>) -> Program<l> ['a]<l> "
              "-> Program<l> ['a]", {"a": RT},
              "apply an array program n times (the step gets the iteration number)"),
    "poweri": ("forall <l> 'a. int -> (int -> ['a] -> Program<l> ['a]<l>) -> Program<l> ['a]<l> "
               "-> Program<l> ['a]", {"a": RT}, "the thesis's name for `power`"),
    "while": ("forall <l> 'a. (['a] -> bool) -> (['a] -> Program<l> ['a]<l>) -> Program<l> ['a]<l> "
              "-> Program<l> ['a]", {"a": RT}, "apply an array program while a condition holds"),
    "histogram": ("forall 'a. int -> ('a -> 'a -> 'a) -> 'a -> [int] -> ['a] -> Program<grid> ['a]",
                  {"a": BT}, "`histogram bins op neutral is xs`: bins elements, each the neutral "
                             "element combined with every xs[k] whose is[k] is that bin; op is "
                             "addi, mini, maxi, mind, maxd, minf or maxf (atomics on a device)"),
    "reduceRows": ("forall 'a. ('a -> 'a -> 'a) -> 'a -> [['a]] -> Program<grid> ['a]", {"a": BT},
                   "`reduceRows f z rows`: each row of an irregular array folded from z with "
                   "the associative f, balanced by elements, whatever the rows' lengths"),
    "scanRows": ("forall 'a. ('a -> 'a -> 'a) -> 'a -> [['a]] -> Program<grid> ['a]", {"a": BT},
                 "`scanRows f z rows`: each row's inclusive scan from z with the associative f, "
                 "the rows one after another in one array"),
    "concatRows": ("forall 'a. [['a]] -> Program<grid> ['a]", {"a": BT},
                   "`concatRows rows`: the elements of an irregular array's rows, one row after "
                   "another in one array (`rowOffsets` gives where each begins)"),
    "streamIn": ("forall 'a. ['a] -> Seq 'a", {"a": BT},
                 "`streamIn xs`: the elements of xs as a sequence, made a chunk at a time"),
    "streamFile": ("forall 'a. string -> Seq 'a", {"a": BT},
                   "`streamFile path`: the elements of a .npy file, read from disk a chunk at a "
                   "time (its dtype must be the element type: int32, float64, float32 or bool)"),
    "mapSeq": ("forall 'a 'b. ('a -> 'b) -> Seq 'a -> Seq 'b", {"a": GT, "b": GT},
               "apply a function to every element of a sequence"),
    "mapSeqM": ("forall 'a 'b. ('a -> Program<thread> 'b) -> Seq 'a -> Seq 'b",
                {"a": GT, "b": GT},
                "apply a work-item's program to every element of a sequence (a loop over a "
                "window's elements, say)"),
    "zipWithSeq": ("forall 'a 'b 'c. ('a -> 'b -> 'c) -> Seq 'a -> Seq 'b -> Seq 'c",
                   {"a": GT, "b": GT, "c": GT},
                   "combine the elements of two sequences of the same length pairwise"),
    "segmentsSeq": ("forall 'a. Seq int -> Seq 'a -> Seq ['a]", {"a": BT},
                    "`segmentsSeq lengths values`: irregular rows, row r the next lengths[r] "
                    "elements of values (both read from the host: arguments or streamFile); a "
                    "chunk holds as many whole rows as fit"),
    "windows": ("forall 'a. int -> int -> Seq 'a -> Seq ['a]", {"a": BT},
                "`windows size step s`: the windows of `size` elements of s, one every `step` "
                "(constants); a chunk's last window reads into the next chunk's elements"),
    "foldSeq": ("forall 'a. ('a -> 'a -> 'a) -> 'a -> Seq 'a -> Program<grid> 'a", {"a": BT},
                "`foldSeq f z s`: the elements of s folded with the associative f and its "
                "neutral element z, each tile of 256 as a tree, the tiles' values in order "
                "(fcl.il.streams); its accumulator is carried from chunk to chunk"),
    "collect": ("forall 'a. Seq 'a -> Program<grid> ['a]", {"a": BT},
                "the elements of a sequence in one array, each chunk's copied back to the host "
                "as it is made"),
    "#BlockSize": ("int", {}, f"the work-group size (configurable, {BLOCK_SIZE} by default)"),
    "#WarpSize": ("int", {}, f"the lanes of a warp (configurable, {WARP_SIZE} by default)"),
    "readIntCSV": ("string -> Program<grid> [int]", {}, "read ints from a CSV file"),
    "forceAndPrint": ("int -> [int]<grid> -> Program<grid> [int]", {},
                      "force a grid array and print its first n elements"),
    "forceAndPrintDouble": ("int -> [double]<grid> -> Program<grid> [double]", {},
                            "force a grid array of doubles and print its first n elements"),
    "forceAndPrintFloat": ("int -> [float]<grid> -> Program<grid> [float]", {},
                           "force a grid array of floats and print its first n elements"),
    "benchmark": ("forall 'a. int -> Program<grid> 'a -> Program<grid> unit", {"a": GT},
                  "run a program n times after a warm-up and report the time per run"),
}

# Builtins with a second type, used where the first argument is a push array: the thesis's
# seqfor (Table 5.1, rule 5.56) starts from an initial array, the original compiler's from a size.
# The type checker picks the form by the first argument (the first form when nothing decides).
PUSH_FORMS = {
    "seqfor": "forall 'a. ['a]<thread> -> int -> ((int -> 'a) -> int -> (int, 'a)) -> ['a]<thread>",
}

# Builtins that only make sense on the host (grid level, outside any kernel).
HOST_BUILTINS = {"readIntCSV", "forceAndPrint", "forceAndPrintDouble", "forceAndPrintFloat",
                 "benchmark", "streamIn",
                 "streamFile", "foldSeq", "collect"}
