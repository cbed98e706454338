"""Generated kernels under Oclgrind: no data races, out-of-bounds accesses or uninitialized reads.

Each check runs `fcl run --check` (a child process on the Oclgrind platform), at small sizes.
"""
import subprocess
import sys
from pathlib import Path

import pytest

import test_opencl

PROGRAMS = {
    "block-while": test_opencl.CHUNKED_SUMS,
    "thread-seqfor": test_opencl.THREAD_SCANS,
    "tiled-transpose": test_opencl.TILED_TRANSPOSE,
    "doubles-power": test_opencl.DOUBLES_AND_POWER,
    "grid-while-host-scalar": test_opencl.GRID_LOOP_SCALAR,
}


def check(tmp_path: Path, text: str, *flags: str) -> subprocess.CompletedProcess:
    src = tmp_path / "prog.fcl"
    src.write_text(text)
    return subprocess.run([sys.executable, "-m", "fcl", "run", "--check", *flags, str(src)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_example_kernels_are_clean_under_oclgrind(tmp_path, name):
    result = check(tmp_path, PROGRAMS[name], "--block-size", "32")
    assert result.returncode == 0, result.stderr
    assert "Oclgrind" not in result.stderr
    assert result.stdout.startswith("[")


def test_a_race_between_work_groups_is_reported_at_the_interleave(tmp_path):
    racy = ("val main = do<grid> {\n"
            "  ys <- generate 2 (fn b => pushM<block> (generate 32 (fn i => i + b)))\n"
            "        |> interleave<block> 32 (fn ij => snd ij) ;\n"
            "  forceAndPrint 32 ys }\n")
    result = check(tmp_path, racy, "--block-size", "32")
    assert result.returncode == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{tmp_path / 'prog.fcl'}:3:12: error: Oclgrind: Write-write data race")
