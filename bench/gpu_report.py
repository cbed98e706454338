"""`make gpu-report`: in one run, everything this project measures on a GPU, written to one JSON
file: the bench's tasks (FCL and the best reference, and the cost model's prediction against the
measured time), micro-benchmarks of the entries the GPU profile assumes (bench/calibrate.py),
and the course notebooks' `%%bench` cells. It runs on any OpenCL device (a CPU's PoCL here,
where the predictions are of the profile's GPU and not comparable); on a GPU it takes a few
minutes.

    python -m bench.gpu_report [--out FILE] [--device D] [--quick]
"""
from __future__ import annotations

import argparse
import datetime
import io
import json
import statistics
from dataclasses import asdict
from pathlib import Path

import pyopencl as cl

from bench.calibrate import calibrate
from bench.measure import PREDICTED_GPU, is_gpu, matching_gpu, measure
from bench.sizes import FULL, TINY
from fcl.analysis.gpu import load_gpu
from fcl.analysis.predict import REQUESTS_IN_FLIGHT
from fcl.errors import FCLError, Source
from fcl.pipeline import CompileOptions, compile_program
from fcl.runtime.device import open_device, pick_device
from fcl.runtime.host import prepare_run
from fcl.session import Session
from fcl.timing import measuring
from fcl.types.types import TProgram, chase

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def first_gpu() -> str | None:
    """The first GPU among the OpenCL devices (`platform:device`), else None (the default)."""
    for p, platform in enumerate(cl.get_platforms()):
        for d, device in enumerate(platform.get_devices()):
            if device.type & cl.device_type.GPU:
                return f"{p}:{d}"
    return None


def bench_cells(notebook: Path, runs: int, device_id: str | None,
                block: int = 256) -> list[dict]:
    """The notebook's `%%bench` cells, each timed as `%%bench` does (the median of its runs'
    kernel times), in the session of the cells before it."""
    session = Session.new()
    found = []
    for n, cell in enumerate(json.loads(notebook.read_text())["cells"]):
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).split("\n")
        if lines[0].startswith("%") and not lines[0].startswith("%%"):
            continue
        code = "\n".join(line for line in lines if not line.startswith("%"))
        snapshot = session.snapshot()
        try:
            _, root = session.add_cell(Source(f"{notebook.name} cell {n}", code))
        except FCLError:
            session.restore(snapshot)  # an exercise left for the reader
            continue
        if not lines[0].startswith("%%bench") or root is None \
                or not isinstance(chase(root.type), TProgram):
            continue
        compiled = compile_program(session, root, CompileOptions(block))
        run = prepare_run(compiled, device_id, block, io.StringIO(), io.StringIO())
        times = []
        try:
            for _ in range(runs + 1):  # the first warms up
                with measuring() as clock:
                    run.run_program()
                    run.device.queue.finish()
                run.check_failures()
                times.append(clock.total())
                run.memory.release_arrays_since(0)
        finally:
            run.release()
        found.append({"notebook": notebook.name, "cell": n, "source": code.strip(),
                      "median_ms": statistics.median(times[1:])})
    return found


def report(device_id: str | None, quick: bool, runs: int) -> dict:
    device = open_device(device_id)
    profile = load_gpu(matching_gpu(device) or PREDICTED_GPU)
    sizes = TINY if quick else FULL
    tasks = measure(sizes, runs, device, None, profile, device_id)
    for row in tasks:
        row["predicted_over_measured"] = row["predicted_ms"] / row["fcl_ms"] \
            if row.get("predicted_ms") else None
    measured = calibrate(device, 0.01 if quick else 1.0, repeats=3 if quick else 7)
    assumed = {key: value for key, value in asdict(profile).items()
               if key in ("launch_overhead_us", "memory_latency_ns", "cache_latency_ns",
                          "memory_bandwidth")}
    assumed["requests_in_flight"] = REQUESTS_IN_FLIGHT
    notebooks = [] if quick else [row for path in sorted(NOTEBOOKS.glob("[01]*.ipynb"))
                                  for row in bench_cells(path, 5, device_id)]
    return {"device": device.name, "is_gpu": is_gpu(device),
            "date": datetime.date.today().isoformat(), "profile": profile.name,
            "sizes": "tiny" if quick else "full", "tasks": tasks,
            "calibration": {"measured": measured, "profile_assumes": assumed},
            "notebook_bench_cells": notebooks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-report.json")
    parser.add_argument("--device", help="`platform:device` (default: the first GPU, else the "
                                         "first usable device)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes and no notebooks: a check that everything runs")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    device_id = args.device or first_gpu()
    pick_device(device_id)  # a clear error now if it cannot be used
    result = report(device_id, args.quick, 2 if args.quick else args.runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, default=float))
    print(f"{result['device']}: {len(result['tasks'])} tasks, "
          f"{len(result['notebook_bench_cells'])} notebook cells, calibration "
          f"{', '.join(f'{k} {v:.3g}' for k, v in result['calibration']['measured'].items())}"
          f"; written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
