"""bench/run.py's correctness check at tiny sizes: each FCL benchmark program computes what its
hand-written OpenCL reference and numpy compute. Timings are the harness's business, not tests'."""
import json
from pathlib import Path

import numpy as np
import pytest

from bench.compile_speed import compile_speed, deep_compile_speed, deep_table
from bench.measure import measure
from bench.originals import ORIGINAL_REPO, chunked_scan
from bench.reference import vector_matmul_works
from bench.report import table
from bench.run import main, usable_device_ids
from bench.sizes import TINY
from bench.tasks import tasks
from fcl.analysis.gpu import load_gpu
from fcl.runtime.device import open_device
from fcl.runtime.oclgrind import parse_reports
from marks import slow_unless

TASKS = [task.name for task in tasks(TINY, np.random.default_rng(0))]
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("task", TASKS)
def test_fcl_program_agrees_with_the_reference_kernel(task):
    (row,) = measure(TINY, runs=1, device=open_device(), only={task})
    assert row["task"] == task and row["fcl_ms"] > 0 and row["reference_ms"] > 0


def test_each_task_gets_the_time_the_cost_model_predicts_on_a_gpu():
    """The predicted column: the model's time on the chosen GPU (on a CPU, with nothing to compare
    it to; on a GPU, also predicted / measured)."""
    h100, t4 = load_gpu("h100"), load_gpu("t4")
    rows = {gpu.name: measure(TINY, runs=1, device=open_device(), only={"copy"},
                                    gpu=gpu)[0] for gpu in (h100, t4)}
    # At least one launch's overhead (tiny sizes are launch-bound), and never faster on the T4.
    assert rows["H100 SXM5"]["predicted_ms"] >= h100.launch_overhead_us / 1000
    assert rows["T4"]["predicted_ms"] >= rows["H100 SXM5"]["predicted_ms"]
    header, _, line = table([rows["T4"]], None).splitlines()
    assert header.endswith("| checks in kernels | predicted on T4 µs |")
    assert line.endswith(f" | {rows['T4']['predicted_ms'] * 1000:.1f} |")
    gpu_header = table([rows["T4"]], None, on_gpu=True).splitlines()[0]
    assert gpu_header.endswith("| predicted on T4 µs | predicted / measured |")


# A vector matmul's contract (reference.cl): work-item (x, y) computes rows 4y..4y+3 and
# columns 16x..16x+15 of C = A B; here as plain loops, then with one fault or another.
SCALAR_MATMUL = """
__kernel void matmul_vec(__global const int* A, __global const int* B, __global int* C,
                         int wA, int wB) {
    int x = get_global_id(0), y = get_global_id(1);
    for (int r = 4 * y; r < 4 * y + 4; r++)
        for (int c = 16 * x; c < 16 * x + 16; c++) {
            int sum = 0;
            for (int k = 0; k < wA; k++) sum += A[r * wA + k] * B[k * wB + c];
            C[r * wB + c] = SUM;
        }
}"""


@pytest.mark.parametrize("fault, works", [
    ("sum", True),
    ("sum + 1", False),  # computes the wrong product
    ("((__global volatile int*)0)[x] = sum", False),  # kills its process (on a CPU device)
])
def test_a_vector_matmul_is_a_candidate_only_where_it_runs_right(fault, works):
    """LLVM 14 aborts the process that launches some of reference.cl's vector matmuls on some
    CPUs, and computes another wrong: the bench runs each in a child process first."""
    source = SCALAR_MATMUL.replace("SUM", fault)
    assert vector_matmul_works(open_device().device, "matmul_vec", source, [], (1, 2)) == works


def test_matmul_compiles_to_opencl():
    assert compile_speed(TINY, repeats=1) > 0


def test_deep_programs_compile_and_their_times_are_tabled():
    times = deep_compile_speed((20, 40))
    assert set(times) == {"nested expression", "lambda chain", "if chain"}
    assert all(row.keys() == {20, 40} and min(row.values()) > 0 for row in times.values())
    header, rule, *rows = deep_table(times).splitlines()
    assert header == "| compile, s | 20 deep | 40 deep |" and rule == "|---|---:|---:|"
    assert [row.split(" | ")[0] for row in rows] == ["| nested expression", "| lambda chain",
                                                      "| if chain"]


