"""FCL lexer.

Hand-written because FCL's lexical rules are beyond a regular-expression lexer: block comments
nest, `-` directly before a digit is part of a negative literal (the original's `f -1`), and
whether `<` opens a level list (`push<block>`) or is the less-than operator depends on the tokens
that follow it. Produces Lark tokens for the LALR parser in `parser.py`.
"""
from __future__ import annotations

import math
import re

import numpy as np
from lark import Token

from fcl.errors import FCLError, Source, Span

KEYWORDS = {
    "sig": "SIG", "fun": "FUN", "val": "VAL", "let": "LET", "in": "IN", "fn": "FN",
    "true": "TRUE", "false": "FALSE", "if": "IF", "then": "THEN", "else": "ELSE", "do": "DO",
    "int": "INT_T", "double": "DOUBLE_T", "bool": "BOOL_T", "char": "CHAR", "kernel": "KERNEL",
}
# Words with a meaning only inside types and level lists; elsewhere they are ordinary names,
# as in the original compiler.
SOFT_KEYWORDS = {
    "forall": "FORALL", "Program": "PROGRAM", "Seq": "SEQ", "unit": "UNIT_T", "string": "STRING_T",
    "thread": "THREAD", "block": "BLOCK", "grid": "GRID", "float": "FLOAT_T",
}
NAME_TOKENS = {"NAME", *SOFT_KEYWORDS.values()}

OPERATORS = {
    "|>": "PIPE", "||": "OROR", "&&": "ANDAND", "==": "EQ", "!=": "NEQ", "<=": "LE", ">=": "GE",
    "<<": "SHL", ">>": "SHR", "<-": "LARROW", "=>": "DARROW", "->": "ARROW", "<": "LT", ">": "GT",
    "+": "PLUS", "-": "MINUS", "*": "STAR", "/": "SLASH", "%": "PERCENT", "&": "AMP", "|": "BAR",
    "^": "CARET", "=": "EQUALS", ".": "DOT", ":": "COLON", ",": "COMMA", ";": "SEMI", "(": "LPAR",
    ")": "RPAR", "[": "LSQB", "]": "RSQB", "{": "LBRACE", "}": "RBRACE",
}
_SPACES = re.compile(r"\s*")  # \s is str.isspace
_ASCII_WORD = re.compile(r"[A-Za-z#][A-Za-z0-9_#']*")  # the rest of a name is checked by hand

INT32_MAX = 2**31 - 1
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a",
           "b": "\b", "f": "\f", "v": "\v"}


def _is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"  # not str.isdigit, which also accepts digits of other scripts


def _is_ident_start(ch: str) -> bool:
    return ch.isalpha() or ch == "#"


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_#'"


