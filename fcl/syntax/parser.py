"""FCL parser: Lark LALR over the tokens of `lexer.py`, building the AST of `ast.py`.

Desugaring happens here: binary operators become applications of builtins (which user
definitions cannot shadow), `a && b` and `a || b` become short-circuiting `if`s, `x |> f` is
`f x`, and `do` blocks become `bind` chains.
"""
from __future__ import annotations

import difflib
import threading
from functools import cache
from pathlib import Path
from typing import cast

from lark import Lark, Token
from lark.exceptions import UnexpectedToken
from lark.lexer import Lexer as LarkLexer

from fcl.errors import FCLError, Source, Span
from fcl.il.ir import float_text
from fcl.syntax import ast
from fcl.syntax.lexer import KEYWORDS, NAME_TOKENS, tokenize

BINARY_BUILTINS = {
    "+": "addi", "-": "subi", "*": "muli", "/": "divi", "%": "modi",
    "==": "eqi", "!=": "neqi", "<": "lti", "<=": "lei", ">": "gti", ">=": "gei",
    "<<": "sll", ">>": "srl", "&": "andi", "|": "ori", "^": "xor",
}
DECL_KEYWORDS = {"SIG", "FUN", "VAL"}
CONCRETE_LEVEL_NAMES = {"thread", "block", "grid", "Z"}
# The original's programs may name a level variable `warp`: it then stands for that variable.
LEVEL_WORDS = CONCRETE_LEVEL_NAMES | {"warp"}


class _TokenPassThrough(LarkLexer):
    """Lark calls this with the token list we already made."""

    def __init__(self, lexer_conf):
        pass

    def lex(self, tokens):  # type: ignore[override]
        yield from tokens


@cache
def _lark() -> tuple[Lark, _Builder]:
    """The parser and the builder it calls on each reduction, so that no parse tree is built."""
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    builder = _Builder()
    parser = Lark(grammar, parser="lalr", lexer=_TokenPassThrough, transformer=builder,
                  start=["program", "expr_start", "scheme_start"], maybe_placeholders=True,
                  cache=True)
    return parser, builder


# Parses take turns: the one builder holds the source (and first error) of the parse under way.
_PARSING = threading.Lock()


def parse_program(source: Source) -> ast.Module:
    """Parse a file: declarations only."""
    return _run(source, tokenize(source), "program")


def parse_cell(source: Source) -> ast.Module:
    """Parse a notebook cell: declarations, then optionally one expression.

    The expression starts at the first token that is not part of a declaration and begins a
    line at column 1 (or is the cell's first token): declarations continue on indented lines.
    """
    tokens = tokenize(source)
    i = _expression_start(tokens)
    if i is None:
        return _run(source, tokens, "program")
    decls = _run(source, tokens[:i], "program").decls if i else []
    return ast.Module(decls, _run(source, tokens[i:], "expr_start"))


def cell_expression_line(source: Source) -> int | None:
    """The line where a cell's expression begins, as written (a `do` block's first line, not
    its first statement's, which is where the desugared expression's span starts)."""
    tokens = tokenize(source)
    i = _expression_start(tokens)
    return None if i is None else tokens[i].line


def _expression_start(tokens: list[Token]) -> int | None:
    for i, tok in enumerate(tokens):
        if tok.type not in DECL_KEYWORDS and (i == 0 or tok.column == 1):
            return i
    return None


def parse_expr(source: Source) -> ast.Expr:
    """Parse a single expression."""
    return _run(source, tokenize(source), "expr_start")


def parse_scheme(source: Source) -> ast.SchemeSyntax:
    """Parse a type scheme, such as `forall <l> 'a. ['a] -> ['a]<l>`."""
    return _run(source, tokenize(source), "scheme_start")


