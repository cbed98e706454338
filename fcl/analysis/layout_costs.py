"""The %%costs section on arrays of records: each kernel in each layout (sectors per warp
request and predicted GPU time), the program in each, and why the compiler chose its plan
(fcl.memory.layouts)."""
from __future__ import annotations

import html

from fcl.analysis.costs import KernelCosts, aligned
from fcl.analysis.predict import time_text
from fcl.memory.layouts import NAMES, UNKNOWN, Choice


def _sectors(value: float, requests: int) -> str:
    return "–" if not requests else f"{value:.3g}"


def _cell(kernels: list[KernelCosts]) -> str:
    """The kernels of one FCL line: sectors per warp load / store request, predicted time."""
    if not kernels:
        return "no kernel"
    sectors = " + ".join(f"{_sectors(c.load_sectors, c.load_requests)}/"
                         f"{_sectors(c.store_sectors, c.store_requests)}" for c in kernels)
    times = [c.predicted.time_s if c.predicted else None for c in kernels]
    time = None if None in times else sum(t for t in times if t is not None)
    return f"{sectors}  {time_text(time)}"


def layout_table(variants: dict[str, tuple[list[KernelCosts], float | None]]) -> list[list[str]]:
    """Rows: the kernels of each FCL line, then the program; a column per variant."""
    lines = sorted({c.line or 0 for costs, _ in variants.values() for c in costs})
    rows = [["kernels of line", *variants]]
    for line in lines:
        rows.append([str(line), *(_cell([c for c in costs if (c.line or 0) == line])
                                  for costs, _ in variants.values())])
    rows.append(["the program", *(time_text(total) for _, total in variants.values())])
    return rows


def plan_text(choices: list[Choice]) -> str:
    """What was chosen for each array, and the sectors behind it."""
    said = []
    for c in choices:
        plan = f"{c.group} as {NAMES[c.layout]}"
        if c.copy is not None:
            lines = ", ".join(str(line) for line in c.reader_lines)
            plan += (f" with an {NAMES[c.copy]} copy for the kernel"
                     f"{'s at lines' if len(c.reader_lines) > 1 else ' at line'} {lines}")
        each = ", ".join(f"{NAMES[name]} {count:,}" for name, count in c.sectors.items())
        copy = f", with the copy {c.with_copy:,} ({c.moved:,} to make it)" if c.copy else ""
        said.append(f"{plan} (32-byte sectors its warps touch in a run: {each}{copy})")
    return "; ".join(said)


def layout_section(choices: list[Choice], gpu: str,
                   variants: dict[str, tuple[list[KernelCosts], float | None]]
                   ) -> tuple[str, str]:
    """Text and HTML: the plan and why, then the table of kernels per layout."""
    head = (f"Layouts of the arrays of records: {plan_text(choices)}, counting {UNKNOWN:,} "
            f"for a size the compiler cannot know. Each kernel on the {gpu} with them in each "
            f"layout (sectors per warp load/store request, predicted time):")
    rows = layout_table(variants)
    text = "\n".join("  " + line for line in aligned(rows))
    cells = "".join(
        "<tr>" + "".join(f"<{'th' if r == 0 or i == 0 else 'td'} style='text-align:"
                         f"{'left' if i == 0 else 'right'}'>{html.escape(cell)}</"
                         f"{'th' if r == 0 or i == 0 else 'td'}>" for i, cell in enumerate(row))
        + "</tr>" for r, row in enumerate(rows))
    return (f"{head}\n{text}",
            f"<p>{html.escape(head)}</p><table class='fcl-layouts'>{cells}</table>")
