"""Reading rendered FCL errors: what the caret line of an excerpt marks."""
import re

from fcl.errors import FCLError

_EXCERPT = re.compile(r"^ *\d+ \| ")


def underlined(err: FCLError, excerpt: int = 0) -> str:
    """The source text that the caret line of the excerpt-th excerpt in err.render() marks."""
    return underlined_in(err.render(), excerpt)


def underlined_in(rendered: str, excerpt: int = 0) -> str:
    """The source text that the caret line of the excerpt-th excerpt of a rendered error marks."""
    lines = rendered.splitlines()
    starts = [i for i, line in enumerate(lines) if _EXCERPT.match(line)]
    source_line, caret_line = lines[starts[excerpt]], lines[starts[excerpt] + 1]
    gutter = _EXCERPT.match(source_line).end()
    assert caret_line[:gutter].strip() == "|"
    marks = caret_line[gutter:]
    assert re.fullmatch(r" *\^~*", marks), marks
    return source_line[gutter + marks.index("^"):gutter + len(marks)]
