"""A streamed run's timeline (fcl.runtime.streams): when each chunk's data moved between host
and device and when its kernels ran, measured with profiling events; drawn as text for the
command line and with matplotlib in a notebook."""
from __future__ import annotations

from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Timeline:
    """When a run's chunks moved and ran, from profiling events: rows of (chunk, what, start
    ms, end ms) from the first one's start, `what` being "to device", "to host" or a kernel's
    name; with the chunk size, the elements streamed, the budget and the peak of device memory
    the run's arrays took (bytes)."""
    rows: list[tuple[int, str, float, float]]
    chunk: int
    elements: int
    budget: int
    peak: int
    overlap: bool

    @property
    def total_ms(self) -> float:
        return max((end for *_, end in self.rows), default=0.0)

    def busy_ms(self, moving: bool) -> float:
        """The time during which data moved (moving) or kernels ran: the union of the rows'."""
        return _covered([(start, end) for _, what, start, end in self.rows
                         if (what in MOVES) == moving])

    @property
    def overlap_ms(self) -> float:
        """How long data moved while kernels ran: moving + computing - the whole."""
        both = _covered([(start, end) for _, _, start, end in self.rows])
        return max(0.0, self.busy_ms(True) + self.busy_ms(False) - both)

    def summary(self) -> str:
        chunks = len({chunk for chunk, *_ in self.rows})
        return (f"{self.elements} elements in {chunks} chunks of {self.chunk}; "
                f"device memory: peak {self.peak} of a budget of {self.budget} bytes; "
                f"{self.total_ms:.2f} ms: moving data {self.busy_ms(True):.2f} ms, kernels "
                f"{self.busy_ms(False):.2f} ms, both at once {self.overlap_ms:.2f} ms")

    def text(self, width: int = 72) -> str:
        """A chart: a line per chunk and kind of work, `=` where data moved, `#` where kernels
        ran, on one time axis."""
        total = self.total_ms or 1.0
        lines = [f"timeline ({'overlapped' if self.overlap else 'one after another'}): "
                 + self.summary()]
        for chunk in sorted({chunk for chunk, *_ in self.rows}):
            for label, moving in (("data", True), ("kernels", False)):
                cells = [" "] * width
                for c, what, start, end in self.rows:
                    if c != chunk or (what in MOVES) != moving:
                        continue
                    first = min(width - 1, int(start / total * width))
                    last = max(first, min(width - 1, int(end / total * width - 1e-9)))
                    for k in range(first, last + 1):
                        cells[k] = "=" if moving else "#"
                lines.append(f"chunk {chunk:>3} {label:<7} |{''.join(cells)}|")
        lines.append(f"{'':17}0{'':{width - 2}}{total:.2f} ms")
        return "\n".join(lines)

    def svg(self, width: int = 640) -> str:
        """The chart as SVG, for the kernel's `%%timeline`: a row per chunk, its data moved
        (orange, above) and its kernels (blue, below); each bar's tooltip says what and when."""
        chunks, left, row, top = self.chunks(), 76, 20, 22
        scale = (width - left - 10) / (self.total_ms or 1.0)
        height = top + row * len(chunks) + 24
        parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                 'font-family="sans-serif" font-size="11">',
                 f'<text x="{left}" y="14">{escape(self.summary())}</text>']
        for number, chunk in enumerate(chunks):
            y = top + number * row
            parts.append(f'<text x="2" y="{y + 13}">chunk {chunk}</text>')
            for c, what, start, end in self.rows:
                if c != chunk:
                    continue
                moving = what in MOVES
                x, w = left + start * scale, max((end - start) * scale, 1.0)
                colour = "#ff7f0e" if moving else "#1f77b4"
                parts.append(f'<rect x="{x:.1f}" y="{y + (1 if moving else 9)}" width="{w:.1f}" '
                             f'height="8" fill="{colour}"><title>{escape(what)}: '
                             f'{start:.3f}-{end:.3f} ms</title></rect>')
        axis = top + row * len(chunks) + 4
        parts.append(f'<line x1="{left}" y1="{axis}" x2="{width - 10}" y2="{axis}" '
                     'stroke="#888"/>')
        parts.append(f'<text x="{left}" y="{axis + 14}">0</text>')
        parts.append(f'<text x="{width - 10}" y="{axis + 14}" text-anchor="end">'
                     f'{self.total_ms:.2f} ms</text></svg>')
        return "".join(parts)

    def plot(self, ax=None):
        """The timeline drawn with matplotlib (on `ax`, or a new figure's): a bar per chunk's
        data moved and kernels run. Returns the axes."""
        import matplotlib.pyplot as plt  # the `lab` extra's; only notebooks plot

        if ax is None:
            _, ax = plt.subplots(figsize=(9, 0.4 + 0.35 * len(self.chunks())))
        for row, chunk in enumerate(self.chunks()):
            for moving, colour in ((True, "tab:orange"), (False, "tab:blue")):
                spans = [(start, end - start) for c, what, start, end in self.rows
                         if c == chunk and (what in MOVES) == moving]
                ax.broken_barh(spans, (row - 0.4 if moving else row, 0.4), color=colour)
        ax.set_yticks(range(len(self.chunks())), [f"chunk {c}" for c in self.chunks()])
        ax.invert_yaxis()
        ax.set_xlabel("ms")
        ax.set_title(("overlapped" if self.overlap else "one after another")
                     + f": data moved (orange), kernels (blue); {self.total_ms:.1f} ms")
        return ax

    def chunks(self) -> list[int]:
        return sorted({chunk for chunk, *_ in self.rows})


MOVES = ("to device", "to host")


def _covered(spans: list[tuple[float, float]]) -> float:
    """The length of the union of the spans."""
    total, reach = 0.0, 0.0
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
