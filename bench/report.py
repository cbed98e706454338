"""The tables `make bench` prints and appends to bench/README.md."""
from __future__ import annotations


def _ms(value: float) -> str:
    """A time in ms, in seconds from one second on."""
    return f"{value / 1e3:.2f} s" if value >= 1000 else f"{value:.1f} ms"


def originals_table(rows: list[dict]) -> str:
    lines = ["| original program | `benchmark` of | runs | FCL ms per run | reference ms per run | "
             "FCL / reference | medians: FCL / reference | spreads: FCL, reference | ranked |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['program']} | {r['benchmark']} | {r['repetitions']} | "
                     f"{r['fcl_mean_ms']:.3f} | {r['reference_mean_ms']:.3f} | {r['ratio']:.2f} | "
                     f"{r['median_ratio']:.2f} | {r['fcl_spread']:.1%}, "
                     f"{r['reference_spread']:.1%} | {r['ranking']} |")
    return "\n".join(lines)


def _prediction_cells(r: dict, on_gpu: bool) -> str:
    """The predicted time, and on a GPU its ratio to the measured one (on a CPU the model,
    which is of a GPU, has nothing to be compared with)."""
    if "predicted_ms" not in r:
        return ""
    if r["predicted_ms"] is None:
        return " cannot run there |" + (" – |" if on_gpu else "")
    cells = f" {r['predicted_ms'] * 1000:.1f} |"
    return cells + (f" {r['predicted_ms'] / r['fcl_ms']:.2f} |" if on_gpu else "")


def table(rows: list[dict], compile_ms: float | None, kernel: dict | None = None,
          original_rows: list[dict] | None = None, on_gpu: bool = False,
          memory_table: str | None = None) -> str:
    lines = []
    if rows:
        gpu = next((r["predicted_gpu"] for r in rows if "predicted_gpu" in r), None)
        predicted = (f" predicted on {gpu} µs |" + (" predicted / measured |" if on_gpu else "")
                     if gpu else "")
        lines += ["| task | reference ms | FCL ms | FCL / reference | reference bandwidth | "
                  "FCL bandwidth | checked / unchecked | checks in kernels |" + predicted,
                  "|---|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * predicted.count("|")]
        for r in rows:
            lines.append(f"| {r['task']} | {r['reference_ms']:.3f} | {r['fcl_ms']:.3f} | "
                         f"{r['ratio']:.2f} | {r.get('reference_bandwidth', 0):.2f} | "
                         f"{r.get('fcl_bandwidth', 0):.2f} | {r['checked_ratio']:.3f}"
                         f"{' (same kernels)' if r['same_kernels'] else ''} | "
                         f"{r['kernel_checks']} |" + _prediction_cells(r, on_gpu))
    if original_rows:
        lines += [""] if lines else []
        lines.append(originals_table(original_rows))
    if compile_ms is not None:
        lines += [""] if lines else []
        lines.append(f"FCL source to OpenCL source (matmul): {compile_ms:.1f} ms")
    if kernel:
        lines += [""] if lines else []
        lines += ["| Jupyter kernel | median | goal | met | runs |", "|---|---:|---:|---|---|"]
        for entry in kernel.values():
            goal = entry["goal_ms"]
            goal_text = f"{goal / 1e3:g} s" if goal >= 1000 else f"{goal:g} ms"
            runs = ", ".join(f"{t:.1f}" for t in entry["runs_ms"])
            lines.append(f"| {entry['what']} | {_ms(entry['median_ms'])} | < {goal_text} | "
                         f"{'yes' if entry['met'] else '**no**'} | {runs} ms |")
    if memory_table:
        lines += [""] if lines else []
        lines.append(memory_table)
    return "\n".join(lines)
