"""Memory diagrams of one traced work-group: which work-item touches which element.

One panel per access site (a load or store in the kernel's code). Global memory is drawn as
a grid `pitch` elements wide; local memory as rows of its 32 banks. A cell takes the colour of
the work-item that touches it (hue runs from the first work-item to the last), writes are
hatched, and the chosen warp's first execution of the site is outlined in black: for global
memory with the 32-byte sectors it touches dashed in red and their 128-byte lines framed in
dark red, for local memory with the banks it hits more than once (conflicts) marked in red.
"""
from __future__ import annotations

import colorsys
import textwrap
from dataclasses import dataclass
from html import escape

import numpy as np

from fcl.analysis.access import (
    BANK_BYTES,
    BANKS,
    LINE_BYTES,
    SECTOR_BYTES,
    SiteAccesses,
    bank_words,
    check_warp,
    fit_lmad,
    same_addresses,
    sectors,
    split_by_site,
)
from fcl.analysis.symbolic import formula
from fcl.analysis.trace import KernelTrace
from fcl.errors import FCLError
from fcl.memory.relayout import RecordArray

MAX_ROWS = 12        # rows drawn per panel; the rest are left out, with a note saying so
HEAD_ROWS, TAIL_ROWS = 8, 3  # a warp touching more rows: its first and last ones
MAX_PITCH = 128
WIDTH = 900          # the grid's width in pixels at most
LABEL = 64           # room for row labels
TEXT_COLUMNS = 64    # the text fallback draws grids up to this wide
READ_COLOUR, WRITE_COLOUR = "#1f5fbf", "#c0550a"
# How a touched sector and a touched line are outlined: the line outside, heavier.
SECTOR_STYLE = ('class="fcl-sector" stroke="#d00000" stroke-width="1.5" '
                'stroke-dasharray="4 2"', 1)
LINE_STYLE = ('class="fcl-line" stroke="#800000" stroke-width="2.5"', 3)


@dataclass
class Diagram:
    svg: str
    text: str


def lane_colour(lane: int, lanes: int) -> str:
    """Hue from red (the first work-item) to magenta (the last), as #rrggbb: a diagram has
    thousands of cells, and hex is the shortest way to write each one's colour."""
    red, green, blue = colorsys.hls_to_rgb(300 * lane / max(1, lanes - 1) / 360, 0.68, 0.75)
    return f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"


@dataclass
class _Panel:
    accesses: SiteAccesses
    title: str
    summary: str
    words: np.ndarray         # per access: the position drawn (element, or bank word)
    columns: int
    highlight: np.ndarray     # bool per access: the chosen warp's first execution
    marked_columns: dict[int, int]             # local: bank -> n-way conflict
    sectors: list[tuple[int, int]]             # global: [first, last] drawn positions of the
    lines: list[tuple[int, int]]               # sectors and lines touched
    record: RecordArray | None = None          # the record fields the array holds


def memory_diagram(trace: KernelTrace, sites, array: str | None = None, warp: int = 0,
                   pitch: int | None = None, records: dict[str, RecordArray] | None = None,
                   labels: dict[str, str] | None = None) -> Diagram:
    """Panels for every load and store of the traced kernel (of `array` only, if given); an
    array of `records` shows which field each element holds, and one the program names (its
    `labels`) is called by its FCL name."""
    check_warp(warp, trace.block_size)
    if pitch is not None and not 1 <= pitch <= MAX_PITCH:
        raise FCLError(f"the pitch must be between 1 and {MAX_PITCH}, not {pitch}")
    chosen = [a for a in split_by_site(trace, sites)
              if a.site.is_memory and (array is None or a.site.array == array)]
    if not chosen:
        arrays = sorted({a.site.array for a in split_by_site(trace, sites) if a.site.array})
        what = f"array {array}" if array else "memory"
        raise FCLError(f"kernel {trace.kernel.name} does not access {what} in work-group "
                       f"{trace.group}; it accesses: {', '.join(arrays) or 'nothing'}")
    panels = [_panel(trace, a, warp, pitch, (records or {}).get(a.site.array or ""), labels)
              for a in chosen]
    heading = (f"{trace.kernel.name}: work-group {trace.group} of {trace.groups}, "
               f"{trace.block_size} work-items, warp {warp} outlined")
    # What the kernel is for, where the code alone does not say (a flattened kernel's rows: its
    # panel writing each position's row then draws the tile's segments, a colour per row).
    said = [line for note in trace.kernel.notes for line in textwrap.wrap(note, NOTE_WIDTH)]
    return Diagram(_svg(heading, panels, trace.block_size, said),
                   _text(heading, panels, said))


