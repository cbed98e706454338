"""Error messages: one test per kind of error, pinning the sentence, its location and the caret.

Every FCL error is a located `FCLError`; `render()` shows `file:line:col: error: sentence`, the
source line and a caret line. `underlined` reads the caret back, so each test checks that the
caret sits under exactly the offending source text.
"""
import io

import pytest

from errors_shown import underlined
from fcl.errors import FCLError, Source
from fcl.interp.eval import RunConfig
from fcl.pipeline import main_root, run_interpreter
from fcl.session import Session


def check_error(text: str, prelude: bool = True, cell: bool = False) -> FCLError:
    """The error that adding `text` (as file t.fcl, or as a notebook cell) raises."""
    session = Session.new(prelude=prelude)
    add = session.add_cell if cell else session.add_file
    with pytest.raises(FCLError) as info:
        add(Source("t.fcl", text))
    return info.value


def run_error(text: str) -> tuple[FCLError, str]:
    """The error that running `text`'s main raises, and what was printed before it."""
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    out = io.StringIO()
    with pytest.raises(FCLError) as info:
        run_interpreter(session, main_root(session), RunConfig(out=out, err=io.StringIO()))
    return info.value, out.getvalue()


def assert_error(err: FCLError, message: str, line: int, col: int, marked: str) -> None:
    assert err.message == message
    assert (err.span.line, err.span.col) == (line, col)
    assert err.render().splitlines()[0] == f"t.fcl:{line}:{col}: error: {message}"
    assert underlined(err) == marked


# ---- lexical errors ---------------------------------------------------------------------------

def test_unexpected_character():
    err = check_error("val x = 1 $ 2")
    assert_error(err, "unexpected character `$`", 1, 11, "$")


def test_invisible_unexpected_character_is_named_by_code_point():
    err = check_error("val x = 1\u200b + 2")
    assert_error(err, "unexpected character U+200B", 1, 10, "\u200b")


def test_unterminated_nested_comment_is_reported_where_it_opens():
    # The inner comment closes; the outer one, opened on line 2, never does.
    err = check_error("val x = 1\n(* outer (* inner *) still open\nval y = 2")
    assert_error(err, "this comment is never closed with `*)`", 2, 1, "(*")


def test_inner_comment_closing_does_not_close_the_outer_one():
    err = check_error("val x = 1 (* a (* b *)\nval y = 2")
    assert_error(err, "this comment is never closed with `*)`", 1, 11, "(*")


def test_nested_comments_that_close_are_skipped():
    session = Session.new(prelude=False)
    session.add_file(Source("t.fcl", "(* a (* b *) c *)\nval x = 1 (* (* *) *) + 2"))
    assert [str(d.scheme) for d in session.user_decls()] == ["int"]


def test_unterminated_string_is_reported_where_it_opens():
    err = check_error('val s = "abc\nval y = 2')
    assert_error(err, 'this string is never closed with `"`', 1, 9, '"')


@pytest.mark.parametrize("number", ["12abc", "1.5e", "1.5x", "0x"])
def test_malformed_number_is_underlined_whole(number):
    err = check_error(f"val x = {number} + 1")
    assert_error(err, f"malformed number `{number}`", 1, 9, number)


@pytest.mark.parametrize("number", ["2147483648", "-2147483649", "0x100000000", "0o40000000000"])
def test_int_literal_over_32_bits(number):
    err = check_error(f"val x = {number}")
    assert_error(err, "this integer does not fit in 32 bits (FCL's `int` is a 32-bit int)",
                 1, 9, number)


def test_hex_and_octal_literals_are_32_bit_patterns():
    # As in C, where the original's literals end up: 0xFFFFFFFF is the int -1.
    session = Session.new(prelude=False)
    session.add_file(Source("t.fcl",
                            "val a = 0xFFFFFFFF\nval b = 0x80000000\nval c = 0o37777777777"))
    assert [d.value.value for d in session.user_decls()] == [-1, -2**31, -1]


