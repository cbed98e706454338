"""The IL optimisation passes: what they remove, and that they keep meaning."""
from fcl.il import ir
from fcl.il.passes import propagate, prune, sweep
from fcl.steps import OPTIMIZE, Settings, run_steps

INT = ir.INT
x, y, n, k = (ir.Var(name, INT) for name in ("x", "y", "n", "k"))
arr = ir.Var("arr", ir.ArrayType(INT))


def test_propagate_replaces_single_definitions_and_refolds():
    stmts = [ir.Declare(x, ir.Const(4, INT)), ir.Declare(y, x),
             ir.Store(arr, ir.Bin("+", y, ir.Const(1, INT), INT), ir.Bin("*", x, y, INT))]
    assert ir.show_stmts(propagate(stmts)) == "arr[5] = 16;"


def test_propagate_leaves_variables_that_change():
    stmts = [ir.Declare(n, ir.Const(0, INT)), ir.Assign(n, ir.Const(3, INT)), ir.Store(arr, n, n)]
    assert ir.show_stmts(propagate(stmts)) == ir.show_stmts(stmts)


def test_read_csv_counts_as_changing_its_length():
    length = ir.Var("len", INT)
    stmts = [ir.Declare(length, ir.Const(0, INT)), ir.Input(arr, length, "f.csv"),
             ir.Print(length, arr)]
    assert "printIntArray(len, arr);" in ir.show_stmts(run_steps(stmts, [OPTIMIZE], Settings(None)))


def test_prune_keeps_the_branch_that_runs_and_drops_empty_loops():
    stmts = [ir.If(ir.Const(False, ir.BOOL), [ir.Store(arr, k, k)], [ir.Store(arr, n, n)]),
             ir.SeqFor(k, ir.Const(0, INT), [ir.Store(arr, k, k)]),
             ir.Assign(n, n)]
    assert ir.show_stmts(prune(stmts)) == "arr[n] = n;"


def test_sweep_drops_counters_nothing_reads():
    stmts = [ir.Declare(k, ir.Const(0, INT)),
             ir.While([], ir.Var("go", ir.BOOL),
                      [ir.Assign(k, ir.Bin("+", k, ir.Const(1, INT), INT)), ir.Store(arr, n, n)])]
    assert ir.show_stmts(sweep(stmts)) == "while (go) {\n  arr[n] = n;\n}"


def test_sweep_keeps_what_a_store_needs():
    stmts = [ir.Declare(k, ir.Bin("*", n, n, INT)), ir.Store(arr, ir.Const(0, INT), k)]
    assert sweep(stmts) == stmts


def test_bound_decides_comparisons_with_the_ranges_of_loop_variables():
    from fcl.il.passes import bound
    m = ir.Var("m", INT)
    inside = ir.Bin("<", ir.Bin("+", ir.Bin("*", k, ir.Const(4, INT), INT), m, INT),
                    ir.Const(32, INT), ir.BOOL)
    stmts = [ir.SeqFor(k, ir.Const(8, INT), [ir.SeqFor(m, ir.Const(4, INT), [
        ir.Store(arr, m, ir.Select(inside, k, n, INT))])])]
    assert "arr[m] = k;" in ir.show_stmts(bound(stmts))


def test_bound_turns_division_of_non_negative_values_by_powers_of_two_into_shifts():
    from fcl.il.passes import bound
    stmts = [ir.SeqFor(k, n, [ir.Store(arr, ir.Bin("/", k, ir.Const(8, INT), INT),
                                       ir.Bin("%", k, ir.Const(8, INT), INT)),
                              ir.Store(arr, ir.Bin("/", x, ir.Const(8, INT), INT),
                                       ir.Const(0, INT))])]
    shown = ir.show_stmts(bound(stmts))
    # x may be negative: C's division rounds towards zero, a shift would not.
    assert "arr[(k >> 3)] = (k & 7);" in shown and "arr[(x / 8)] = 0;" in shown


def test_bound_knows_a_value_below_the_divisor_is_its_own_remainder():
    from fcl.il.passes import bound
    stmts = [ir.SeqFor(k, ir.Const(256, INT), [
        ir.Store(arr, ir.Bin(">>", k, ir.Const(8, INT), INT),
                 ir.Bin("&", k, ir.Const(255, INT), INT)),
        ir.Store(arr, ir.Bin(">>", k, ir.Const(7, INT), INT),
                 ir.Bin("&", k, ir.Const(127, INT), INT))])]
    shown = ir.show_stmts(bound(stmts))
    # k < 256: no quotient by 256, and its own remainder; not so by 128.
    assert "arr[0] = k;" in shown and "arr[(k >> 7)] = (k & 127);" in shown


def test_bound_leaves_what_could_wrap_around():
    from fcl.il.passes import bound
    big = ir.Bin("*", k, ir.Const(2**30, INT), INT)
    stmts = [ir.SeqFor(k, ir.Const(8, INT), [ir.Store(arr, k, ir.Select(
        ir.Bin(">=", big, ir.Const(0, INT), ir.BOOL), k, n, INT))])]
    assert "?" in ir.show_stmts(bound(stmts))


def test_a_visitor_dispatches_on_the_statement_class_and_its_bases():
    from fcl.codegen.kernel import SerialFor
    from fcl.il.dispatch import StmtVisitor

    class Names(StmtVisitor):
        def visit_SeqFor(self, s, suffix):
            return "loop" + suffix

        def visit_Store(self, s, suffix):
            return "store" + suffix

    names = Names()
    assert names.visit(ir.SeqFor(k, n, []), "!") == "loop!"
    assert names.visit(SerialFor(k, n, []), "?") == "loop?"  # a later stage's kind of SeqFor
    assert names.visit(ir.Store(arr, k, k), "") == "store"
    try:
        names.visit(ir.Barrier("block"), "")
    except TypeError as error:
        assert "Names does not handle Barrier statements" in str(error)
    else:
        raise AssertionError("a statement no method takes must not pass unnoticed")
