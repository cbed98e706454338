"""Cost counters per kernel, from one traced work-group, as a text or HTML table.

Counts are for the traced work-group (its work-items averaged), so a kernel whose groups do
different amounts of work is described by the one shown; the table says which.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np

from fcl.analysis.access import SiteSummary, summarize
from fcl.analysis.trace import KernelTrace, Trace


@dataclass
class KernelCosts:
    kernel: str
    line: int | None           # the FCL line the kernel comes from
    launches: int
    groups: int                # work-groups of its first launch
    group: int                 # the traced one
    block_size: int
    local_bytes: int
    global_loads: float        # per work-item
    global_stores: float
    load_transactions: float   # 128-byte segments per warp access to global memory ...
    load_ideal: float          # ... and the least that the same accesses could take
    store_transactions: float
    store_ideal: float
    local_loads: float         # per work-item
    local_stores: float
    bank_conflicts: int        # extra serialized local accesses in the work-group
    worst_conflict: int        # the worst n-way conflict of one warp access (1: none)
    barriers: int              # per work-group
    truncated: bool
    sites: list[SiteSummary]


def kernel_costs(trace: KernelTrace, sites) -> KernelCosts:
    summaries = summarize(trace, sites)
    items = trace.block_size

    def total(kind: str, space: str, attribute: str = "accesses") -> int:
        return sum(getattr(s, attribute) for s in summaries
                   if s.site.kind == kind and s.site.space == space)

    def per_warp_access(kind: str, attribute: str) -> float:
        accesses = total(kind, "global", "warp_accesses")
        return total(kind, "global", attribute) / accesses if accesses else 0.0

    first_lane = trace.lane == int(trace.lane.min(initial=0))
    barrier_sites = [s.id for s in sites if s.kind == "barrier" and s.kernel == trace.kernel.name]
    barriers = int(np.isin(trace.site[first_lane], barrier_sites).sum())
    local = [s for s in summaries if s.site.space == "local"]
    return KernelCosts(
        trace.kernel.name, trace.kernel.span.line if trace.kernel.span else None, trace.launches,
        trace.groups, trace.group, items, trace.local_bytes,
        total("load", "global") / items, total("store", "global") / items,
        per_warp_access("load", "transactions"), per_warp_access("load", "ideal_transactions"),
        per_warp_access("store", "transactions"), per_warp_access("store", "ideal_transactions"),
        total("load", "local") / items, total("store", "local") / items,
        sum(s.bank_conflicts for s in local), max((s.worst_conflict for s in local), default=1),
        barriers, trace.truncated, summaries)


def program_costs(trace: Trace) -> list[KernelCosts]:
    return [kernel_costs(k, trace.sites) for k in trace.kernels]


def _number(value: float) -> str:
    if value == int(value):
        return f"{value:g}"
    # Small values (say 1 store per group) with two significant digits, not as 0.00.
    return f"{value:.2f}" if abs(value) >= 0.1 else f"{value:.2g}"


ROWS = [
    ("launches", lambda c: str(c.launches)),
    ("work-groups (first launch)", lambda c: str(c.groups)),
    ("work-items per group", lambda c: str(c.block_size)),
    ("global loads per work-item", lambda c: _number(c.global_loads)),
    ("global stores per work-item", lambda c: _number(c.global_stores)),
    ("transactions per warp load (ideal)",
     lambda c: f"{_number(c.load_transactions)} ({_number(c.load_ideal)})" if c.global_loads
     else "–"),
    ("transactions per warp store (ideal)",
     lambda c: f"{_number(c.store_transactions)} ({_number(c.store_ideal)})" if c.global_stores
     else "–"),
    ("local loads per work-item", lambda c: _number(c.local_loads)),
    ("local stores per work-item", lambda c: _number(c.local_stores)),
    ("bank conflicts per group (worst)",
     lambda c: f"{c.bank_conflicts} ({c.worst_conflict}-way)" if c.bank_conflicts else "0"),
    ("barriers per group", lambda c: str(c.barriers)),
    ("local memory per group", lambda c: f"{c.local_bytes} B"),
]


def _heading(c: KernelCosts) -> str:
    return c.kernel


def _notes(costs: list[KernelCosts]) -> list[str]:
    groups = {c.group for c in costs}
    # A kernel launching fewer work-groups than the one asked for is traced in its last one.
    where = f"work-group {costs[0].group} of each kernel's first launch" if len(groups) == 1 \
        else "the first launch of each kernel, in work-group " + ", ".join(
            f"{c.group} of {c.kernel}" for c in costs)
    notes = [f"Counted in {where} (warps of 32 work-items, 128-byte transactions, 32 banks of "
             "4 bytes)."]
    if any(c.truncated for c in costs):
        notes.append("Some work-items did more accesses than were recorded: counts are lower "
                     "bounds.")
    return notes


def costs_text(costs: list[KernelCosts]) -> str:
    if not costs:
        return "The program launches no kernels."
    table = [["", *(_heading(c) for c in costs)], *([label, *(cell(c) for c in costs)]
                                                     for label, cell in ROWS)]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in table]
    return "\n".join(lines + _notes(costs))


def costs_html(costs: list[KernelCosts]) -> str:
    if not costs:
        return "<p>The program launches no kernels.</p>"
    head = "".join(f"<th>{html.escape(_heading(c))}</th>" for c in costs)
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(label)}</th>"
        + "".join(f"<td style='text-align:right'>{html.escape(cell(c))}</td>" for c in costs)
        + "</tr>" for label, cell in ROWS)
    notes = "".join(f"<p><small>{html.escape(n)}</small></p>" for n in _notes(costs))
    return (f"<table class='fcl-costs'><thead><tr><th></th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>{notes}")
