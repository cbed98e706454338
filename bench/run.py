"""`make bench`: the FCL programs of bench/ against hand-written OpenCL (bench/reference.cl).

The runner: it measures, on each device, what the modules beside it measure (sizes, tasks and
reference: what runs; measure: FCL against the reference; originals: the original repository's
programs; compile_speed; kernel_speed: the Jupyter kernel; memory: the kernel's memory after each
course notebook) and prints and records the tables of report.

Both run on the same device with the same input data; their results must agree (and match
numpy). Times are kernel times from OpenCL profiling events, summed over a run's kernels, the
median of several runs after a warm-up. Bandwidth is the bytes a task must read and write
divided by its time, as a fraction of what the copy kernel achieves. Compile speed is measured
too (FCL source to OpenCL source for the matmul program, and for programs nested 250 to 10,000
deep), and the Jupyter kernel against its goals: start-up, the interrupt of an endless loop, a
warm kernel cell.

It also runs the original repository's benchmark programs unchanged against reference.cl doing
the same work (see "the original repository's benchmark programs" below).

    python -m bench.run [--runs N] [--tiny] [--device D] [--only WHAT] [--original PATH]
                        [--no-record] [--no-cell]

Without `--device`, the tasks and the original programs are measured on every device that works
(`fcl devices`), one after the other: on a CPU machine, pip's PoCL and the distribution's.

`--only` (repeatable) names a task, or originals, planning (the memory planner on and off,
bench/planning.py), streaming (sequences past a device-memory budget, bench/streaming.py),
layouts (N-body's and particles' records in each layout, bench/layouts.py), compile, startup,
interrupt, cell, memory (the kernel's memory after each course notebook, bench/memory.py), or
jupyter (startup, interrupt and cell): `make bench BENCH_ARGS="--only jupyter"` measures only
the kernel.
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.compile_speed import (
    DEEP_DEPTHS,
    DEEP_GOAL_S,
    compile_speed,
    deep_compile_speed,
    deep_table,
)
from bench.kernel_speed import jupyter
from bench.layouts import layouts_table, measure_layouts
from bench.measure import (
    CHECKED_GOAL,
    PREDICTED_GPU,
    PREDICTION_GOAL,
    is_gpu,
    matching_gpu,
    measure,
)
from bench.originals import (
    GOAL_RATIO,
    ORIGINAL_FULL,
    ORIGINAL_REPETITIONS,
    ORIGINAL_REPO,
    ORIGINAL_TINY,
    TINY_REPETITIONS,
    measure_originals,
)
from bench.planning import measure_planning, planning_table
from bench.report import table
from bench.sizes import FULL, HERE, TINY, Sizes
from bench.streaming import FULL_BUDGET, TINY_BUDGET, measure_streaming, streaming_table
from bench.tasks import tasks
from fcl.analysis.gpu import gpu_names, load_gpu
from fcl.runtime.device import all_devices, is_oclgrind, open_device
from fcl.runtime.probe import health


def kernel_memory():
    """bench/memory.py (the kernel's memory after each course notebook, by the load test)."""
    from bench import memory
    return memory


SECTIONS = ("originals", "planning", "streaming", "layouts", "compile", "startup", "interrupt",
            "cell", "memory")
JUPYTER = ("startup", "interrupt", "cell")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs per kernel (at least 5)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes: a correctness check")
    parser.add_argument("--device", help="platform:device or part of a name (default: every "
                                         "device that works)")
    parser.add_argument("--only", action="append", metavar="WHAT",
                        help="measure only this (repeatable): a task (copy, matmul, ...), "
                             f"{', '.join(SECTIONS)}, or jupyter (startup, interrupt and cell)")
    parser.add_argument("--no-record", action="store_true",
                        help="print only: leave results.json and README.md alone")
    parser.add_argument("--original", type=Path, default=ORIGINAL_REPO,
                        help="the original FCL repository (a checkout or a bare git directory), "
                             "for its benchmark programs (default: $FCL_ORIGINAL_REPO, else "
                             f"{ORIGINAL_REPO})")
    parser.add_argument("--gpu", choices=gpu_names(), metavar="NAME",
                        help="the GPU whose time the cost model predicts for each task: "
                             f"{', '.join(gpu_names())} (default: h100; on a GPU, the profile "
                             "its name matches, when there is one)")
    parser.add_argument("--no-cell", action="store_true",
                        help="skip the Jupyter kernel's measurements (where no FCL kernel is "
                             "installed)")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    names = {t.name for t in tasks(sizes, np.random.default_rng(0))}
    only = set(args.only or ())
    if "jupyter" in only:
        only = (only - {"jupyter"}) | set(JUPYTER)
    if only - names - set(SECTIONS):
        parser.error(f"--only: unknown {', '.join(sorted(only - names - set(SECTIONS)))}")
    wanted = (lambda name: name in only) if only else (lambda name: True)
    # Without --device, every device that works (fcl devices), one after the other in this run:
    # on a CPU machine pip's PoCL and the distribution's side by side. The Jupyter kernel and
    # compile speed are measured once, beside the first.
    device_ids = [args.device] if args.device else usable_device_ids()
    for index, device_id in enumerate(device_ids):
        measure_device(args, sizes, names, wanted, device_id, first=index == 0)
    return 0


def usable_device_ids() -> list[str | None]:
    ids: list[str | None] = [ident for ident, dev in all_devices()
                             if not is_oclgrind(dev) and health(dev).usable]
    return ids or [None]  # none: open_device's error says why


def measure_device(args, sizes: Sizes, names: set[str], wanted: Callable[[str], bool],
                   device_id: str | None, first: bool) -> None:
    """The tasks and the original programs on one device, printed and recorded; with `first`,
    compile speed and the Jupyter kernel too."""
    if not first:
        print()
    device = open_device(device_id)
    chosen = {name for name in names if wanted(name)}
    gpu = load_gpu(args.gpu or matching_gpu(device) or PREDICTED_GPU)
    rows = measure(sizes, args.runs, device, chosen, gpu, device_id) if chosen else []
    original_rows = None
    if wanted("originals"):
        if args.original.exists():
            original_rows = measure_originals(
                args.original, ORIGINAL_TINY if args.tiny else ORIGINAL_FULL,
                TINY_REPETITIONS if args.tiny else ORIGINAL_REPETITIONS, device, device_id)
        else:
            print(f"note: no copy of the original FCL repository at {args.original} (set "
                  "FCL_ORIGINAL_REPO or --original): its benchmark programs are left out\n")
    planning_rows = measure_planning(args.tiny, args.runs, device_id, sizes.block, gpu) \
        if wanted("planning") else None
    streaming_rows = measure_streaming(args.tiny, args.runs, device_id) \
        if wanted("streaming") else None
    layout_rows = measure_layouts(args.tiny, args.runs, device_id, sizes.block, gpu.key) \
        if wanted("layouts") else None
    compile_ms = compile_speed(sizes) if first and wanted("compile") else None
    deep = deep_compile_speed((50, 100) if args.tiny else DEEP_DEPTHS) \
        if first and wanted("compile") else None
    sections = set() if args.tiny or args.no_cell or not first else \
        {s for s in JUPYTER if wanted(s)}
    kernel = jupyter(sections) if sections else None
    memory_rows, memory = None, kernel_memory()
    if first and wanted("memory") and not (args.tiny or args.no_cell):
        if memory.available():
            memory_rows = memory.measure(memory.course_notebooks())
        else:
            print("note: no configurable-http-proxy (`make test-setup` installs it): the "
                  "kernel's memory after the course notebooks is left out\n")
    report = table(rows, compile_ms, kernel, original_rows, is_gpu(device),
                   memory.table(memory_rows) if memory_rows else None)
    if planning_rows:
        report += "\n\nMemory planning (fcl/memory), planned against unplanned " \
            f"(`--no-short-circuit`), {args.runs} runs each, taking turns:\n\n" \
            + planning_table(planning_rows)
    if streaming_rows:
        budget = TINY_BUDGET if args.tiny else FULL_BUDGET
        report += f"\n\nSequences streamed past a device-memory budget of {budget}B " \
            "(bench/streaming.py), memory-mapped inputs, the next chunk moved while this one's " \
            f"kernels run (overlapped) and not (apart), {args.runs} runs each, taking turns:" \
            "\n\n" + streaming_table(streaming_rows)
    if layout_rows:
        report += "\n\nLayouts of arrays of records (bench/layouts.py): N-body's bodies and " \
            "particles read unevenly as an array per field, of whole records, of tiles of 32, " \
            f"and as inferred, {args.runs} runs each, taking turns (kernel ms, median):\n\n" \
            + layouts_table(layout_rows)
    if deep:
        report += "\n\n" + deep_table(deep)
    kernels = [f"{r['task']}: {r['reference_kernel']}{_candidates(r)}" for r in rows
               if r.get("reference_kernel")]
    kernels += [f"original {r['program']} ({r['benchmark']}): {r['reference_kernel']}"
                for r in original_rows or [] if r.get("reference_kernel")]
    if kernels:  # the faster of each task's candidates in reference.cl, on this device
        report += f"\n\nReference kernels: {'; '.join(kernels)}."
    left_out = sorted({name for r in [*rows, *(original_rows or [])]
                       for name in r.get("reference_left_out", [])})
    if left_out:  # candidates that crash or compute wrongly on this device (reference.py)
        report += (f" Left out, as they do not run right on this device: "
                   f"{', '.join(left_out)}.")
    date = datetime.date.today().isoformat()
    print(f"{device.name}, {date}\n\n{report}")
    missed = [entry["what"] for entry in (kernel or {}).values() if not entry["met"]]
    missed += [f"compiling the {name} {depth:,} deep: {seconds:.1f} s > {DEEP_GOAL_S:g} s"
               for name, row in (deep or {}).items() for depth, seconds in row.items()
               if depth >= 10_000 and seconds > DEEP_GOAL_S]
    if is_gpu(device):
        ratios = {r["task"]: r["predicted_ms"] / r["fcl_ms"] for r in rows if r.get("predicted_ms")}
        missed += [f"{task}: predicted / measured {ratio:.2f} is not within {PREDICTION_GOAL}x"
                   for task, ratio in ratios.items()
                   if not 1 / PREDICTION_GOAL <= ratio <= PREDICTION_GOAL]
    missed += [f"{r['task']}: checked / unchecked {r['checked_ratio']:.3f} > {CHECKED_GOAL}"
               for r in rows if r["checked_ratio"] > CHECKED_GOAL]
    missed += [f"original {r['program']} ({r['benchmark']}): FCL / reference {r['ratio']:.2f} > "
               f"{GOAL_RATIO}" for r in original_rows or [] if r["ratio"] > GOAL_RATIO]
    missed += [f"{r['notebook']}: the kernel holds {r['private_mb']:.0f} MB after it (goal "
               f"{memory.GOAL_MB:.0f}){', ' if r['problems'] else ''}{'; '.join(r['problems'])}"
               for r in memory_rows or [] if not r["met"]]
    if missed:
        print(f"\ngoals missed: {'; '.join(missed)}")
    if not args.no_record and report.strip():  # a device with nothing measured (--only) is left
        # One entry per device: a run on another device (a GPU) keeps this one's. A run of some
        # measurements (--only) replaces those and keeps the rest.
        path = HERE / "results.json"
        results = json.loads(path.read_text()) if path.exists() else {}
        entry = results.get(device.name, {})
        entry["date"] = date
        if rows:
            entry.update(sizes=vars(sizes), runs=args.runs)
            measured = {r["task"] for r in rows}
            entry["tasks"] = [r for r in entry.get("tasks", []) if r["task"] not in measured] + rows
        if original_rows:
            entry["originals"] = original_rows
        if planning_rows:
            entry["planning"] = planning_rows
        if streaming_rows:
            entry["streaming"] = streaming_rows
        if layout_rows:
            entry["layouts"] = layout_rows
        if compile_ms is not None:
            entry["compile_ms"] = compile_ms
        if deep:
            entry["deep_compile_s"] = {name: {str(depth): seconds for depth, seconds in row.items()}
                                       for name, row in deep.items()}
        if memory_rows:
            entry["kernel_memory"] = memory_rows
        if kernel:
            entry.setdefault("kernel", {}).update(kernel)
            if "cell" in kernel:
                entry["cell_round_trip_ms"] = kernel["cell"]["median_ms"]
        results[device.name] = entry
        path.write_text(json.dumps(results, indent=2) + "\n")
        with open(HERE / "README.md", "a") as readme:
            readme.write(f"\n### {device.name}, {date}\n\n{report}\n")


def _candidates(row: dict) -> str:
    """Each candidate reference's median while it was chosen, where there were several (the
    sparse products: a work-item per row and a warp per row)."""
    times = row.get("reference_candidates_ms") or {}
    if len(times) < 2:
        return ""
    return " (" + ", ".join(f"{name} {ms:.3g} ms" for name, ms in times.items()) + ")"


if __name__ == "__main__":
    sys.exit(main())
