"""Pygments highlighting of FCL: token types, agreement with the compiler's lexer, discovery
through the `pygments.lexers` entry point, and nbconvert's HTML export of an FCL notebook."""
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter
from pygments.lexers import find_lexer_class_for_filename, get_lexer_by_name, get_lexer_for_mimetype
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

from fcl.errors import Source
from fcl.highlight import FCLLexer, highlight_html
from fcl.syntax.lexer import tokenize
from fcl.types.builtins import BUILTINS

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted([ROOT / "fcl" / "prelude.fcl", *(ROOT / "tests").rglob("*.fcl")])


def tokens(code: str) -> list[tuple[object, str]]:
    """(token type, text) pairs, whitespace left out."""
    return [(kind, text) for kind, text in FCLLexer().get_tokens(code)
            if kind not in Whitespace and text.strip()]


def kind_of(code: str, text: str):
    """The token type of the first token whose text is `text`."""
    return next(kind for kind, value in tokens(code) if value == text)


def test_keywords_constants_and_types():
    code = "sig f : int -> bool\nfun f x = if true then lti x 2 else false"
    assert kind_of(code, "sig") is Keyword
    assert kind_of(code, "fun") is Keyword
    assert kind_of(code, "if") is Keyword
    assert kind_of(code, "true") is Keyword.Constant
    assert kind_of(code, "int") is Keyword.Type
    assert kind_of(code, "bool") is Keyword.Type
    assert kind_of(code, "f") is Name.Function  # the name a sig/fun/val defines
    assert kind_of(code, "x") is Name


def test_soft_keywords_of_types():
    code = "sig g : forall <l> 'a. ['a] -> Program<l> (unit, string)"
    assert kind_of(code, "forall") is Keyword
    assert kind_of(code, "Program") is Keyword.Type
    assert kind_of("sig f : Seq int -> Program <grid> int", "Seq") is Keyword.Type
    assert kind_of(code, "unit") is Keyword.Type
    assert kind_of(code, "string") is Keyword.Type


def test_every_builtin_is_highlighted_as_one():
    for name in BUILTINS:
        assert tokens(f"val v = {name} x")[3] == (Name.Builtin, name)
    assert kind_of("val n = #BlockSize", "#BlockSize") is Name.Builtin
    assert kind_of("val n = mapper", "mapper") is Name  # a builtin's prefix is not enough


@pytest.mark.parametrize("code", [
    "val a = push<block> xs",
    "val a = push <block> xs",
    "sig s : [int]<block> -> Program<grid> [int]",
    "val a = do<block> { return 1 }",
])
def test_level_lists(code):
    level_tokens = [(kind, text) for kind, text in tokens(code) if text in "<>" or text == "block"]
    assert (Keyword.Pseudo, "block") in level_tokens
    assert all(kind is Punctuation or text == "block" for kind, text in level_tokens)


def test_level_list_with_variables_and_steps():
    assert tokens("fun f<lvl> xs = interleave<1+lvl> 2 g xs")[2:5] == [
        (Punctuation, "<"), (Name.Variable, "lvl"), (Punctuation, ">")]
    assert tokens("val y = interleave<1+lvl> 2 g xs")[4:9] == [
        (Punctuation, "<"), (Number.Integer, "1"), (Operator, "+"), (Name.Variable, "lvl"),
        (Punctuation, ">")]


def test_comparisons_and_level_names_outside_level_lists():
    code = "val block = if a < b then block else c >= d"
    assert [kind for kind, text in tokens(code) if text in ("<", ">=")] == [Operator, Operator]
    assert [kind for kind, text in tokens(code) if text == "block"] == [Name.Function, Name]


def test_nested_block_comment_spanning_lines():
    code = "(* outer (* inner\nstill inner *) still outer\n*)\nval x = 1"
    toks = tokens(code)
    comment = [text for kind, text in toks if kind in Comment.Multiline]
    assert "".join(comment) == "(* outer (* inner\nstill inner *) still outer\n*)"
    assert toks[len(comment)] == (Keyword, "val")


def test_line_comments():
    assert tokens("val x = 1 -- one\nval y = x --1") == [
        (Keyword, "val"), (Name.Function, "x"), (Operator, "="), (Number.Integer, "1"),
        (Comment.Single, "-- one"),
        (Keyword, "val"), (Name.Function, "y"), (Operator, "="), (Name, "x"),
        (Comment.Single, "--1"),  # as in the compiler: `--` starts a comment before anything else
    ]


def test_type_variables():
    code = "sig id : forall 'a. 'a -> 'a"
    assert [kind for kind, text in tokens(code) if text == "'a"] == [Name.Variable] * 3
    assert kind_of("val n' = 1", "n'") is Name.Function  # a quote inside a name is the name's


