"""The course notebooks, for the tests that run or compile them: all of them, and those on the FCL
kernel (notebook 12 runs on the Python kernel, its FCL in `%%fcl` cells)."""
import json
from pathlib import Path

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
