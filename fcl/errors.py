"""Source locations and the one error type every stage raises.

Every FCL error is an `FCLError` carrying a `Span`; `render()` prints it as
`file:line:col: error: sentence`, the offending source line, a caret under the span, and hints.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field


class Source:
    """A named piece of FCL text (a file, a notebook cell, the prelude)."""

    def __init__(self, name: str, text: str):
        self.name = name
        self.text = text
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        line = bisect.bisect_right(self.line_starts, offset) - 1
        return line + 1, offset - self.line_starts[line] + 1

    def line_text(self, line: int) -> str:
        start = self.line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def __repr__(self) -> str:
        return f"Source({self.name!r})"


@dataclass(frozen=True, eq=False)
class Span:
    """A half-open character range [start, end) of a Source."""

    source: Source
    start: int
    end: int

    @property
    def line(self) -> int:
        return self.source.line_col(self.start)[0]

    @property
    def col(self) -> int:
        return self.source.line_col(self.start)[1]

    @property
    def end_line(self) -> int:
        return self.source.line_col(max(self.start, self.end - 1))[0]

    @property
    def end_col(self) -> int:
        """1-based column just past the span's last character."""
        return self.source.line_col(max(self.start, self.end - 1))[1] + 1

    @property
    def text(self) -> str:
        return self.source.text[self.start:self.end]

    def to(self, other: Span) -> Span:
        """The span from the start of self to the end of other."""
        return Span(self.source, self.start, max(self.end, other.end))

    def __str__(self) -> str:
        return f"{self.source.name}:{self.line}:{self.col}"

    def __repr__(self) -> str:
        return f"Span({self})"


@dataclass
class FCLError(Exception):
    """An error in an FCL program, located in its source."""

    message: str
    span: Span | None = None
    hints: list[str] = field(default_factory=list)
    notes: list[tuple[Span, str]] = field(default_factory=list)
    kind: str = "error"

    def __post_init__(self):
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.render()

    def render(self) -> str:
        lines = [_headline(self.span, f"{self.kind}: {self.message}")]
        if self.span is not None:
            lines += _excerpt(self.span)
        for span, note in self.notes:
            lines.append(_headline(span, f"note: {note}"))
            lines += _excerpt(span)
        lines += [f"hint: {hint}" for hint in self.hints]
        return "\n".join(lines)


def _headline(span: Span | None, text: str) -> str:
    return f"{span}: {text}" if span is not None else text


# A generated one-line program can be thousands of columns wide: a line longer than EXCERPT_MAX
# is shown as a window of EXCERPT_WIDTH columns around the span.
EXCERPT_MAX = 160
EXCERPT_WIDTH = 100
EXCERPT_LEAD = 30


def _excerpt(span: Span) -> list[str]:
    """The span's first source line with a caret line under the span, clipped to a window of
    EXCERPT_WIDTH columns ("..." marks what is cut) when the line is longer."""
    line = span.line
    text = span.source.line_text(line).replace("\t", " ")
    start = span.col
    stop = span.end_col if span.end_line == line else len(text) + 1
    width = max(1, stop - start)
    if len(text) > EXCERPT_MAX:
        left = min(start - 1 - EXCERPT_LEAD, len(text) - EXCERPT_WIDTH)
        left = max(0, min(max(left, stop - 1 - EXCERPT_WIDTH), start - 1))
        shown = text[left:left + EXCERPT_WIDTH]
        prefix = "..." if left else ""
        suffix = "..." if left + EXCERPT_WIDTH < len(text) else ""
        text = prefix + shown + suffix
        start = start - left + len(prefix)
        width = min(width, EXCERPT_WIDTH + len(prefix) - start + 1)
    gutter = f"{line:>5} | "
    caret = " " * (len(gutter) - 2) + "| " + " " * (start - 1) + "^" + "~" * (width - 1)
    return [gutter + text, caret]
