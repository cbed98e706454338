"""Notebook semantics for FCL, independent of Jupyter: a workspace that runs cells.

A cell holds declarations and/or a final expression. Declarations accumulate across cells (a
later definition shadows an earlier one of the same name); a cell that fails in any way (parse,
type, runtime, interrupt) leaves the workspace exactly as it was. A final expression of type
`Program <grid> t` runs on the chosen back end and its result is returned; a pure expression is
evaluated by the interpreter; a cell that defines `main` runs it, as a file does.
"""
from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from fcl import pipeline, records
from fcl.analysis.gpu import DEFAULT_GPU, gpu_names, load_gpu
from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.errors import FCLError, Source
from fcl.explain import explain
from fcl.highlight import theme_colour
from fcl.hostio import Writer
from fcl.il import ir
from fcl.interp.eval import Interpreter, RunConfig
from fcl.interp.lanes import lift_full
from fcl.interp.values import (
    Buffer,
    Closure,
    Primitive,
    Program,
    PullArray,
    PushArray,
    PushPull,
    RecordBuffer,
    record_dtype,
)
from fcl.memory.layouts import LAYOUTS
from fcl.mono import GRID, level_number
from fcl.runtime.device import (
    BACKENDS,
    NoUsableDevice,
    choose_backend,
    describe_devices,
    open_device,
    pick_device,
    require_device,
)
from fcl.runtime.host import time_compiled
from fcl.runtime.oclgrind import Finding
from fcl.runtime.streams import StreamOptions, parse_bytes
from fcl.session import Session
from fcl.syntax import ast
from fcl.timing import Policy, Timing
from fcl.types.types import (
    RT,
    TArrow,
    TCon,
    TPair,
    TProgram,
    TPull,
    TPush,
    Type,
    chase,
    kind_of,
    show_types,
)
from fcl.viz.timeline import Timeline


@dataclass
class Settings:
    backend: str = "auto"  # see fcl.runtime.device.BACKENDS
    block_size: int = BLOCK_SIZE
    checks: bool = True
    device: str | None = None
    gpu: str = DEFAULT_GPU  # whose occupancy and time %%costs predicts (a file in fcl/gpus/)
    short_circuit: bool = True  # the memory steps (fcl.memory)
    warp_size: int = WARP_SIZE  # #WarpSize
    flatten: bool = True  # irregular arrays flattened (fcl.il.rows)
    # How sequences stream (fcl.runtime.streams): a device-memory budget in bytes (None: the
    # environment's FCL_DEVICE_MEMORY, else the device's), a chunk size, overlap.
    device_memory: int | None = None
    chunk: int | None = None
    overlap: bool = True
    layout: str = "auto"  # arrays of records in global memory (fcl.memory.layouts)

    def streaming(self) -> StreamOptions:
        budget = self.device_memory if self.device_memory is not None \
            else StreamOptions.from_environment().budget
        return StreamOptions(budget, self.chunk, self.overlap)

    def options(self, keep_result: bool = True) -> pipeline.CompileOptions:
        return pipeline.CompileOptions(self.block_size, self.checks, keep_result,
                                       short_circuit=self.short_circuit,
                                       warp_size=self.warp_size, flatten=self.flatten,
                                       layout=self.layout)

    def set(self, key: str, value: str) -> None:
        """Set one setting from its text, as `%config key=value` and the kernel's Jupyter
        configuration give it."""
        if key == "block_size" and value.isdigit() and int(value) > 0:
            self.block_size = int(value)
        elif key == "warp_size" and value.isdigit() and int(value) > 0:
            self.warp_size = int(value)
        elif key == "backend" and value in BACKENDS:
            self.backend = value
        elif key == "checks" and value.lower() in ("on", "off", "true", "false"):
            self.checks = value.lower() in ("on", "true")
        elif key == "short_circuit" and value.lower() in ("on", "off", "true", "false"):
            self.short_circuit = value.lower() in ("on", "true")
        elif key == "flatten" and value.lower() in ("on", "off", "true", "false"):
            self.flatten = value.lower() in ("on", "true")
        elif key == "gpu" and value:
            self.gpu = load_gpu(value).key  # an unknown GPU: an error naming the known ones
        elif key == "layout" and value in ("auto", *LAYOUTS):
            self.layout = value
        elif key == "overlap" and value.lower() in ("on", "off", "true", "false"):
            self.overlap = value.lower() in ("on", "true")
        elif key == "device_memory" and value:
            self.device_memory = None if value == "default" else _positive(key, parse_bytes, value)
        elif key == "chunk" and value:
            self.chunk = None if value == "auto" else _positive(key, int, value)
        else:
            raise FCLError(f"cannot set `{key}={value}`: use block_size=N, warp_size=N, "
                           f"backend={'|'.join(BACKENDS)}, checks=on|off, short_circuit=on|off, "
                           f"flatten=on|off, layout=auto|{'|'.join(LAYOUTS)}, "
                           "device_memory=BYTES|default, chunk=N|auto, "
                           f"overlap=on|off or gpu={'|'.join(gpu_names())}")