def test_int_literals_at_the_32_bit_limits_are_accepted():
    session = Session.new(prelude=False)
    session.add_file(Source("t.fcl", "val a = 2147483647\nval b = -2147483648\nval c = 0x7FFFFFFF"))
    assert [str(d.scheme) for d in session.user_decls()] == ["int", "int", "int"]


def test_digits_of_other_scripts_are_not_numbers():
    # str.isdigit accepts `²`; the lexer once crashed with a ValueError on it.
    err = check_error("val x = \u00b2")
    assert_error(err, "unexpected character `\u00b2`", 1, 9, "\u00b2")


def test_double_literal_too_large():
    err = check_error("val x = 1e999")
    assert_error(err, "this number is too large for a double", 1, 9, "1e999")


def test_float_literal_too_large():
    err = check_error("val x = 1e39f")
    assert_error(err, "this number is too large for a float (32 bits)", 1, 9, "1e39f")


def test_float_is_a_type_only_where_a_type_is_written():
    """As in the original compiler, which does not reserve it: `float` stays a name elsewhere."""
    session = Session.new()
    session.add_file(Source("t.fcl", "fun float x = x + 1\nsig y : float\nval y = i2f (float 2)"))
    assert {d.name for d in session.decls} >= {"float", "y"}


# ---- parse errors -----------------------------------------------------------------------------

def test_unexpected_token_says_what_was_expected():
    err = check_error("val = 3")
    assert_error(err, "unexpected `=`; expected a name", 1, 5, "=")


def test_unexpected_end_of_input_is_placed_at_the_last_token():
    err = check_error("fun f x = if x then 1\n\n")
    assert_error(err, "unexpected end of input; expected `else`", 1, 21, "1")


def test_expected_set_has_no_closers_of_brackets_that_are_not_open():
    # LALR would also offer `;` and `}` here, which only continue a `do` block.
    err = check_error("val x = let y = 1")
    assert err.message == "unexpected end of input; expected `in`"


def test_missing_close_paren_notes_the_unclosed_paren():
    err = check_error("val x = (1 + (2 * 3)\nval y = 2")
    assert_error(err, "unexpected `val`; expected `)` or `,`", 2, 1, "val")
    assert err.notes[0][1] == "this `(` is never closed"
    assert err.render().splitlines()[3] == "t.fcl:1:9: note: this `(` is never closed"
    assert underlined(err, excerpt=1) == "("


def test_missing_close_paren_at_end_of_input():
    err = check_error("val x = (1 + 2")
    assert_error(err, "unexpected end of input; expected `)` or `,`", 1, 14, "2")
    assert underlined(err, excerpt=1) == "("


def test_no_unclosed_note_when_the_bracket_is_closed_later():
    err = check_error("val x = (1, 2; 3)")
    assert_error(err, "unexpected `;`; expected `)` or `,`", 1, 14, ";")
    assert err.notes == []


def test_empty_do_block_does_not_claim_its_brace_is_unclosed():
    err = check_error("val x = do<grid> { }")
    assert_error(err, "unexpected `}`; expected an expression", 1, 20, "}")
    assert err.notes == []


@pytest.mark.parametrize("text, message, col, marked", [
    ("sig f : int -> Program <grid int", "unexpected `int`; expected `>` to close the level list "
     "`<grid`", 30, "int"),
    ("sig f : [int]<grid, block -> int", "unexpected `->`; expected `>` to close the level list "
     "`<grid, block`", 27, "->"),
    ("val m = do<grid { return<grid> 1 }", "unexpected `{`; expected `>` to close the level list "
     "`<grid`", 17, "{"),
    ("sig f : Program <3> int", "unexpected number `3`; expected a level (thread, warp, block, "
     "grid or a level variable)", 18, "3"),
    ("sig f : Program <2+grid> int", "only `1+` can be added to a level (levels are thread, "
     "warp, block, grid)", 18, "2"),
])
def test_a_level_list_that_does_not_close_says_what_is_missing(text, message, col, marked):
    # The lexer takes `<` for the less-than operator unless a level list follows it.
    assert_error(check_error(text), message, 1, col, marked)


