"""One row per load and store of each traced kernel: its index as a formula, the LMADs of the
traced work-group's and one warp's accesses (when affine), and what a warp request costs; and
one row per branch taken (an if's side, a loop's body) with its SIMT efficiency."""
from __future__ import annotations

import html
from dataclasses import dataclass

from fcl.analysis.access import SiteSimt, SiteSummary, simt_by_site, summarize
from fcl.analysis.symbolic import formula
from fcl.analysis.trace import KernelTrace, Trace

SHOWN_STEPS = 12  # of a branch's SIMT efficiency by execution (a loop's iterations)
BRANCHES = {"then": "takes the if", "else": "takes the else of the if",
            "loop": "runs the loop body while"}


@dataclass
class SiteRow:
    kernel: str
    line: int | None
    access: str            # e.g. "reads global arr_1", or for a branch "takes the if"
    index: str             # the index formula in group, item and loop counters (a branch: its
    loops: list[str]       # condition); what the loop counters in it run over
    lmad_group: str        # the traced work-group's accesses as an LMAD, or why not
    lmad_warp: str
    cost: str              # sectors per warp request, bank conflicts, or SIMT efficiency
    branch: bool = False
    kernel_array: str = ""  # the array's name in the kernel, where `access` gives its FCL name


def site_rows(trace: Trace, warp: int = 0) -> list[SiteRow]:
    rows = []
    for traced in trace.kernels:
        memory = [(s.site.id, _memory_row(traced, s, trace.labels))
                  for s in summarize(traced, trace.sites, warp)]
        branches = [(s.site.id, _branch_row(traced, s, trace.labels))
                    for s in simt_by_site(traced, trace.sites) if s.site.kind == "branch"]
        rows += [row for _, row in sorted(memory + branches, key=lambda pair: pair[0])]
    return rows


def _memory_row(traced: KernelTrace, s: SiteSummary, labels: dict[str, str]) -> SiteRow:
    site = s.site
    index, loops = formula(site.index_expr, traced.kernel, labels) \
        if site.index_expr is not None else (site.index or "?", [])
    not_affine = f"not one LMAD ({s.accesses} accesses traced: see %%memory)"
    if site.space == "global":
        each, lines = s.sectors / max(1, s.requests), s.lines / max(1, s.requests)
        cost = (f"{each:.3g} sector{'s' * (each != 1)} per warp request "
                f"(ideal {s.sectors_ideal / max(1, s.requests):.3g}) in "
                f"{lines:.3g} line{'s' * (lines != 1)}")
    else:
        cost = (f"{s.worst_conflict}-way bank conflict, {s.bank_conflicts} extra accesses"
                if s.bank_conflicts else "no bank conflict")
    named = labels.get(site.array or "")
    return SiteRow(
        traced.kernel.name, site.span.line if site.span else None,
        f"{'reads' if site.kind == 'load' else 'writes'} {site.space} {named or site.array}",
        index, loops, str(s.lmad_group) if s.lmad_group else not_affine,
        str(s.lmad_warp) if s.lmad_warp else not_affine, cost,
        kernel_array=site.array or "" if named else "")


def _branch_row(traced: KernelTrace, s: SiteSimt, labels: dict[str, str]) -> SiteRow:
    site = s.site
    condition, loops = formula(site.condition, traced.kernel, labels) \
        if site.condition is not None else ("?", [])
    cost = (f"SIMT efficiency {s.efficiency:.3g}: {s.active} of {s.lanes} lanes active in "
            f"{s.executions} warp execution{'s' * (s.executions != 1)}")
    steps = s.by_occurrence
    if len(set(steps)) > 1:  # it changes from one execution to the next: say how
        shown = ", ".join(f"{e:.3g}" for e in steps[:SHOWN_STEPS])
        cost += f"; by execution: {shown}{', …' if len(steps) > SHOWN_STEPS else ''}"
    return SiteRow(traced.kernel.name, site.span.line if site.span else None,
                   BRANCHES[site.branch or "then"], condition, loops, "–", "–", cost, branch=True)


def _where(row: SiteRow) -> str:
    return f"{row.kernel}, line {row.line}" if row.line else row.kernel


def _in_kernel(row: SiteRow) -> str:
    return f" ({row.kernel_array} in the kernel)" if row.kernel_array else ""


def sites_text(rows: list[SiteRow], warp: int = 0) -> str:
    lines = []
    for row in rows:
        if row.branch:
            lines += [f"{_where(row)}: {row.access} ({row.index})"]
            lines += [f"    {loop}" for loop in row.loops] + [f"    {row.cost}"]
            continue
        lines += [f"{_where(row)}: {row.access}[{row.index}]{_in_kernel(row)}"]
        lines += [f"    {loop}" for loop in row.loops]
        lines += [f"    work-group: {row.lmad_group}",
                  f"    warp {warp}:     {row.lmad_warp}",
                  f"    {row.cost}"]
    return "\n".join(lines)


def sites_html(rows: list[SiteRow], warp: int = 0) -> str:
    head = ("<tr><th>kernel</th><th>access</th><th>index</th><th>work-group (LMAD)</th>"
            f"<th>warp {warp} (LMAD)</th><th>cost</th></tr>")
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{cell}</td>" for cell in (
            html.escape(_where(row)), html.escape(row.access + _in_kernel(row)),
            f"<code>{html.escape(row.index)}</code>"
            + "".join(f"<br><small>{html.escape(loop)}</small>" for loop in row.loops),
            f"<code>{html.escape(row.lmad_group)}</code>",
            f"<code>{html.escape(row.lmad_warp)}</code>", html.escape(row.cost))) + "</tr>"
        for row in rows)
    return f"<table class='fcl-sites'><thead>{head}</thead><tbody>{body}</tbody></table>"