# The scans take 1.1-1.8 s each, the reductions by warps 0.8-1 s, the sparse products 1.4 s
# (the skewed one, flattened, stays in the loop).
@pytest.mark.parametrize("task", slow_unless([t for t in TASKS if t != "copy"],
                                              lambda t: not t.startswith("scan")
                                              and "warps" not in t
                                              and t not in ("smvm (regular)",
                                                            "smvm (skewed, not flattened)")))
def test_fcl_program_is_clean_under_oclgrind(task, capfd):
    # Oclgrind reports data races between the work-items of a group (a barrier too few), reads
    # out of bounds and of uninitialized memory; the reference kernels run too, and must be clean.
    capfd.readouterr()
    measure(TINY, runs=1, device=open_device("oclgrind"), only={task})
    findings = parse_reports(capfd.readouterr().err, [])
    assert not findings, "\n".join(f"{f.kernel}: {f.message}" for f in findings)


# The original repository's benchmark programs (tests/benchmarks of github.com/dybber/fcl): read
# from a copy of it, which a fresh clone does not have; without one the harness leaves their
# table out, as the last test checks.
needs_original = pytest.mark.skipif(not ORIGINAL_REPO.exists(),
                                    reason="no copy of the original FCL repository here "
                                           "(FCL_ORIGINAL_REPO)")


@needs_original
@pytest.mark.slow  # 10 s (where it runs)
def test_original_programs_run_unchanged_against_the_reference_kernels(capsys):
    # --tiny: the programs' sizes scaled down; each must print numpy's result and its
    # `benchmark` lines, and each reference kernel compute numpy's result (measure_originals
    # raises otherwise).
    assert main(["--tiny", "--only", "originals", "--no-record"]) == 0
    rows = [line.split(" | ")[:3] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and not line.startswith("| original")]
    # One table per device that works (pip's PoCL and the distribution's, where both are).
    assert rows == [["| copy", "copy", "2"], ["| reverse", "reverse", "2"],
                    ["| transpose", "transpose", "2"], ["| reduce", "partial reduction", "2"],
                    ["| reduce", "full reduction", "2"], ["| scan", "scan", "2"],
                    ["| matmul", "matmul (doubles)", "2"]] * len(usable_device_ids())


def test_without_the_original_repository_its_table_is_left_out(tmp_path, capsys):
    missing = tmp_path / "no-such-repository"
    assert main(["--tiny", "--only", "originals", "--no-record",
                       "--original", str(missing)]) == 0
    out = capsys.readouterr().out
    assert f"no copy of the original FCL repository at {missing}" in out
    assert "| original program" not in out


def test_chunked_scan_is_the_originals_scan():
    values = np.arange(1, 33, dtype=np.int32)
    scanned = chunked_scan(values, 4)
    # A whole scan while the totals before a chunk lie in the first chunk of 4 totals: up to
    # 4 * (4 + 1) elements. Then, as in the original's scan.fcl, chunk 5 adds only the total of
    # chunk 4, the first of the second chunk of totals.
    assert np.array_equal(scanned[:20], np.cumsum(values[:20]))
    assert np.array_equal(scanned[20:24], np.cumsum(values[16:24])[4:])


@pytest.mark.slow  # 10-30 s: five programs built planned and not, traced for the GPU model
def test_planning_is_measured_planned_and_not(capsys):
    # --tiny: each program's result matches numpy planned and unplanned (measure_planning raises
    # otherwise); planning removes a kernel and lowers the memory allocated.
    first = usable_device_ids()[0]
    assert main(["--tiny", "--only", "planning", "--no-record", "--runs", "1"]
                + (["--device", first] if first else [])) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()
            if line.startswith(("| concatenation", "| hotspot", "| blocked", "| Needleman",
                                "| LU"))]
    assert [(r[0], r[1]) for r in rows] == [("| concatenation of 3 parts", "3 / 4"),
                                            ("| hotspot (power)", "4 / 5"),
                                            ("| blocked running sum (power)", "8 / 9"),
                                            ("| Needleman-Wunsch (power)", "8 / 16"),
                                            ("| LU decomposition (power)", "18 / 19")]
    for r in rows:
        planned, unplanned = (int(r[k].replace(",", "")) for k in (5, 6))
        assert planned < unplanned


