"""Compile speed: FCL source to OpenCL source for the matmul program, and for programs nested 250
to 10,000 deep (issue 28: compile time must grow about linearly with the depth)."""
from __future__ import annotations

import statistics
import time

import numpy as np

from bench.sizes import Sizes
from bench.tasks import compile_task, tasks
from fcl.errors import Source
from fcl.pipeline import compile_program, main_root
from fcl.session import Session


def compile_speed(s: Sizes, repeats: int = 7) -> float:
    """Median ms from FCL source to OpenCL source for the matmul program (the prelude checked
    once before, as in any process that has compiled something)."""
    task = next(t for t in tasks(s, np.random.default_rng(0)) if t.name == "matmul")
    compile_task(task, s.block)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        compile_task(task, s.block)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _over_k(body: str) -> str:
    """A program printing `body` for k = 0..3."""
    return f"val main = do<grid> {{ r <- forcePull<grid> (generate 4 (fn k => {body})) ; " \
           f"forceAndPrint 4 (push<grid> r) }}"


def nested_expression(n: int) -> str:
    """A remainder chain without lets: each level's sign depends on the level below."""
    e = "k"
    for _ in range(n):
        e = f"({e} * 5 % 7919 - k)"
    return _over_k(e)


def lambda_chain(n: int) -> str:
    """Let-bound lambdas, each calling the one before."""
    lines = ["", "  let f0 = fn x => x * 3 % 1009 in"]
    lines += [f"  let f{i} = fn x => f{i - 1} x * 3 % 1009 + {i} in" for i in range(1, n)]
    lines.append(f"  f{n - 1} k")
    return _over_k("\n".join(lines))


def if_chain(n: int) -> str:
    """Conditionals nested in their else branches."""
    e = "0"
    for i in range(n):
        e = f"(if k == {i % 5} then {i * 7} else {e} % 1000)"
    return _over_k(e)


DEEP_SHAPES = {"nested expression": nested_expression, "lambda chain": lambda_chain,
               "if chain": if_chain}


DEEP_DEPTHS = (250, 1000, 10_000)


DEEP_GOAL_S = 10.0  # at 10,000 deep


def deep_compile_speed(depths: tuple[int, ...] = DEEP_DEPTHS) -> dict[str, dict[int, float]]:
    """Seconds from FCL source (checked with the prelude) to OpenCL source, once per shape and
    depth."""
    times: dict[str, dict[int, float]] = {}
    for name, shape in DEEP_SHAPES.items():
        for depth in depths:
            start = time.perf_counter()
            session = Session.new()
            session.add_file(Source("deep.fcl", shape(depth)))
            compile_program(session, main_root(session))
            times.setdefault(name, {})[depth] = time.perf_counter() - start
    return times


def deep_table(times: dict[str, dict[int, float]]) -> str:
    depths = sorted({d for row in times.values() for d in row})
    lines = ["| compile, s | " + " | ".join(f"{d:,} deep" for d in depths) + " |",
             "|---|" + "---:|" * len(depths)]
    for name, row in times.items():
        lines.append(f"| {name} | " + " | ".join(f"{row[d]:.2f}" for d in depths) + " |")
    return "\n".join(lines)
