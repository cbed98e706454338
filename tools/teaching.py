"""The course for a class (`make teaching`): each notebook as an nbgrader assignment, whose
student version nbgrader generates with the solutions and the diagrams of answers removed and
whose checks it autogrades, and the answer keys apart, as Markdown.

In the course notebooks an exercise is a code cell tagged `exercise` (a `%%expect` check and
starter code), followed by cells tagged `solution`: the answer, and what shows it (a diagram,
or a paragraph). For nbgrader, an exercise with a check becomes two cells: the student's answer,
`val answerN = ...`, between nbgrader's solution markers (the starter code kept above them as
comments), and a locked test cell, the same check of `answerN`; the solution cells go. Under the
autograder a failed check is an error (fcl_kernel.expect), which scores 0.

    python -m tools.teaching OUT   writes OUT/source/NN/NN.ipynb, OUT/nbgrader_config.py and
                                   OUT/answers/NN.md; then `nbgrader generate_assignment NN`
                                   in OUT makes OUT/release/NN/NN.ipynb
    python -m tools.teaching OUT --submit-answers NN ...
                                   hands in each released NN with the key's answers, as student
                                   `answers`: `nbgrader autograde NN` must give full marks
    python -m tools.teaching OUT --check-scores NN ...
                                   says whether it did (`make teaching-check` runs all three)
"""
from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from fcl.errors import FCLError, Source
from fcl.syntax.parser import cell_expression_line, parse_cell

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
CONFIG = ROOT / "tests" / "nbgrader" / "nbgrader_config.py"


@dataclass
class Exercise:
    number: int           # in the notebook, from 1
    title: str            # the heading above it
    statement: str        # the text just above it: what to do
    cell: NotebookNode    # the starter
    solutions: list[NotebookNode]

    @property
    def check(self) -> str | None:
        """The `%%expect` line of its answer, if it has one."""
        first = self.solutions[0].source.split("\n", 1)[0] if self.solutions else ""
        return first if first.startswith("%%expect") and self.solutions[0].cell_type == "code" \
            else None


def tags(cell: NotebookNode) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def exercises(nb: NotebookNode) -> list[Exercise]:
    found: list[Exercise] = []
    title = statement = ""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and not tags(cell):
            statement = cell.source
            if cell.source.startswith("#"):
                title = cell.source.split("\n", 1)[0].lstrip("# ").strip()
        if "exercise" in tags(cell):
            found.append(Exercise(len(found) + 1, title, statement, cell, []))
        elif "solution" in tags(cell) and found:
            found[-1].solutions.append(cell)
    return found


def answer_code(exercise: Exercise, name: str) -> str:
    """The answer's definitions, its expression bound to `name`."""
    body = exercise.solutions[0].source.split("\n", 1)[1].strip("\n")
    try:
        module = parse_cell(Source("answer", body))
    except FCLError as error:
        raise SystemExit(f"exercise {exercise.number} ({exercise.title}): "
                         f"{error.render()}") from None
    first = cell_expression_line(Source("answer", body))
    if module.expr is None or first is None:
        raise SystemExit(f"exercise {exercise.number} ({exercise.title}): no expression to check")
    lines = body.split("\n")
    start = first - 1
    expression = "\n".join("  " + line if line else line for line in lines[start:])
    return "\n".join(lines[:start] + [f"val {name} ="] + [expression])


def starter_comment(exercise: Exercise) -> str:
    starter = exercise.cell.source.split("\n", 1)[1].strip("\n") \
        if exercise.cell.source.startswith("%%") else exercise.cell.source
    return "\n".join(f"-- {line}".rstrip() for line in starter.split("\n"))