def _positive(key: str, parse, value: str) -> int:
    try:
        number = parse(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise FCLError(f"cannot set `{key}={value}`: it needs a positive number"
                       + (" of bytes (as 4096, 64K, 512M or 2G)" if key == "device_memory"
                          else " of elements"))
    return number


@dataclass
class Outcome:
    """What running a cell produced."""

    defined: list[ast.Decl] = field(default_factory=list)
    value: object = None
    type: Type | None = None
    shown: bool = False  # whether there is a value to show (a unit result is not shown)


class Workspace:
    def __init__(self, prelude: bool = True):
        self.prelude = prelude
        self.session = Session.new(prelude=prelude)
        self.settings = Settings()
        self.cells = 0
        # The front end's number of the cell running (`In [22]`), which its errors name; None
        # outside a notebook, where cells are counted here.
        self.prompt: int | None = None

    def reset(self) -> None:
        self.session = Session.new(prelude=self.prelude)

    def cell_name(self) -> str:
        self.cells += 1
        return f"<cell {self.prompt if self.prompt is not None else self.cells}>"

    # ---- running cells
    def execute(self, code: str, out: Writer, err: Writer, name: str | None = None) -> Outcome:
        snapshot = self.session.snapshot()
        warned = len(self.session.warnings)
        try:
            decls, expr = self.session.add_cell(Source(name or self.cell_name(), code))
            for warning in self.session.warnings[warned:]:
                print(warning, file=err)
            outcome = Outcome(defined=decls)
            root = expr
            if root is None and any(d.name == "main" for d in decls):
                root = pipeline.main_root(self.session)
            if root is not None:
                outcome.type = chase(root.type)
                # The program's err stream carries only `benchmark` reports (on stderr in `fcl
                # run`, as in the original): in a notebook a timing is ordinary output.
                outcome.value = self.evaluate(root, out, out, note_to=err)
                outcome.shown = not _is_unit(_result_type(outcome.type))
            return outcome
        except BaseException:
            self.session.restore(snapshot)
            raise

    def evaluate(self, root: ast.Expr, out: Writer, err: Writer, note_to: Writer | None = None,
                 on_timeline: Callable[[Timeline], None] | None = None):
        """Run a grid program on the chosen back end, or evaluate a pure expression; the note
        that `auto` runs on the interpreter, for want of a device, goes to `note_to`; on OpenCL,
        `on_timeline` is given the run's sequences' timeline, if it streamed any."""
        t = chase(root.type)
        if isinstance(t, TProgram):
            if level_number(t.level) != GRID:
                raise FCLError(f"only grid-level programs can run from a cell; this is a "
                               f"`{show_types(t)[0]}`", root.span,
                               ["wrap it in a grid-level program, e.g. with concat<block>"])
            if self.backend(note_to or err) == "opencl":
                return pipeline.run_opencl(self.session, root, self.settings.options(),
                                           self.settings.device, out, err,
                                           self.settings.streaming(), on_timeline)
        return self.interpret(root, out, err)

    def backend(self, note_to: Writer | None = None) -> str:
        """The back end grid programs run on now: `opencl` or `interp` (see choose_backend)."""
        return choose_backend(self.settings.backend, self.settings.device,
                              None if note_to is None else lambda text: print(text, file=note_to),
                              asked_as="`%config backend=opencl`")

    def interpret(self, root: ast.Expr, out: Writer, err: Writer):
        config = RunConfig(block_size=self.settings.block_size, out=out, err=err,
                           warp_size=self.settings.warp_size)
        interpreter = Interpreter(config)
        value = interpreter.run(pipeline.mono_program(self.session, root))
        try:
            return to_host(value, _result_type(chase(root.type)), interpreter)
        except FCLError as error:
            if error.span is None:  # showing the value forced it: too large, say
                error.span = root.span
            raise

    @contextmanager
    def scratch(self, code: str):
        """The root of a cell (its final expression, else its `main`) whose definitions are
        forgotten afterwards: for showing what a cell compiles to without running it."""
        snapshot = self.session.snapshot()
        try:
            _, expr = self.session.add_cell(Source(self.cell_name(), code))
            yield expr if expr is not None else pipeline.main_root(self.session)
        finally:
            self.session.restore(snapshot)

    def compile_cell(self, code: str, target: str = "auto"):
        """The compiled program of a cell (its IL before kernels are cut out included), its
        kernels shaped for `target` (fcl.backend; "auto" shows a GPU's)."""
        options = replace(self.settings.options(keep_result=False), target=target)
        with self.scratch(code) as root:
            return pipeline.compile_program(self.session, root, options)

    def use_device(self, wanted: str) -> str:
        """Run cells on the device `wanted` names (an id such as `1:0`, or part of a name);
        the device and its platform, as they name themselves."""
        device = pick_device(wanted)
        self.settings.device = wanted
        return f"{device.name.strip()} ({device.platform.name.strip()})"

    def device_listing(self) -> list[str]:
        """The OpenCL devices, each usable or why not, the one cells run on marked."""
        try:
            current = pick_device(self.settings.device)
        except NoUsableDevice:
            current = None
        return describe_devices(marked=current)

    def il_text(self, code: str) -> str:
        """The imperative IL the cell compiles to, before kernels are cut out."""
        return ir.show_stmts(self.compile_cell(code).il)

    def time_kernels(self, code: str, policy: Policy,
                     progress: Callable[[int, float], None] | None = None
                     ) -> tuple[str, Timing] | None:
        """(the device's name, the kernel times of repeated runs) of the cell's grid program on
        the device (time_compiled); None when the cell is no grid program or runs on the
        interpreter. The cell's definitions are not kept."""
        if self.settings.backend == "interp":
            return None
        with self.scratch(code) as root:
            t = chase(root.type)
            if not (isinstance(t, TProgram) and level_number(t.level) == GRID):
                return None
            require_device("`%%bench`, which times a program's kernels,", self.settings.device,
                           "`%config backend=interp` times the interpreter instead")
            compiled = pipeline.compile_program(self.session, root,
                                                self.settings.options(keep_result=False))
            timing = time_compiled(compiled, self.settings.device, self.settings.block_size,
                                   policy, progress, streaming=self.settings.streaming())
            return open_device(self.settings.device).name, timing

    def timeline_cell(self, code: str, out: Writer, err: Writer) -> Timeline | None:
        """The timeline of the cell's sequences, run on the OpenCL device (None if it streamed
        none). The cell's definitions are not kept."""
        require_device("`%%timeline`, which times a program's transfers and kernels,",
                       self.settings.device)
        found: list[Timeline] = []
        with self.scratch(code) as root:
            t = chase(root.type)
            if not (isinstance(t, TProgram) and level_number(t.level) == GRID):
                raise FCLError("`%%timeline` runs a grid-level program; this cell is a "
                               f"`{show_types(t)[0]}`", root.span)
            pipeline.run_opencl(self.session, root, self.settings.options(),
                                self.settings.device, out, err, self.settings.streaming(),
                                found.append)
        return found[0] if found else None

    def run_and_forget(self, code: str, out: Writer, err: Writer) -> None:
        """Run the cell, then forget its definitions (a run of `%%bench` on the interpreter)."""
        snapshot = self.session.snapshot()
        try:
            self.execute(code, out, err)
        finally:
            self.session.restore(snapshot)

    def check_cell(self, code: str, out: Writer, err: Writer) -> tuple[object, list[Finding]]:
        """(the cell's value, what Oclgrind found) of the cell run on Oclgrind
        (pipeline.check_on_oclgrind). The cell's definitions are not kept."""
        with self.scratch(code) as root:
            return pipeline.check_on_oclgrind(self.session, root, self.settings.options(), out,
                                              err)

    def steps_cell(self, code: str, target: str = "auto") -> list[tuple[str, str]]:
        """The cell's program after each compiler step (pipeline.compile_steps)."""
        options = replace(self.settings.options(keep_result=False), target=target)
        with self.scratch(code) as root:
            return pipeline.compile_steps(self.session, root, options)

    def explain_cell(self, code: str):
        """An fcl.explain.Explanation of the cell's program (cost tables, diagrams, graphs)."""
        with self.scratch(code) as root:
            return explain(self.session, root, self.settings.options(keep_result=False),
                           self.settings.device, self.settings.gpu, self.settings.streaming())

    def define(self, source: Source) -> list[ast.Decl]:
        """Add a file's declarations (for %load)."""
        return self.session.add_file(source)

    # ---- questions about the workspace
    def type_of_expression(self, text: str) -> str:
        snapshot = self.session.snapshot()
        try:
            _, expr = self.session.add_cell(Source("<type>", text))
            if expr is None:
                raise FCLError("give an expression to find its type")
            return show_types(expr.type)[0]
        finally:
            self.session.restore(snapshot)

    def user_definitions(self) -> list[tuple[str, str]]:
        """(name, type scheme) of the user's definitions that are still in scope, in order."""
        seen = {}
        for decl in self.session.user_decls():
            binding = self.session.scope.names.get(decl.name)
            if binding is not None and binding.scheme is decl.scheme:
                seen[decl.name] = str(decl.scheme)
        return list(seen.items())

    def names(self) -> list[str]:
        return sorted(self.session.scope.names)

    def describe(self, name: str) -> str | None:
        """`name : scheme` and its doc, for inspection."""
        binding = self.session.scope.names.get(name)
        if binding is None:
            return None
        text = f"{name} : {binding.scheme}"
        if binding.doc:
            text += f"\n    {binding.doc}"
        elif binding.span is not None:
            origin = "prelude" if binding.span.source.name.endswith("prelude.fcl") else \
                binding.span.source.name
            text += f"\n    defined in {origin}, line {binding.span.line}"
        return text


def _result_type(t: Type) -> Type:
    t = chase(t)
    return chase(t.result) if isinstance(t, TProgram) else t


def _is_unit(t: Type) -> bool:
    t = chase(t)
    return isinstance(t, TCon) and t.name == "unit"


def to_host(value, t: Type, interpreter: Interpreter):
    """An interpreter value as plain host data: numpy arrays and scalars, tuples, None."""
    t = chase(t)
    if isinstance(value, PullArray):
        assert isinstance(t, (TPull, TPush))  # an array's type
        elem = chase(t.elem)
        if not isinstance(elem, (TCon, TPair)) or kind_of(elem) > RT:
            raise FCLError("only arrays of int, double, float or bool, or of records of them, can "
                           f"be shown, not `{show_types(t)[0]}`")
        dtype = record_dtype(elem)
        if not isinstance(value, (Buffer, RecordBuffer)):
            value = interpreter.force(PushPull(value), interpreter.host, dtype, None)
        start = int(lift_full(value.offset, interpreter.host, np.int64)[0])
        length = int(lift_full(value.length, interpreter.host, np.int64)[0])
        # An array of records is shown as its fields' arrays, nested as the pairs are.
        fields = value.fields if isinstance(value, RecordBuffer) else [value]
        return records.rebuild(dtype, [f.data[start:start + length].copy() for f in fields])
    if isinstance(value, tuple) and value and isinstance(t, TPair):
        return tuple(to_host(v, u, interpreter) for v, u in zip(value, (t.fst, t.snd)))
    if isinstance(value, (Closure, Primitive, Program, PushArray)) or isinstance(t, TArrow):
        return Opaque(show_types(t)[0])
    if isinstance(value, tuple):  # unit
        return None
    return value


@dataclass
class Opaque:
    """A value that has no data to show (a function, a program, a push array)."""

    type_text: str


# ---- showing results -------------------------------------------------------------------------

# The theme's second text colour (readable in light and dark themes, see fcl.highlight).
SECONDARY_COLOUR = theme_colour("jp-content-font-color2", "descriptionForeground", "#666")
ELIDE_AFTER = 200  # longer arrays show their first and last elements only
SHOW_EACH_END = 20


def render(value, t: Type | None) -> dict[str, str]:
    """A mime bundle (text/plain always, text/html for arrays) for a cell's result."""
    type_text = show_types(_result_type(t))[0] if t is not None else ""
    plain = _plain(value)
    bundle = {"text/plain": plain}
    if isinstance(value, np.ndarray):
        bundle["text/html"] = _array_html(value, type_text)
    return bundle


def _plain(value) -> str:
    if isinstance(value, np.ndarray):
        items = _format_items(value)
        return "[" + ",".join(items) + "]" + (f"  ({len(value)} elements)" if "…" in items else "")
    if isinstance(value, tuple):
        return "(" + ", ".join(_plain(v) for v in value) + ")"
    if isinstance(value, Opaque):
        return f"<{value.type_text}>"
    if value is None:
        return "()"
    return _scalar(value)


def _scalar(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        return f"{v:.5f}"
    return str(int(v))


def _format_items(values: np.ndarray) -> list[str]:
    if len(values) <= ELIDE_AFTER:
        return [_scalar(v) for v in values]
    head = [_scalar(v) for v in values[:SHOW_EACH_END]]
    tail = [_scalar(v) for v in values[-SHOW_EACH_END:]]
    return head + ["…"] + tail


def _array_html(values: np.ndarray, type_text: str) -> str:
    cells = "".join(f"<td>{item}</td>" if item != "…" else
                    f"<td title='{len(values) - 2 * SHOW_EACH_END} more'>…</td>"
                    for item in _format_items(values))
    return ("<div class='fcl-array' style='font-family:monospace;font-size:90%'>"
            f"<div style='color:{SECONDARY_COLOUR}'>{type_text} · {len(values)} elements</div>"
            "<table style='border-collapse:collapse'><tr>"
            f"{cells}</tr></table></div>")
