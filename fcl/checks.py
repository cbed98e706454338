"""The run-time checks' messages, shared by the interpreter and the OpenCL back end so that both
report a failure in the same words.

A template's `{}` are filled with the values involved. A failure inside parallel code also says
where it happened, by the indices of the enclosing parallel loops: the block (work-group) of a
grid-level `concat`/`concatMap`/`interleave`, the thread (work-item) of a block-level `push`
or `concat`, or, for a grid-level `push`, the element, which is the work-item of the whole grid.
"""
from __future__ import annotations

from typing import TypeVar

from fcl.errors import FCLError, Span

T = TypeVar("T")

INDEX = "index {} is out of bounds for an array of length {}"
DIVISION = "division by zero: {} / 0"
REMAINDER = "remainder of a division by zero: {} % 0"
PLACED = "an element was placed at index {}, outside the array of length {}"
PLACED_HINT = "check the index function given to interleave"
SEQFOR = "seqfor step wrote to index {}, outside its array of length {}"
INNER_LENGTH = "an inner array has length {}, but {} was declared"
INNER_LENGTH_HINT = ("every program given to concat, concatMap or interleave must produce "
                     "exactly the number of elements it declares")
POWI_NEGATIVE = "powi needs a non-negative exponent, not {}"
GENERATE_NEGATIVE = "generate was given the negative length {}"
TAKE = "cannot take {} elements of an array of length {}"
NEGATIVE = "cannot force an array of negative length {}"
TOO_LONG = "an array of {} x {} elements is longer than 2147483647, the largest int"
BIN = "bin {} is outside the histogram's {} bins"
ITERATOR_READ_AGAIN = ("argument {} is an iterator, which can be read once, and this reads it "
                       "again: pass an array or a memmap")
SEQ_LENGTHS = "zipWithSeq was given sequences of {} and {} elements: they must be as long"
HISTOGRAM_LENGTHS = "histogram was given {} bin indices and {} values: one index per value"
# The operators a histogram combines with, and what a device does atomically. addd and addf are
# not: a sum of doubles or floats depends on the order of the additions, which atomics do not fix,
# and both back ends must print the same.
HISTOGRAM_OPS = {"addi": "add", "mini": "min", "min": "min", "maxi": "max", "max": "max",
                 "mind": "min", "maxd": "max", "minf": "min", "maxf": "max"}
HISTOGRAM_OP_ERROR = ("histogram combines bins with addi, mini, maxi, mind, maxd, minf or maxf, "
                      "not {}")
HISTOGRAM_ADDD_HINT = ("a sum of doubles depends on the order of its additions, which a "
                       "device's atomics do not fix; add ints (e.g. scaled with d2i), or "
                       "use mind or maxd")
HISTOGRAM_ADDF_HINT = ("a sum of floats depends on the order of its additions, which a "
                       "device's atomics do not fix; add ints (e.g. scaled with f2i), or "
                       "use minf or maxf")


def histogram_combine(operator: str | None, span: Span | None) -> str:
    """What a device does atomically for a histogram's operator (a builtin's name, None for a
    function of the program's); an error where it has no atomic, the same on every back end."""
    if operator not in HISTOGRAM_OPS:
        shown = f"`{operator}`" if operator is not None else "a function of the program's"
        raise FCLError(HISTOGRAM_OP_ERROR.format(shown), span,
                       {"addd": [HISTOGRAM_ADDD_HINT], "addf": [HISTOGRAM_ADDF_HINT]}.get(
                           operator or "", []))
    return HISTOGRAM_OPS[operator]


# The note on an error inside a prelude function, which is raised at the user's call.
INSIDE_PRELUDE = "inside this prelude definition"

GROWN = ("a loop step produced an array of length {}, larger than the initial one of length {} "
         "(while and power never grow arrays)")

# Where a failure happened, by the kind of the enclosing parallel loop.
GROUP, LOCAL, GLOBAL = "work-group", "work-item", "grid work-item"
_ORDER = (GROUP, LOCAL, GLOBAL)
# The kind of parallel loop that forcing an array of each level (0 thread, 1 block, 2 grid)
# runs: a `push` (one iteration per element) and a parallel `interleave` (one per program).
PUSH_PLACES = {0: None, 1: LOCAL, 2: GLOBAL}
INTERLEAVE_PLACES = {0: None, 1: LOCAL, 2: GROUP}


def where(kinds: list[str]) -> str:
    """The suffix template naming a failure's position, for the kinds of its enclosing parallel
    loops (innermost of each kind), e.g. ` (in work-group {}, work-item {})`."""
    if not kinds:
        return ""
    named = [("work-item" if kind == GLOBAL else kind) + " {}" for kind in _ORDER if kind in kinds]
    return " (in " + ", ".join(named) + ")"


def innermost(places: list[tuple[str, T]]) -> list[tuple[str, T]]:
    """The innermost place of each kind, in the order `where` names them."""
    found: dict[str, T] = {}
    for kind, value in places:
        found[kind] = value
    return [(kind, found[kind]) for kind in _ORDER if kind in found]
