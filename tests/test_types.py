"""Type inference: printed schemes in the original's `--typecheck` format, levels, kinds, sigs.

Letters follow the original's variable creation order (reference §3.5), so these expectations
pin down that order as well as the types themselves.
"""
import pytest

from fcl.errors import FCLError, Source
from fcl.session import Session


def types_of(text: str, prelude: bool = False) -> list[str]:
    session = Session.new(prelude=prelude)
    session.add_file(Source("t.fcl", text))
    return [f"{d.name} : {d.scheme}" for d in session.user_decls()]


@pytest.mark.parametrize("program, expected", [
    ("val a = true\nval b = if 1 == 2 then 3 else 4", ["a : bool", "b : int"]),
    ("val a = -5\nval b = 10 - 2 - 3\nval c = maxi -1 7", ["a : int", "b : int", "c : int"]),
    ("val a = 2.5\nval b = addd a (i2d 1)", ["a : double", "b : double"]),
    ("fun inc n = n + 1\nfun sum p = fst p + snd p",
     ["inc : int -> int", "sum : (int, int) -> int"]),
    ("fun twice f x = f (f x)", ["twice : forall 'a. ('a -> 'a) -> 'a -> 'a"]),
    ("fun k x y = x\nval five = k 5 true", ["k : forall 'a 'b. 'b -> 'a -> 'b", "five : int"]),
    ("val app = fn f => fn v => f v\nval app2 = app",
     ["app : forall 'a 'b. ('a -> 'b) -> 'a -> 'b", "app2 : forall 'a 'b. ('b -> 'a) -> 'b -> 'a"]),
    ("val u = ()\nval p = (1, (2.0, false))", ["u : ()", "p : (int, (double, bool))"]),
    ("val poly = let ident = fn x => x in (ident 1, ident true)", ["poly : (int, bool)"]),
])
def test_printed_schemes(program, expected):
    assert types_of(program) == expected


def test_level_polymorphic_definition_prints_its_level_after_type_variables():
    program = "fun lift<lvl> arr = return<lvl> (push<lvl> arr)"
    assert types_of(program) == ["lift : forall 'a <lvl>. ['a] -> Program <lvl> ['a]<lvl>"]


def test_levels_can_be_inferred_and_one_plus_level_unifies_with_grid():
    program = ("fun chunks xs = splitUp 4 xs |> mapPull (fn c => return (push c)) |> concat 4\n"
               "sig top : [int] -> Program<grid> [int]<grid>\n"
               "fun top xs = chunks xs")
    assert types_of(program, prelude=True)[-1] == "top : [int] -> Program <grid> [int]<grid>"


def test_signature_may_be_an_instance_of_the_inferred_type():
    assert types_of("sig f : int -> int\nfun f x = x") == ["f : int -> int"]


def test_signature_alpha_equivalent_keeps_the_inferred_lettering():
    program = ("sig rep : forall 'a 'b. 'a -> ['b] -> ['a]\n"
               "fun rep x xs = generate (lengthPull xs) (fn i => x)")
    assert types_of(program) == ["rep : forall 'a 'b. 'b -> ['a] -> ['b]"]


def test_signature_more_general_than_definition_is_rejected():
    with pytest.raises(FCLError, match="signature of `f` does not match"):
        types_of("sig f : forall 'a. 'a -> 'a\nfun f x = x + 1")


def test_declared_level_parameter_is_rigid():
    with pytest.raises(FCLError) as err:
        types_of("fun g<l> xs = force<thread> (push<l> xs)")
    assert "thread" in err.value.render()


def test_unit_unifies_with_unit():
    # The original cannot unify `()` with `()` (reference §3.2); here `g ()` needs exactly that.
    program = "sig g : unit -> unit\nval g = fn u => u\nval h = g ()"
    assert types_of(program) == ["g : () -> ()", "h : ()"]


def test_if_chooses_between_base_values_only():
    with pytest.raises(FCLError, match="base values"):
        types_of("val f = fn u => if true then u else ()")


def test_push_arrays_hold_records_of_base_types_only():
    assert types_of("val p = push<block> (generate 3 (fn i => (i, (2.0, true))))") == \
        ["p : [(int, (double, bool))]<block>"]
    with pytest.raises(FCLError, match="not a record of base types"):
        types_of("val p = push<block> (generate 3 (fn i => (i, iota i)))")
    with pytest.raises(FCLError, match="not a ground type"):  # no pull array holds functions
        types_of("val p = push<block> (generate 3 (fn i => (i, fn x => x)))")


def test_pull_arrays_of_pairs_are_fine():
    assert types_of("val p = generate 3 (fn i => (i, 2.0))") == ["p : [(int, double)]"]


def test_operators_are_builtins_even_when_shadowed():
    program = "fun addi a b = a * b\nval seven = 3 + 4"
    session = Session.new(prelude=False)
    session.add_file(Source("t.fcl", program))
    assert [d.name for d in session.user_decls()] == ["addi", "seven"]


def test_cell_declarations_then_expression():
    session = Session.new()
    decls, expr = session.add_cell(Source("cell", "fun sq x = x * x\nsq 7"))
    assert [d.name for d in decls] == ["sq"] and str(expr.type) == "int"


def test_failed_cell_changes_nothing():
    session = Session.new()
    session.add_cell(Source("c1", "val keep = 1"))
    with pytest.raises(FCLError):
        session.add_cell(Source("c2", "val keep = 2\nval broken = keep 3"))
    assert str(session.type_of("keep")) == "int"
    assert session.type_of("broken") is None
    assert [d.name for d in session.user_decls()] == ["keep"]
