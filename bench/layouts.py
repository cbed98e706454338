"""Layouts of arrays of records measured (`--only layouts`): the N-body program of
bench/nbody.fcl (the type-driven layouts paper's running example) with its bodies in each layout
(`fcl.load(layout=...)`: an array per field, of whole records, of tiles of 32 records) and in the
one the compiler infers, taking turns run by run on one device: kernel time (profiling events,
the median), the inferred layout over the best measured, and each layout's time predicted on a
GPU by the cost model. Each result is checked against numpy."""
from __future__ import annotations

import statistics

import numpy as np

import fcl
from bench.sizes import HERE
from fcl.memory.layouts import LAYOUTS, NAMES

DT = 0.01


def bodies(n: int) -> tuple:
    """n bodies: positions and velocities from a normal distribution, masses 0.5-1.5."""
    rng = np.random.default_rng(3)
    f = [rng.standard_normal(n) for _ in range(6)] + [rng.uniform(0.5, 1.5, n)]
    return ((f[0], (f[1], f[2])), ((f[3], (f[4], f[5])), f[6]))


def reference(given: tuple, steps: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """numpy's positions and velocities after `steps` steps, as bench/nbody.fcl computes them."""
    (x, (y, z)), ((vx, (vy, vz)), m) = given
    p, v = np.stack([x, y, z], 1), np.stack([vx, vy, vz], 1)
    for _ in range(steps):
        d = p[None, :, :] - p[:, None, :]
        r2 = 0.01 + (d * d).sum(2)
        v = v + DT * (d * (m[None, :] / (r2 * np.sqrt(r2)))[:, :, None]).sum(1)
        p = p + DT * v
    return p, v


def _check(result: tuple, expected: tuple[np.ndarray, np.ndarray]) -> None:
    (x, (y, z)), ((vx, (vy, vz)), _) = result
    if not (np.allclose(np.stack([x, y, z], 1), expected[0])
            and np.allclose(np.stack([vx, vy, vz], 1), expected[1])):
        raise AssertionError("N-body: the bodies differ from numpy's")


def inferred(library) -> str:
    """The layout the compiler chose for the bodies between the two steps."""
    for line in library.simulate.opencl.splitlines():
        if "record array" in line:
            return next(name for name, shown in NAMES.items() if f" as {shown} (" in line)
    return "soa"


def measure_layouts(tiny: bool, runs: int, device_id: str | None, block: int,
                    gpu: str) -> list[dict]:
    n = 4 * block if tiny else 4096
    given = bodies(n)
    expected = reference(given)
    libraries = {layout: fcl.load_file(HERE / "nbody.fcl", device=device_id, block_size=block,
                                       layout=layout) for layout in (*LAYOUTS, "auto")}
    times: dict[str, list[float]] = {name: [] for name in libraries}
    for round_ in range(runs + 1):  # the first round warms up
        for name, library in libraries.items():
            _check(library.simulate(2, DT, given), expected)
            timing = library.simulate.bench(2, DT, given, runs=1)
            if round_:
                times[name].append(timing.timed.median)
    medians = {name: statistics.median(values) for name, values in times.items()}
    chosen = inferred(libraries["auto"])
    best = min(LAYOUTS, key=lambda name: medians[name])
    predicted = {}
    for name in LAYOUTS:
        explanation = libraries[name].simulate.costs(2, DT, given, gpu=gpu)
        seconds = explanation.predict(explanation.costs()).time_s
        predicted[name] = None if seconds is None else seconds * 1000
    return [{"program": f"N-body, {n} bodies, 2 steps", "bodies": n, "ms": medians,
             "inferred": chosen, "best": best, "ratio": medians["auto"] / medians[best],
             "predicted_ms": predicted, "gpu": gpu, "runs": runs}]


def layouts_table(rows: list[dict]) -> str:
    lines = ["| program | SoA ms | AoS ms | AoSoA ms | inferred (its ms) | inferred ÷ best | "
             "predicted on the GPU: SoA, AoS, AoSoA ms |",
             "|---|---:|---:|---:|---|---:|---|"]
    for r in rows:
        ms, predicted = r["ms"], r["predicted_ms"]
        guesses = ", ".join("–" if predicted[n] is None else f"{predicted[n]:.3g}"
                            for n in LAYOUTS)
        lines.append(f"| {r['program']} | {ms['soa']:.2f} | {ms['aos']:.2f} | "
                     f"{ms['aosoa']:.2f} | {NAMES[r['inferred']]} ({ms['auto']:.2f}) | "
                     f"{r['ratio']:.2f} | {guesses} ({r['gpu']}) |")
    return "\n".join(lines)
