"""`fcl lsp`: a language server for .fcl files over stdio (diagnostics, hover, completion,
go to definition; outline, references, rename, signature help and semantic tokens from
fcl.lsp_names), built on pygls.

Each open document is checked as `fcl check` checks a file, after the prelude, whenever it
changes, and its errors become diagnostics. The other answers come from the checked
declarations: the type checker records on every use of a name the binding it resolved to
(`Var.inst`), so locals, shadowing and the prelude's names resolve here exactly as they did
there. No compiler logic lives in this module.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from fcl import __version__, lsp_names as names
from fcl.errors import FCLError, Source, Span
from fcl.prelude import PRELUDE_NAME, PRELUDE_PATH
from fcl.session import Session
from fcl.syntax import ast
from fcl.syntax.lexer import KEYWORDS, SOFT_KEYWORDS
from fcl.syntax.parser import parse_program
from fcl.types.infer import Binding
from fcl.types.types import TArrow, chase, show_types

WORD_BEFORE = re.compile(r"[#A-Za-z][A-Za-z0-9_#']*$")


@dataclass
class Analysis:
    """A document's text as the front end saw it: the session holds the declarations that
    type-checked."""

    source: Source  # named by the document's URI
    session: Session
    errors: list[FCLError]

    def checked(self) -> list[ast.Decl]:
        """The document's own checked declarations (none when its text does not parse)."""
        return [d for d in self.session.user_decls() if d.span.source is self.source]


@dataclass
class Target:
    """The name under the cursor: what it is and where it is defined."""

    name: str
    type_text: str
    defined_at: Span | None  # None for builtins
    local: bool = False      # a parameter or a `let`
    doc: str | None = None   # a builtin's


def analyze(uri: str, text: str, previous: Analysis | None) -> Analysis:
    source = Source(uri, text)
    session = Session.new()
    try:
        decls = parse_program(source).decls
    except FCLError as error:
        # Until the text parses again, completion and hover use the names of its last version.
        return Analysis(source, previous.session if previous else session, [error])
    # One declaration at a time, going on past a failed one so that the rest stay known. A
    # declaration that uses a failed one's name is not reported: its error would follow from
    # the first.
    errors: list[FCLError] = []
    failed: set[str] = set()
    for decl in decls:
        try:
            session.add_decls([decl])
            failed.discard(decl.name)  # defined again, and this time well
        except FCLError as error:
            if not any(isinstance(e, ast.Var) and e.name in failed for e in names.exprs([decl])):
                errors.append(error)
            failed.add(decl.name)
    return Analysis(source, session, errors)


def target_at(analysis: Analysis, offset: int) -> Target | None:
    """The definition or use of a name at `offset`, from the checked declarations."""
    decls = analysis.checked()
    for decl in decls:
        if _within(decl.name_span, offset):
            return Target(decl.name, str(decl.scheme), decl.name_span)
    for e in names.exprs(decls):
        if isinstance(e, ast.Var) and (use := names.written(e)) is not None \
                and use.start <= offset <= use.end:
            return _binding_target(e.name, e.inst.binding)
        if isinstance(e, ast.Let) and _within(e.name_span, offset):
            return Target(e.name, str(e.scheme), e.name_span, local=True)
        if isinstance(e, ast.Lam) and _within(e.param_span, offset):
            param = chase(e.type)
            shown = show_types(param.arg)[0] if isinstance(param, TArrow) else "?"
            return Target(e.param, shown, e.param_span, local=True)
    return None


def _within(span: Span, offset: int) -> bool:
    return span.start <= offset <= span.end


def name_target(analysis: Analysis, name: str) -> Target | None:
    """A top-level name looked up in scope: for text that does not parse or check."""
    binding = analysis.session.scope.names.get(name)
    return _binding_target(name, binding) if binding is not None else None


def _binding_target(name: str, binding: Binding) -> Target:
    return Target(name, str(binding.scheme), binding.span, binding.origin == "local",
                  binding.doc)


def describe(analysis: Analysis, target: Target) -> str:
    """Markdown for hover: the type scheme, then the builtin's doc or the definition's
    comment, or where it is defined."""
    text = f"```fcl\n{target.name} : {target.type_text}\n```"
    if target.doc:
        return f"{text}\n\nBuiltin: {target.doc}."
    where = target.defined_at
    if where is None:
        return text
    if target.local:
        return f"{text}\n\nA local name, bound on line {where.line}."
    place = "the prelude" if where.source.name == PRELUDE_NAME else "this file"
    comment = _comment_above(analysis, where)
    return "\n\n".join([text, *([comment] if comment else []),
                        f"Defined in {place}, line {where.line}."])


