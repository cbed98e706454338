"""Completion, inspection and is_complete for the kernel (names come from the workspace)."""
from __future__ import annotations

import re

from fcl.notebook import Workspace
from fcl.syntax.lexer import KEYWORDS, SOFT_KEYWORDS
from fcl.syntax.parser import cell_status

WORD = re.compile(r"[#A-Za-z][A-Za-z0-9_#']*$")
MAGIC = re.compile(r"^(%%?)([A-Za-z]*)$")


def completions(workspace: Workspace, magics: list[str], code: str,
                cursor: int) -> tuple[int, list[str]]:
    """(where the completed word starts, the candidates)."""
    line_start = code.rfind("\n", 0, cursor) + 1
    line = code[line_start:cursor]
    magic = MAGIC.match(line)
    if magic:
        prefix = magic.group(2)
        return line_start + len(magic.group(1)), [m for m in magics if m.startswith(prefix)]
    word = WORD.search(code[:cursor])
    prefix = word.group() if word else ""
    names = set(workspace.names()) | set(KEYWORDS) | set(SOFT_KEYWORDS)
    return cursor - len(prefix), sorted(n for n in names if n.startswith(prefix))


def word_at(code: str, cursor: int) -> str | None:
    """The name the cursor is on or just after."""
    for match in re.finditer(r"%{0,2}[#A-Za-z][A-Za-z0-9_#']*", code):
        if match.start() <= cursor <= match.end():
            return match.group()
    return None


def is_complete(code: str) -> str:
    if code.lstrip().startswith("%"):
        # A magic line is complete; a cell magic's body is checked when it runs.
        return "complete"
    return cell_status(code)
