"""The kernel's magics: `%name args` lines at the top of a cell, or `%%name args` cells.

Each magic is a method with a docstring (shown by `%name?` and `%magic`); the work itself is
done by the fcl library (compiling, showing code, checking with Oclgrind).
"""
from __future__ import annotations

import argparse
import html
import re
import shlex
import time
import uuid
from pathlib import Path
from typing import TypedDict

from fcl.errors import FCLError, Source
from fcl.lmad import LMADError, render_svg
from fcl.lmad.report import report
from fcl.notebook import render
from fcl.timing import Policy, Sample, Timing, measuring, repeat, single_run_report
from fcl.viz.codeview import side_by_side
from fcl.viz.steps import step_changes, steps_html, steps_text
from fcl_kernel.expect import (
    check_budgets,
    compare,
    evaluate_expected,
    failure,
    must_fail,
    parse_expectation,
    verdict,
)


def split_magics(code: str) -> tuple[list[tuple[str, str]], tuple[str, str] | None, str]:
    """(line magics, the cell magic if any, the rest of the cell)."""
    lines = code.split("\n")
    line_magics: list[tuple[str, str]] = []
    while lines and lines[0].startswith("%"):
        head = lines[0]
        if head.startswith("%%"):
            name, _, args = head[2:].partition(" ")
            return line_magics, (name.strip(), args.strip()), "\n".join(lines[1:])
        name, _, args = head[1:].partition(" ")
        line_magics.append((name.strip(), args.strip()))
        lines = lines[1:]
    return line_magics, None, "\n".join(lines)