@pytest.mark.parametrize("code, expected", [
    ("maxi -17 2", [(Name.Builtin, "maxi"), (Number.Integer, "-17"), (Number.Integer, "2")]),
    # No space: `a-1` is `a` applied to -1, as the compiler reads it.
    ("a-1", [(Name, "a"), (Number.Integer, "-1")]),
    ("a - 1", [(Name, "a"), (Operator, "-"), (Number.Integer, "1")]),
    ("0x1F 0XfF -0o17 0O7", [(Number.Hex, "0x1F"), (Number.Hex, "0XfF"), (Number.Oct, "-0o17"),
                             (Number.Oct, "0O7")]),
    ("1.5 -2.5e3 2e2 1.0E-3", [(Number.Float, "1.5"), (Number.Float, "-2.5e3"),
                               (Number.Float, "2e2"), (Number.Float, "1.0E-3")]),
    # Floats (32 bits): the `f` is part of the number.
    ("1.5f 2f -1e-3f addf", [(Number.Float, "1.5f"), (Number.Float, "2f"),
                             (Number.Float, "-1e-3f"), (Name.Builtin, "addf")]),
])
def test_numbers(code, expected):
    assert tokens(code) == expected


def test_strings_and_escapes():
    assert tokens(r'readIntCSV "a\tb.csv"')[1:] == [
        (String.Double, '"'), (String.Double, "a"), (String.Escape, r"\t"),
        (String.Double, "b.csv"), (String.Double, '"')]
    assert (Error, "\\") in tokens(r'"bad \q escape"')


def test_an_unterminated_string_ends_at_the_line_end():
    # The next line is FCL again: its `%` is not taken for a magic.
    assert tokens('val s = "open\n%time 2\nval t = 1')[3:] == [
        (String.Double, '"'), (String.Double, "open"), (Operator, "%"), (Name, "time"),
        (Number.Integer, "2"), (Keyword, "val"), (Name.Function, "t"), (Operator, "="),
        (Number.Integer, "1")]


def test_magic_lines_at_the_start_of_a_cell():
    code = "%%opencl --show\n%time\nval x = 5 % 2\n%time"
    toks = tokens(code)
    assert toks[:2] == [(Comment.Preproc, "%%opencl --show"), (Comment.Preproc, "%time")]
    # After the first line of FCL, `%` is the remainder operator again.
    assert toks[-3:] == [(Number.Integer, "2"), (Operator, "%"), (Name, "time")]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(ROOT)))
def test_agrees_with_the_compilers_lexer(path):
    """On every FCL file in the repository, the highlighter splits the text into the compiler's
    tokens (strings merged), with no errors, and tells level brackets from comparisons the same
    way."""
    text = path.read_text()
    merged: list[tuple[object, str]] = []
    in_string = False
    for kind, value in FCLLexer().get_tokens(text):
        if kind in Whitespace or kind in Comment:
            continue
        if in_string:
            merged[-1] = (String, merged[-1][1] + value)
            in_string = value != '"'
        else:
            merged.append((kind, value))
            in_string = kind in String
    compiler = [(tok.type, text[tok.start_pos:tok.end_pos]) for tok in tokenize(Source("f", text))]
    assert [value for _, value in merged] == [value for _, value in compiler]
    assert not any(kind in Error for kind, _ in merged)
    for (kind, value), (tok_type, _) in zip(merged, compiler):
        if value in ("<", ">"):
            assert (kind is Punctuation) == tok_type.startswith("LVL_"), (value, tok_type)


def test_get_tokens_returns_the_whole_text():
    code = "%time\n(* a *) val x = \"s\\n\" -- c\nval y = push<block> x\n"
    assert "".join(text for _, text in FCLLexer().get_tokens(code)) == code


def test_discoverable_through_the_entry_point():
    assert isinstance(get_lexer_by_name("fcl"), FCLLexer)
    assert find_lexer_class_for_filename("x.fcl") is FCLLexer
    assert isinstance(get_lexer_for_mimetype("text/x-fcl"), FCLLexer)


def test_highlight_html_is_self_contained():
    html = highlight_html("val a = push<block> xs")
    assert html.startswith('<div class="highlight fcl-highlight"')
    assert '<span style="' in html and 'class="k"' not in html  # inline colours, no stylesheet
    # Each colour is the theme's (light and dark themes alike), with a fallback for light pages.
    assert "color: var(--jp-mirror-editor-keyword-color," in html
    assert "color: #" not in html and "background: #" not in html
    assert "&lt;" in html and "<block>" not in html  # the source is escaped
    assert ">val</span>" in html and ">push</span>" in html


def test_nbconvert_html_export_highlights_fcl_cells():
    nb = nbformat.v4.new_notebook(metadata={
        "kernelspec": {"name": "fcl", "display_name": "FCL", "language": "fcl"},
        "language_info": {"name": "fcl", "pygments_lexer": "fcl", "file_extension": ".fcl"},
    })
    nb.cells.append(nbformat.v4.new_code_cell("fun f<lvl> xs = push<block> xs -- to block"))
    html, _ = HTMLExporter().from_notebook_node(nb)
    assert '<span class="k">fun</span>' in html
    assert '<span class="nf">f</span>' in html
    assert '<span class="nb">push</span>' in html
    assert '<span class="kp">block</span>' in html
    assert '<span class="c1">-- to block</span>' in html
