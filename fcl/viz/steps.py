"""The compiler's steps side by side: what each one changed, as a diff against the one before.

As Compiler Explorer's optimisation-pipeline view: the program after lowering in full, then one
entry per step run (a fixpoint's steps once per round) with the lines it removed and added, steps
that changed nothing folded into one line, and the OpenCL C at the end. For `%%steps` and
`fcl compile --after` (one stage only).
"""
from __future__ import annotations

import difflib
import html
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from fcl.pipeline import EMIT, stage_purposes
from fcl.steps import FIXPOINTS

_PURPOSES = {name.strip(): purpose for name, purpose in stage_purposes()}
CONTEXT = 2  # unchanged lines shown around each change


@dataclass
class StepChange:
    label: str          # the step's name, with its round for a fixpoint's step run again
    purpose: str
    text: str           # the program after the step
    diff: list[str]     # unified diff lines against the stage before (empty: unchanged)
    added: int
    removed: int
    whole: bool = False  # shown in full (the first stage, the OpenCL C)


def step_changes(views: list[tuple[str, str]]) -> list[StepChange]:
    """Each stage of `views` ((name, text), as pipeline.compile_steps gives) with what it
    changed. A fixpoint's own entry (the program once its rounds are done) repeats its last
    step's, and is left out."""
    runs: Counter[str] = Counter()
    changes: list[StepChange] = []
    before: str | None = None
    for name, text in views:
        if name in FIXPOINTS:
            continue
        runs[name] += 1
        label = name if runs[name] == 1 else f"{name} (round {runs[name]})"
        if before is None or name == EMIT:
            changes.append(StepChange(label, _PURPOSES.get(name, ""), text, [], 0, 0, True))
        else:
            diff = list(difflib.unified_diff(before.splitlines(), text.splitlines(), lineterm="",
                                             n=CONTEXT))[2:]  # no file header lines
            added = sum(1 for line in diff if line.startswith("+"))
            removed = sum(1 for line in diff if line.startswith("-"))
            changes.append(StepChange(label, _PURPOSES.get(name, ""), text, diff, added,
                                      removed))
        if name != EMIT:
            before = text
    return changes


def _folded(changes: list[StepChange]) -> Iterator[StepChange | list[str]]:
    """The changes in order, each run of steps that changed nothing as the list of their
    labels."""
    quiet: list[str] = []
    for change in changes:
        if not change.whole and not change.diff:
            quiet.append(change.label)
            continue
        if quiet:
            yield quiet
            quiet = []
        yield change
    if quiet:
        yield quiet


def steps_text(changes: list[StepChange]) -> str:
    """Plain text: each changed step's diff, unchanged steps named on one line."""
    out: list[str] = []
    for part in _folded(changes):
        if isinstance(part, list):
            out.append(f"== unchanged: {', '.join(part)}")
        elif part.whole:
            out.append(f"== {part.label}: {part.purpose}\n{part.text}")
        else:
            out.append(f"== {part.label}: {part.purpose} (+{part.added} -{part.removed})\n"
                       + "\n".join(part.diff))
    return "\n\n".join(out)


_STYLE = """<style>
.fcl-steps details { margin: 2px 0; }
.fcl-steps summary { cursor: pointer; font-family: var(--jp-ui-font-family, sans-serif); }
.fcl-steps .purpose { opacity: 0.7; }
.fcl-steps .quiet { opacity: 0.6; margin: 2px 0 2px 1.2em; }
.fcl-steps pre { margin: 2px 0 6px 1.2em; font-size: 90%; }
.fcl-steps .add { background: rgba(46, 160, 67, 0.18); display: block; }
.fcl-steps .del { background: rgba(248, 81, 73, 0.18); display: block; }
.fcl-steps .hunk { opacity: 0.6; display: block; }
</style>"""


def steps_html(changes: list[StepChange]) -> str:
    """HTML: one collapsible entry per step that changed the program (its diff, with added and
    removed lines coloured), unchanged steps folded into one line; the first stage and the
    OpenCL C in full, closed."""
    out = [_STYLE, "<div class='fcl-steps'>"]
    for part in _folded(changes):
        if isinstance(part, list):
            out.append(f"<div class='quiet'>unchanged: {html.escape(', '.join(part))}</div>")
            continue
        counts = "" if part.whole else f" <code>+{part.added} −{part.removed}</code>"
        body = html.escape(part.text) if part.whole else _diff_html(part.diff)
        out.append(f"<details><summary><b>{html.escape(part.label)}</b>{counts} "
                   f"<span class='purpose'>{html.escape(part.purpose)}</span></summary>"
                   f"<pre>{body}</pre></details>")
    out.append("</div>")
    return "".join(out)


def _diff_html(diff: list[str]) -> str:
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return "".join(f"<span class='{kinds[line[:1]]}'>{html.escape(line)}</span>"
                   if line[:1] in kinds else html.escape(line) + "\n" for line in diff)