class Magics:
    LINE = ("lsmagic", "magic", "type", "time", "device", "config", "load", "who", "reset", "lmad")
    CELL = ("opencl", "il", "steps", "costs", "memory", "graph", "bench", "check", "time",
            "expect", "timeline")

    def __init__(self, kernel):
        self.kernel = kernel

    @property
    def workspace(self):
        return self.kernel.workspace

    def names(self) -> list[str]:
        return sorted(set(self.LINE) | set(self.CELL) | {"cl"})

    def doc(self, name: str) -> str:
        method = getattr(self, f"cell_{name}", None) or getattr(self, f"line_{name}", None)
        return (method.__doc__ or "").strip() if method else f"no magic named %{name}"

    def _text(self, text: str) -> None:
        self.kernel.out.write(text if text.endswith("\n") else text + "\n")

    # ---- dispatch
    def run_line(self, name: str, args: str) -> None:
        if name.endswith("?"):
            return self._text(f"%{name[:-1]}: {self.doc(name[:-1])}")
        method = getattr(self, f"line_{name}", None)
        if method is None:
            raise FCLError(f"unknown magic `%{name}`; `%lsmagic` lists the magics")
        method(args)

    def run_cell(self, name: str, args: str, body: str) -> None:
        name = {"cl": "opencl"}.get(name, name)
        method = getattr(self, f"cell_{name}", None)
        if method is None:
            raise FCLError(f"unknown cell magic `%%{name}`; `%lsmagic` lists the magics")
        method(args, body)

    # ---- line magics
    def line_lsmagic(self, args: str) -> None:
        """List the magics."""
        self._text("line magics: " + "  ".join(f"%{m}" for m in self.LINE) + "\n"
                   "cell magics: " + "  ".join(f"%%{m}" for m in self.CELL)
                   + "  (%%cl = %%opencl)\n"
                   "`%name?` describes one magic; `%magic` describes them all.")

    def line_magic(self, args: str) -> None:
        """Describe every magic."""
        for name in self.names():
            if name != "cl":
                self._text(f"%{name}: {self.doc(name)}")

    def line_type(self, args: str) -> None:
        """`%type EXPR`: the type of an FCL expression, in the original's notation."""
        self._text(f"{args} : {self.workspace.type_of_expression(args)}")

    def line_time(self, args: str) -> None:
        """`%time EXPR`: evaluate an expression (or run a grid program) once and report the wall
        time; on OpenCL also the kernel time (profiling events) and the host overhead (compiling,
        transfers, host code) apart. `%%bench` times repeated runs."""
        clock = None
        start = time.perf_counter()
        if self.workspace.backend() == "opencl":
            with measuring() as clock:
                self.kernel.run_fcl(args)
        else:
            self.kernel.run_fcl(args)
        self._text(single_run_report((time.perf_counter() - start) * 1000, clock))

    def line_device(self, args: str) -> None:
        """`%device` lists the OpenCL devices; `%device ID` (`1:0`, or part of a name) uses one."""
        if args:
            self._text(f"using {self.workspace.use_device(args)}")
            return
        self._text("\n".join(self.workspace.device_listing()))

    def line_config(self, args: str) -> None:
        """`%config` shows the settings; `%config block_size=128 warp_size=32 backend=interp
        checks=off short_circuit=off flatten=off layout=aos device_memory=64M chunk=4096
        overlap=off gpu=h100` changes them (short_circuit: the compiler's memory planning;
        flatten: irregular arrays' work shared out by elements; layout: arrays of records in
        global memory, soa, aos, aosoa or auto; device_memory, chunk and overlap: how
        sequences stream, `default` and `auto` for the defaults;
        backend: auto, the default, is opencl where a device works and else
        interp; gpu: the GPU whose occupancy and time %%costs predicts, one of the
        profiles in fcl/gpus/)."""
        settings = self.workspace.settings
        for item in shlex.split(args):
            key, _, value = item.partition("=")
            settings.set(key, value)
        resolved = f" ({self.workspace.backend()})" if settings.backend == "auto" else ""
        self._text(f"backend={settings.backend}{resolved} block_size={settings.block_size} "
                   f"warp_size={settings.warp_size} "
                   f"checks={'on' if settings.checks else 'off'} "
                   f"short_circuit={'on' if settings.short_circuit else 'off'} "
                   f"flatten={'on' if settings.flatten else 'off'} "
                   f"layout={settings.layout} "
                   f"device_memory={settings.device_memory or 'default'} "
                   f"chunk={settings.chunk or 'auto'} "
                   f"overlap={'on' if settings.overlap else 'off'} "
                   f"device={settings.device or 'default'} gpu={settings.gpu}")
        if not args:
            from fcl_kernel.widgets import settings_panel  # ipywidgets: 0.16 s, when first shown
            self.kernel.display(settings_panel(settings)._repr_mimebundle_())

    def line_load(self, args: str) -> None:
        """`%load FILE.fcl`: add the declarations of an FCL file."""
        path = Path(args.strip().strip("\"'"))
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            reason = getattr(err, "strerror", None) or err
            raise FCLError(f"cannot read `{path}`: {reason}") from None
        decls = self.workspace.define(Source(str(path), text))
        self._text(f"loaded {len(decls)} definitions from {path}")

    def line_who(self, args: str) -> None:
        """`%who`: your definitions with their types."""
        rows = self.workspace.user_definitions()
        if not rows:
            return self._text("no definitions yet")
        plain = "\n".join(f"{name} : {scheme}" for name, scheme in rows)
        table = "".join(f"<tr><td><b>{html.escape(n)}</b></td>"
                        f"<td><code>{html.escape(s)}</code></td></tr>" for n, s in rows)
        self.kernel.display({"text/plain": plain, "text/html": f"<table>{table}</table>"})

    def line_reset(self, args: str) -> None:
        """`%reset`: forget every definition (the prelude stays)."""
        self.workspace.reset()
        self._text("all definitions forgotten")

    def line_lmad(self, args: str) -> None:
        """`%lmad EXPR [--pitch N] [--points]`: an LMAD such as `2 + {(3:5),(4:1)}` — its
        normal form, shape, points and self-overlap, drawn as a grid N addresses wide.
        `%lmad A ; B` also says whether two LMADs overlap. `%lmad` alone opens a playground
        with sliders for the offset, sizes, strides and pitch."""
        if not args.strip():
            from fcl_kernel.widgets import lmad_playground
            return self.kernel.display(lmad_playground()._repr_mimebundle_())
        # The options are pulled out; the rest is the LMAD notation, spaces and all.
        flags = re.findall(OPTION, args)
        options = _options("lmad", " ".join(flag.replace("=", " ") for flag in flags),
                           pitch=int, points=bool)
        text = re.sub(OPTION, " ", args)
        try:
            lmads, lines = report(text, options.points)
            pictures = [render_svg(lmad, options.pitch) for lmad in lmads]
        except LMADError as err:
            raise FCLError(f"%lmad: {err}") from None
        self._text("\n".join(lines))
        for lmad, picture in zip(lmads, pictures):
            self.kernel.display(_svg_bundle(picture, str(lmad)))

    # ---- cell magics
    def cell_opencl(self, args: str, body: str) -> None:
        """`%%opencl [--target gpu|cpu]` (or `%%cl`): show the OpenCL generated for the cell
        (for a GPU unless told otherwise), each FCL line and the OpenCL lines it produced in
        matching colours. The cell's definitions are not kept."""
        target = _options("opencl", args, target=str).target or "gpu"
        if target not in ("gpu", "cpu"):
            raise FCLError(f"%%opencl --target takes gpu or cpu, not `{target}`")
        compiled = self.workspace.compile_cell(body, target)
        self.kernel.display({"text/plain": compiled.source,
                             "text/html": side_by_side(body, compiled.source, compiled.line_table)})

    def cell_il(self, args: str, body: str) -> None:
        """`%%il`: show the imperative IL the cell compiles to (before kernels are cut out)."""
        il = self.workspace.il_text(body)
        self.kernel.display({"text/plain": il, "text/html": f"<pre>{html.escape(il)}</pre>"})

    def cell_steps(self, args: str, body: str) -> None:
        """`%%steps [--target gpu|cpu]`: the compiler's steps after lowering, one after another,
        each with what it changed in the program (a diff against the step before; steps that
        changed nothing folded): the lowered IL, the optimisation passes (once per round), the
        kernels as they are cut out and shaped, and the OpenCL C. `fcl compile --list-steps`
        lists the steps. The cell's definitions are not kept."""
        target = _options("steps", args, target=str).target or "gpu"
        if target not in ("gpu", "cpu"):
            raise FCLError(f"%%steps --target takes gpu or cpu, not `{target}`")
        changes = step_changes(self.workspace.steps_cell(body, target))
        self.kernel.display({"text/plain": steps_text(changes), "text/html": steps_html(changes)})

    def cell_costs(self, args: str, body: str) -> None:
        """`%%costs [--group G] [--warp W]`: a table of what each kernel of the cell does to
        memory, counted in one traced work-group (default 0): global loads and stores per
        work-item, 32-byte sectors and 128-byte lines per warp request (and the ideal), local
        loads and stores, bank conflicts, barriers, SIMT efficiency, local memory, work-groups
        launched; then, predicted on the GPU that `%config gpu=NAME` chose (default generic):
        occupancy and what limits it, estimated registers, and the time of each kernel and of
        the program (docs/costs.md explains the model); and, labelled apart, each kernel's time
        measured on the device that runs it (profiling events). Below it, each load and store: its
        index as a formula in group, item and loop counters, the LMAD of the work-group's and of
        warp W's accesses (when affine), and its cost."""
        options = _options("costs", args, group=int, warp=int)
        explanation = self.workspace.explain_cell(body)
        self.kernel.display(explanation.costs_bundle(options.group or 0, options.warp or 0))

    def cell_memory(self, args: str, body: str) -> None:
        """`%%memory [--kernel K] [--array A] [--group G] [--warp W] [--pitch P] [--explore]`:
        memory diagrams of one traced work-group: for every load and store of each kernel (or
        kernel K: its name or number), the elements each work-item touches, coloured by
        work-item, writes hatched; warp W's first access outlined with its 32-byte sectors and
        128-byte lines (global memory, P elements per row) or its bank conflicts (local memory,
        32 banks). An array the program binds to a name (`xs <- forcePull ...`) is called by
        it, its kernel name beside it; `--array A` takes either name. Under each kernel's
        heading, its notes (a flattened kernel's rows: the panel writing each position's row
        draws the tile's segments).
        `--explore` gives widgets to pick the kernel, work-group, warp and pitch.
        `--blocks` shows the global memory plan instead: each block, the arrays placed in it
        (their index functions as LMADs), every copy removed or kept and why, and the memory
        saved (no device needed)."""
        options = _options("memory", args, kernel=str, array=str, group=int, warp=int,
                           pitch=int, explore=bool, blocks=bool)
        explanation = self.workspace.explain_cell(body)
        if options.blocks:
            return self.kernel.display(explanation.blocks_bundle())
        if options.explore:
            from fcl_kernel.widgets import memory_explorer
            panel = memory_explorer(explanation, options.array, options.pitch)
            return self.kernel.display(panel._repr_mimebundle_())
        for _, diagram in explanation.memory(options.kernel, options.array, options.group or 0,
                                          options.warp or 0, options.pitch):
            self.kernel.display(_svg_bundle(diagram.svg, diagram.text))

    def cell_graph(self, args: str, body: str) -> None:
        """`%%graph [--kernels | --kernel K]`: the cell's program as a Graphviz graph: its
        loops coloured by level (grid, block, thread), kernels as bold boxes, materialised
        arrays as cylinders. `--kernels` draws every statement of each kernel instead (or of
        kernel K). Without Graphviz's `dot` program, the DOT text is shown."""
        options = _options("graph", args, kernels=bool, kernel=str)
        explanation = self.workspace.explain_cell(body)
        if options.kernels or options.kernel:
            drawings = [d for _, d in explanation.kernel_graphs(options.kernel)]
        else:
            drawings = [explanation.structure()]
        for drawing in drawings:
            if drawing.svg is None:
                self.kernel.err.write(drawing.note + "\n")
                self.kernel.display({"text/plain": drawing.dot})
            else:
                self.kernel.display(_svg_bundle(drawing.svg, drawing.dot))

    def cell_time(self, args: str, body: str) -> None:
        """`%%time`: run the cell once and report the wall time; on OpenCL also the kernel time
        and the host overhead apart."""
        self.line_time(body)

    def cell_bench(self, args: str, body: str) -> None:
        """`%%bench [--budget S] [--runs N]`: time the cell's program, with a progress bar. On
        OpenCL its kernels are timed by profiling events after a warm-up run, until the spread
        settles (the middle half of at least 5 runs within 3% of the median) or S seconds pass
        (default 2), or exactly N runs; the report gives the kernel time's median, min and
        spread, the host overhead apart, each kernel's median, and whether the spread is small
        enough to rank two variants. On the interpreter (or for a pure expression), the wall
        time per run. The cell's definitions are not kept. `%%bench N` is `%%bench --runs N`."""
        words = shlex.split(args)
        if len(words) == 1 and words[0].isdigit():
            words = ["--runs", words[0]]
        options = _options("bench", shlex.join(words), budget=float, runs=int)
        if (options.runs is not None and options.runs < 1) or \
                (options.budget is not None and options.budget <= 0):
            raise FCLError("%bench: --runs needs at least 1 run and --budget a positive number "
                           "of seconds")
        policy = Policy(runs=options.runs) if options.budget is None else \
            Policy(budget_s=options.budget, runs=options.runs)
        display_id = uuid.uuid4().hex
        self._progress(0.0, policy, display_id, new=True)
        shown: _Progress = {"at": time.monotonic(), "runs": 0, "elapsed_s": 0.0}

        def progress(runs: int, elapsed_s: float, final: bool = False) -> None:
            shown["runs"], shown["elapsed_s"] = runs, elapsed_s
            if final or time.monotonic() - shown["at"] >= PROGRESS_EVERY_S:
                shown["at"] = time.monotonic()
                self._progress(runs if policy.runs else elapsed_s, policy, display_id, runs)

        try:
            self._text(self._bench_report(body, policy, progress))
        finally:
            progress(shown["runs"], shown["elapsed_s"], final=True)

    def _bench_report(self, body: str, policy: Policy, progress) -> str:
        timed = self.workspace.time_kernels(body, policy, progress)
        if timed is not None:
            device, timing = timed
            return f"timed on {device}\n{timing.report()}"
        return self._bench_cell(body, policy, progress).report()

    def _bench_cell(self, body: str, policy: Policy, progress) -> Timing:
        """The wall time of running the cell (after a warm-up run), for the interpreter."""
        def once() -> Sample:
            start = time.perf_counter()
            self.workspace.run_and_forget(body, _Discard(), _Discard())
            return Sample((time.perf_counter() - start) * 1000)

        once()
        return repeat(once, policy, progress=progress)

    def _progress(self, done: float, policy: Policy, display_id: str, runs: int = 0,
                  new: bool = False) -> None:
        total = policy.runs or policy.budget_s
        text = f"{runs} runs" if policy.runs is None else f"{runs}/{policy.runs} runs"
        bar = (f"<progress value='{min(done, total)}' max='{total}' style='width:20em'>"
               f"</progress> {text}")
        content = {"data": {"text/plain": text, "text/html": bar}, "metadata": {},
                   "transient": {"display_id": display_id}}
        self.kernel.send_response(self.kernel.iopub_socket,
                                  "display_data" if new else "update_display_data", content)

    def cell_timeline(self, args: str, body: str) -> None:
        """`%%timeline`: run the cell's program on the OpenCL device and draw when each chunk of
        its sequences moved to the device (orange) and when its kernels ran (blue), measured by
        profiling events, with the chunk size and the peak of device memory against the budget
        (`%config device_memory=64M chunk=N overlap=off` set how it streams). The cell's
        definitions are not kept."""
        timeline = self.workspace.timeline_cell(body, self.kernel.out, self.kernel.err)
        if timeline is None:
            self._text("the program streamed no sequence: it has no timeline")
            return
        self.kernel.display(_svg_bundle(timeline.svg(), timeline.text()))

    def cell_check(self, args: str, body: str) -> None:
        """`%%check`: run the cell on Oclgrind and report data races, out-of-bounds accesses and
        uninitialized reads at FCL lines."""
        value, findings = self.workspace.check_cell(body, self.kernel.out, self.kernel.err)
        for finding in findings:
            self.kernel.err.write(finding.as_error().render() + "\n")
        self._text(f"Oclgrind: {len(findings)} problem(s) found" if findings else
                   "Oclgrind: no data races, out-of-bounds accesses or uninitialized reads")
        if value is not None:
            self.kernel.display(render(value, None))

    def cell_expect(self, args: str, body: str) -> None:
        """`%%expect [--strict] NUMPY-EXPR [--budget CLAUSE ...]`: run the cell like any other
        (its definitions are kept), then compare its result with a numpy expression (`np` is
        numpy), e.g. `%%expect np.arange(8)[::-1]`: ✓ when they match (floats approximately),
        else ✗ and the first wrong positions. Each budget CLAUSE, `NAME OP NUMBER` without
        spaces (OP one of <= < >= > ==), bounds a figure of the cost model measured on the
        cell's program (one traced work-group per kernel, the GPU of `%config gpu=`):
        kernels (launches), global_loads, global_stores, local_loads, local_stores (per
        work-item, over the kernels), sectors_per_load, sectors_per_store, lines_per_load,
        lines_per_store (per warp request, the worst kernel), dram_sectors (the sectors a
        work-group's requests touch, each once), flops (operations on doubles per work-item),
        intensity (those per DRAM byte, the densest kernel), float_flops and float_intensity
        (the same for floats), bank_conflicts, barriers (per
        work-group, over the kernels), simt (the worst kernel's SIMT efficiency, 0..1),
        local_bytes (the largest kernel's), occupancy (the worst kernel's, 0..1) and
        predicted_us (the program's predicted time, µs); e.g. `%%expect np.arange(8) * 2
        --budget kernels<=1 global_loads<=1`. A ✓ or ✗ line per budget, then the verdict,
        ✓ only if the value and every budget pass. A failed check is an output, not an error,
        so Run All goes on; with `--strict`, or while nbgrader grades the notebook, it is an
        error (the cell fails, and nbgrader scores it 0)."""
        expectation = parse_expectation(args)
        expected = evaluate_expected(expectation.expression)
        outcome = self.workspace.execute(body, self.kernel.out, self.kernel.err)
        if outcome.shown:
            self.kernel.display(render(outcome.value, outcome.type))
        value = compare(outcome.value if outcome.shown else None, expected)
        budgets = []
        if expectation.budgets:
            # The program just run, explained with the same settings (a cell without a final
            # expression or `main` has none to measure).
            explanation = self.workspace.explain_cell(body) if outcome.type is not None else None
            budgets = check_budgets(expectation.budgets, explanation)
        result = verdict(value, budgets)
        for bundle in result.bundles:
            self.kernel.display(bundle)
        if not result.ok and must_fail(expectation.strict):
            raise failure(result, expectation.strict)