def _run(source: Source, tokens: list[Token], start: str):
    parser, builder = _lark()
    with _PARSING:
        builder.source, builder.error = source, None
        try:
            # Lark returns what the builder's reduction of the start rule returned.
            result = cast("_Located", parser.parse(tokens, start=start))
        except UnexpectedToken as err:
            raise _syntax_error(source, tokens, err) from None
        if builder.error is not None:
            raise builder.error
        return result.value


# ---- syntax error messages --------------------------------------------------------------------

_EXPR_START = {"NAME", "INT", "FLOAT", "FLOAT32", "STRING", "LPAR", "TRUE", "FALSE", "FN", "IF",
               "LET", "DO"}
_TYPE_START = {"INT_T", "DOUBLE_T", "FLOAT_T", "BOOL_T", "TYVAR", "LSQB", "PROGRAM", "SEQ"}
_SHOW = {
    "EQUALS": "`=`", "DARROW": "`=>`", "ARROW": "`->`", "LARROW": "`<-`", "COLON": "`:`",
    "COMMA": "`,`", "SEMI": "`;`", "DOT": "`.`", "RPAR": "`)`", "RSQB": "`]`", "RBRACE": "`}`",
    "LBRACE": "`{`", "LPAR": "`(`", "LSQB": "`[`", "IN": "`in`", "THEN": "`then`",
    "ELSE": "`else`", "SIG": "`sig`", "FUN": "`fun`", "VAL": "`val`", "NAME": "a name",
    "LVL_CLOSE": "`>`", "LVL_OPEN": "`<`", "TYVAR": "a type variable", "$END": "the end of input",
}
_CLOSERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE", "LVL_OPEN": "LVL_CLOSE"}
_CLOSER_OF = {closer: opener for opener, closer in _CLOSERS.items()}


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    if tok.type in ("INT", "FLOAT"):
        return f"number `{tok.value}`"
    if tok.type == "FLOAT32":
        return f"number `{float_text(tok.value)}f`"
    if tok.type == "STRING":
        return "string literal"
    return f"`{tok.value}`"


def _describe_expected(expected: set[str]) -> str | None:
    if expected & _TYPE_START and "TYVAR" in expected:
        return "a type"
    if {"INT", "LPAR", "NAME"} <= expected:
        return "an expression"
    shown = sorted({_SHOW[e] for e in expected if e in _SHOW})
    if not shown or len(shown) > 5:
        return None
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _eof_span(source: Source, tokens: list[Token]) -> Span:
    # The last token's end, not the text's: a cell's declarations end where its expression starts.
    if tokens:
        end = tokens[-1].end_pos
        assert end is not None  # the lexer sets it
    else:
        end = 0
    return Span(source, max(0, end - 1), max(1, end)) if end else Span(source, 0, 0)


