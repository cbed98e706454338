"""Every course notebook in notebooks/ runs top to bottom on the `fcl` kernel without an error.

The notebooks are executed with nbclient, as `jupyter nbconvert --execute` would, on the default
OpenCL device (PoCL on a machine without a GPU). Besides error outputs, the self-checking
exercises are checked: a `%%expect` cell must show ✓, except the exercise cells themselves
(tagged `exercise`), which hold the student's starting point and are expected to show ✗.
"""
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
from course import NOTEBOOKS, kernel_of  # noqa: E402

# The kernels run by the kernelspec tests/kernels.py puts on JUPYTER_PATH (see conftest.py).


def run_notebook(path: Path) -> nbformat.NotebookNode:
    starts = 2
    while True:
        nb = nbformat.read(path, as_version=4)
        client = NotebookClient(nb, kernel_name=kernel_of(path), timeout=300,
                                startup_timeout=120, allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}})
        try:
            client.execute()
            return nb
        except RuntimeError as error:
            # jupyter_client picks a kernel's TCP ports before the kernel binds them: with two
            # test processes starting kernels, another may take one meanwhile ("Address
            # already in use"), and the kernel dies at once. That start is tried again.
            starts -= 1
            if not starts or "died before replying to kernel_info" not in str(error):
                raise


def texts(cell) -> list[str]:
    found = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            found.append(output["text"])
        elif "data" in output:
            found.append(output["data"].get("text/plain", ""))
    return found


def test_there_are_course_notebooks():
    names = [p.name for p in NOTEBOOKS]
    # The course, in order (issues 6, 17 and 19): eight lessons, the puzzles, divergence and
    # occupancy, then FCL from Python; none left in drafts.
    assert names == ["01-fcl-in-ten-minutes.ipynb", "02-machine-model.ipynb",
                     "03-coalescing.ipynb", "04-local-memory.ipynb", "05-reduction.ipynb",
                     "06-scan.ipynb", "07-matmul.ipynb", "08-lmads.ipynb", "09-puzzles.ipynb",
                     "10-divergence.ipynb", "11-occupancy.ipynb", "12-fcl-from-python.ipynb"]
    assert not (ROOT / "notebooks" / "drafts").exists()
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata.kernelspec.name == ("python3" if path.stem == "12-fcl-from-python"
                                               else "fcl")
        # Committed without outputs: they are produced on the reader's machine.
        assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), path.name


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_without_errors(path):
    nb = run_notebook(path)
    problems = []
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type != "code":
            continue
        where = f"{path.name}, cell {number}:\n{cell.source}\n"
        for output in cell.outputs:
            if output["output_type"] == "error":
                problems.append(where + "\n".join(output["traceback"]))
        # What the lesson's text says a cell shows (e.g. a compiler step's diff), it shows.
        shown = "\n".join(texts(cell))
        problems += [where + f"does not show {claim!r}"
                     for claim in cell.metadata.get("fcl_shows", []) if claim not in shown]
        tags = cell.metadata.get("tags", [])
        if cell.source.startswith("%%expect"):
            verdicts = [t for t in texts(cell) if t.startswith(("✓", "✗"))]
            if "exercise" in tags:
                assert verdicts, where + "no verdict"
            elif not (verdicts and verdicts[-1].startswith("✓")):
                problems.append(where + f"expected ✓, got {verdicts}")
    problems += unprinted_figures(path, nb)
    assert not problems, "\n\n".join(problems)


# The µs figures a notebook's text quotes that none of its cells prints: times measured on an
# NVIDIA H100 (a lent GPU, bench/README.md's "NVIDIA H100" run), figures worked out in the text
# (a latency times a count), and predictions for sizes, work-group sizes or GPUs the notebook
# describes but does not run. Every other figure in the text must be one its outputs show: a
# prediction the cost model no longer makes, or a number mistyped, fails here.
NOT_PRINTED = {
    "02-machine-model": {"34", "10.8"},  # the two programs it times, predicted on an H100
    "03-coalescing": {"65.1", "422", "429",  # the copy of 16M ints, predicted on an H100 and a T4
                      "7.6", "8.1", "11.3", "19.2",  # strided reads, measured on an H100
                      "4.9", "6.1", "8.6"},  # ... and predicted for them
    "05-reduction": {"27",  # version 4, measured on an H100
                     # the exercise's other k, which it leaves to try
                     "29.5", "25.9", "22.3", "25.4"},
    "06-scan": {"20", "26", "18", "41"},  # measured on an H100
    "11-occupancy": {"15.5", "128", "5", "32",  # worked out in the text
                     "157", "108", "18.8", "112",  # other work-group sizes, and the T4's column
                     "55.6", "8.01", "11.1"},  # the variants' table beyond the cells run
}


def unprinted_figures(path: Path, nb) -> list[str]:
    outputs = " ".join(text for cell in nb.cells if cell.cell_type == "code"
                       for text in texts(cell))
    printed = set(re.findall(r"(\d+(?:\.\d+)?) µs", outputs))
    allowed = NOT_PRINTED.get(path.stem, set())
    return [f"{path.name}, cell {number}: {figure} µs is quoted but no cell prints it"
            for number, cell in enumerate(nb.cells, 1) if cell.cell_type == "markdown"
            for figure in re.findall(r"(\d+(?:\.\d+)?) µs", cell.source)
            if figure not in printed | allowed]