def test_a_signature_with_no_definition_after_it():
    err = check_error("sig foo : int -> int\n")
    assert_error(err, "unexpected end of input; expected a definition (`fun` or `val`) after the "
                      "signature of `foo`", 1, 20, "t")
    err = check_error("sig foo : int\nsig bar : int\nval bar = 1")
    assert_error(err, "unexpected `sig`; expected a definition (`fun` or `val`) after the "
                      "signature of `foo`", 2, 1, "sig")
    assert err.notes[0][1] == "the signature is here" and underlined(err, excerpt=1) == "foo"


def test_a_signature_before_a_cell_expression_is_reported_at_the_signature():
    # The declarations end where the expression starts (at column 1), not at the cell's end.
    err = check_error("sig foo : int\nfoo 3", cell=True)
    assert_error(err, "unexpected end of input; expected a definition (`fun` or `val`) after the "
                      "signature of `foo`", 1, 13, "t")


def test_bind_arrow_outside_do():
    err = check_error("fun f x = x <- 1")
    assert_error(err, "unexpected `<-`; expected an expression", 1, 13, "<-")
    assert "`x <- e` binds only inside `do { ... }`" in err.hints[0]


def test_last_statement_of_do_cannot_be_a_bind():
    err = check_error("val m = do<grid> { x <- return<grid> 1; y <- return<grid> x }")
    assert_error(err, "the last statement of a `do` block must be an expression, not a binding",
                 1, 41, "y <- return<grid> x")


# ---- scope errors -----------------------------------------------------------------------------

def test_undefined_name_suggests_a_close_builtin():
    err = check_error("val y = lengthPul (iota 3)")
    assert_error(err, "`lengthPul` is not defined", 1, 9, "lengthPul")
    assert err.hints[0].startswith("did you mean `lengthPull`")


def test_undefined_name_suggests_a_close_user_definition():
    err = check_error("fun square x = x * x\nval y = sqaure 3")
    assert_error(err, "`sqaure` is not defined", 2, 9, "sqaure")
    assert err.hints == ["did you mean `square`?"]


def test_undefined_name_without_a_close_match_has_no_hint():
    err = check_error("val y = zzzzqq", prelude=False)
    assert_error(err, "`zzzzqq` is not defined", 1, 9, "zzzzqq")
    assert err.hints == []


def test_undefined_level_variable():
    err = check_error("fun f x = push<l> x")
    assert_error(err, "level variable `l` is not in scope", 1, 16, "l")
    assert "fun f<l> x = ..." in err.hints[0]


@pytest.mark.parametrize("text, col", [
    ("val m = do<gird> { forceAndPrint 1 (push<grid> (iota 1)) }", 12),
    ("val m = do<gird> { xs <- forcePull<grid> (iota 1); forceAndPrint 1 (push<grid> xs) }", 12),
    ("val p = push<gird> (iota 4)", 14),
    ("fun f<l> x = push<l> x\nval p = f<1+gird> (iota 4)", 13),
    ("sig f : [int]<gird> -> int\nfun f xs = lengthPush xs", 15),
    ("sig f : int -> Program <gird> int\nfun f x = return<grid> x", 25),
    ("val y = let f : Program <gird> int = return<grid> 1 in 2", 26),
])
def test_a_misspelt_level_is_not_a_level(text, col):
    err = check_error(text)
    line = 2 if "\nval" in text else 1
    assert_error(err, "`gird` is not a level", line, col, "gird")
    assert err.hints[0] == "did you mean `grid`?"


def test_an_undeclared_level_variable_close_to_a_declared_one():
    err = check_error("fun f<lvl> x = push<lvel> x")
    assert_error(err, "level variable `lvel` is not in scope", 1, 21, "lvel")
    assert err.hints[0] == "did you mean `lvl`?"


def test_a_concrete_level_cannot_be_declared_as_a_level_variable():
    err = check_error("fun f<thread> x = x")
    assert_error(err, "`thread` is a level, not a level variable", 1, 7, "thread")


# ---- type errors ------------------------------------------------------------------------------

def test_int_and_double_do_not_mix():
    err = check_error("val x = 1 + 2.0")
    assert_error(err, "`+` expects its 2nd argument to have type `int`, but this has type "
                      "`double`", 1, 13, "2.0")
    assert "`i2d`" in err.hints[0] and "`addd`" in err.hints[0]


