"""Syntax highlighting of FCL with Pygments.

`FCLLexer` is registered under the `pygments.lexers` entry point (pyproject.toml), so anything
that asks Pygments for "fcl" finds it: nbconvert's HTML export of a notebook whose
language_info.pygments_lexer is "fcl", `pygmentize -l fcl`, Sphinx. `highlight_html` renders a
snippet for the kernel's own HTML outputs.

It follows the compiler's lexer (fcl/syntax/lexer.py) where a regular-expression lexer can:
nested `(* *)` comments are tracked with a state stack, `-` directly before a digit belongs to a
negative literal, and `<` opens a level list under the same rule as `mark_level_brackets`
(after a name, `]` or `do`, when a well-formed list follows). Inside level lists the concrete
levels are keywords; elsewhere `thread`, `block` and `grid` are ordinary names, as in FCL.
`forall`, `Program`, `Seq`, `unit` and `string` are soft keywords too, but they are nearly always
types, so they are highlighted everywhere. `%magic` and `%%magic` lines at the top of a cell are
kernel directives, not FCL.

`ThemedStyle` colours tokens from the front end's theme, so highlighted code is readable in light
and dark themes alike: JupyterLab's (and Notebook 7's) editor colour variables, which every
JupyterLab theme defines, else VS Code's theme colours, else JupyterLab's light colours.
"""
from __future__ import annotations

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import RegexLexer, bygroups, default
from pygments.style import Style
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

from fcl.syntax.lexer import KEYWORDS, SOFT_KEYWORDS
from fcl.syntax.parser import LEVEL_WORDS
from fcl.types.builtins import BUILTINS

__all__ = ["FCLLexer", "ThemedStyle", "TEXT_COLOUR", "highlight_html", "theme_colour"]

_IDENT = r"(?:[^\W\d_]|#)[\w#']*"  # a letter or `#`, then letters, digits, `_`, `#`, `'`
# What may follow the `<` of a level list: `<>` or `<lvl, ..., lvl>`, lvl ::= name | 1 + lvl.
_LEVEL = rf"(?:1\s*\+\s*)*{_IDENT}"
_LEVEL_LIST_REST = rf"\s*(?:{_LEVEL}\s*(?:,\s*{_LEVEL}\s*)*)?>"

_TYPE_WORDS = {"int", "double", "float", "bool", "char", "unit", "string", "Program", "Seq"}
_WORD_TOKENS = {
    **dict.fromkeys(BUILTINS, Name.Builtin),
    **{word: Keyword for word in (*KEYWORDS, *SOFT_KEYWORDS) if word not in LEVEL_WORDS},
    **dict.fromkeys(_TYPE_WORDS, Keyword.Type),
    "true": Keyword.Constant,
    "false": Keyword.Constant,
}


def _word(lexer, match):
    yield match.start(), _WORD_TOKENS.get(match.group(), Name), match.group()


def _level(lexer, match):
    kind = Keyword.Pseudo if match.group() in LEVEL_WORDS else Name.Variable
    yield match.start(), kind, match.group()


