"""What a program does on the device, for people: cost tables, memory diagrams and graphs.

One `Explanation` per program, shared by the kernel's magics and the `fcl costs/memory/graph`
commands. Tracing runs the program with instrumented kernels, so each traced work-group is
run once and kept, by the TRACES_KEPT explanations traced last.
"""
from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from html import escape

from fcl import backend, pipeline
from fcl.analysis.access import check_warp
from fcl.analysis.costs import KernelCosts, Measured, costs_html, costs_text, program_costs
from fcl.analysis.gpu import DEFAULT_GPU, GPU, load_gpu
from fcl.analysis.layout_costs import layout_section
from fcl.analysis.occupancy import estimate_registers
from fcl.analysis.predict import ProgramPrediction, kernel_work, predict_program, time_text
from fcl.analysis.sites import SiteRow, site_rows, sites_html, sites_text
from fcl.analysis.trace import KernelTrace, Trace, trace_program
from fcl.codegen.kernel import Compiled, Kernel
from fcl.errors import FCLError
from fcl.il import ir
from fcl.memory.check import plan_problems
from fcl.memory.layouts import LAYOUTS, NAMES, choose_layouts
from fcl.memory.plan import COPIES, MemoryPlan, memory_plan, unknown_savings
from fcl.memory.relayout import record_arrays
from fcl.runtime.device import is_oclgrind, open_device, require_device
from fcl.runtime.host import time_compiled
from fcl.runtime.streams import StreamOptions
from fcl.session import Session
from fcl.syntax import ast
from fcl.timing import Policy, Timing
from fcl.viz.blocks import plan_svg
from fcl.viz.codeview import SCROLL
from fcl.viz.graphs import Drawing, kernel_graph, render, structure_graph
from fcl.viz.memory import Diagram, memory_diagram

# Measuring the kernels next to the counts: long enough for a median on a busy CPU, short
# enough for a cell.
MEASURE_BUDGET_S = 1.0

# A memory explorer keeps its explanation for as long as the notebook shows it, and a course
# notebook shows a dozen, each trace a log of every access of a work-group: only the explanations
# traced last keep their traces. An older one traces again if asked (its explorer's group moved).
TRACES_KEPT = 4
_traced: list[weakref.ref[Explanation]] = []  # the most recently traced last