class Lexer:
    def __init__(self, source: Source):
        self.source = source
        self.text = source.text
        self.pos = 0
        self.tokens: list[Token] = []
        self.line = 0  # of the last token, 0-based: tokens come in order, and none spans lines

    def error(self, message: str, start: int, end: int | None = None, hints=()) -> FCLError:
        return FCLError(message, Span(self.source, start, end if end is not None else start + 1),
                        list(hints))

    def emit(self, kind: str, value, start: int) -> None:
        starts = self.source.line_starts
        while self.line + 1 < len(starts) and starts[self.line + 1] <= start:
            self.line += 1
        line_start = starts[self.line]
        self.tokens.append(Token(kind, value, start_pos=start, line=self.line + 1,
                                 column=start - line_start + 1, end_line=self.line + 1,
                                 end_column=max(start, self.pos - 1) - line_start + 2,
                                 end_pos=self.pos))

    def run(self) -> list[Token]:
        text = self.text
        while True:
            self.skip_space_and_comments()
            if self.pos >= len(text):
                return self.tokens
            start = self.pos
            ch = text[start]
            negative_number = ch == "-" and start + 1 < len(text) and _is_digit(text[start + 1])
            if _is_digit(ch) or negative_number:
                self.number()
            elif _is_ident_start(ch):
                ascii_word = _ASCII_WORD.match(text, start)
                self.pos = ascii_word.end() if ascii_word else start
                while self.pos < len(text) and _is_ident_char(text[self.pos]):
                    self.pos += 1
                word = text[start:self.pos]
                kind = KEYWORDS.get(word) or SOFT_KEYWORDS.get(word) or "NAME"
                self.emit(kind, word, start)
            elif ch == "'" and start + 1 < len(text) and _is_ident_start(text[start + 1]):
                self.pos += 1
                while self.pos < len(text) and _is_ident_char(text[self.pos]):
                    self.pos += 1
                self.emit("TYVAR", text[start:self.pos], start)
            elif ch == '"':
                self.string()
            else:
                op = text[start:start + 2]
                op_kind = OPERATORS.get(op)  # maximal munch: `<<` before `<`
                if op_kind is None:
                    op = ch
                    op_kind = OPERATORS.get(op)
                if op_kind is None:
                    shown = f"`{ch}`" if ch.isprintable() else f"U+{ord(ch):04X}"
                    raise self.error(f"unexpected character {shown}", start)
                self.pos += len(op)
                self.emit(op_kind, op, start)

    def skip_space_and_comments(self) -> None:
        text = self.text
        while self.pos < len(text):
            # `\s*` always matches.
            self.pos = _SPACES.match(text, self.pos).end()  # type: ignore[union-attr]
            if text.startswith("--", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif text.startswith("(*", self.pos):
                self.block_comment()
            else:
                return

    def block_comment(self) -> None:
        opened = [self.pos]  # the opening positions of the comments we are inside
        self.pos += 2
        text = self.text
        while opened:
            if self.pos >= len(text):
                raise self.error("this comment is never closed with `*)`", opened[0], opened[0] + 2)
            if text.startswith("(*", self.pos):
                opened.append(self.pos)
                self.pos += 2
            elif text.startswith("*)", self.pos):
                opened.pop()
                self.pos += 2
            else:
                self.pos += 1

    def number(self) -> None:
        text, start = self.text, self.pos
        if text[self.pos] == "-":
            self.pos += 1
        digits_start = self.pos
        value: int | None  # None for a double
        if text.startswith(("0x", "0X"), self.pos) and self._digits_at(self.pos + 2, 16):
            self.pos += 2
            value = int(self._take_digits(16), 16)
        elif text.startswith(("0o", "0O"), self.pos) and self._digits_at(self.pos + 2, 8):
            self.pos += 2
            value = int(self._take_digits(8), 8)
        else:
            self._take_digits(10)
            is_float = False
            if self.pos + 1 < len(text) and text[self.pos] == "." and _is_digit(text[self.pos + 1]):
                self.pos += 1
                self._take_digits(10)
                is_float = True
            if self.pos < len(text) and text[self.pos] in "eE":
                exp = self.pos + 1
                if exp < len(text) and text[exp] in "+-":
                    exp += 1
                if exp < len(text) and _is_digit(text[exp]):
                    self.pos = exp
                    self._take_digits(10)
                    is_float = True
            value = int(text[digits_start:self.pos]) if not is_float else None
            if text.startswith("f", self.pos) and not (
                    self.pos + 1 < len(text) and _is_ident_char(text[self.pos + 1])):
                self._float32(text, start)  # `1.5f`, `2f`: a float (32 bits)
                return
        if self.pos < len(text) and _is_ident_char(text[self.pos]):
            end = self.pos
            while end < len(text) and _is_ident_char(text[end]):
                end += 1
            raise self.error(f"malformed number `{text[start:end]}`", start, end)
        if value is None:
            number = float(text[start:self.pos])
            if math.isinf(number):
                raise self.error("this number is too large for a double", start, self.pos)
            self.emit("FLOAT", number, start)
            return
        prefix = text[digits_start:digits_start + 2].lower()
        if INT32_MAX < value < 2**32 and prefix in ("0x", "0o"):
            value -= 2**32  # a bit pattern, as in C: 0xFFFFFFFF is -1
        if text[start] == "-":
            value = -value
        if not -INT32_MAX - 1 <= value <= INT32_MAX:
            raise self.error("this integer does not fit in 32 bits (FCL's `int` is a 32-bit int)",
                             start, self.pos)
        self.emit("INT", value, start)

    def _float32(self, text: str, start: int) -> None:
        with np.errstate(over="ignore"):
            number = np.float32(float(text[start:self.pos]))
        if np.isinf(number):
            raise self.error("this number is too large for a float (32 bits)", start, self.pos + 1)
        self.pos += 1
        self.emit("FLOAT32", float(number), start)

    def _digits_at(self, pos: int, base: int) -> bool:
        return pos < len(self.text) and _digit_value(self.text[pos]) < base

    def _take_digits(self, base: int) -> str:
        start = self.pos
        while self.pos < len(self.text) and _digit_value(self.text[self.pos]) < base:
            self.pos += 1
        return self.text[start:self.pos]

    def string(self) -> None:
        text, start = self.text, self.pos
        self.pos += 1
        chars = []
        while True:
            if self.pos >= len(text) or text[self.pos] == "\n":
                raise self.error("this string is never closed with `\"`", start)
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                break
            if ch == "\\":
                esc = text[self.pos + 1:self.pos + 2]
                if esc not in ESCAPES:
                    raise self.error(f"unknown escape sequence `\\{esc}` in string", self.pos,
                                     self.pos + 2)
                chars.append(ESCAPES[esc])
                self.pos += 2
            else:
                chars.append(ch)
                self.pos += 1
        self.emit("STRING", "".join(chars), start)


def _digit_value(ch: str) -> int:
    return int(ch, 16) if ch in "0123456789abcdefABCDEF" else 99


def tokenize(source: Source) -> list[Token]:
    """Tokens of `source`, with level-list brackets told apart from comparisons."""
    return mark_level_brackets(Lexer(source).run())


# Tokens after which `<` may open a level list: `push<block>`, `['a]<grid>`, `do<grid>`.
_LEVEL_LIST_OWNERS = NAME_TOKENS | {"RSQB", "DO"}
_SPLIT_CLOSERS = {"GE": ("GT", "EQUALS"), "SHR": ("GT", "GT")}


def mark_level_brackets(tokens: list[Token]) -> list[Token]:
    """Retag `<` ... `>` as LVL_OPEN ... LVL_CLOSE where they enclose a level list.

    A level list is `<>` or `<lvl, ..., lvl>` with lvl ::= name | 1 + lvl, right after a name,
    `]` or `do`. Anything else keeps `<` and `>` as comparison operators.
    """
    out: list[Token] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "LT" and out and out[-1].type in _LEVEL_LIST_OWNERS:
            close = _level_list_end(tokens, i + 1)
            if close is not None:
                out.append(tok.update("LVL_OPEN"))
                out.extend(tokens[i + 1:close])
                closer = tokens[close]
                if closer.type in _SPLIT_CLOSERS:  # `<l>=` or `<l>>`: the `>` closes the list
                    first, second = _split(closer, *_SPLIT_CLOSERS[closer.type])
                    out.append(first.update("LVL_CLOSE"))
                    tokens = tokens[:close] + [second] + tokens[close + 1:]
                    i = close
                else:
                    out.append(closer.update("LVL_CLOSE"))
                    i = close + 1
                continue
        out.append(tok)
        i += 1
    return out


def _level_list_end(tokens: list[Token], i: int) -> int | None:
    """Index of the `>` closing a level list that starts at tokens[i], if one does."""
    def at(k: int) -> str | None:
        return tokens[k].type if k < len(tokens) else None

    if at(i) in ("GT", "GE", "SHR"):
        return i
    while True:
        while at(i) == "INT" and tokens[i].value == 1 and at(i + 1) == "PLUS":
            i += 2
        if at(i) not in NAME_TOKENS:
            return None
        i += 1
        if at(i) in ("GT", "GE", "SHR"):
            return i
        if at(i) != "COMMA":
            return None
        i += 1


def _split(tok: Token, first_type: str, second_type: str) -> tuple[Token, Token]:
    assert tok.start_pos is not None and tok.column is not None  # the lexer sets both
    first = Token(first_type, tok.value[0], start_pos=tok.start_pos, line=tok.line,
                  column=tok.column, end_line=tok.line, end_column=tok.column + 1,
                  end_pos=tok.start_pos + 1)
    second = Token(second_type, tok.value[1:], start_pos=tok.start_pos + 1, line=tok.line,
                   column=tok.column + 1, end_line=tok.end_line, end_column=tok.end_column,
                   end_pos=tok.end_pos)
    return first, second
