"""One row per load and store of each traced kernel: its index as a formula, the LMADs of the
traced work-group's and one warp's accesses (when affine), and what a warp access costs."""
from __future__ import annotations

import html
from dataclasses import dataclass

from fcl.analysis.access import summarize
from fcl.analysis.symbolic import formula
from fcl.analysis.trace import Trace


@dataclass
class SiteRow:
    kernel: str
    line: int | None
    access: str            # e.g. "reads global arr_1"
    index: str             # the index formula, in group, item and loop counters
    loops: list[str]       # what the loop counters in it run over
    lmad_group: str        # the traced work-group's accesses as an LMAD, or why not
    lmad_warp: str
    cost: str              # transactions per warp access, or bank conflicts


def site_rows(trace: Trace, warp: int = 0) -> list[SiteRow]:
    rows = []
    for traced in trace.kernels:
        for s in summarize(traced, trace.sites, warp):
            site = s.site
            index, loops = formula(site.index_expr, traced.kernel) if site.index_expr is not None \
                else (site.index or "?", [])
            not_affine = f"not one LMAD ({s.accesses} accesses traced: see %%memory)"
            if site.space == "global":
                each = s.transactions / max(1, s.warp_accesses)
                cost = (f"{each:.3g} transaction{'s' * (each != 1)} per warp access "
                        f"(ideal {s.ideal_transactions / max(1, s.warp_accesses):.3g})")
            else:
                cost = (f"{s.worst_conflict}-way bank conflict, {s.bank_conflicts} extra accesses"
                        if s.bank_conflicts else "no bank conflict")
            rows.append(SiteRow(
                traced.kernel.name, site.span.line if site.span else None,
                f"{'reads' if site.kind == 'load' else 'writes'} {site.space} {site.array}",
                index, loops, str(s.lmad_group) if s.lmad_group else not_affine,
                str(s.lmad_warp) if s.lmad_warp else not_affine, cost))
    return rows


def _where(row: SiteRow) -> str:
    return f"{row.kernel}, line {row.line}" if row.line else row.kernel


def sites_text(rows: list[SiteRow], warp: int = 0) -> str:
    lines = []
    for row in rows:
        lines += [f"{_where(row)}: {row.access}[{row.index}]"]
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
            html.escape(_where(row)), html.escape(row.access),
            f"<code>{html.escape(row.index)}</code>"
            + "".join(f"<br><small>{html.escape(loop)}</small>" for loop in row.loops),
            f"<code>{html.escape(row.lmad_group)}</code>",
            f"<code>{html.escape(row.lmad_warp)}</code>", html.escape(row.cost))) + "</tr>"
        for row in rows)
    return f"<table class='fcl-sites'><thead>{head}</thead><tbody>{body}</tbody></table>"