@dataclass
class Explanation:
    compiled: Compiled
    block_size: int
    device: str | None
    gpu: GPU  # the GPU whose occupancy and time are predicted
    # An entry point's arguments on the device (fcl.python): the call explained.
    arguments: list = field(default_factory=list)
    streaming: StreamOptions | None = None  # how its sequences stream (default: the environment's)
    _traces: dict[int, Trace] = field(default_factory=dict)
    _timing: Timing | None = None
    _plan: MemoryPlan | None = None

    # ---- traces and counters
    def trace(self, group: int = 0) -> Trace:
        if group not in self._traces:
            require_device("Counting a program's accesses (costs, memory diagrams), which runs "
                           "its kernels instrumented,", self.device,
                           "`%%opencl`, `%%graph` and the interpreter need no device")
            self._traces[group] = trace_program(self.compiled, group, self.device, self.block_size,
                                                arguments=self.arguments,
                                                streaming=self.streaming)
            _keep_traces_of(self)
        return self._traces[group]

    def costs(self, group: int = 0) -> list[KernelCosts]:
        """Each kernel's counts, with its occupancy and predicted time on the chosen GPU."""
        costs = program_costs(self.trace(group))
        for kernel, predicted in zip(costs, self.predict(costs).kernels):
            kernel.predicted = predicted
        return costs

    def measure(self) -> tuple[Timing, str] | None:
        """The kernels timed on the device (by profiling events, until the spread settles or
        MEASURE_BUDGET_S passes) and its name; None on a simulator, whose times mean nothing."""
        device = open_device(self.device)
        if is_oclgrind(device.device) or not self.compiled.kernels:
            return None
        if self._timing is None:
            self._timing = time_compiled(self.compiled, self.device, self.block_size,
                                         Policy(budget_s=MEASURE_BUDGET_S),
                                         arguments=self.arguments, streaming=self.streaming)
        return self._timing, device.name

    def measured_costs(self, group: int = 0) -> tuple[list[KernelCosts], Measured | None]:
        """costs(group), each with its measured time on the device, and how it was measured."""
        costs, timed = self.costs(group), self.measure()
        if timed is None:
            return costs, None
        timing, device = timed
        medians = timing.kernel_medians()
        for kernel in costs:
            kernel.measured_ms = medians.get(kernel.kernel)
        return costs, Measured(device, timing.timed.runs, timing.timed.median,
                               timing.timed.spread, timing.host_overhead.median)

    def predict(self, costs: list[KernelCosts]) -> ProgramPrediction:
        return predict_costs(self.compiled, self.gpu, costs)

    def sites(self, group: int = 0, warp: int = 0) -> list[SiteRow]:
        check_warp(warp, self.block_size)
        return site_rows(self.trace(group), warp)

    def costs_bundle(self, group: int = 0, warp: int = 0) -> dict[str, str]:
        """The cost table, then each access's formula, LMADs and cost: text and HTML."""
        (costs, measured), rows = self.measured_costs(group), self.sites(group, warp)
        memory = self.memory_line() + self.stream_line(costs, group)
        layouts, layouts_html = self.layout_section(group)
        text = costs_text(costs, measured) + f"\n{memory}" + (f"\n{layouts}" if layouts else "") \
            + (f"\n\nEach access:\n{sites_text(rows, warp)}" if rows else "")
        # Wide tables scroll inside the output rather than being cut off at its right edge.
        details = (f"<details><summary>each access: its index, LMADs and cost</summary>"
                   f"<div style='{SCROLL}'>{sites_html(rows, warp)}</div></details>"
                   if rows else "")
        return {"text/plain": text,
                "text/html": f"<div style='{SCROLL}'>{costs_html(costs, measured)}</div>"
                             f"<p>{escape(memory)}</p>" + layouts_html + details}

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        """The cost table, as IPython shows an Explanation (fcl.python's `costs`)."""
        return self.costs_bundle()

    def __repr__(self) -> str:
        return self.costs_bundle()["text/plain"]

    # ---- the global memory plan
    def memory_plan(self) -> MemoryPlan:
        """The blocks, the arrays in them and the copies removed or kept (fcl.memory.plan), as
        planned for this program; with planning off, what it would be."""
        if self._plan is None:  # the memory steps run again on the IL: once per explanation
            self._plan = memory_plan(self.compiled.il)
        return self._plan

    def memory_line(self) -> str:
        """Global memory allocated and bytes the removed copies would have moved, planned and
        not (`%config short_circuit` picks which one runs)."""
        plan = self.memory_plan()
        runs = "planned" if self.compiled.plan_memory else "unplanned (short_circuit=off)"
        return (f"Global memory, {runs} runs: planned {plan.planned}, unplanned "
                f"{plan.unplanned}; the {sum(d.done for d in plan.decisions if d.kind in COPIES)}"
                f" copies removed by planning move {plan.copy_bytes_saved:,} bytes"
                f"{unknown_savings(plan)}")

    def stream_line(self, costs: list[KernelCosts], group: int = 0) -> str:
        """A streaming run's transfers priced on the GPU's host link against its kernels'
        predicted time (empty for a run that streamed nothing)."""
        streamed = self.trace(group).streamed
        if streamed is None:
            return ""
        chunks, to_device, to_host = streamed
        gpu = self.gpu
        moving = (to_device + to_host) / gpu.host_bandwidth
        kernels = self.predict(costs).time_s
        line = (f"\nStreamed: {to_device:,} bytes to the device and {to_host:,} back in "
                f"{chunks} chunks; over the {gpu.name}'s host link "
                f"({gpu.host_bandwidth / 1e9:g} GB/s each way) moving them takes "
                f"{time_text(moving)}")
        if kernels is None:
            return line + "."
        # Overlapped, a chunk's move hides behind the kernels of the one before (or they behind
        # it): the longer of the two, plus the first chunk's move, which nothing hides.
        overlapped = max(moving, kernels) + moving / max(chunks, 1)
        bound = "transfer-bound" if moving > kernels else "kernel-bound"
        return (line + f", the kernels {time_text(kernels)}: overlapped about "
                f"{time_text(overlapped)}, one after another {time_text(moving + kernels)} "
                f"({bound}).")

    def layout_section(self, group: int = 0) -> tuple[str, str]:
        """For a program with arrays of records in global memory: its kernels' sectors per
        request and predicted times with them in each layout (the program compiled again in
        each, each traced), the plan chosen and why; text and HTML, empty for no records."""
        _, choices = choose_layouts(self.compiled.il, self.compiled.layout)
        if not choices:
            return "", ""
        variants: dict[str, tuple[list[KernelCosts], float | None]] = {}
        for layout in LAYOUTS:
            variant = backend.compile_il(self.compiled.il, self.compiled.block_size or
                                         self.block_size, self.compiled.target
                                         if not self.compiled.portable else "auto",
                                         home=self.compiled.home,
                                         plan_memory=self.compiled.plan_memory,
                                         share_blocks=self.compiled.share_blocks, layout=layout)
            other = Explanation(variant, self.block_size, self.device, self.gpu,
                                arguments=self.arguments, streaming=self.streaming)
            costs = other.costs(group)
            variants[NAMES[layout]] = costs, other.predict(costs).time_s
        if any(c.copy is not None for c in choices):  # the plan chosen is none of the three
            costs = self.costs(group)
            variants["as chosen"] = costs, self.predict(costs).time_s
        return layout_section(choices, self.gpu.name, variants)

    def blocks_bundle(self) -> dict[str, str]:
        plan = self.memory_plan()
        off = "" if self.compiled.plan_memory else \
            "memory planning is off (short_circuit=off): the program runs unplanned; " \
            "planned, it would be:\n"
        problems = plan_problems(self.compiled.il, plan)
        checked = ("checked apart from the planner: no two arrays written and live at once "
                   "share memory") if not problems else \
            "checked apart from the planner (a bug in FCL's compiler):\n" + "\n".join(problems)
        return {"text/plain": off + plan.text() + "\n" + checked,
                "text/html": f"<div style='{SCROLL}'>{escape(off)}{plan_svg(plan)}"
                             f"<p>{escape(checked)}</p></div>"}

    # ---- memory diagrams
    def memory(self, kernel: str | None = None, array: str | None = None, group: int = 0,
               warp: int = 0, pitch: int | None = None) -> list[tuple[str, Diagram]]:
        """(kernel name, diagram) per launched kernel (the chosen one only, if given) that
        touches memory (`array` only, if given)."""
        trace = self.trace(group)
        chosen = [self.find_traced(kernel, group)] if kernel is not None else trace.kernels
        if array is not None:
            # An array may be named as the kernels name it or as the program does.
            if array not in {s.array for s in trace.sites}:
                array = next((name for name, label in trace.labels.items()
                              if array in label.strip("()").split(ir.LABEL_SEPARATOR)), array)
            touching = [k for k in chosen if any(
                s.array == array for s in trace.sites if s.kernel == k.kernel.name)]
            if not touching:
                arrays = sorted({s.array for s in trace.sites if s.array and s.kind != "barrier"
                                 and any(s.kernel == k.kernel.name for k in chosen)})
                shown = [f"{a} ({trace.labels[a]})" if a in trace.labels else a for a in arrays]
                raise FCLError(f"no kernel shown accesses array {array}; the arrays accessed "
                               f"are: {', '.join(shown) or 'none'}")
            chosen = touching
        if not chosen:
            raise FCLError("the program launches no kernels: there is no memory traffic to draw")
        records = record_arrays(*choose_layouts(self.compiled.il, self.compiled.layout))
        return [(k.kernel.name, memory_diagram(k, trace.sites, array, warp, pitch, records,
                                               trace.labels))
                for k in chosen]

    def find_traced(self, kernel: str, group: int = 0) -> KernelTrace:
        name = self.kernel_name(kernel)
        return self.trace(group).kernel(name)

    def kernel_name(self, wanted: str) -> str:
        """A kernel by its name, its number (`1` for `kernel1_line4`) or a prefix of its name."""
        names = [k.name for k in self.compiled.kernels]
        if wanted in names:
            return wanted
        number = re.fullmatch(r"(?:kernel)?(\d+)", wanted)
        matches = [n for n in names if (number and n.split("_")[0] == f"kernel{number.group(1)}")
                   or (not number and n.startswith(wanted))]
        if len(matches) == 1:
            return matches[0]
        raise FCLError(f"no kernel `{wanted}`; the program's kernels are: "
                       f"{', '.join(names) or 'none'}")

    # ---- graphs
    def structure(self) -> Drawing:
        return render(structure_graph(self.compiled.il, self.compiled.kernels))

    def kernel_graphs(self, kernel: str | None = None) -> list[tuple[Kernel, Drawing]]:
        chosen = [k for k in self.compiled.kernels
                  if kernel is None or k.name == self.kernel_name(kernel)]
        if not chosen:
            raise FCLError("the program has no kernels: everything runs on the host")
        return [(k, render(kernel_graph(k))) for k in chosen]


def predict_costs(compiled: Compiled, gpu: GPU, costs: list[KernelCosts]) -> ProgramPrediction:
    """Occupancy and predicted time of the kernels counted in `costs`, and the program's, on
    the GPU."""
    registers = {k.name: estimate_registers(k) for k in compiled.kernels}
    return predict_program(gpu, [kernel_work(c, registers[c.kernel]) for c in costs])


def _keep_traces_of(explanation: Explanation) -> None:
    _traced[:] = [ref for ref in _traced if ref() is not None and ref() is not explanation]
    _traced.append(weakref.ref(explanation))
    while len(_traced) > TRACES_KEPT:
        older = _traced.pop(0)()
        if older is not None:
            older._traces.clear()


def explain(session: Session, root: ast.Expr, options: pipeline.CompileOptions,
            device: str | None = None, gpu: str = DEFAULT_GPU,
            streaming: StreamOptions | None = None) -> Explanation:
    """Compile `root` for explaining (its result is not fetched); traces come on demand."""
    chosen = load_gpu(gpu)  # an unknown GPU is an error before anything is compiled
    return Explanation(pipeline.compile_program(session, root, options), options.block_size,
                       device, chosen, streaming=streaming)
