"""FCL from Python (fcl.python): entry points called on numpy arrays, on both back ends.

Every supported parameter and result type (tests/python/entries.fcl) on random lengths, 0 and
lengths that are not multiples of the work-group size among them, against numpy; the errors a
caller can make, each naming the parameter; results left on the device and chained; timing and
costs of a call.
"""
from pathlib import Path

import numpy as np
import pyopencl.array as cl_array
import pytest
from hypothesis import given, settings, strategies as st

import fcl
from fcl import pipeline
from fcl.errors import FCLError
from fcl.il import ir
from fcl.runtime import device as opencl_device

ENTRIES = Path(__file__).parent / "python" / "entries.fcl"
BACKENDS = ("opencl", "interp")
# 0, around the work-group size (256) and its double (a reduction's chunk), and anything else.
LENGTHS = st.one_of(st.sampled_from([0, 1, 255, 256, 257, 511, 512, 513]),
                    st.integers(0, 3000))
EXAMPLES = settings(max_examples=12)


# Built for OpenCL, the library costs each of its tests' first example 1.6-4 s: `make test-fast`
# runs those on the interpreter (and test_results_stay_on_the_device... on OpenCL).
@pytest.fixture(scope="module", params=["interp", pytest.param("opencl", marks=pytest.mark.slow)])
def lib(request):
    return fcl.load_file(ENTRIES, backend=request.param, block_size=256)


def ints(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + n).integers(-1000, 1000, n, dtype=np.int32)


def doubles(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + n).standard_normal(n)


@EXAMPLES
@given(n=LENGTHS)
def test_arrays_in_and_out_match_numpy(lib, n):
    xs, ds, es = ints(n), doubles(n), doubles(n, 1)
    bs = xs % 3 == 0
    added = lib.addOne(xs)
    assert added.dtype == np.int32 and np.array_equal(added, xs + 1)
    assert np.array_equal(lib.saxpy(2.5, ds, es), 2.5 * ds + es)  # to the last bit
    fs, gs = ds.astype(np.float32), es.astype(np.float32)
    single = lib.saxpyf(0.1, fs, gs)  # 0.1 rounded to a float, each operation to a float
    assert single.dtype == np.float32 and np.array_equal(single, np.float32(0.1) * fs + gs)
    flipped = lib.flip(bs)
    assert flipped.dtype == np.bool_ and np.array_equal(flipped, ~bs)
    assert np.array_equal(lib.clampAll(-10, 10, xs), np.clip(xs, -10, 10))
    ys, length = lib.shifted(xs, 7)
    assert np.array_equal(ys, xs + 7) and length == n


@EXAMPLES
@given(n=LENGTHS)
def test_a_reduction_over_any_length(lib, n):
    xs = ints(n, 2)
    total = lib.sumAll(xs)
    assert isinstance(total, np.int32) and total == xs.sum()


def test_scalars_and_pairs(lib):
    n, (d, b) = lib.scalars(21, 1.25, True)
    assert (n, d, b) == (42, 2.5, False)
    assert isinstance(n, np.int32) and isinstance(d, np.float64) and isinstance(b, np.bool_)
    assert lib.at(np.arange(5, dtype=np.int32) * 3, 4) == 12


@pytest.mark.slow  # 0.8-1.6 s
def test_both_back_ends_agree_on_every_entry_point():
    libs = [fcl.load_file(ENTRIES, backend=b) for b in BACKENDS]
    xs = ints(300, 5)
    calls = [("addOne", (xs,)), ("flip", (xs > 0,)), ("clampAll", (0, 9, xs)),
             ("scalars", (-3, -0.5, False)), ("shifted", (xs, -1)), ("at", (xs, 299)),
             ("sumAll", (xs,)), ("saxpy", (0.5, doubles(300), doubles(300, 3)))]
    for name, args in calls:
        first, second = (getattr(lib, name)(*args) for lib in libs)
        assert _same(first, second), name


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and np.array_equal(a, b) and np.asarray(a).dtype == \
        np.asarray(b).dtype


def test_polymorphic_functions_take_their_types_from_the_arguments(lib):
    for values in (ints(300), doubles(300), doubles(300).astype(np.float32), ints(300) > 0):
        reversed_ = lib.revAny(values)
        assert reversed_.dtype == values.dtype and np.array_equal(reversed_, values[::-1])
    first, picked = lib.pick(False, 2.5, [1.0, 2.0])
    assert first == 1.0 and isinstance(first, np.float64) and np.array_equal(picked, [1.0, 2.0])
    first, picked = lib.pick(True, 7, ints(3))
    assert first == 7 and isinstance(first, np.int32) and np.array_equal(picked, [7, 7, 7])
    # One compiled instance per combination of types, not per call.
    assert set(lib.revAny._instances) == {("int",), ("double",), ("float",), ("bool",)}
    with pytest.raises(TypeError, match=r"parameter `ys` is \['a\], and `x` made 'a int; got "
                                        "double"):
        lib.pick(True, 1, doubles(2))
    with pytest.raises(TypeError, match=r"parameter `xs` is \['a\], 'a being int, double, float "
                                        r"or bool \(int32, float64, float32 or bool\); got int64"):
        lib.revAny(np.arange(3))
    assert lib.revAny.signature == "revAny : forall 'a. ['a] -> Program <grid> ['a]<grid>"