def _syntax_error(source: Source, tokens: list[Token], err: UnexpectedToken) -> FCLError:
    tok = err.token
    if tok.type == "LT" and "LVL_OPEN" in err.expected:
        return _level_list_error(source, tokens, tok)
    if tok.type == "$END":
        span = _eof_span(source, tokens)
    else:
        span = Span(source, tok.start_pos, tok.end_pos)
    open_before = _open_brackets(tokens, tok)
    # LALR merges states, so its expected set may name closers (and `;`, which only separates
    # `do` statements) that cannot occur here because no such bracket is open.
    open_types = {o.type for o in open_before}
    expected = {e for e in err.expected
                if not ((e in _CLOSER_OF and _CLOSER_OF[e] not in open_types)
                        or (e == "SEMI" and "LBRACE" not in open_types))}
    described = _describe_expected(expected)
    signature = _signature_before(tokens, tok) if "FUN" in expected else None
    if signature is not None:
        described = f"a definition (`fun` or `val`) after the signature of `{signature.value}`"
    message = f"unexpected {_describe_token(tok)}"
    if described:
        message += f"; expected {described}"
    error = FCLError(message, span)
    if signature is not None and signature.line != span.line:
        error.notes.append((_tok_span(source, signature), "the signature is here"))
    never_closed = {id(o) for o in _open_brackets(tokens)}
    unclosed = [o for o in open_before if id(o) in never_closed]
    if unclosed:
        opener = unclosed[-1]
        error.notes.append((_tok_span(source, opener), f"this `{opener.value}` is never closed"))
    if tok.type == "LARROW":
        error.hints.append("`x <- e` binds only inside `do { ... }`; for a comparison with a "
                           "negative number write `x < -1` with a space")
    if tok.type == "INT" and tok.value < 0 and err.expected & {"MINUS"}:
        error.hints.append(f"`-{-tok.value}` directly before a digit is a negative number; "
                           f"write `- {-tok.value}` to subtract")
    if tok.type in DECL_KEYWORDS and "IN" in expected:
        error.hints.append("a `let` inside an expression needs `in`")
    at = next((i for i, t in enumerate(tokens) if t is tok), len(tokens))  # Tokens are strs
    before = tokens[:at]
    if tok.type == "EQUALS" and [t.type for t in before[-2:]] == ["FUN", "NAME"]:
        error.hints.append(f"`fun` defines a function of parameters (`fun {before[-1].value} x = "
                           f"...`); a value without parameters is `val {before[-1].value} = ...`")
    if tok.value in KEYWORDS and "NAME" in expected:
        error.hints.append(f"`{tok.value}` is a reserved word; choose another name, such as "
                           f"`{tok.value}_`")
    misspelt = _misspelt_keyword([*before[-3:], tok], tok.line)
    if misspelt is not None:
        name, keyword = misspelt
        # Where a declaration was expected (`lett y = 1` at the top level), `let` is no answer.
        top_level = " (at the top level, a definition starts with `val`)" \
            if keyword == "let" and name is tok and "VAL" in expected else ""
        error.hints.append(f"`{name}` is not a keyword: did you mean `{keyword}`?{top_level}")
    return error


# Keywords a misspelling of which (`lett`, `esle`) is worth a hint; `in` and `fn` are too short to
# guess at.
_GUESSED_KEYWORDS = ("let", "val", "fun", "sig", "then", "else", "if", "do")


def _misspelt_keyword(tokens: list[Token], line: int) -> tuple[Token, str] | None:
    """A name among `tokens` (on `line`) that looks like a mistyped keyword, and the keyword."""
    for t in tokens:
        if t.type == "NAME" and t.line == line:
            close = difflib.get_close_matches(t.value, _GUESSED_KEYWORDS, n=1, cutoff=0.75)
            if close:
                return t, close[0]
    return None


def _signature_before(tokens: list[Token], upto: Token) -> Token | None:
    """The name in `sig name : ...` if that is the last declaration started before `upto`."""
    last = None
    for i, t in enumerate(tokens):
        if t is upto:
            break
        if t.type in DECL_KEYWORDS:
            last = i
    if last is None or tokens[last].type != "SIG" or last + 1 == len(tokens):
        return None
    return tokens[last + 1]


def _level_list_error(source: Source, tokens: list[Token], opener: Token) -> FCLError:
    """Where a level list was due, a `<` that the lexer did not take for one (see
    lexer.mark_level_brackets): what in the list is wrong."""
    i = next(k for k, t in enumerate(tokens) if t is opener) + 1
    while True:
        while i + 1 < len(tokens) and tokens[i].type == "INT" and tokens[i + 1].type == "PLUS":
            if tokens[i].value != 1:
                return FCLError("only `1+` can be added to a level (levels are thread, warp, "
                                "block, grid)", _tok_span(source, tokens[i]))
            i += 2
        if i == len(tokens) or tokens[i].type not in NAME_TOKENS:
            break
        i += 1
        if i == len(tokens) or tokens[i].type != "COMMA":
            written = source.text[opener.start_pos:tokens[i - 1].end_pos]
            return _unexpected(source, tokens, i, f"`>` to close the level list `{written}`")
        i += 1
    return _unexpected(source, tokens, i, "a level (thread, warp, block, grid or a level variable)")


