"""`make bench`'s memory section: a student's kernel after each course notebook, as the load test
measures it (tools/loadtest.py: one student on a real JupyterHub on this machine, every code
cell of the notebook run through the kernel's websocket). "After" is the memory of the kernel and
its children once it is idle and its build helper has exited: private (what a student adds to
the server: resident memory less the clean pages of files, the libraries' code, which the system
keeps once for all kernels) and resident (RSS, those pages counted in full); "peak" the most RSS
it held while the notebook ran. The goal: at most 200 MB private after any course notebook."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_MB = 200.0
MB = 1e6


def _loadtest():
    from tools import loadtest  # imported when measured: it needs JupyterHub's test extras
    return loadtest


def available() -> bool:
    """Whether the load test can run here (it needs configurable-http-proxy)."""
    return _loadtest().proxy_command() is not None


def course_notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def measure(notebooks: list[Path]) -> list[dict]:
    loadtest, rows = _loadtest(), []
    for notebook in notebooks:
        row = loadtest.run_class(1, notebook)
        problems = row["failures"] + row["lost"]
        private = max(loadtest.settled_mb(row, "private"))
        rows.append({"notebook": notebook.stem, "kernel": loadtest.kernel_name(notebook),
                     "cells": row["cells"], "problems": problems, "private_mb": private,
                     "rss_mb": max(loadtest.settled_mb(row, "rss")),
                     "peak_mb": max(row["peak_bytes"].values(), default=0) / MB,
                     "met": private <= GOAL_MB and not problems})
        print(f"{notebook.stem}: {private:.0f} MB private after", file=sys.stderr)
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"| course notebook | kernel | cells | kernel private MB after | kernel RSS MB after "
             f"| kernel RSS MB peak | private ≤ {GOAL_MB:.0f} MB |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in rows:
        met = "yes" if r["met"] else "**no**" + (f" ({'; '.join(r['problems'])})"
                                                 if r["problems"] else "")
        lines.append(f"| {r['notebook']} | {r['kernel']} | {r['cells']} | {r['private_mb']:.0f} "
                     f"| {r['rss_mb']:.0f} | {r['peak_mb']:.0f} | {met} |")
    return "\n".join(lines)
