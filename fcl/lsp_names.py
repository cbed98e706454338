"""The language server's answers about names across a document: its outline, the references to a
name, renaming one, the signature of the function being applied, and semantic tokens (what each
token is, for editors without an FCL grammar). Plain functions over a checked document
(fcl.lsp.Analysis); the server (fcl.lsp) turns their spans into protocol positions.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from fcl.errors import FCLError, Span
from fcl.prelude import PRELUDE_NAME
from fcl.syntax import ast
from fcl.syntax.lexer import KEYWORDS, SOFT_KEYWORDS, tokenize
from fcl.types.types import TArrow, chase, show_types

NAME = re.compile(r"[#A-Za-z][A-Za-z0-9_#']*")


def _same(a: Span | None, b: Span | None) -> bool:
    return a is not None and b is not None and a.source is b.source \
        and (a.start, a.end) == (b.start, b.end)


def exprs(decls: list[ast.Decl]) -> Iterator[ast.Expr]:
    """Every expression in the declarations (a loop, not recursion: generated programs nest
    deeply)."""
    stack = [decl.value for decl in decls]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(ast.children(e))


def written(e: ast.Var) -> Span | None:
    """Where a use of a name is written: none for a name the parser made (`+` is `addi`)."""
    if e.inst is None or not e.span.text.startswith(e.name):
        return None
    return Span(e.span.source, e.span.start, e.span.start + len(e.name))


# ---- outline

@dataclass
class Symbol:
    name: str
    detail: str      # its type scheme
    function: bool
    span: Span       # the whole declaration
    name_span: Span


def document_symbols(decls: list[ast.Decl]) -> list[Symbol]:
    return [Symbol(d.name, str(d.scheme), isinstance(chase(d.scheme.body), TArrow), d.span,
                   d.name_span) for d in decls]


# ---- references and renaming

def references(decls: list[ast.Decl], defined_at: Span, include_definition: bool) -> list[Span]:
    """Where the name defined at `defined_at` is used in the declarations (and defined, and
    named by its `sig`), in order."""
    found: list[Span] = []
    for decl in decls:
        if _same(decl.name_span, defined_at) and include_definition:
            found.append(decl.name_span)
            if decl.sig_name is not None and decl.sig_name[0] == decl.name:
                found.append(decl.sig_name[1])
    for e in exprs(decls):
        if isinstance(e, ast.Var) and _same(e.inst and e.inst.binding.span, defined_at):
            use = written(e)
            if use is not None:
                found.append(use)
        elif include_definition and isinstance(e, ast.Let) and _same(e.name_span, defined_at):
            found.append(e.name_span)
        elif include_definition and isinstance(e, ast.Lam) and _same(e.param_span, defined_at):
            found.append(e.param_span)
    return sorted(found, key=lambda s: s.start)


class RenameRefused(Exception):
    """Why a rename cannot be done (the message is shown to the user)."""


def rename(decls: list[ast.Decl], names_in_scope: set[str], defined_at: Span | None,
           source_of_document: object, new_name: str) -> list[Span]:
    """The spans to replace with `new_name`, or RenameRefused: a name not defined in this
    document, a new name that is not a name, or one that is already used (it would capture or
    be captured by another definition)."""
    if defined_at is None or defined_at.source is not source_of_document:
        where = "the prelude's" if defined_at is not None and \
            defined_at.source.name == PRELUDE_NAME else "a builtin"
        raise RenameRefused(f"this name is {where}, not defined in this file")
    if not NAME.fullmatch(new_name) or new_name in KEYWORDS:
        raise RenameRefused(f"`{new_name}` is not a name FCL accepts")
    local = {e.name for e in exprs(decls) if isinstance(e, ast.Let)} | \
        {e.param for e in exprs(decls) if isinstance(e, ast.Lam)}
    if new_name in names_in_scope or new_name in local:
        raise RenameRefused(f"`{new_name}` is already defined: renaming to it would change what "
                            f"a name refers to")
    return references(decls, defined_at, include_definition=True)


# ---- signature help

@dataclass
class Signature:
    label: str                 # `name : scheme`
    parameters: list[str]      # the argument types, in order
    active: int                # the argument being written


def signature_at(text: str, offset: int, schemes: dict) -> Signature | None:
    """The function applied around `offset` (`f a |`: its 2nd argument), from the text before
    it, so that it works while the text does not parse: the name after the innermost open
    bracket (or the start of the expression) and the arguments written after it."""
    head, arguments = _application_before(text[:offset])
    if head is None or head not in schemes:
        return None
    scheme = schemes[head]
    parameters = []
    t = chase(scheme.body)
    while isinstance(t, TArrow):
        parameters.append(show_types(t.arg)[0])
        t = chase(t.res)
    if not parameters:
        return None
    return Signature(f"{head} : {scheme}", parameters, min(arguments, len(parameters) - 1))


_BREAKS = {"=", "<-", "=>", "in", "then", "else", "if", "let", "fn", ";", ",", "|>"}
_HEAD = re.compile(r"([#A-Za-z][A-Za-z0-9_#']*)(<[^>]*>)?")


def _application_before(text: str) -> tuple[str | None, int]:
    """The head name of the application that `text` ends inside, and how many of its arguments
    are complete (each part after the head that a space ends; a bracket is one part)."""
    depth, pos = 0, len(text)
    while pos > 0:  # back to the innermost bracket still open
        ch = text[pos - 1]
        if ch in ")]}":
            depth += 1
        elif ch in "([{":
            if depth == 0:
                break
            depth -= 1
        pos -= 1
    parts: list[str] = []
    current, level = "", 0
    for ch in text[pos:]:
        level += (ch in "([{") - (ch in ")]}")
        if level == 0 and ch.isspace():
            if current:
                parts.append(current)
            current = ""
        else:
            current += ch
    typing = bool(current)
    if current:
        parts.append(current)
    for k in range(len(parts) - 1, -1, -1):  # the application starts after the last break
        if parts[k] in _BREAKS or parts[k] in KEYWORDS or not re.search(r"[\w(\[]", parts[k]):
            parts = parts[k + 1:]
            break
    head = _HEAD.fullmatch(parts[0]) if parts else None
    if head is None or head.group(1) in KEYWORDS:
        return None, 0
    return head.group(1), max(len(parts) - 1 - typing, 0)


# ---- semantic tokens

TOKEN_TYPES = ["keyword", "type", "function", "variable", "parameter", "number", "string",
               "comment", "operator", "enumMember"]
TOKEN_MODIFIERS = ["declaration", "defaultLibrary"]
_TYPE_WORDS = {"int", "double", "float", "bool", "char", "unit", "string", "Program", "Seq"}
_LEVELS = {"thread", "block", "grid"}
_COMMENT = re.compile(r"--[^\n]*|\(\*.*?\*\)", re.S)


@dataclass
class Token:
    span: Span
    kind: str
    modifiers: tuple[str, ...] = ()


def semantic_tokens(source, decls: list[ast.Decl]) -> list[Token]:
    """Every token of the document with what it is: keywords, types, levels, numbers, strings,
    comments and operators by the lexer; names by what the type checker resolved them to (a
    builtin or prelude function, a function or value of the file, a parameter or local)."""
    resolved: dict[int, Token] = {}
    for decl in decls:
        resolved[decl.name_span.start] = Token(decl.name_span, _kind_of(decl.scheme),
                                               ("declaration",))
    for e in exprs(decls):
        if isinstance(e, ast.Var):
            use = written(e)
            if use is not None:
                binding = e.inst.binding
                library = binding.origin == "builtin" or (
                    binding.span is not None and binding.span.source.name == PRELUDE_NAME)
                kind = "parameter" if binding.origin == "local" else \
                    _kind_of(binding.scheme)
                resolved[use.start] = Token(use, kind,
                                                ("defaultLibrary",) if library else ())
        elif isinstance(e, ast.Lam):
            resolved[e.param_span.start] = Token(e.param_span, "parameter", ("declaration",))
        elif isinstance(e, ast.Let):
            resolved[e.name_span.start] = Token(e.name_span, "variable", ("declaration",))
    found: list[Token] = []
    try:
        lexed = tokenize(source)
    except FCLError:  # text that does not lex: its comments and checked names only
        lexed = []
    for tok in lexed:
        assert tok.start_pos is not None and tok.end_pos is not None  # the lexer sets both
        span = Span(source, tok.start_pos, tok.end_pos)
        word = str(tok.value) if tok.type not in ("INT", "FLOAT", "FLOAT32", "STRING") else ""
        if span.start in resolved:
            found.append(resolved[span.start])
        elif tok.type in ("INT", "FLOAT", "FLOAT32"):
            found.append(Token(span, "number"))
        elif tok.type == "STRING":
            found.append(Token(span, "string"))
        elif word in _TYPE_WORDS or tok.type == "TYVAR":
            found.append(Token(span, "type"))
        elif word in _LEVELS and tok.type != "NAME":
            found.append(Token(span, "enumMember"))
        elif word in KEYWORDS or word in SOFT_KEYWORDS:
            found.append(Token(span, "keyword"))
        elif tok.type != "NAME" and not NAME.fullmatch(word):
            found.append(Token(span, "operator"))
    found += [Token(Span(source, m.start(), m.end()), "comment")
              for m in _COMMENT.finditer(source.text) if not _inside_string(source.text, m.start())]
    return sorted(found, key=lambda t: t.span.start)


def _kind_of(scheme) -> str:
    return "function" if isinstance(chase(scheme.body), TArrow) else "variable"


def _inside_string(text: str, offset: int) -> bool:
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count('"', line_start, offset) % 2 == 1