def _comment_above(analysis: Analysis, name_span: Span) -> str | None:
    """The `--` comment lines just above a top-level definition (and its `sig`)."""
    decls = analysis.session.decls
    decl = next((d for d in decls if d.name_span is name_span), None)
    if decl is None:
        return None
    source, line = decl.span.source, decl.span.line - 1
    lines: list[str] = []
    while line >= 1 and source.line_text(line).lstrip().startswith("--"):
        lines.insert(0, source.line_text(line).lstrip()[2:].strip())
        line -= 1
    return " ".join(lines) or None


def completions(analysis: Analysis, prefix: str) -> list[lsp.CompletionItem]:
    names = analysis.session.scope.names
    items = [lsp.CompletionItem(word, kind=lsp.CompletionItemKind.Keyword)
             for word in sorted({*KEYWORDS, *SOFT_KEYWORDS} - set(names))
             if word.startswith(prefix)]
    for name in sorted(n for n in names if n.startswith(prefix)):
        binding = names[name]
        function = isinstance(chase(binding.scheme.body), TArrow)
        items.append(lsp.CompletionItem(
            name, detail=str(binding.scheme), documentation=binding.doc,
            kind=lsp.CompletionItemKind.Function if function else lsp.CompletionItemKind.Value))
    return items


# ---- the server ------------------------------------------------------------------------------

PRELUDE_URI = PRELUDE_PATH.as_uri()


class FCLServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fcl", __version__)
        self.analyses: dict[str, Analysis] = {}

    def check(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        analysis = analyze(uri, document.source, self.analyses.get(uri))
        self.analyses[uri] = analysis
        diagnostics = [self.diagnostic(error, analysis) for error in analysis.errors]
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(
            uri, diagnostics, version=document.version))

    def diagnostic(self, error: FCLError, analysis: Analysis) -> lsp.Diagnostic:
        if error.span is not None and error.span.source is analysis.source:
            where = self.location(error.span).range
        else:  # not located in this document: at its start
            where = lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0))
        related = [lsp.DiagnosticRelatedInformation(self.location(span), note)
                   for span, note in error.notes
                   if span.source is analysis.source or span.source.name == PRELUDE_NAME]
        return lsp.Diagnostic(
            where, "\n".join([error.message, *(f"hint: {hint}" for hint in error.hints)]),
            severity=(lsp.DiagnosticSeverity.Warning if error.kind == "warning"
                      else lsp.DiagnosticSeverity.Error),
            source="fcl", related_information=related or None)

    def location(self, span: Span) -> lsp.Location:
        """A span of a document or of the prelude, in the client's position encoding."""
        uri = PRELUDE_URI if span.source.name == PRELUDE_NAME else span.source.name
        text = TextDocument(uri, span.source.text, position_codec=self.workspace.position_codec)
        return lsp.Location(uri, lsp.Range(text.client_position_at_offset(span.start),
                                           text.client_position_at_offset(span.end)))

    def target(self, uri: str, position: lsp.Position) -> tuple[Analysis, Target] | None:
        analysis = self.analyses.get(uri)
        if analysis is None:
            return None
        document = self.workspace.get_text_document(uri)
        offset = document.offset_at_position(position)
        found = target_at(analysis, offset)
        if found is None:
            name = _name_at(document.source, offset)
            found = name_target(analysis, name) if name else None
        return (analysis, found) if found else None


def _name_at(text: str, offset: int) -> str | None:
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    line = text[line_start:line_end if line_end >= 0 else len(text)]
    for match in names.NAME.finditer(line):
        if match.start() <= offset - line_start <= match.end():
            return match.group()
    return None