def test_floats_mix_with_neither_ints_nor_doubles():
    err = check_error("val x = addf 1 2.0f")
    assert_error(err, "`addf` expects its 1st argument to have type `float`, but this has type "
                      "`int`", 1, 14, "1")
    assert err.hints == ["int and float never mix: convert with `i2f`, and use `addf`, `subf`, "
                         "`mulf`, `divf` for float arithmetic"]
    err = check_error("val x = addf 1.5 2.0f")
    assert_error(err, "`addf` expects its 1st argument to have type `float`, but this has type "
                      "`double`", 1, 14, "1.5")
    assert "`d2f`" in err.hints[0] and "`1.5f`" in err.hints[0]


def test_applying_a_non_function():
    err = check_error("val x = 3 4")
    assert_error(err, "this is not a function, so it cannot be applied to an argument: it has "
                      "type `int`", 1, 9, "3")


def test_a_minus_one_without_spaces_is_an_application():
    # `a-1` lexes as `a` applied to the literal `-1`, as in the original compiler.
    err = check_error("val a = 5\nval b = a-1")
    assert_error(err, "this is not a function, so it cannot be applied to an argument: it has "
                      "type `int`", 2, 9, "a")
    assert "did you mean `a - 1`" in err.hints[0]


def test_a_minus_one_inside_a_function_gets_the_hint():
    # `i` is a parameter: `i-1` makes it a function, and the error comes later, elsewhere.
    err = check_error("val g = map (fn i => i-1) (generate 4 (fn i => i))")
    assert err.message.startswith("`int -> 'a` is not a ground type")
    assert "did you mean `i - 1`? `i-1` applies `i` to the number `-1`" in err.hints


def test_a_minus_one_against_a_signature_gets_the_hint_and_a_note():
    err = check_error("sig h : int -> int\nfun h i = i-1")
    assert err.message.startswith("the signature of `h` does not match its definition")
    assert "did you mean `i - 1`? `i-1` applies `i` to the number `-1`" in err.hints
    assert err.notes[0][0].text == "i-1"
    assert underlined(err, excerpt=1) == "i-1"


def test_a_minus_one_in_a_definition_gets_the_hint_at_its_use():
    err = check_error("fun dec i = i-1\nval y = dec 3")
    assert_error(err, "`dec` expects its 1st argument to have type `int -> 'a`, but this has "
                      "type `int`", 2, 13, "3")
    assert ("did you mean `i - 1` in the definition of `dec`? `i-1` applies `i` to the number "
            "`-1`") in err.hints
    assert underlined(err, excerpt=1) == "i-1"


def test_no_minus_hint_where_reading_a_subtraction_does_not_help():
    # `f-1` is a good application; the error is elsewhere, and `f - 1` would fail sooner.
    err = check_error("fun f x = x\nval y = (f-1) + (3 4)")
    assert err.message.startswith("this is not a function")
    assert not any(hint.startswith("did you mean") for hint in err.hints)


@pytest.mark.parametrize("first, shown", [("1.5", "double"),
                                          ("push<block> (iota 3)", "[int]<block>")])
def test_seqfor_takes_a_size_or_a_thread_level_initial_array(first, shown):
    err = check_error(f"val s = seqfor ({first}) 3 (fn read => fn i => (i, i))")
    assert_error(err, f"`seqfor` expects its 1st argument to have type `int` or `['a]<thread>`, "
                      f"but this has type `{shown}`", 1, 17, first)


def test_occurs_check():
    err = check_error("fun f g = g g")
    assert_error(err, "this application would need an infinite type: `'a` would have to equal "
                      "`'a -> 'b`", 1, 11, "g g")


def test_if_branches_differ():
    err = check_error("val x = if true then 1 else false")
    assert_error(err, "the branches of this `if` have different types: `int` and `bool`",
                 1, 9, "if true then 1 else false")


def test_if_condition_must_be_bool():
    err = check_error("val x = if 1 then 1 else 2")
    assert_error(err, "the condition of `if` must be a bool, but this has type `int`", 1, 12, "1")