class FCLLexer(RegexLexer):
    """Pygments lexer for FCL source and FCL notebook cells."""

    name = "FCL"
    aliases = ["fcl"]
    filenames = ["*.fcl"]
    mimetypes = ["text/x-fcl"]
    url = "https://github.com/dybber/fcl"

    tokens = {
        # The start of a cell: kernel magics, one a line, before the first line of FCL. The
        # lexer leaves this state for good at the first other line, so a `%` further down is the
        # remainder operator.
        "root": [
            (r"[ \t]*\n", Whitespace),
            (r"([ \t]*)(%%?[^\W\d][\w.-]*[^\n]*)(\n?)",
             bygroups(Whitespace, Comment.Preproc, Whitespace)),
            default("code"),
        ],
        "code": [
            (r"\s+", Whitespace),
            (r"--[^\n]*", Comment.Single),
            (r"\(\*", Comment.Multiline, "comment"),
            (r'"', String.Double, "string"),
            (r"-?0[xX][0-9a-fA-F]+", Number.Hex),
            (r"-?0[oO][0-7]+", Number.Oct),
            (r"-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)?f\b", Number.Float),  # a float
            (r"-?\d+(?:\.\d+(?:[eE][+-]?\d+)?|[eE][+-]?\d+)", Number.Float),
            (r"-?\d+", Number.Integer),
            (rf"(sig|fun|val)(\s+)({_IDENT})", bygroups(Keyword, Whitespace, Name.Function),
             "after_name"),
            (_IDENT, _word, "after_name"),
            (rf"'{_IDENT}", Name.Variable),
            (r"\]", Punctuation, "after_name"),
            (r"\|>|\|\||&&|==|!=|<=|>=|<<|>>|<-|=>|->|[<>+\-*/%&|^=]", Operator),
            (r"[.:,;()\[{}]", Punctuation),
        ],
        # Right after a name or `]`: a `<` here may open a level list.
        "after_name": [
            (rf"(\s*)(<)(?={_LEVEL_LIST_REST})", bygroups(Whitespace, Punctuation),
             ("#pop", "levels")),
            default("#pop"),
        ],
        "levels": [
            (r"\s+", Whitespace),
            (r"1", Number.Integer),
            (r"\+", Operator),
            (r",", Punctuation),
            (r">", Punctuation, "#pop"),
            (_IDENT, _level),
        ],
        "comment": [
            (r"[^(*]+", Comment.Multiline),
            (r"\(\*", Comment.Multiline, "#push"),
            (r"\*\)", Comment.Multiline, "#pop"),
            (r"[(*]", Comment.Multiline),
        ],
        "string": [
            (r'[^"\\\n]+', String.Double),
            (r"\\[ntr\\\"'0abfv]", String.Escape),
            (r'"', String.Double, "#pop"),
            (r"\\", Error),  # an unknown escape, which the compiler rejects
            # Only a line end is left: the string is unterminated (also an error). Ending it here
            # keeps the next line FCL; left unmatched, the newline would send RegexLexer back to
            # "root", where `%` lines are magics.
            default("#pop"),
        ],
    }


def theme_colour(jupyterlab: str, vscode: str, light: str) -> str:
    """A CSS colour: JupyterLab's variable `--jupyterlab`, else VS Code's `--vscode-vscode`, else
    `light` (a page without either, such as the classic notebook, is light)."""
    return f"var(--{jupyterlab},var(--vscode-{vscode},{light}))"


TEXT_COLOUR = theme_colour("jp-content-font-color1", "editor-foreground", "#1a1a1a")


def _editor(name: str, vscode: str, light: str) -> str:
    return theme_colour(f"jp-mirror-editor-{name}-color", vscode, light)


class ThemedStyle(Style):
    """Token colours from the theme (no spaces inside a colour: Pygments splits styles on them).

    Every colour reaches WCAG's contrast 4.5 in JupyterLab's light and dark themes, also on the
    faint tints of the %%opencl view. JupyterLab's own comment and meta colours do not on the
    dark background (4.2 and 3.9), nor its number colour on the light tints, so comments are
    italic in the text's colour and numbers and directives borrow other editor colours. VS Code
    names colours for few token kinds; the others take its text colour there.
    """

    background_color = None  # the output's own background
    styles = {
        Comment: "italic",
        Comment.Preproc: "noitalic " + _editor("variable-2", "editor-foreground", "#00366d"),
        Keyword: "bold " + _editor("keyword", "debugTokenExpression-boolean", "#008000"),
        Keyword.Pseudo: "nobold",
        Keyword.Type: "nobold " + _editor("string-2", "debugTokenExpression-name", "#770088"),
        Name.Builtin: _editor("builtin", "debugTokenExpression-name", "#008000"),
        Name.Function: _editor("property", "editor-foreground", "#0055aa"),
        Name.Variable: _editor("string-2", "editor-foreground", "#770088"),
        String: _editor("string", "debugTokenExpression-string", "#ba2121"),
        String.Escape: "bold",
        Number: _editor("operator", "editor-foreground", "#7800c2"),
        Error: "border:" + _editor("error", "errorForeground", "#ff0000"),
    }


_FORMATTER = HtmlFormatter(noclasses=True, style=ThemedStyle, cssclass="highlight fcl-highlight")


def highlight_html(code: str) -> str:
    """`code` as highlighted HTML: a `<div class="highlight fcl-highlight"><pre>` block.

    The colours are inline `style` attributes (`ThemedStyle`'s theme variables), so the block
    looks right in JupyterLab, the classic notebook, VS Code and exported HTML without a
    stylesheet; the classes only let a page restyle the block as a whole.
    """
    return highlight(code, FCLLexer(), _FORMATTER)