def _unexpected(source: Source, tokens: list[Token], i: int, expected: str) -> FCLError:
    """`unexpected X; expected ...` at tokens[i] (the end of input past the last token)."""
    if i == len(tokens):
        return FCLError(f"unexpected end of input; expected {expected}", _eof_span(source, tokens))
    return FCLError(f"unexpected {_describe_token(tokens[i])}; expected {expected}",
                    _tok_span(source, tokens[i]))


def _open_brackets(tokens: list[Token], upto: Token | None = None) -> list[Token]:
    """The brackets still open just before token `upto` (after all tokens if None), outermost
    first."""
    stack: list[Token] = []
    for t in tokens:
        if t is upto:
            break
        if t.type in _CLOSERS:
            stack.append(t)
        elif t.type in _CLOSER_OF and stack and _CLOSERS[stack[-1].type] == t.type:
            stack.pop()
    return stack


# ---- reductions → AST -----------------------------------------------------------------------

def _tok_span(source: Source, tok: Token) -> Span:
    assert tok.start_pos is not None and tok.end_pos is not None  # the lexer sets both
    return Span(source, tok.start_pos, tok.end_pos)


class _Located:
    """What a rule built, and where the rule's text starts and ends: from its first token to its
    last, so brackets are included (a parenthesised expression's own span leaves them out)."""

    __slots__ = ("value", "start_pos", "end_pos")

    def __init__(self, start_pos: int | None, end_pos: int | None):
        self.value = None
        self.start_pos = start_pos
        self.end_pos = end_pos


def _reductions(cls):
    """Turn each public method `rule(self, meta, items)` of the builder into the callback Lark
    calls when it reduces that rule: it gets the children (tokens, `_Located` results, and None
    for an optional part that is absent) and returns a `_Located`. `meta` is that result, whose
    positions are those of the rule's first and last present child."""
    def reduction(method):
        def reduce(self, children):
            start = end = None
            for child in children:
                if child is not None:
                    start = child.start_pos
                    break
            for child in reversed(children):
                if child is not None:
                    end = child.end_pos
                    break
            node = _Located(start, end)
            if self.error is None:
                try:
                    node.value = method(self, node, [c.value if type(c) is _Located else c
                                                     for c in children])
                except FCLError as err:
                    self.error = err
            return node
        return reduce

    for name, method in list(vars(cls).items()):
        if callable(method) and not name.startswith("_"):
            setattr(cls, name, reduction(method))
    return cls