def test_signature_more_general_than_the_definition_is_rejected():
    err = check_error("sig f : forall 'a. 'a -> 'a\nfun f x = x + 1")
    assert_error(err, "the signature of `f` does not match its definition: it is declared as "
                      "`forall 'a. 'a -> 'a` but the definition has type `int -> int`",
                 1, 9, "forall 'a. 'a -> 'a")
    assert "more general than the definition" in err.hints[0]


def test_signature_that_is_an_instance_of_the_inferred_type_is_accepted():
    session = Session.new(prelude=False)
    session.add_file(Source("t.fcl", "sig f : int -> int\nfun f x = x\nval y = f 3"))
    assert [f"{d.name} : {d.scheme}" for d in session.user_decls()] == ["f : int -> int",
                                                                        "y : int"]


def test_error_in_a_cell_expression_is_located_in_the_cell():
    err = check_error("val x = 1\nx + true", cell=True)
    assert_error(err, "`+` expects its 2nd argument to have type `int`, but this has type "
                      "`bool`", 2, 5, "true")


# ---- level errors -----------------------------------------------------------------------------

def test_force_at_a_different_level_than_the_push():
    err = check_error("val p = force<grid> (push<block> (iota 4))")
    assert_error(err, "`force` expects its 1st argument to have type `['a]<grid>`, but this has "
                      "type `[int]<block>`", 1, 22, "push<block> (iota 4)")
    # The whole levels, not what is left after peeling the `1+` they share.
    assert err.hints == ["the levels `grid` and `block` differ; check the level arguments "
                         "(`<thread>`, `<block>`, `<grid>`) here"]


def test_declared_level_parameter_is_rigid():
    err = check_error("fun gg<l> x = force<thread> (push<l> x)")
    assert_error(err, "`force` expects its 1st argument to have type `['a]<thread>`, but this "
                      "has type `['b]<l>`", 1, 30, "push<l> x")
    assert err.hints[1] == ("`l` is a declared level parameter, so the definition must work at "
                            "every level `l`; it cannot be fixed to `thread` here")


def test_declared_level_parameter_under_one_plus_is_rigid():
    err = check_error("fun f<l> x = force<grid> (push<1+l> x)")
    assert err.hints[0].startswith("the levels `grid` and `1+l` differ")
    assert "it cannot be fixed to `block` here" in err.hints[1]


@pytest.mark.parametrize("text, message, marked", [
    ("val p = push<block, grid> (iota 4)", "`push` takes 1 level argument, but 2 were given",
     "push<block, grid>"),
    ("val m = do<grid, block> { return<grid> 1 }", "`do` takes 1 level argument, but 2 were "
     "given", "do"),
    ("val m = do<> { x <- return<grid> 1; return<grid> x }", "`do` takes 1 level argument, but 0 "
     "were given", "do"),
    ("val p = iota<block> 4", "`iota` takes 0 level arguments, but 1 was given", "iota<block>"),
])
def test_wrong_number_of_level_arguments(text, message, marked):
    assert_error(check_error(text), message, 1, 9, marked)


def test_a_do_block_of_one_statement_is_checked_at_its_level():
    # As the `bind` of a longer block checks each statement.
    err = check_error("val m = do<block> { return<grid> 1 }")
    assert_error(err, "`do` expects its 1st argument to have type `Program <block> 'a`, but this "
                      "has type `Program <grid> int`", 1, 21, "return<grid> 1")


def test_level_would_have_to_contain_itself():
    err = check_error("fun f p = do { x <- p; concat 1 (generate 1 (fn i => p)) }")
    assert err.hints == ["the level `l` would have to equal `1+l`, one level up from itself"]


# ---- kind errors ------------------------------------------------------------------------------

def test_push_array_of_pairs_holding_an_array_is_not_a_record():
    err = check_error("val p = push<block> (generate 3 (fn i => (i, iota i)))")
    assert_error(err, "`[int]` is not a record of base types (int, double, float, bool, or pairs "
                      "of them), but the elements of push arrays must be", 1, 22,
                 "generate 3 (fn i => (i, iota i))")


