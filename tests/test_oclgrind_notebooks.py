"""The course notebooks' FCL under Oclgrind, at small sizes: no data races, out-of-bounds
accesses or uninitialized reads in any kernel a notebook runs.

Every code cell runs, in order, in one workspace per notebook whose device is Oclgrind (as the
kernel would with `%device oclgrind`): `%%expect`, `%%bench` and `%%time` cells run their FCL
once (so do `%%costs`, `%%memory` and `%%graph` cells); cells that only show code or types
(`%%opencl`, `%%il`, `%type`, ...) and settings are left out. The problem sizes the notebooks
time are cut down, so that the simulator takes seconds.
"""
import io
import json
import re
from pathlib import Path

import pytest

from course import FCL_NOTEBOOKS as NOTEBOOKS
from fcl.notebook import Workspace
from fcl.runtime.oclgrind import parse_reports

pytestmark = pytest.mark.notebooks
# Magics whose body is FCL to run.
RUN_BODY = {"expect", "bench", "time", "costs", "memory", "graph"}
# Sizes the notebooks time on a real device, and the small ones used here (multiples of every
# chunk the notebooks split them into).
SMALL = [(re.compile(r"^val n = (4194304|4000000|1048576)$", re.M), "val n = 8192"),
         (re.compile(r"^val n = 256$", re.M), "val n = 32"),
         (re.compile(r"\bgenerate 1048576\b"), "generate 8192"),  # notebook 2's points
         (re.compile(r"\bbenchmark \d+"), "benchmark 1")]


def fcl_cells(path: Path) -> list[str]:
    """The FCL that each code cell of the notebook runs, sizes cut down."""
    cells = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.startswith("%%"):
            magic, _, body = source.partition("\n")
            if magic[2:].split()[0] not in RUN_BODY:
                continue
            source = body
        source = "\n".join(line for line in source.splitlines() if not line.startswith("%"))
        for pattern, small in SMALL:
            source = pattern.sub(small, source)
        if source.strip():
            cells.append(source)
    return cells


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_kernels_are_clean_under_oclgrind(path, capfd):
    workspace = Workspace()
    workspace.settings.device = "oclgrind"
    workspace.settings.block_size = 64
    cells = fcl_cells(path)
    assert cells
    capfd.readouterr()
    for n, cell in enumerate(cells):
        workspace.execute(cell, io.StringIO(), io.StringIO(), name=f"<{path.stem} cell {n}>")
    findings = parse_reports(capfd.readouterr().err, [])
    assert not findings, "\n".join(f"{f.kernel}: {f.message}" for f in findings)