def test_floats_take_float32_arrays_and_numbers_rounded_to_a_float(lib):
    xs = np.array([1.5, -2.25, 3.0], np.float32)
    assert np.array_equal(lib.saxpyf(2, xs, [0.1, 0.2, 0.3]),
                          np.float32(2) * xs + np.array([0.1, 0.2, 0.3], np.float32))
    with pytest.raises(TypeError, match=r"an array of float32; got an array of float64 \(convert "
                                        r"it with \.astype\(np\.float32\)\)"):
        lib.saxpyf(1.0, xs.astype(np.float64), xs)
    with pytest.raises(ValueError, match=r"`a` is float; 1e\+39 is beyond the range of a float"):
        lib.saxpyf(1e39, xs, xs)
    with pytest.raises(ValueError, match="values beyond the range of a float"):
        lib.saxpyf(1.0, xs, [1.0, 1e39, 2.0])


def test_what_a_program_prints_goes_to_stdout(lib, capsys):
    assert lib.shout(np.arange(10, dtype=np.int32)) is None
    assert capsys.readouterr().out == "[0,1,2]\n"


def test_one_build_serves_every_length():
    lib = fcl.load_file(ENTRIES)
    lib.addOne(ints(10))
    source = lib.addOne.opencl
    built = opencl_device.build_count
    for n in (0, 1, 999, 4097, 100_000):
        assert np.array_equal(lib.addOne(ints(n)), ints(n) + 1)
    assert opencl_device.build_count == built
    assert lib.addOne.opencl == source and "__kernel" in source
    # The length is a kernel argument, not a constant of the source.
    assert "100000" not in source and "4097" not in source


@pytest.mark.slow  # 0.9-1 s
def test_entry_points_verify_after_every_pass():
    lib = fcl.load_file(ENTRIES)
    for entry in lib.entry_points.values():
        for block, checks in ((256, True), (32, False)):
            options = pipeline.CompileOptions(block, checks, verify_il=True)
            root = entry.instance(tuple("double" for _ in entry.type_vars)).root
            compiled = pipeline.compile_program(lib.session, root, options, entry=True)
            assert any(isinstance(s, ir.Input) for s in ir.walk(compiled.host)) or \
                not entry.params, entry.name


def test_run_time_errors_carry_the_fcl_location(lib):
    with pytest.raises(FCLError) as caught:
        lib.at(np.arange(4, dtype=np.int32), 9)
    text = str(caught.value)
    assert "index 9 is out of bounds for an array of length 4" in text
    assert text.startswith(f"{ENTRIES}:28:66:") and "index ys i" in text and "^" in text
    # Raised from the caller's line, not from deep inside the compiler.
    assert caught.traceback[-1].name == "wrapper"


@pytest.mark.parametrize("args, error, words", [
    ((np.arange(3),), TypeError, "parameter `xs` is [int], an array of int32; got an array "
                                 "of int64"),
    ((np.zeros((2, 2), np.int32),), ValueError, "parameter `xs` is [int], a 1-D array; got "
                                                "shape (2, 2)"),
    (([1.5, 2.0],), TypeError, "parameter `xs` is [int]; got a sequence of float64"),
    (([1, 2**40],), ValueError, "outside int32's range"),
    (("text",), TypeError, "parameter `xs` is [int], an array of int32; got str"),
    ((), TypeError, "addOne takes 1 arguments (xs), not 0"),
])
def test_argument_mismatches_name_the_parameter(lib, args, error, words):
    with pytest.raises(error) as caught:
        lib.addOne(*args)
    assert words in str(caught.value)


@pytest.mark.parametrize("args, error, words", [
    ((2**31, 1.0, True), ValueError, "parameter `n` is int, a 32-bit int; 2147483648 is out"),
    ((True, 1.0, True), TypeError, "parameter `n` is int; got bool"),
    ((1, "x", True), TypeError, "parameter `d` is double; got str"),
    ((1, 1.0, 1), TypeError, "parameter `b` is bool; got int"),
    ((1, 10**400, True), ValueError, "parameter `d` is double; 1000000000000000000000"),
    ((1, 2**53 + 1, True), ValueError, "parameter `d` is double; 9007199254740993 is not exactly "
                                       "a double (the nearest is 9007199254740992)"),
])
def test_scalar_mismatches_name_the_parameter(lib, args, error, words):
    with pytest.raises(error) as caught:
        lib.scalars(*args)
    assert words in str(caught.value)


