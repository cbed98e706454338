"""Sequences streamed through the device in chunks (fcl.il.streams, fcl.runtime.streams): the same
results whatever the chunk size and on both back ends, inputs larger than the device-memory
budget, Python arrays, memmaps and iterators as sequence arguments, the timeline, and errors."""
import io
import re
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

import fcl
from fcl import pipeline
from fcl.errors import FCLError
from fcl.runtime.streams import StreamOptions, parse_bytes
from tests.kernels import execute, stdout
from tests.runs import run_interp, session_for

PROGRAMS = Path(__file__).parent / "programs"

SOURCE = """
sig energies : Seq double -> Program <grid> [double]
fun energies s =
  collect (mapSeq (fn w => addd (muld (index w 0) (index w 0)) (muld (index w 3) (index w 3)))
                  (windows 4 2 s))

sig total : Seq int -> Program <grid> int
fun total s = foldSeq addi 0 (mapSeq (fn x => x % 1000) s)

sig spikes : Seq double -> Program <grid> double
fun spikes s = foldSeq addd 0.0 s

sig dot : Seq double -> Seq double -> Program <grid> double
fun dot a b = foldSeq addd 0.0 (zipWithSeq muld a b)

sig positive : forall 'a. Seq int -> Program <grid> [bool]
fun positive s = collect (mapSeq (fn x => x > 0) s)
"""


def run_streamed(text: str, options: StreamOptions) -> tuple[str, list]:
    session = session_for(text)
    out, timelines = io.StringIO(), []
    pipeline.run_opencl(session, pipeline.main_root(session), out=out, err=io.StringIO(),
                        streaming=options, on_timeline=timelines.append)
    return out.getvalue(), timelines


def tile_fold(values, zero=0.0) -> float:
    """foldSeq's order (fcl.il.streams): tiles of 256, filled up with zero, each folded as a
    tree (pairs 128 apart, then 64, ...), then the tiles' values in order from zero."""
    result = zero
    for first in range(0, len(values), 256):
        tile = list(values[first:first + 256]) + [zero] * (256 - len(values[first:first + 256]))
        half = 128
        while half:
            tile[:half] = [tile[i] + tile[i + half] for i in range(half)]
            half //= 2
        result += tile[0]
    return result