def assignment(nb: NotebookNode, stem: str) -> NotebookNode:
    """The notebook as nbgrader's source version of an assignment."""
    out = nbformat.from_dict(nbformat.v4.new_notebook(metadata=nb.metadata).copy())
    by_cell = {id(e.cell): e for e in exercises(nb)}
    for cell in nb.cells:
        if "solution" in tags(cell):
            continue  # the answer, or a diagram or paragraph that shows it
        exercise = by_cell.get(id(cell))
        if exercise is None or exercise.check is None:
            out.cells.append(_plain_copy(cell))
            continue
        name = f"answer{exercise.number}"
        answer = nbformat.v4.new_code_cell(
            f"-- Exercise {exercise.number}: define `{name}`. The starter code:\n"
            f"{starter_comment(exercise)}\n"
            f"-- BEGIN SOLUTION\n{answer_code(exercise, name)}\n-- END SOLUTION")
        answer.metadata["nbgrader"] = _grading(f"{stem}_answer{exercise.number}", solution=True)
        test = nbformat.v4.new_code_cell(f"{exercise.check}\n{name}")
        test.metadata["nbgrader"] = _grading(f"{stem}_check{exercise.number}", grade=True)
        out.cells += [answer, test]
    return out


def _plain_copy(cell: NotebookNode) -> NotebookNode:
    copy = nbformat.from_dict(dict(cell))
    copy.metadata = {k: v for k, v in cell.metadata.items() if k not in ("tags", "jupyter")}
    if copy.cell_type == "code":
        copy.outputs, copy.execution_count = [], None
    return copy


def _grading(grade_id: str, solution: bool = False, grade: bool = False) -> dict:
    marks = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
             "solution": solution, "task": False}
    return {**marks, "points": 1} if grade else marks


def answer_key(nb: NotebookNode, title: str) -> str:
    """The notebook's exercises with their answers, for the teacher."""
    parts = [f"# Answers: {title}\n"]
    for exercise in exercises(nb):
        parts.append(f"## Exercise {exercise.number} ({exercise.title})\n")
        parts.append("> " + exercise.statement.replace("\n", "\n> ") + "\n")
        for cell in exercise.solutions:
            parts.append(f"```\n{cell.source}\n```\n" if cell.cell_type == "code"
                         else f"{cell.source}\n")
    return "\n".join(parts)


def write_course(out: Path) -> list[str]:
    """The nbgrader course and the answer keys under `out`; the assignments' names."""
    names = []
    shutil.copy(CONFIG, out / "nbgrader_config.py")
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if not exercises(nb):
            continue
        stem = path.stem.split("-", 1)[0]
        folder = out / "source" / stem
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(assignment(nb, stem), folder / f"{stem}.ipynb")
        (out / "answers").mkdir(exist_ok=True)
        title = nb.cells[0].source.split("\n", 1)[0].lstrip("# ").strip()
        (out / "answers" / f"{stem}.md").write_text(answer_key(nb, title))
        names.append(stem)
    return names


def submit_answers(out: Path, stem: str, student: str = "answers") -> None:
    """The released assignment `stem` handed in by `student` with the answer key's answers,
    for `nbgrader autograde` to score (full marks, if the key and the checks agree)."""
    released = nbformat.read(out / "release" / stem / f"{stem}.ipynb", as_version=4)
    source = nbformat.read(out / "source" / stem / f"{stem}.ipynb", as_version=4)
    right = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
             if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in released.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in right:
            cell.source = right[grade_id]
    folder = out / "submitted" / student / stem
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(released, folder / f"{stem}.ipynb")


def answer_scores(out: Path, stems: list[str], student: str = "answers"
                  ) -> dict[str, tuple[float, float]]:
    """Each autograded assignment's (score, most possible) for `student`."""
    from nbgrader.api import Gradebook  # only the graders need nbgrader
    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gradebook:
        return {stem: (notebook.score, notebook.max_score) for stem in stems
                for notebook in [gradebook.find_submission_notebook(stem, stem, student)]}


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "build/teaching")
    if len(sys.argv) > 2 and sys.argv[2] == "--submit-answers":  # after generate_assignment
        for stem in sys.argv[3:]:
            submit_answers(target, stem)
        sys.exit(0)
    if len(sys.argv) > 2 and sys.argv[2] == "--check-scores":  # after autograde
        scores = answer_scores(target, sys.argv[3:])
        for stem, (score, most) in scores.items():
            print(f"{stem}: {score:g} of {most:g}{'' if score == most else '  ✗'}")
        sys.exit(0 if all(score == most for score, most in scores.values()) else 1)
    target.mkdir(parents=True, exist_ok=True)
    print(" ".join(write_course(target)))