def test_ints_that_are_not_exactly_doubles_are_refused(lib):
    with pytest.raises(ValueError) as caught:
        lib.saxpy(2, [1.0, 2**53 + 1], [0.5, 0.5])
    assert "saxpy: parameter `xs` is [double]; the sequence holds values that are not exactly " \
           "doubles" in str(caught.value)
    with pytest.raises(ValueError, match="is beyond the range of a double"):
        lib.scalars(1, 10**400, True)
    assert np.array_equal(lib.saxpy(2, [2**53], [0.0]), [2.0**54])  # exact: converted


def test_python_sequences_and_scalars_that_fit_are_converted(lib):
    assert np.array_equal(lib.addOne([1, 2, 3]), [2, 3, 4])
    assert np.array_equal(lib.saxpy(2, [1, 2], [0.5, 0.5]), [2.5, 4.5])  # ints fit doubles
    assert np.array_equal(lib.addOne(range(4)), [1, 2, 3, 4])


def test_names_that_cannot_be_called_say_why(lib):
    assert set(lib.entry_points) == {"addOne", "saxpy", "flip", "clampAll", "scalars",
                                     "shifted", "at", "shout", "sumAll", "revAny", "pick", "saxpyf"}
    with pytest.raises(AttributeError, match="its parameter `f` has type `'a -> 'a -> 'b`"):
        lib.step  # noqa: B018
    with pytest.raises(AttributeError, match="parameter `f` has type `int -> int`"):
        lib.applyAll  # noqa: B018
    with pytest.raises(AttributeError, match="defines no `nothing`; its entry points are: "
                                             "addOne, saxpy"):
        lib.nothing  # noqa: B018
    assert "sumAll : [int] -> Program <grid> int" in repr(lib)
    assert lib.sumAll.__doc__ == "sumAll : [int] -> Program <grid> int"


def test_errors_in_the_source_are_fcl_errors_at_their_line(tmp_path):
    path = tmp_path / "bad.fcl"
    path.write_text("sig f : [int] -> int\nfun f xs = index xs true\n")
    with pytest.raises(FCLError) as caught:
        fcl.load_file(path)
    assert str(caught.value).startswith(f"{path}:2:")
    with pytest.raises(ValueError, match="backend must be one of auto, opencl, interp"):
        fcl.load("val x = 1", backend="cuda")


def test_results_stay_on_the_device_and_chain_without_copies():
    lib = fcl.load_file(ENTRIES)
    xs = ints(1000)
    once = lib.addOne(xs, out="device")
    assert isinstance(once, cl_array.Array) and once.dtype == np.int32 and once.shape == (1000,)
    twice = lib.addOne(once, out="device")
    assert np.array_equal(twice.get(), xs + 2)
    assert np.array_equal(once.get(), xs + 1)  # an argument is never written over
    ys, n = lib.shifted(twice, 1, out="device")
    assert np.array_equal(ys.get(), xs + 3) and n == 1000
    flags = lib.flip(cl_array.to_device(lib.queue, xs > 0), out="device")
    assert flags.dtype == np.bool_ and np.array_equal(flags.get(), xs <= 0)
    assert lib.sumAll(cl_array.to_device(lib.queue, xs)) == xs.sum()
    # A slice that does not start at offset 0 is copied, not misread.
    assert np.array_equal(lib.addOne(once[10:20]), xs[10:20] + 2)
    with pytest.raises(TypeError, match="got a pyopencl array of float64"):
        lib.addOne(cl_array.to_device(lib.queue, doubles(3)))


def test_device_results_need_the_opencl_back_end():
    lib = fcl.load_file(ENTRIES, backend="interp")
    with pytest.raises(ValueError, match="out='device' needs the OpenCL back end"):
        lib.addOne(ints(3), out="device")


def test_bench_times_a_call(lib):
    timing = lib.addOne.bench(ints(5000), runs=4)
    assert len(timing.samples) == 4
    report = repr(timing)
    if lib.backend == "opencl":
        assert timing.kernel_times and "kernel time per run" in report
        assert any(name.startswith("kernel") for name in timing.kernel_medians())
    else:
        assert "wall time per run (interpreter" in report
    assert "verdict:" in report


def test_costs_of_a_call(lib):
    explanation = lib.addOne.costs(ints(2000), gpu="a100")
    [kernel] = explanation.costs()
    assert kernel.global_loads == 1 and kernel.global_stores == 1
    text = repr(explanation)
    assert "predicted on A100" in text and "global loads per work-item" in text
    assert "<table" in explanation._repr_mimebundle_()["text/html"]
    [(name, diagram)] = explanation.memory()
    assert name == kernel.kernel and "<svg" in diagram.svg
    with pytest.raises(FCLError, match="no GPU named `nonesuch`"):
        lib.addOne.costs(ints(3), gpu="nonesuch")