OPTION = r"--pitch[ =]\s*-?\d+|--\w+"  # %lmad's options, among the LMAD's own characters


class _MagicParser(argparse.ArgumentParser):
    def error(self, message: str):  # a usage error is the user's, shown like other errors
        raise FCLError(f"%{self.prog}: {message}; `%{self.prog}?` describes its options")


# A %%bench progress bar is redrawn at most five times a second: a fast kernel runs thousands of
# times in its budget, and each redraw is a message to the browser (on a hub, through its proxy).
PROGRESS_EVERY_S = 0.2


class _Progress(TypedDict):
    """`%%bench`'s runs and seconds so far, and when they were last shown."""

    at: float
    runs: int
    elapsed_s: float


def _options(magic: str, args: str, **kinds) -> argparse.Namespace:
    """Parse `--name value` options (`bool` ones are flags) of a magic."""
    parser = _MagicParser(prog=magic, add_help=False)
    for name, kind in kinds.items():
        if kind is bool:
            parser.add_argument(f"--{name}", action="store_true")
        else:
            parser.add_argument(f"--{name}", type=kind)
    try:
        return parser.parse_args(shlex.split(args))
    except ValueError as err:
        raise FCLError(f"%{magic}: {err}") from None


def _svg_bundle(svg: str, text: str) -> dict:
    # The HTML copy keeps the SVG's tooltips, which an <img> of image/svg+xml loses.
    return {"image/svg+xml": svg, "text/html": f"<div class='fcl-svg'>{svg}</div>",
            "text/plain": text}


class _Discard:
    def write(self, text: str) -> int:
        return len(text)
