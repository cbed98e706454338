"""The course notebooks, for the tests that run or compile them: all of them, and those on the FCL
kernel (notebook 12 runs on the Python kernel, its FCL in `%%fcl` cells)."""
import json
from pathlib import Path

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def kernel_of(path: Path) -> str:
    return json.loads(path.read_text())["metadata"]["kernelspec"]["name"]


FCL_NOTEBOOKS = [path for path in NOTEBOOKS if kernel_of(path) == "fcl"]