def _panel(trace: KernelTrace, accesses: SiteAccesses, warp: int, pitch: int | None,
           record: RecordArray | None = None, labels: dict[str, str] | None = None) -> _Panel:
    site = accesses.site
    verb = "reads" if site.kind == "load" else "combines atomically into" if site.atomic \
        else "writes"
    where = f"line {site.span.line}" if site.span else "generated code"
    index, loops = formula(site.index_expr, trace.kernel, labels) \
        if site.index_expr is not None else (site.index, [])
    named = (labels or {}).get(site.array or "")
    shown = f"{named}[{index}] ({site.array} in the kernel, {where})" if named \
        else f"{site.array}[{index}] ({where})"
    title = f"{verb} {site.space} {shown}" + \
        "".join(f", {loop}" for loop in loops)
    first = (accesses.warp_of() == warp) & (accesses.occurrence == 0)
    lanes_in_warp = int(first.sum())
    if site.space == "local":
        words = accesses.index.astype(np.int64) * accesses.elem_bytes // BANK_BYTES
        conflicts: dict[int, int] = {}  # the most words of a bank that one phase accesses
        for _, bank, count in zip(*bank_words(accesses.subset(first))):
            if count > 1:
                conflicts[int(bank)] = max(int(count), conflicts.get(int(bank), 0))
        worst = max(conflicts.values(), default=1)
        summary = (f"warp {warp}'s first access: {lanes_in_warp} work-items, "
                   + (f"{worst}-way bank conflict ({len(conflicts)} bank"
                      f"{'s' * (len(conflicts) > 1)} hit by several words)"
                      if conflicts else "no bank conflict")) + _turns(accesses, first)
        return _Panel(accesses, title, summary, words, BANKS, first, conflicts, [], [])
    words = accesses.index.astype(np.int64)
    touched, ideal, lines = sectors(accesses.subset(first))
    summary = (f"warp {warp}'s first access: {lanes_in_warp} work-items touch {touched} "
               f"sector{'s' * (touched != 1)} of 32 bytes (ideal {ideal}) in {lines} "
               f"line{'s' * (lines != 1)} of 128 bytes") + _turns(accesses, first)
    columns = pitch or _default_pitch(accesses, trace.block_size)
    return _Panel(accesses, title, summary, words, columns, first, {},
                  _ranges(words[first], SECTOR_BYTES // accesses.elem_bytes),
                  _ranges(words[first], LINE_BYTES // accesses.elem_bytes), record)


def _turns(accesses: SiteAccesses, first: np.ndarray) -> str:
    """For an atomic: how many of the warp's lanes wait on an element another lane combines
    into (they take turns)."""
    if not accesses.site.atomic:
        return ""
    waiting, worst = same_addresses(accesses.subset(first))
    return f"; {waiting} lane{'s' * (waiting != 1)} wait on another's element" + \
        (f" (at most {worst} on one)" if worst > 1 else "")


def _ranges(words: np.ndarray, per_unit: int) -> list[tuple[int, int]]:
    """[first, last] element of each unit (sector, line) of `per_unit` elements touched."""
    return [(unit * per_unit, (unit + 1) * per_unit - 1)
            for unit in sorted({int(w) // per_unit for w in words})]


def _default_pitch(accesses: SiteAccesses, lanes: int) -> int:
    """The row length that shows the pattern: the work-group's accesses as an LMAD give it
    (their largest stride above 1, as a matrix's row length); else one line of ints."""
    lmad = fit_lmad(accesses, range(lanes))
    strides = [abs(stride) for size, stride in (lmad.dims if lmad else ()) if size > 1]
    fitting = [stride for stride in strides if 1 < stride <= MAX_PITCH]
    if fitting:
        return max(fitting)
    low, high = int(accesses.index.min()), int(accesses.index.max())
    return max(1, min(high - low + 1, 32))


def _rows(panel: _Panel) -> list[int | str]:
    """The rows to draw, with notes (strings) where rows are left out. Up to MAX_ROWS rows:
    the chosen warp's first (its first HEAD_ROWS and last TAIL_ROWS when it touches more),
    then the work-group's first ones, so that a panel stays a screen tall."""
    rows = sorted({int(w) // panel.columns for w in panel.words})
    if len(rows) > MAX_ROWS:
        highlighted = sorted({int(w) // panel.columns for w in panel.words[panel.highlight]})
        if len(highlighted) > MAX_ROWS:
            rows = highlighted[:HEAD_ROWS] + highlighted[-TAIL_ROWS:]
        else:
            others = [r for r in rows if r not in set(highlighted)]
            rows = sorted(highlighted + others[:MAX_ROWS - len(highlighted)])
    touched = sorted({int(w) // panel.columns for w in panel.words})
    shown: list[int | str] = []
    for previous, row in zip([None, *rows], rows):
        if previous is not None and row != previous + 1:
            shown.append(_gap(touched, previous, row))
        shown.append(row)
    after = sum(1 for r in touched if r > rows[-1]) if rows else 0
    if after:
        shown.append(f"⋯ {after} more touched row{'s' * (after > 1)}, not drawn ⋯")
    return shown


def _gap(touched: list[int], above: int, below: int) -> str:
    """The note for the rows between two drawn ones."""
    left_out = sum(1 for r in touched if above < r < below)
    if not left_out:
        return "⋯ rows untouched ⋯"
    return f"⋯ {left_out} touched row{'s' * (left_out > 1)} not drawn ⋯"


NOTE_WIDTH = 96  # characters per line of a kernel's note under the heading


def _svg(heading: str, panels: list[_Panel], lanes: int, said: list[str]) -> str:
    body = [f'<text x="10" y="{38 + 16 * i}" fill="#555">{escape(line)}</text>'
            for i, line in enumerate(said)]
    y = 34 + 16 * len(said) + (6 if said else 0)
    width = 0
    for panel in panels:
        part, height, panel_width = _panel_svg(panel, lanes, y)
        body.append(part)
        y += height + 18
        width = max(width, panel_width)
    # Wide enough for every line of text drawn (a monospace character of 12 px is 7.2 px wide).
    longest = max(len(text) for text in [*(p.title for p in panels),
                                         *(p.summary for p in panels), *LEGEND_NOTES, *said])
    width = max(width, 520, 9 * len(heading) + 20, int(7.3 * longest) + 20,
                *(_key_width(p.record) for p in panels if p.record is not None))
    legend = _legend(lanes, 10, y)
    height = y + 38 + 16 * len(LEGEND_NOTES)
    # An opaque white background under dark text (and light-page colours): the diagram reads the
    # same in dark themes, where the output's own background is dark.
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="fcl-diagram" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" '
            f'font-size="12">'
            f'<defs><pattern id="fcl-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            f'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#000" '
            f'stroke-opacity="0.35" stroke-width="2"/></pattern></defs>'
            f'<rect width="100%" height="100%" fill="#ffffff"/>'
            f'<text x="10" y="20" font-size="14" font-weight="bold">{escape(heading)}</text>'
            + "".join(body) + legend + "</svg>")


def _panel_svg(panel: _Panel, lanes: int, top: int) -> tuple[str, int, int]:
    cell = max(6, min(18, (WIDTH - LABEL) // panel.columns))
    colour = READ_COLOUR if panel.accesses.site.kind == "load" else WRITE_COLOUR
    out = [f'<text x="10" y="{top + 12}" fill="{colour}" font-weight="bold">'
           f'{escape(panel.title)}</text>',
           f'<text x="10" y="{top + 28}">{escape(panel.summary)}</text>']
    grid_top = top + 40
    if panel.record is not None:
        out.append(_fields_key(panel.record, top + 44))
        grid_top += 16
    if panel.accesses.site.space == "local":
        for bank in range(BANKS):
            x = LABEL + bank * cell
            marked = bank in panel.marked_columns
            out.append(f'<text x="{x + cell / 2}" y="{grid_top + 9}" font-size="8" '
                       f'text-anchor="middle" fill="{"#d00000" if marked else "#666"}">'
                       f'{f"{panel.marked_columns[bank]}×" if marked else bank}</text>')
        grid_top += 14
    owners: dict[int, list[int]] = {}
    for word, lane in zip(panel.words.tolist(), panel.accesses.lane.tolist()):
        owners.setdefault(word, []).append(lane)
    outlined = set(panel.words[panel.highlight].tolist())
    hatched = panel.accesses.site.kind == "store"
    y = grid_top
    row_y: dict[int, int] = {}
    grid = f"fcl-grid-{cell}-{panel.columns}"
    for row in _rows(panel):
        if isinstance(row, str):  # clear of the frames drawn around the rows above and below
            out.append(f'<text x="{LABEL}" y="{y + 13}" font-size="10" fill="#666">{row}</text>')
            y += 20
            continue
        row_y[row] = y
        out.append(f'<text x="{LABEL - 4}" y="{y + cell * 0.75}" font-size="10" '
                   f'text-anchor="end" fill="#555">{row * panel.columns}</text>')
        # Untouched cells are the row's background; touched ones are drawn over it.
        out.append(f'<rect x="{LABEL}" y="{y}" width="{panel.columns * cell}" height="{cell}" '
                   f'fill="url(#{grid})"/>')
        if panel.record is not None:
            out.append(_field_tints(panel.record, row, panel.columns, cell, y))
        run_start = None
        for column in range(panel.columns + 1):
            word = row * panel.columns + column
            touched = owners.get(word) if column < panel.columns else None
            if hatched and touched is None and run_start is not None:  # one hatch per run
                out.append(f'<rect x="{LABEL + run_start * cell}" y="{y}" '
                           f'width="{(column - run_start) * cell}" height="{cell}" '
                           f'fill="url(#fcl-hatch)" pointer-events="none"/>')
                run_start = None
            if touched is None:
                continue
            if run_start is None:
                run_start = column
            x = LABEL + column * cell
            others = sorted(set(touched))
            tip = f"element {word}{_field_tip(panel.record, word)}: " \
                f"work-item{'s' * (len(others) > 1)} " + \
                ", ".join(map(str, others[:8])) + (" …" if len(others) > 8 else "")
            fill = lane_colour(others[0], lanes)
            if word not in outlined:
                out.append(f'<use href="#fcl-cell-{cell}" x="{x}" y="{y}" fill="{fill}">'
                           f'<title>{escape(tip)}</title></use>')
                continue
            stroke = "#d00000" if panel.accesses.site.space == "local" \
                and word % BANKS in panel.marked_columns else "#000"
            out.append(f'<rect x="{x}" y="{y}" width="{cell}" height="{cell}" fill="{fill}" '
                       f'stroke="{stroke}" stroke-width="{2.5 if stroke != "#000" else 2}">'
                       f'<title>{escape(tip)}</title></rect>')
        y += cell + 1
    for ranges, (style, margin) in ((panel.lines, LINE_STYLE), (panel.sectors, SECTOR_STYLE)):
        for first, last in ranges:
            for row in range(first // panel.columns, last // panel.columns + 1):
                if row not in row_y:
                    continue
                start = max(first, row * panel.columns) - row * panel.columns
                end = min(last, (row + 1) * panel.columns - 1) - row * panel.columns
                out.append(f'<rect x="{LABEL + start * cell - margin}" y="{row_y[row] - margin}" '
                           f'width="{(end - start + 1) * cell + 2 * margin}" '
                           f'height="{cell + 2 * margin}" fill="none" {style}/>')
    width = LABEL + panel.columns * cell + 20
    return _cell_defs(cell, panel.columns) + "".join(out), y - top, width


# A field's tint under untouched elements: plain colours, light beside the work-items' hues.
FIELD_COLOURS = ("#2166ac", "#1b7a5a", "#5e3c99", "#8c8c8c", "#b35806", "#222222", "#c51b7d")
TINT = 0.3


def _field_colour(field: int) -> str:
    return FIELD_COLOURS[field % len(FIELD_COLOURS)]


def _fields_key(record: RecordArray, y: int) -> str:
    """What the array holds, and the tint of each field's elements."""
    text = f"{record.describe()}; elements tinted by field:"
    key = [f'<text x="10" y="{y}" fill="#555">{escape(text)}</text>']
    x = 10 + int(7.3 * len(text)) + 8
    for f in range(record.fields):
        key.append(f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{_field_colour(f)}" '
                   f'fill-opacity="{TINT}"/><text x="{x + 13}" y="{y}">{f}</text>')
        x += 13 + 8 * len(str(f)) + 8
    return "".join(key)


def _key_width(record: RecordArray) -> int:
    return int(7.3 * len(record.describe())) + 260 + 30 * record.fields


def _field_tints(record: RecordArray, row: int, columns: int, cell: int, y: int) -> str:
    """The row's elements tinted by the field they hold, one rectangle per run of a field."""
    tints, start = [], 0
    for column in range(1, columns + 1):
        here = record.field_at(row * columns + start)
        if column < columns and record.field_at(row * columns + column) == here:
            continue
        tints.append(f'<rect x="{LABEL + start * cell}" y="{y}" width="{(column - start) * cell}" '
                     f'height="{cell}" fill="{_field_colour(here)}" fill-opacity="{TINT}" '
                     f'pointer-events="none"/>')
        start = column
    return "".join(tints)


def _field_tip(record: RecordArray | None, element: int) -> str:
    if record is None:
        return ""
    return f", field {record.field_at(element)} of record {record.record_at(element)}"


def _cell_defs(cell: int, columns: int) -> str:
    """A touched cell (filled by its user) and the pattern of untouched cells, per size.
    Ids name their content, so diagrams on one page may repeat them."""
    tile = f"{1 / columns:.8f}"  # one cell of the row it fills
    return (f'<defs><rect id="fcl-cell-{cell}" width="{cell}" height="{cell}" stroke="#ffffff" '
            f'stroke-width="0.5"/><pattern id="fcl-grid-{cell}-{columns}" '
            f'patternUnits="objectBoundingBox" width="{tile}" height="1"><rect width="{cell}" '
            f'height="{cell}" fill="#fafafa" stroke="#dddddd" stroke-width="0.5"/>'
            '</pattern></defs>')


def _legend(lanes: int, x: int, y: int) -> str:
    steps = 24
    bar = "".join(f'<rect x="{x + 90 + i * 8}" y="{y}" width="8" height="12" '
                  f'fill="{lane_colour(round(i * (lanes - 1) / (steps - 1)), lanes)}"/>'
                  for i in range(steps))
    notes = "".join(f'<text x="{x}" y="{y + 28 + 16 * i}" fill="#555">{escape(note)}</text>'
                    for i, note in enumerate(LEGEND_NOTES))
    return (f'<text x="{x}" y="{y + 10}">work-item 0</text>{bar}'
            f'<text x="{x + 96 + steps * 8}" y="{y + 10}">{lanes - 1}</text>' + notes)


LEGEND_NOTES = ("hatched: written · black outline: the warp's first access",
                "red dashes: a 32-byte sector it touches · dark red frame: a 128-byte line",
                "red bank number: a conflict")


def _text(heading: str, panels: list[_Panel], said: list[str]) -> str:
    lines = [heading, *said]
    for panel in panels:
        lines += ["", panel.title, "  " + panel.summary]
        if panel.record is not None:
            lines.append(f"  {panel.record.describe()}; its fields under each row")
        if panel.columns > TEXT_COLUMNS:
            continue
        outlined = set(panel.words[panel.highlight].tolist())
        touched = set(panel.words.tolist())
        for row in _rows(panel):
            if isinstance(row, str):
                lines.append(f"         {row}")
                continue
            cells = "".join("#" if w in outlined else "o" if w in touched else "."
                            for w in range(row * panel.columns, (row + 1) * panel.columns))
            lines.append(f"  {row * panel.columns:>6} {cells}")
            if panel.record is not None:
                lines.append("  field  " + "".join(
                    str(panel.record.field_at(w) % 10)
                    for w in range(row * panel.columns, (row + 1) * panel.columns)))
    lines += ["", "# the warp's first access, o other work-items, . untouched"]
    return "\n".join(lines)