def make_server() -> FCLServer:
    server = FCLServer()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FCLServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FCLServer, params: lsp.DidChangeTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FCLServer, params: lsp.DidCloseTextDocumentParams) -> None:
        ls.analyses.pop(params.text_document.uri, None)
        ls.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(params.text_document.uri, []))

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: FCLServer, params: lsp.HoverParams) -> lsp.Hover | None:
        found = ls.target(params.text_document.uri, params.position)
        if found is None:
            return None
        analysis, target = found
        return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, describe(analysis, target)))

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: FCLServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        found = ls.target(params.text_document.uri, params.position)
        if found is None:
            return None
        analysis, target = found
        span = target.defined_at
        if span is None or (span.source is not analysis.source
                            and span.source.name != PRELUDE_NAME):
            return None  # a builtin, or in an earlier version of the text
        return ls.location(span)

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION)
    def complete(ls: FCLServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        offset = document.offset_at_position(params.position)
        word = WORD_BEFORE.search(document.source[:offset])
        analysis = ls.analyses.get(uri) or analyze(uri, document.source, None)
        return lsp.CompletionList(False, completions(analysis, word.group() if word else ""))

    _name_features(server)
    return server


def _name_features(server: FCLServer) -> None:
    """Outline, references, rename, signature help and semantic tokens (fcl.lsp_names)."""

    @server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: FCLServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        analysis = ls.analyses.get(params.text_document.uri)
        if analysis is None:
            return []
        return [lsp.DocumentSymbol(
            symbol.name, lsp.SymbolKind.Function if symbol.function else lsp.SymbolKind.Variable,
            ls.location(symbol.span).range, ls.location(symbol.name_span).range,
            detail=symbol.detail) for symbol in names.document_symbols(analysis.checked())]

    @server.feature(lsp.TEXT_DOCUMENT_REFERENCES)
    def references(ls: FCLServer, params: lsp.ReferenceParams) -> list[lsp.Location]:
        found = ls.target(params.text_document.uri, params.position)
        if found is None:
            return []
        analysis, target = found
        if target.defined_at is None:
            return []
        return [ls.location(span) for span in names.references(
            analysis.checked(), target.defined_at, params.context.include_declaration)]

    @server.feature(lsp.TEXT_DOCUMENT_RENAME)
    def rename(ls: FCLServer, params: lsp.RenameParams) -> lsp.WorkspaceEdit | None:
        found = ls.target(params.text_document.uri, params.position)
        if found is None:
            return None
        analysis, target = found
        if analysis.errors:
            raise JsonRpcException("fix the file's errors first: a rename needs every use of the "
                                   "name resolved", code=REQUEST_FAILED)
        try:
            spans = names.rename(analysis.checked(), set(analysis.session.scope.names),
                                 target.defined_at, analysis.source, params.new_name)
        except names.RenameRefused as why:
            raise JsonRpcException(str(why), code=REQUEST_FAILED) from None
        return lsp.WorkspaceEdit(changes={params.text_document.uri: [
            lsp.TextEdit(ls.location(span).range, params.new_name) for span in spans]})

    @server.feature(lsp.TEXT_DOCUMENT_SIGNATURE_HELP,
                    lsp.SignatureHelpOptions(trigger_characters=[" ", "("]))
    def signature_help(ls: FCLServer, params: lsp.SignatureHelpParams) -> lsp.SignatureHelp | None:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        analysis = ls.analyses.get(uri) or analyze(uri, document.source, None)
        schemes = {name: binding.scheme
                   for name, binding in analysis.session.scope.names.items()}
        found = names.signature_at(document.source, document.offset_at_position(params.position),
                                   schemes)
        if found is None:
            return None
        return lsp.SignatureHelp([lsp.SignatureInformation(
            found.label, parameters=[lsp.ParameterInformation(p) for p in found.parameters])],
            active_signature=0, active_parameter=found.active)

    @server.feature(lsp.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL,
                    lsp.SemanticTokensLegend(names.TOKEN_TYPES, names.TOKEN_MODIFIERS))
    def semantic_tokens(ls: FCLServer, params: lsp.SemanticTokensParams) -> lsp.SemanticTokens:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        analysis = ls.analyses.get(uri)
        decls = analysis.checked() if analysis and analysis.source.text == document.source \
            else []
        source = Source(uri, document.source)
        return lsp.SemanticTokens(_encode(ls, source, names.semantic_tokens(source, decls)))


REQUEST_FAILED = -32803  # LSP's RequestFailed: the request was valid, and cannot be done


def _encode(ls: FCLServer, source: Source, tokens: list[names.Token]) -> list[int]:
    """Semantic tokens as the protocol's five numbers each (relative to the token before, in the
    client's position encoding); a token over several lines (a comment) is one per line."""
    document = TextDocument(source.name, source.text,
                            position_codec=ls.workspace.position_codec)
    data: list[int] = []
    line, char = 0, 0
    for token in tokens:
        kind = names.TOKEN_TYPES.index(token.kind)
        modifiers = sum(1 << names.TOKEN_MODIFIERS.index(m) for m in token.modifiers)
        start = token.span.start
        while start < token.span.end:
            end = source.text.find("\n", start, token.span.end)
            end = token.span.end if end < 0 else end
            first = document.client_position_at_offset(start)
            last = document.client_position_at_offset(end)
            if last.character > first.character:
                data += [first.line - line, first.character - (char if first.line == line else 0),
                         last.character - first.character, kind, modifiers]
                line, char = first.line, first.character
            start = end + 1
    return data


def serve() -> int:
    make_server().start_io()
    return 0
