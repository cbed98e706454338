"""The course notebooks, for the tests that run or compile them: all of them, and those on the FCL
kernel (notebook 12 runs on the Python kernel, its FCL in `%%fcl` cells)."""
import json
from pathlib import Path

from fcl.errors import FCLError, Source
from fcl.pipeline import main_root
from fcl.session import Session
from fcl.types.types import TProgram, chase

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def kernel_of(path: Path) -> str:
    return json.loads(path.read_text())["metadata"]["kernelspec"]["name"]


FCL_NOTEBOOKS = [path for path in NOTEBOOKS if kernel_of(path) == "fcl"]

# The notebooks whose programs compile and check in a fraction of a second: the tests that
# compile each notebook's programs run on these in `make test-fast`, on all in `make test`.
SMALL_NOTEBOOKS = {"01-fcl-in-ten-minutes.ipynb", "02-machine-model.ipynb", "03-coalescing.ipynb",
                   "04-local-memory.ipynb", "08-lmads.ipynb"}


def small(notebook: Path) -> bool:
    return notebook.name in SMALL_NOTEBOOKS


def fcl_cells(notebook: Path) -> list[str]:
    """The FCL of a notebook's code cells, magic lines left out (a line magic's cell holds no
    program: `%type e`, `%config`)."""
    cells = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            lines = "".join(cell["source"]).split("\n")
            if lines and lines[0].startswith("%") and not lines[0].startswith("%%"):
                continue
            cells.append("\n".join(line for line in lines if not line.startswith("%")))
    return cells


def notebook_programs(notebook: Path):
    """(cell number, session, root) for each cell of the notebook that runs a program, the
    session holding the cells before it that type-check."""
    session = Session.new()
    for n, code in enumerate(fcl_cells(notebook)):
        snapshot = session.snapshot()
        try:
            decls, root = session.add_cell(Source(f"{notebook.name} cell {n}", code))
            if root is None and any(d.name == "main" for d in decls):
                root = main_root(session)
        except FCLError:
            session.restore(snapshot)  # an exercise left for the reader, or a deliberate error
            continue
        if root is not None and isinstance(chase(root.type), TProgram):
            yield n, session, root
