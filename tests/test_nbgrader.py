"""The course as an nbgrader course: nbgrader (from PyPI, its own command line) generates the
student version of an FCL exercise notebook (tests/nbgrader/) and autogrades submissions, whose
`%%expect` checks, value and budget, decide the scores."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from fcl_kernel.install import write_kernel_spec

COURSE = Path(__file__).parent / "nbgrader"
FUSED = "val squaresPlusOne = forcePull<grid> (map (fn x => x * x + 1) (iota 1024))"
ANSWERS = {
    "right": FUSED,
    "wrong": FUSED.replace("x * x + 1", "x * x"),
    # The right value, with the squares written to memory and read back: two kernels.
    "over": "val squaresPlusOne = do<grid> {\n"
            "  sq <- forcePull<grid> (map (fn x => x * x) (iota 1024));\n"
            "  forcePull<grid> (map (fn x => x + 1) sq)\n  }",
}


def nbgrader(course: Path, *args: str) -> str:
    """Run the nbgrader command in the course, with the FCL kernelspec on JUPYTER_PATH."""
    # nbgrader's gradebook runs the `alembic` command, found on PATH beside this Python, as in
    # an activated environment.
    env = {**os.environ, "JUPYTER_PATH": str(write_kernel_spec(course.parent / "jupyter")),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def cell(nb, grade_id: str):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.mark.slow  # three notebooks executed by nbgrader, each in a fresh kernel: 20 to 40 s
def test_nbgrader_hides_the_solution_and_scores_value_and_budget(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(COURSE, course)
    nbgrader(course, "generate_assignment", "ps1")

    # The student's version: the solution gone, replaced by the FCL stub; the check kept.
    released = nbformat.read(course / "release" / "ps1" / "squares.ipynb", as_version=4)
    sources = "\n".join(c.source for c in released.cells)
    assert "SOLUTION" not in sources and "forcePull" not in sources
    assert cell(released, "squares").source == "-- YOUR CODE HERE"
    assert cell(released, "check_squares").source.startswith(
        "%%expect np.arange(1024) ** 2 + 1 --budget kernels<=1")

    for student, answer in ANSWERS.items():
        submitted = nbformat.from_dict(json.loads(json.dumps(released)))
        cell(submitted, "squares").source = answer
        folder = course / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        nbformat.write(submitted, folder / "squares.ipynb")
    nbgrader(course, "autograde", "ps1")

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        scores = {student: gradebook.find_grade("check_squares", "squares", "ps1", student).score
                  for student in ANSWERS}
    assert scores == {"right": 1, "wrong": 0, "over": 0}
    # Under the autograder a failed check is an error (the notebook has no --strict): the
    # wrong submission's check cell failed for its value, the other's for its budgets.
    failures = {}
    for student in ("wrong", "over"):
        graded = nbformat.read(course / "autograded" / student / "ps1" / "squares.ipynb",
                               as_version=4)
        [error] = [o for o in cell(graded, "check_squares").outputs if o.output_type == "error"]
        failures[student] = error.evalue
    assert failures == {
        "wrong": "the check failed: the value is wrong, within its 2 budgets (while nbgrader "
                 "grades or validates the notebook, a failed check is an error)",
        "over": "the check failed: the value matches numpy and misses 2 of its 2 budgets "
                "(while nbgrader grades or validates the notebook, a failed check is an "
                "error)"}