def test_program_returning_a_function_names_program_results_as_the_reason():
    err = check_error("val p = return<grid> (fn x => x + 1)")
    assert_error(err, "`int -> int` is not a ground type (a non-function type), but the results "
                      "of programs must be", 1, 23, "fn x => x + 1")


def test_if_returning_an_array_is_rejected():
    err = check_error("val x = if true then iota 3 else iota 4")
    assert_error(err, "`if` can only choose between base values (int, double, float or bool) or "
                      "records of them (pairs), but its branches have type `[int]`", 1, 9,
                 "if true then iota 3 else iota 4")


# ---- too deeply nested ------------------------------------------------------------------------

def test_deeply_nested_definitions_and_cell_expressions_type_check():
    session = Session.new()
    session.add_file(Source("t.fcl", "val ok = 1\nval deep = " + "1 + " * 2000 + "1"))
    assert str(session.type_of("deep")) == "int"
    _, root = session.add_cell(Source("cell", "fn a => " * 2000 + "1"))
    assert root is not None


def test_deep_parentheses_alone_parse_and_check():
    session = Session.new(prelude=False)
    session.add_file(Source("t.fcl", "val x = " + "(" * 5000 + "1" + ")" * 5000))
    assert str(session.type_of("x")) == "int"


# ---- runtime errors ---------------------------------------------------------------------------

def test_index_out_of_bounds():
    err, out = run_error("val main = forceAndPrint 3 (push<grid> (generate 3 (fn i => "
                         "index (iota 2) (i + 5))))")
    assert_error(err, "index 5 is out of bounds for an array of length 2 (in work-item 0)", 1, 61,
                 "index (iota 2) (i + 5)")
    assert out == ""


def test_division_by_zero_only_in_the_lanes_that_divide():
    # Lane 2 alone divides by zero, and only in the branch it takes.
    err, _ = run_error("val main = forceAndPrint 4 (push<grid> (generate 4 (fn i => "
                       "if i == 2 then 10 / (i - 2) else i)))")
    assert_error(err, "division by zero: 10 / 0 (in work-item 2)", 1, 76, "10 / (i - 2)")


@pytest.mark.parametrize("count", [0, 5])
def test_force_and_print_count_out_of_range(count):
    err, out = run_error(f"val main = forceAndPrint {count} (push<grid> (iota 3))")
    assert_error(err, f"cannot print {count} elements of an array of length 3: the count must be "
                      "between 1 and the length", 1, 12,
                 f"forceAndPrint {count} (push<grid> (iota 3))")
    assert out == ""


def test_read_int_csv_of_a_missing_file(tmp_path):
    missing = tmp_path / "missing.csv"
    err, _ = run_error(f'val main = do<grid> {{ xs <- readIntCSV "{missing}"; '
                       'forceAndPrint 1 (push<grid> xs) }')
    assert_error(err, f"cannot read `{missing}`: No such file or directory", 1, 29,
                 f'readIntCSV "{missing}"')


def test_seqfor_reading_its_accumulator_in_zero_blocks():
    # Found by test_fuzz.py: this once escaped as an IndexError from an empty buffer.
    err, _ = run_error("fun cell t = return<thread> (seqfor 1 2 (fn acc => fn k => (0, acc 0)))\n"
                       "fun blk b = concat<thread> 1 (generate 1 cell)\n"
                       "val main = do<grid> { r <- concat<block> 1 (generate 0 blk) ; "
                       "forceAndPrint 1 r }")
    # Zero blocks make an empty array, as when the step does not read the accumulator.
    assert err.message == ("cannot print 1 elements of an array of length 0: the count must be "
                           "between 1 and the length")


def test_missing_main():
    session = Session.new()
    session.add_file(Source("t.fcl", "val x = 1"))
    with pytest.raises(FCLError) as info:
        main_root(session)
    assert info.value.render() == ("error: there is no `main` to run in t.fcl: define `val main "
                                   "= ...` of type `Program <grid> 'a`")


