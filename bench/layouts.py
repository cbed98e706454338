"""Layouts of arrays of records measured (`--only layouts`): the N-body program of
bench/nbody.fcl (the type-driven layouts paper's running example) with its bodies in each layout
(`fcl.load(layout=...)`: an array per field, of whole records, of tiles of 32 records) and in the
one the compiler infers, taking turns run by run on one device: kernel time (profiling events,
the median), the inferred layout over the best measured, and each layout's time predicted on a
GPU by the cost model. Each result is checked against numpy."""
from __future__ import annotations

import re
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


def gathers_reference(n: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy's results of bench/particles.fcl's `gathers n` and `pinned n`."""
    i = np.arange(n)
    x, y, m = i.astype(float), (i % 7).astype(float), (1 + i % 3).astype(float)
    def gathered(j: int) -> np.ndarray:
        k = (i * 37 + j * 101) % n
        return x[k] + (y[k] + m[k])
    g = gathered(0) + (gathered(1) + (gathered(2) + gathered(3)))
    return (g + (2 * x + (3 * y + ((1 + m) + 0.5 * m))),
            x[1] + (gathered(0) + gathered(1)))


def _check(result: tuple, expected: tuple[np.ndarray, np.ndarray]) -> None:
    (x, (y, z)), ((vx, (vy, vz)), _) = result
    if not (np.allclose(np.stack([x, y, z], 1), expected[0])
            and np.allclose(np.stack([vx, vy, vz], 1), expected[1])):
        raise AssertionError("N-body: the bodies differ from numpy's")


def inferred(opencl: str) -> str:
    """The plan the compiler chose for the first record array the kernels' notes name."""
    for line in opencl.splitlines():
        if "record array" in line and " fields) as " in line:
            layout = next(name for name, shown in NAMES.items() if f" as {shown} (" in line)
            copy = re.search(r"with an (\w+) copy", line)
            return NAMES[layout] + (f" + {copy.group(1)} copy" if copy else "")
    return NAMES["soa"]


def _measure(name: str, libraries: dict, entry: str, args: tuple, check, runs: int,
             gpu: str) -> dict:
    """One program's `entry` on `args` in each layout and as inferred, taking turns round by
    round, each result checked."""
    def call(library):
        return getattr(library, entry)

    times: dict[str, list[float]] = {layout: [] for layout in libraries}
    for round_ in range(runs + 1):  # the first round warms up
        for layout, library in libraries.items():
            check(call(library)(*args))
            timing = call(library).bench(*args, runs=1)
            if round_:
                times[layout].append(timing.timed.median)
    medians = {layout: statistics.median(values) for layout, values in times.items()}
    best = min(LAYOUTS, key=lambda layout: medians[layout])
    predicted = {}
    for layout in (*LAYOUTS, "auto"):
        explanation = call(libraries[layout]).costs(*args, gpu=gpu)
        seconds = explanation.predict(explanation.costs()).time_s
        predicted[layout] = None if seconds is None else seconds * 1000
    return {"program": name, "ms": medians, "inferred": inferred(call(libraries["auto"]).opencl),
            "best": best, "ratio": medians["auto"] / medians[best], "predicted_ms": predicted,
            "gpu": gpu, "runs": runs}


def measure_layouts(tiny: bool, runs: int, device_id: str | None, block: int,
                    gpu: str) -> list[dict]:
    def load(program: str) -> dict:
        return {layout: fcl.load_file(HERE / program, device=device_id, block_size=block,
                                      layout=layout) for layout in (*LAYOUTS, "auto")}

    n = 4 * block if tiny else 4096
    given, expected = bodies(n), reference(bodies(n))
    rows = [_measure(f"N-body, {n:,} bodies, 2 steps", load("nbody.fcl"),
                     "simulate", (2, DT, given), lambda result: _check(result, expected),
                     runs, gpu)]
    # Particles: as many as the compiler assumes for a size it cannot know.
    count = 4 * block if tiny else 1 << 20
    gathered = gathers_reference(count)[0]

    def same(result: np.ndarray) -> None:
        if not np.allclose(result, gathered):
            raise AssertionError("particles: the sums differ from numpy's")

    rows.append(_measure(f"particles read unevenly, {count:,}", load("particles.fcl"),
                         "gathers", (count,), same, runs, gpu))
    return rows


def layouts_table(rows: list[dict]) -> str:
    lines = ["| program | SoA ms | AoS ms | AoSoA ms | inferred (its ms) | inferred ÷ best | "
             "predicted on the GPU: SoA, AoS, AoSoA, inferred ms |",
             "|---|---:|---:|---:|---|---:|---|"]
    for r in rows:
        ms, predicted = r["ms"], r["predicted_ms"]
        guesses = ", ".join("–" if predicted[n] is None else f"{predicted[n]:.3g}"
                            for n in (*LAYOUTS, "auto"))
        lines.append(f"| {r['program']} | {ms['soa']:.2f} | {ms['aos']:.2f} | "
                     f"{ms['aosoa']:.2f} | {r['inferred']} ({ms['auto']:.2f}) | "
                     f"{r['ratio']:.2f} | {guesses} ({r['gpu']}) |")
    return "\n".join(lines)