@pytest.mark.parametrize("chunk", [100, 256, 768, None])
def test_a_program_prints_the_same_whatever_the_chunk_size(chunk):
    text = (PROGRAMS / "streams.fcl").read_text()
    out, timelines = run_streamed(text, StreamOptions(chunk=chunk))
    assert out == run_interp(text)
    # Five streams, which covered their sequences, chunk after chunk (all in one without a
    # chunk size: the device's memory holds them).
    lengths = [5000, 1249, 5000, (5000 - 5) // 3 + 1, 5000]
    folds = [True, False, True, False, False]  # a fold's chunks hold whole tiles of 256
    assert timelines and timelines[0].elements == sum(lengths)
    sizes = [n if chunk is None else -(-chunk // 256) * 256 if fold else chunk
             for n, fold in zip(lengths, folds, strict=True)]
    expected_chunks = sum(-(-n // size) for n, size in zip(lengths, sizes, strict=True))
    assert timelines[0].chunks() == list(range(expected_chunks))
    if chunk is not None:
        assert timelines[0].chunk == chunk


@pytest.fixture(scope="module")
def library():
    return fcl.load(SOURCE, device_memory="64K")


@pytest.fixture(scope="module")
def oracle():
    return fcl.load(SOURCE, backend="interp")


def test_an_input_four_times_the_budget_streams_within_it(library, tmp_path):
    budget = parse_bytes("64K")
    values = (np.arange(5 * budget // 4, dtype=np.int32) * 7919) % 100003  # 5x the budget
    path = tmp_path / "big.npy"
    np.save(path, values)
    mapped = np.load(path, mmap_mode="r")
    timeline = library.total.timeline(mapped)
    assert library.total(mapped) == int((values % 1000).sum())
    assert values.nbytes >= 4 * budget
    assert 0 < timeline.peak <= budget
    assert timeline.elements == len(values) and timeline.chunk < len(values) // 4
    chunks = timeline.chunks()
    assert len(chunks) == -(-len(values) // timeline.chunk)
    for chunk in chunks:  # every chunk's data moved to the device, and its kernels ran
        kinds = {what for c, what, *_ in timeline.rows if c == chunk}
        assert "to device" in kinds and len(kinds) >= 3


def test_iterators_and_memmaps_give_what_arrays_give(library, oracle, tmp_path):
    rng = np.random.default_rng(7)
    signal = rng.standard_normal(20_000)
    expected = oracle.energies(signal)
    windows = np.lib.stride_tricks.sliding_window_view(signal, 4)[::2]
    assert np.array_equal(expected, windows[:, 0] ** 2 + windows[:, 3] ** 2)
    np.save(tmp_path / "signal.npy", signal)
    pieces = np.array_split(signal, 13)  # pieces that do not line up with chunks or windows
    for argument in (signal, np.load(tmp_path / "signal.npy", mmap_mode="r"), iter(pieces),
                     (p for p in pieces)):
        assert np.array_equal(library.energies(argument), expected)
    assert oracle.energies(iter(pieces)).tolist() == expected.tolist()


def test_a_fold_of_doubles_has_the_same_bits_on_both_back_ends(library, oracle):
    values = np.where(np.arange(10_000) % 97 == 0, 1.0e16, np.arange(10_000) % 13 - 6.5)
    values[::193] = -1.0e16
    assert library.spikes(values) == oracle.spikes(values) == tile_fold(values.tolist())
    b = np.linspace(-1, 1, 10_000)
    assert library.dot(values, b) == oracle.dot(values, b) == tile_fold((values * b).tolist())


def test_bools_and_polymorphic_sequences(library, oracle):
    xs = np.arange(-500, 1500, dtype=np.int32)
    assert library.positive(xs).tolist() == (xs > 0).tolist() == oracle.positive(xs).tolist()
    assert library.positive(iter([xs[:7], xs[7:]])).tolist() == (xs > 0).tolist()


def test_without_overlap_the_results_are_the_same(oracle):
    values = np.arange(50_000, dtype=np.int32)
    apart = fcl.load(SOURCE, device_memory="64K", overlap=False)
    together = fcl.load(SOURCE, device_memory="64K")
    assert apart.total(values) == together.total(values) == oracle.total(values)
    timeline = apart.total.timeline(values)
    assert not timeline.overlap and "one after another" in timeline.text()
    text = together.total.timeline(values).text()
    assert "overlapped" in text and "chunk   0 data" in text and "=" in text and "#" in text


def test_sequences_of_different_lengths_are_an_error_on_both_back_ends(library, oracle):
    for lib in (library, oracle):
        with pytest.raises(FCLError, match="zipWithSeq was given sequences of 300 and 200"):
            lib.dot(np.ones(300), np.ones(200))
    text = ("val main = do<grid> { s <- foldSeq addi 0 (zipWithSeq addi (streamIn (iota 5)) "
            "(streamIn (iota 4))) ; forceAndPrint 1 (push<grid> (generate 1 (fn i => s))) }")
    for run in (lambda: run_streamed(text, StreamOptions()), lambda: run_interp(text)):
        with pytest.raises(FCLError, match="sequences of 5 and 4 elements") as caught:
            run()
        assert caught.value.span is not None and caught.value.span.line == 1


def test_a_budget_too_small_for_a_chunk_says_so():
    tiny = fcl.load(SOURCE, device_memory=1024)
    with pytest.raises(FCLError, match="leaves room for fewer than 256 elements per chunk"):
        tiny.total(np.arange(10_000, dtype=np.int32))


def test_bad_sequence_arguments_are_named(library):
    with pytest.raises(TypeError, match="parameter `s` is Seq int, a 1-D array of int32"):
        library.total(np.zeros(5, dtype=np.int64))
    with pytest.raises(FCLError, match="needs 1-D arrays of int32 from its iterator"):
        library.total(iter([np.zeros(5, np.int32), np.zeros(5, np.float64)]))
    with pytest.raises(ValueError, match="chunk holds a positive number of elements, not 0"):
        fcl.load(SOURCE, chunk=0)
    with pytest.raises(ValueError, match="not a number of bytes"):
        fcl.load(SOURCE, device_memory="lots")


def test_windows_need_constant_sizes():
    text = ("sig f : int -> Seq int -> Program <grid> [int]\n"
            "fun f n s = collect (mapSeq (fn w => index w 0) (windows n 1 s))")
    lib = fcl.load(text)
    with pytest.raises(FCLError, match="windows needs a size and a step that are positive "
                                       "constants"):
        lib.f(3, np.arange(10, dtype=np.int32))


def test_stream_file_reads_npy_files_as_elements_and_rows(tmp_path, monkeypatch):
    values = np.arange(-3000, 7000, dtype=np.int32)
    lengths = (np.arange(400) * 7 % 43).astype(np.int32)
    lengths[-1] += len(values) - lengths.sum()  # the rows hold every value
    np.save(tmp_path / "samples.npy", values)
    np.save(tmp_path / "lengths.npy", lengths)
    monkeypatch.chdir(tmp_path)  # the program names the files relative to the working directory
    text = (PROGRAMS / "streamFile.fcl").read_text()
    starts = np.concatenate([[0], np.cumsum(lengths)])
    peaks = [int(values[a:b].max()) if b > a else -1000000 for a, b in pairwise(starts)]
    out, timelines = run_streamed(text, StreamOptions(chunk=1024))
    assert out == run_interp(text)
    assert out == f"{_wrapped(int((values.astype(np.int64) ** 2).sum()))}\n[{len(lengths)}]\n" \
        f"[{','.join(map(str, peaks[:12]))}]\n"
    assert len(timelines[0].chunks()) == 10 + 1  # the samples in 10 chunks, the rows in one
    np.save(tmp_path / "samples.npy", values.astype(np.float64))
    for run in (lambda: run_streamed(text, StreamOptions()), lambda: run_interp(text)):
        with pytest.raises(FCLError, match=re.escape(
                "a sequence of int32 needs 1-D arrays of int32; `samples.npy` holds an array of "
                "float64")):
            run()


def _wrapped(value: int) -> str:
    """An int printed as FCL prints a 32-bit int, which wraps."""
    value %= 2**32
    return f"[{value - 2**32 if value >= 2**31 else value}]"


def test_the_cli_draws_the_timeline(tmp_path, capsys):
    from fcl.cli import main
    path = tmp_path / "prog.fcl"
    path.write_text((PROGRAMS / "streams.fcl").read_text())
    assert main(["run", "--chunk", "1024", "--timeline", "--device-memory", "1M",
                 str(path)]) == 0
    captured = capsys.readouterr()
    assert captured.out == run_interp(path.read_text())
    assert "timeline (overlapped)" in captured.err and "chunks of 1024" in captured.err
    assert "budget of 1048576 bytes" in captured.err


KERNEL_CELL = """%%timeline
val main = do<grid> {
  s <- foldSeq addi 0 (mapSeq (fn x => x % 7) (streamIn (generate 100000 (fn i => i)))) ;
  forceAndPrint 1 (push<grid> (generate 1 (fn i => s))) }"""


def test_the_kernel_streams_within_its_budget_and_draws_the_timeline(kc):
    reply, messages = execute(kc, "%config device_memory=128K chunk=auto overlap=on")
    assert reply["status"] == "ok" and "device_memory=131072 chunk=auto overlap=on" in \
        stdout(messages)
    reply, messages = execute(kc, KERNEL_CELL)
    assert reply["status"] == "ok", reply
    assert stdout(messages) == f"[{sum(i % 7 for i in range(100000))}]\n"
    [bundle] = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]
    assert bundle["image/svg+xml"].startswith("<svg") and "<rect" in bundle["image/svg+xml"]
    text = bundle["text/plain"]
    assert text.startswith("timeline (overlapped): 100000 elements in")
    assert "budget of 131072 bytes" in text
    reply, messages = execute(kc, "%config chunk=1024 overlap=off")
    assert "chunk=1024 overlap=off" in stdout(messages)
    reply, messages = execute(kc, KERNEL_CELL)
    text = next(m["content"]["data"]["text/plain"] for m in messages
                if m["msg_type"] == "display_data")
    assert "one after another" in text and "in 98 chunks of 1024" in text
    reply, messages = execute(kc, "%config device_memory=lots")
    assert "cannot set `device_memory=lots`: it needs a positive number of bytes" in "".join(
        m["content"].get("text", "") + str(m["content"].get("evalue", "")) for m in messages)


ROWS = """
sig rowTimes : [double] -> ([double], [int]) -> Program <thread> double
fun rowTimes x row = do<thread> {
  s <- force<thread> (foldl (fn a => fn j => addd a (muld (index (fst row) j)
                                                          (index x (index (snd row) j))))
                            0.0 (iota (length (fst row)))) ;
  return<thread> (index s 0)
}

sig smvm : [double] -> Seq int -> Seq double -> Seq int -> Program <grid> [double]
fun smvm x lengths vals cols =
  collect (mapSeqM (rowTimes x) (zipWithSeq (fn v => fn c => (v, c)) (segmentsSeq lengths vals)
                                                                    (segmentsSeq lengths cols)))

sig longest : Seq int -> Seq int -> Program <grid> int
fun longest lengths vals = foldSeq maxi 0 (mapSeq length (segmentsSeq lengths vals))

sig windowed : Seq int -> Seq int -> Program <grid> [int]
fun windowed lengths vals =
  collect (mapSeq (fn w => index w 1) (windows 2 1 (mapSeq length (segmentsSeq lengths vals))))
"""


@pytest.fixture(scope="module")
def csr():
    rng = np.random.default_rng(5)
    rows, n = 3000, 300
    lengths = (rng.pareto(1.2, rows) * 3).astype(np.int32).clip(0, 1000)
    lengths[17] = 1000  # a long row among short ones
    nnz = int(lengths.sum())
    return lengths, rng.standard_normal(nnz), rng.integers(0, n, nnz).astype(np.int32), \
        rng.standard_normal(n)


def test_irregular_rows_stream_in_whole_rows_on_both_back_ends(csr):
    lengths, vals, cols, x = csr
    starts = np.concatenate([[0], np.cumsum(lengths)])
    expected = [np.dot(vals[a:b], x[cols[a:b]]) for a, b in pairwise(starts)]
    device = fcl.load(ROWS, device_memory="96K")
    oracle = fcl.load(ROWS, backend="interp")
    y = device.smvm(x, lengths, vals, cols)
    assert np.allclose(y, expected) and np.array_equal(y, oracle.smvm(x, lengths, vals, cols))
    timeline = device.smvm.timeline(x, lengths, vals, cols)
    assert len(timeline.chunks()) > 4 and timeline.peak <= 96 * 1024
    # Pieces that cut rows anywhere: a chunk still takes whole rows.
    pieces = [iter(np.array_split(a, k)) for a, k in ((lengths, 7), (vals, 3), (cols, 11))]
    assert np.array_equal(device.smvm(x, *pieces), y)
    assert device.longest(lengths, cols) == oracle.longest(lengths, cols) == 1000


def test_irregular_rows_that_do_not_add_up_are_errors_on_both_back_ends(csr):
    lengths, _, cols, _ = csr
    device = fcl.load(ROWS, device_memory="96K")
    oracle = fcl.load(ROWS, backend="interp")
    for lib in (device, oracle):
        with pytest.raises(FCLError, match="lengths add up to more than the "
                                           f"{len(cols) - 1} elements given"):
            lib.longest(lengths, cols[:-1])
        with pytest.raises(FCLError, match=f"lengths add up to {len(cols)}, but "
                                           f"{len(cols) + 1} elements were given"):
            lib.longest(lengths, np.concatenate([cols, np.zeros(1, np.int32)]))
        negative = lengths.copy()
        negative[5] = -2
        with pytest.raises(FCLError, match="row 5 has the negative length -2"):
            lib.longest(negative, cols)
    tiny = fcl.load(ROWS, device_memory="8K")
    with pytest.raises(FCLError, match="row 17 has 1000 elements, more than a chunk holds"):
        tiny.longest(lengths, cols)
    for lib in (device, oracle):
        with pytest.raises(FCLError, match="windows of a sequence made of irregular rows are "
                                           "not supported"):
            lib.windowed(lengths, cols)


def test_costs_price_the_moves_on_the_gpus_host_link(library):
    values = np.arange(40_000, dtype=np.int32)
    explanation = library.total.costs(values, gpu="t4")
    text = explanation.costs_bundle()["text/plain"]
    streamed = next(line for line in text.splitlines() if line.startswith("Streamed:"))
    chunks = len(library.total.timeline(values).chunks())
    assert streamed.startswith(f"Streamed: {values.nbytes:,} bytes to the device and 0 back in "
                               f"{chunks} chunks; over the T4's host link (16 GB/s each way) "
                               f"moving them takes 10 µs")
    assert "overlapped about" in streamed and "one after another" in streamed
    with pytest.raises(TypeError, match=r"total\.costs runs the call more than once, and an "
                                        "iterator can be read once"):
        library.total.costs(iter([values]))
    with pytest.raises(TypeError, match="give `s` an array or a memmap"):
        library.total.bench(iter([values]))


def test_an_iterator_read_twice_is_an_error_on_both_back_ends():
    text = ("sig twice : Seq int -> Program <grid> (int, [int])\n"
            "fun twice s = do<grid> { a <- foldSeq addi 0 s ; b <- collect s ; return (a, b) }")
    pieces = [np.arange(5, dtype=np.int32), np.arange(7, dtype=np.int32)]
    for backend in ("opencl", "interp"):
        lib = fcl.load(text, backend=backend)
        total, collected = lib.twice(np.concatenate(pieces))  # an array may be read again
        assert total == 31 and collected.tolist() == list(range(5)) + list(range(7))
        with pytest.raises(FCLError, match="argument 1 is an iterator, which can be read once, "
                                           "and this reads it again") as caught:
            lib.twice(iter(pieces))
        assert caught.value.span is not None and caught.value.span.col == 55  # collect s