def test_an_empty_file_is_named_in_the_missing_main():
    session = Session.new()
    session.add_file(Source("empty.fcl", ""))
    session.add_file(Source("other.fcl", "val x = 1"))
    with pytest.raises(FCLError, match=r"no `main` to run in empty.fcl, other.fcl: "):
        main_root(session)


@pytest.mark.parametrize("text, hint", [
    ("fun main = 1", "`fun` defines a function of parameters (`fun main x = ...`); a value "
                     "without parameters is `val main = ...`"),
    ("fun double x = x * 2", "`double` is a reserved word; choose another name, such as "
                             "`double_`"),
    ("val main = lett y = 1 in y", "`lett` is not a keyword: did you mean `let`?"),
    ("lett y = 1", "`lett` is not a keyword: did you mean `let`? (at the top level, a definition "
                   "starts with `val`)"),
    ("val f = fn x => if x then 1 esle 2", "`esle` is not a keyword: did you mean `else`?"),
])
def test_first_mistakes_get_a_hint(text, hint):
    session = Session.new()
    with pytest.raises(FCLError) as info:
        session.add_file(Source("t.fcl", text))
    assert info.value.hints == [hint]
    assert info.value.span is not None and info.value.span.source.name == "t.fcl"


def test_a_name_that_only_resembles_a_keyword_in_valid_code_gets_no_hint():
    session = Session.new()
    session.add_file(Source("t.fcl", "val lett = 1\nval main = forceAndPrint 1 (push<grid> "
                                     "(generate 1 (fn i => lett)))"))
    assert session.type_of("lett") is not None


@pytest.mark.parametrize("definition, shown", [
    ("val main = 1", "int"),
    ("val main = return<block> 1", "Program <block> int"),
    ("fun main x = return<grid> x", "'a -> Program <grid> 'a"),
])
def test_main_must_be_a_grid_program(definition, shown):
    session = Session.new()
    session.add_file(Source("t.fcl", definition))
    with pytest.raises(FCLError) as info:
        main_root(session)
    assert_error(info.value, f"`main` must have type `Program <grid> 'a` to be run, but it has "
                             f"type `{shown}`", 1, 5, "main")


# ---- readIntCSV reads like the original's C reader (strtok + atoi) --------------------------

def _run_to_output(text: str) -> str:
    session = Session.new()
    session.add_file(Source("t.fcl", text))
    out = io.StringIO()
    run_interpreter(session, main_root(session), RunConfig(out=out, err=io.StringIO()))
    return out.getvalue()


def _csv_program(path) -> str:
    return (f'val main = do<grid> {{ xs <- readIntCSV "{path}"; '
            "forceAndPrint (lengthPull xs) (push<grid> xs) }")


def test_read_int_csv_of_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "bytes.csv"
    path.write_bytes(b"1,2\n\xff\xfe,3\n")
    # The original reads bytes with atoi, so the undecodable field is 0; an FCLError is fine too.
    try:
        assert _run_to_output(_csv_program(path)) == "[1,2,0,3]\n"
    except FCLError as err:
        assert str(path) in err.message


def test_read_int_csv_of_a_value_over_32_bits(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("1,99999999999,3\n")
    # C's (int) of the long that atoi reads wraps modulo 2^32; an FCLError is fine too.
    try:
        assert _run_to_output(_csv_program(path)) == "[1,1215752191,3]\n"
    except FCLError as err:
        assert str(path) in err.message


# ---- long lines -------------------------------------------------------------------------------

@pytest.mark.slow  # 0.8 s
def test_a_long_line_is_shown_as_a_window_around_the_caret():
    """A generated one-line program thousands of columns wide shows ~100 columns around the error,
    with "..." where the line is cut, and the caret still under the offending text."""
    sums = " + ".join(str(k) for k in range(2000))
    err = check_error(f"val x = {sums} + true + 5")
    shown = err.render().splitlines()[1]
    assert len(shown) < 120
    assert shown.count("...") == 1 and shown.endswith(" + 5")
    assert underlined(err) == "true"
    err = check_error(f"val x = {sums} + true + {sums}")
    assert err.render().splitlines()[1].count("...") == 2
    assert underlined(err) == "true"