# Lark reduces bottom-up with its own stack, so deeply nested input needs no Python recursion.
# A syntax error anywhere is reported before any error found while building (as when the AST was
# built from a finished parse tree): after the first such error, parsing goes on, building nothing.
@_reductions
class _Builder:
    source: Source
    error: FCLError | None

    def _span(self, meta: _Located) -> Span:
        # Only `program` can match no tokens, and it asks for no span.
        assert meta.start_pos is not None and meta.end_pos is not None
        return Span(self.source, meta.start_pos, meta.end_pos)

    # ---- top level
    def program(self, meta, decls):
        return ast.Module([d for d in decls if d is not None])

    def expr_start(self, meta, items):
        return items[0]

    scheme_start = expr_start

    def decl(self, meta, items):
        sig, definition = items
        if sig is not None:
            definition.sig_name, definition.sig = sig
            definition.span = self._span(meta)
        return definition

    def sig(self, meta, items):
        _, (name, name_span), _, scheme = items
        return (name, name_span), scheme

    def fun(self, meta, items):
        _, (name, name_span), lvls, *rest = items
        params, body = rest[:-2], rest[-1]
        value = body
        for pname, pspan in reversed(params):
            value = ast.Lam(pspan.to(body.span), pname, pspan, value)
        return ast.Decl(name, name_span, lvls or [], None, None, value, self._span(meta))

    def val(self, meta, items):
        _, (name, name_span), lvls, _, body = items
        return ast.Decl(name, name_span, lvls or [], None, None, body, self._span(meta))

    def level_params(self, meta, items):
        params = _names(items)
        for name, span in params:
            if name in CONCRETE_LEVEL_NAMES:
                raise FCLError(f"`{name}` is a level, not a level variable", span,
                               [f"declare a level variable such as `<l>`, or write `{name}` "
                                "directly where it is needed"])
        return [name for name, _ in params]

    # ---- names, levels, types
    def name(self, meta, items):
        return items[0].value, _tok_span(self.source, items[0])

    def level(self, meta, items):
        name, span = items[0]
        return ast.LevelSyntax(name, 0, span)

    def level_step(self, meta, items):
        one, _, inner = items
        if one.value != 1:
            raise FCLError("only `1+` can be added to a level (levels are thread, warp, block, "
                           "grid)", _tok_span(self.source, one))
        return ast.LevelSyntax(inner.name, inner.steps + 1, self._span(meta))

    def level_args(self, meta, items):
        return [lvl for lvl in items if isinstance(lvl, ast.LevelSyntax)]

    def forall(self, meta, items):
        lists = [x for x in items if isinstance(x, list)]
        level_vars = [v for lst in lists for v in lst]
        tyvars = [t.value[1:] for t in items if isinstance(t, Token) and t.type == "TYVAR"]
        return ast.SchemeSyntax(level_vars, tyvars, items[-1], self._span(meta))

    def mono(self, meta, items):
        return ast.SchemeSyntax([], [], items[0], self._span(meta))

    def _type(self, meta, con, args=(), **kw):
        return ast.TypeSyntax(con, list(args), self._span(meta), **kw)

    def arrow(self, meta, items):
        return self._type(meta, "arrow", [items[0], items[2]])

    def int_t(self, meta, items):
        return self._type(meta, "int")

    def double_t(self, meta, items):
        return self._type(meta, "double")

    def float_t(self, meta, items):
        return self._type(meta, "float")

    def bool_t(self, meta, items):
        return self._type(meta, "bool")

    def string_t(self, meta, items):
        return self._type(meta, "string")

    def unit_t(self, meta, items):
        return self._type(meta, "unit")

    def var_t(self, meta, items):
        return self._type(meta, "var", var=items[0].value[1:])

    def program_t(self, meta, items):
        return self._type(meta, "program", [items[4]], level=items[2])

    def pair_t(self, meta, items):
        """`(a, b, c)` is `(a, (b, c))`: a tuple is pairs nested to the right."""
        *parts, last = items[1:-1:2]
        for part in reversed(parts):
            last = ast.TypeSyntax("pair", [part, last], Span(self.source, part.span.start,
                                                             last.span.end))
        last.span = self._span(meta)
        return last

    def simple_type(self, meta, items):  # `( type )`
        return items[1]

    def pull_t(self, meta, items):
        return self._type(meta, "pull", [items[1]])

    def seq_t(self, meta, items):
        return self._type(meta, "seq", [items[1]])

    def push_t(self, meta, items):
        return self._type(meta, "push", [items[1]], level=items[4])

    # ---- expressions
    def binop(self, meta, items):
        left, op, right = items
        op_span = _tok_span(self.source, op)
        span = self._span(meta)
        if op.value == "&&":
            return ast.If(span, left, right, ast.Lit(op_span, False, "bool"))
        if op.value == "||":
            return ast.If(span, left, ast.Lit(op_span, True, "bool"), right)
        fn = ast.Var(op_span, BINARY_BUILTINS[op.value], builtin=True)
        return ast.App(span, ast.App(left.span.to(op_span), fn, left), right)

    def pipe(self, meta, items):
        arg, _, fn = items
        return ast.App(self._span(meta), fn, arg)

    def app(self, meta, items):
        return ast.App(self._span(meta), items[0], items[1])

    def lam(self, meta, items):
        params = _names(items[1:-2])
        body = items[-1]
        for pname, pspan in reversed(params):
            body = ast.Lam(pspan.to(body.span), pname, pspan, body)
        body.span = self._span(meta)
        return body

    def if_(self, meta, items):
        return ast.If(self._span(meta), items[1], items[3], items[5])

    def let_head(self, meta, items):
        (name, name_span), lvls = items[1], items[2]
        sig = items[4] if items[3] is not None else None
        return name, name_span, lvls or [], sig, items[-1], self._span(meta)

    def let(self, meta, items):
        name, name_span, lvls, sig, value, _ = items[0]
        return ast.Let(self._span(meta), name, name_span, lvls, sig, value, items[2])

    def unit(self, meta, items):
        return ast.UnitLit(self._span(meta))

    def paren(self, meta, items):
        return items[1]

    def pair(self, meta, items):
        """`(a, b, c)` is `(a, (b, c))`: a tuple is pairs nested to the right."""
        *parts, last = items[1:-1:2]
        for part in reversed(parts[1:]):
            last = ast.Pair(Span(self.source, part.span.start, last.span.end), part, last)
        return ast.Pair(self._span(meta), parts[0], last)

    def true(self, meta, items):
        return ast.Lit(self._span(meta), True, "bool")

    def false(self, meta, items):
        return ast.Lit(self._span(meta), False, "bool")

    def int(self, meta, items):
        return ast.Lit(self._span(meta), items[0].value, "int")

    def float(self, meta, items):
        return ast.Lit(self._span(meta), items[0].value, "double")

    def float32(self, meta, items):
        return ast.Lit(self._span(meta), items[0].value, "float")

    def string(self, meta, items):
        return ast.Lit(self._span(meta), items[0].value, "string")

    def var(self, meta, items):
        (name, _span), levels = items
        return ast.Var(self._span(meta), name, levels)

    def do(self, meta, items):
        do_tok, levels, _, stmts, _ = items
        kind, payload, stmt_span = stmts[-1]
        if kind != "expr":
            raise FCLError("the last statement of a `do` block must be an expression, "
                           "not a binding", stmt_span)
        result = payload
        if levels is not None and all(kind == "let" for kind, _, _ in stmts[:-1]):
            result.do_levels = (levels, _tok_span(self.source, do_tok))
        for kind, payload, stmt_span in reversed(stmts[:-1]):
            rest_span = stmt_span.to(result.span)
            if kind == "let":
                name, name_span, lvls, sig, value, _ = payload
                result = ast.Let(rest_span, name, name_span, lvls, sig, value, result)
                continue
            bind = ast.Var(_tok_span(self.source, do_tok), "bind", levels, builtin=True)
            if kind == "bind":
                (name, name_span), action = payload
            else:
                name, name_span, action = "_", action_span(payload), payload
            cont = ast.Lam(rest_span, name, name_span, result)
            result = ast.App(rest_span, ast.App(action.span, bind, action), cont)
        return result

    def stmts(self, meta, items):
        return [s for s in items if isinstance(s, tuple)]

    def bind_stmt(self, meta, items):
        return "bind", (items[0], items[2]), self._span(meta)

    def let_stmt(self, meta, items):
        return "let", items[0], self._span(meta)

    def expr_stmt(self, meta, items):
        return "expr", items[0], self._span(meta)


def action_span(e: ast.Expr) -> Span:
    return Span(e.span.source, e.span.start, e.span.start)


def _names(items) -> list[tuple[str, Span]]:
    return [x for x in items if isinstance(x, tuple)]


def cell_status(text: str) -> str:
    """`complete`, `incomplete` (more lines could finish it) or `invalid`, for a cell's text."""
    source = Source("<cell>", text)
    try:
        parse_cell(source)
        return "complete"
    except FCLError as err:
        unfinished = (err.message.startswith("unexpected end of input")
                      or "never closed" in err.message)
        return "incomplete" if unfinished else "invalid"
