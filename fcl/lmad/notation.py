"""The textual LMAD notation of [M] ch. 3: `τ + {(σ1:δ1),…,(σn:δn)}`.

Grammar (whitespace is allowed anywhere between tokens; `−`, U+2212, is accepted as a
minus sign because the thesis and the reference notes print it):

    lmad  ::= [int '+'] '{' [dim (',' dim)*] '}'        -- a missing offset means 0
    dim   ::= '(' int ':' int ')'                        -- (size : stride), size ≥ 1
    int   ::= ['-'] digit+                               -- spaces may follow the '-'
"""
from __future__ import annotations

from .errors import LMADError

_MINUS_SIGNS = "-\u2212"


def format_lmad(offset: int, dims: tuple[tuple[int, int], ...]) -> str:
    """Render an LMAD as `2 + {(3:5),(4:1)}` (rank 0: `5 + {}`)."""
    body = ",".join(f"({size}:{stride})" for size, stride in dims)
    return f"{offset} + {{{body}}}"


def parse_lmad(text: str) -> tuple[int, list[tuple[int, int]]]:
    """Parse LMAD notation into (offset, [(size, stride), …]); raise LMADError on bad text."""
    return _Parser(text).lmad()


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def fail(self, expected: str, at: int | None = None) -> LMADError:
        at = self.pos if at is None else at
        found = repr(self.text[at]) if at < len(self.text) else "end of text"
        return LMADError(f"expected {expected} but found {found} "
                         f"at position {at} in {self.text!r}", at)

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.fail(repr(char))
        self.pos += 1

    def integer(self, what: str) -> int:
        sign = self.peek()
        negative = sign != "" and sign in _MINUS_SIGNS
        if negative:
            self.pos += 1
            self.skip_space()
        digits_start, text = self.pos, self.text
        while self.pos < len(text) and text[self.pos].isascii() and text[self.pos].isdigit():
            self.pos += 1
        if self.pos == digits_start:
            raise self.fail("digits after the minus sign" if negative else what, digits_start)
        value = int(self.text[digits_start:self.pos])
        return -value if negative else value

    def lmad(self) -> tuple[int, list[tuple[int, int]]]:
        offset = 0
        if self.peek() != "{":
            offset = self.integer("an offset or '{'")
            self.expect("+")
        self.expect("{")
        dims = []
        if self.peek() != "}":
            dims.append(self.dim())
            while self.peek() == ",":
                self.pos += 1
                dims.append(self.dim())
        self.expect("}")
        if self.peek() != "":
            raise self.fail("end of text")
        return offset, dims

    def dim(self) -> tuple[int, int]:
        self.expect("(")
        self.skip_space()
        size_at = self.pos
        size = self.integer("a size")
        if size < 1:
            raise LMADError(f"size {size} at position {size_at} in {self.text!r} "
                            "must be positive", size_at)
        self.expect(":")
        stride = self.integer("a stride")
        self.expect(")")
        return size, stride
