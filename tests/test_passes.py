"""The IL optimisation passes: what they remove, and that they keep meaning."""
from fcl.il import ir
from fcl.il.passes import optimize, propagate, prune, sweep

I = ir.INT
x, y, n, k = (ir.Var(name, I) for name in ("x", "y", "n", "k"))
arr = ir.Var("arr", ir.ArrayType(I))


def test_propagate_replaces_single_definitions_and_refolds():
    stmts = [ir.Declare(x, ir.Const(4, I)), ir.Declare(y, x),
             ir.Store(arr, ir.Bin("+", y, ir.Const(1, I), I), ir.Bin("*", x, y, I))]
    assert ir.show_stmts(propagate(stmts)) == "arr[5] = 16;"


def test_propagate_leaves_variables_that_change():
    stmts = [ir.Declare(n, ir.Const(0, I)), ir.Assign(n, ir.Const(3, I)), ir.Store(arr, n, n)]
    assert ir.show_stmts(propagate(stmts)) == ir.show_stmts(stmts)


def test_read_csv_counts_as_changing_its_length():
    length = ir.Var("len", I)
    stmts = [ir.Declare(length, ir.Const(0, I)), ir.ReadCSV(arr, length, "f.csv"),
             ir.Print(length, arr)]
    assert "printIntArray(len, arr);" in ir.show_stmts(optimize(stmts))


def test_prune_keeps_the_branch_that_runs_and_drops_empty_loops():
    stmts = [ir.If(ir.Const(False, ir.BOOL), [ir.Store(arr, k, k)], [ir.Store(arr, n, n)]),
             ir.SeqFor(k, ir.Const(0, I), [ir.Store(arr, k, k)]),
             ir.Assign(n, n)]
    assert ir.show_stmts(prune(stmts)) == "arr[n] = n;"


def test_sweep_drops_counters_nothing_reads():
    stmts = [ir.Declare(k, ir.Const(0, I)),
             ir.While([], ir.Var("go", ir.BOOL),
                      [ir.Assign(k, ir.Bin("+", k, ir.Const(1, I), I)), ir.Store(arr, n, n)])]
    assert ir.show_stmts(sweep(stmts)) == "while (go) {\n  arr[n] = n;\n}"


def test_sweep_keeps_what_a_store_needs():
    stmts = [ir.Declare(k, ir.Bin("*", n, n, I)), ir.Store(arr, ir.Const(0, I), k)]
    assert sweep(stmts) == stmts