@pytest.mark.slow  # 10-20 s: every task, the micro-benchmarks, notebook 5's %%bench cells
def test_the_gpu_report_measures_tasks_calibration_and_notebook_cells(tmp_path):
    # --quick: tiny sizes, on whatever device there is (PoCL here); the same code on a GPU.
    from bench.gpu_report import bench_cells, main as report_main
    out = tmp_path / "report.json"
    assert report_main(["--quick", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert [row["task"] for row in report["tasks"]] == TASKS
    assert all(row["predicted_over_measured"] > 0 and row["fcl_ms"] > 0
               for row in report["tasks"])
    measured = report["calibration"]["measured"]
    assert set(measured) == {"launch_overhead_us", "memory_latency_ns", "cache_latency_ns",
                             "requests_in_flight", "memory_bandwidth_bytes_per_s", "barrier_ns",
                             "atomics_distinct_per_s", "atomics_one_element_per_s"}
    assert report["calibration"]["profile_assumes"]["cache_latency_ns"] > 0
    assert all(value >= 0 for value in measured.values())
    assert measured["memory_bandwidth_bytes_per_s"] > 0 and measured["launch_overhead_us"] > 0
    assert report["calibration"]["profile_assumes"]["launch_overhead_us"] > 0
    # A chain's loads wait for each other, so w chains overlap at most w of them (and a
    # work-item overlaps at least one).
    assert 1 <= measured["requests_in_flight"] <= 16
    assert report["calibration"]["profile_assumes"]["requests_in_flight"] == 4
    assert report["date"] and report["device"]
    # The notebooks' %%bench cells, timed in the session of the cells before them.
    cells = bench_cells(ROOT / "notebooks" / "05-reduction.ipynb", 1, None)
    assert cells and all(c["median_ms"] > 0 for c in cells)
    assert any("reduceFull addi 0 input" in c["source"] for c in cells)


def test_streaming_is_measured_past_the_budget_with_and_without_overlap(capsys):
    # --tiny: each program's result matches numpy with overlap and without (measure_streaming
    # raises otherwise), its input is several budgets, and its arrays stay within the budget.
    first = usable_device_ids()[0]
    assert main(["--tiny", "--only", "streaming", "--no-record", "--runs", "1"]
                + (["--device", first] if first else [])) == 0
    rows = [line.split(" | ") for line in capsys.readouterr().out.splitlines()
            if line.startswith(("| audio", "| csr", "| smvm", "| search"))]
    assert [r[0].split(":")[0] for r in rows] == ["| audio", "| csr", "| smvm", "| search"]
    for r in rows:
        times_the_budget, chunks, peak = float(r[2]), int(r[3].split()[0]), float(r[4])
        assert times_the_budget >= 4 and chunks >= 4 and 0 < peak <= 1


@pytest.mark.slow  # 3.5 s: each layout of each program compiled and run
def test_layouts_are_measured_against_each_other(capsys):
    # --tiny: N-body's bodies and the particles in each layout and the inferred one, each
    # checked against numpy (measure_layouts raises otherwise), with their predicted GPU times.
    first = usable_device_ids()[0]
    assert main(["--tiny", "--only", "layouts", "--no-record", "--runs", "1"]
                + (["--device", first] if first else [])) == 0
    out = capsys.readouterr().out.splitlines()
    [row] = [line.split(" | ") for line in out if line.startswith("| N-body")]
    assert row[0] == "| N-body, 64 bodies, 2 steps"
    assert all(float(cell) > 0 for cell in row[1:4])
    assert row[4].split()[0] in ("SoA", "AoS", "AoSoA") and float(row[5]) > 0
    # The particles' size is the compiler's guess for one it cannot know, so it keeps a copy.
    [row] = [line.split(" | ") for line in out if line.startswith("| particles")]
    assert row[0] == "| particles read unevenly, 64" and row[4].startswith("SoA + AoS copy (")
