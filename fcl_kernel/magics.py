"""The kernel's magics: `%name args` lines at the top of a cell, or `%%name args` cells.

Each magic is a method with a docstring (shown by `%name?` and `%magic`); the work itself is
done by the fcl library (compiling, showing code, checking with Oclgrind).
"""
from __future__ import annotations

import html
import shlex
import statistics
import time
import uuid
from pathlib import Path

from fcl import driver
from fcl.errors import FCLError, Source
from fcl.il.ir import show_stmts
from fcl.notebook import BACKENDS, render
from fcl_kernel.codeview import side_by_side


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
    LINE = ("lsmagic", "magic", "type", "time", "device", "config", "load", "who", "reset")
    CELL = ("opencl", "il", "bench", "check", "time", "expect")

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
                   "cell magics: " + "  ".join(f"%%{m}" for m in self.CELL) + "  (%%cl = %%opencl)\n"
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
        """`%time EXPR`: evaluate an expression (or run a grid program) and report the wall time."""
        start = time.perf_counter()
        self.kernel.run_fcl(args)
        self._text(f"Wall time: {(time.perf_counter() - start) * 1000:.1f} ms")

    def line_device(self, args: str) -> None:
        """`%device` lists the OpenCL devices; `%device ID` (e.g. `1:0`, or part of a name) uses one."""
        from fcl.opencl.device import describe_devices, pick_device
        if args:
            device = pick_device(args)
            self.workspace.settings.device = args
            self._text(f"using {device.name.strip()} ({device.platform.name.strip()})")
            return
        current = pick_device(self.workspace.settings.device)
        lines = [("* " if current.name in line else "  ") + line for line in describe_devices()]
        self._text("\n".join(lines))

    def line_config(self, args: str) -> None:
        """`%config` shows the settings; `%config block_size=128 backend=interp bounds_check=on`
        changes them (backend: opencl or interp)."""
        settings = self.workspace.settings
        for item in shlex.split(args):
            key, _, value = item.partition("=")
            if key == "block_size" and value.isdigit() and int(value) > 0:
                settings.block_size = int(value)
            elif key == "backend" and value in BACKENDS:
                settings.backend = value
            elif key == "bounds_check" and value in ("on", "off", "true", "false"):
                settings.bounds_check = value in ("on", "true")
            else:
                raise FCLError(f"cannot set `{item}`: use block_size=N, backend=opencl|interp or "
                               "bounds_check=on|off")
        self._text(f"backend={settings.backend} block_size={settings.block_size} "
                   f"bounds_check={'on' if settings.bounds_check else 'off'} "
                   f"device={settings.device or 'default'}")
        if not args:
            self.kernel.display(settings_panel(settings)._repr_mimebundle_())

    def line_load(self, args: str) -> None:
        """`%load FILE.fcl`: add the declarations of an FCL file."""
        path = Path(args.strip().strip("\"'"))
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise FCLError(f"cannot read `{path}`: {getattr(err, 'strerror', None) or err}") from None
        decls = self.workspace.define(Source(str(path), text))
        self._text(f"loaded {len(decls)} definitions from {path}")

    def line_who(self, args: str) -> None:
        """`%who`: your definitions with their types."""
        rows = self.workspace.user_definitions()
        if not rows:
            return self._text("no definitions yet")
        plain = "\n".join(f"{name} : {scheme}" for name, scheme in rows)
        table = "".join(f"<tr><td><b>{html.escape(n)}</b></td><td><code>{html.escape(s)}</code></td></tr>"
                        for n, s in rows)
        self.kernel.display({"text/plain": plain, "text/html": f"<table>{table}</table>"})

    def line_reset(self, args: str) -> None:
        """`%reset`: forget every definition (the prelude stays)."""
        self.workspace.reset()
        self._text("all definitions forgotten")

    # ---- cell magics
    def _compile(self, body: str):
        """Compile the cell's final expression (or its `main`) without keeping its definitions."""
        session = self.workspace.session
        snapshot = session.snapshot()
        try:
            decls, expr = session.add_cell(Source(self.workspace.cell_name(), body))
            root = expr if expr is not None else driver.main_root(session)
            options = self.workspace.settings.options(keep_result=False)
            return driver.lower(session, root, options), driver.compile_opencl(session, root, options)
        finally:
            session.restore(snapshot)

    def cell_opencl(self, args: str, body: str) -> None:
        """`%%opencl` (or `%%cl`): show the OpenCL generated for the cell, each FCL line and the
        OpenCL lines it produced in matching colours. The cell's definitions are not kept."""
        _, compiled = self._compile(body)
        self.kernel.display({"text/plain": compiled.source,
                             "text/html": side_by_side(body, compiled.source, compiled.line_table)})

    def cell_il(self, args: str, body: str) -> None:
        """`%%il`: show the imperative IL the cell compiles to (before kernels are cut out)."""
        il, _ = self._compile(body)
        self.kernel.display({"text/plain": show_stmts(il),
                             "text/html": f"<pre>{html.escape(show_stmts(il))}</pre>"})

    def cell_time(self, args: str, body: str) -> None:
        """`%%time`: run the cell and report the wall time."""
        self.line_time(body)

    def cell_bench(self, args: str, body: str) -> None:
        """`%%bench [N]`: run the cell's program N times (default 10), with a progress bar, and
        report the mean, min and median time per run."""
        count = int(args) if args.strip().isdigit() else 10
        display_id = uuid.uuid4().hex
        self._progress(0, count, display_id, new=True)
        times = []
        snapshot = self.workspace.session.snapshot()
        try:
            for k in range(count):
                start = time.perf_counter()
                self.kernel.workspace.execute(body, _Discard(), _Discard())
                times.append((time.perf_counter() - start) * 1000)
                self.workspace.session.restore(snapshot)
                self._progress(k + 1, count, display_id)
        finally:
            self.workspace.session.restore(snapshot)
        self._text(f"{count} runs: mean {statistics.mean(times):.2f} ms, min {min(times):.2f} ms, "
                   f"median {statistics.median(times):.2f} ms ({self.workspace.settings.backend})")

    def _progress(self, done: int, total: int, display_id: str, new: bool = False) -> None:
        bar = (f"<progress value='{done}' max='{total}' style='width:20em'></progress> "
               f"{done}/{total}")
        content = {"data": {"text/plain": f"{done}/{total}", "text/html": bar}, "metadata": {},
                   "transient": {"display_id": display_id}}
        self.kernel.send_response(self.kernel.iopub_socket,
                                  "display_data" if new else "update_display_data", content)

    def cell_check(self, args: str, body: str) -> None:
        """`%%check`: run the cell on Oclgrind and report data races, out-of-bounds accesses and
        uninitialized reads at FCL lines."""
        from fcl.opencl.check import check_in_process
        session = self.workspace.session
        snapshot = session.snapshot()
        try:
            decls, expr = session.add_cell(Source(self.workspace.cell_name(), body))
            root = expr if expr is not None else driver.main_root(session)
            options = self.workspace.settings.options()
            value, findings = check_in_process(session, root, options, self.kernel.out,
                                               self.kernel.err)
        finally:
            session.restore(snapshot)
        for finding in findings:
            self.kernel.err.write(finding.as_error().render() + "\n")
        self._text(f"Oclgrind: {len(findings)} problem(s) found" if findings else
                   "Oclgrind: no data races, out-of-bounds accesses or uninitialized reads")
        if value is not None:
            self.kernel.display(render(value, None))

    def cell_expect(self, args: str, body: str) -> None:
        """`%%expect NUMPY-EXPR`: run the cell like any other (its definitions are kept), then
        compare its result with a numpy expression (`np` is numpy), e.g.
        `%%expect np.arange(8)[::-1]`. Shows ✓ when they match (floats approximately), else ✗ and
        the first wrong positions: an output, not an error, so Run All goes on."""
        from fcl_kernel.expect import compare, evaluate_expected
        expected = evaluate_expected(args)
        outcome = self.workspace.execute(body, self.kernel.out, self.kernel.err)
        if outcome.shown:
            self.kernel.display(render(outcome.value, outcome.type))
        _, verdict = compare(outcome.value if outcome.shown else None, expected)
        self.kernel.display(verdict)


def settings_panel(settings):
    """Widgets that change the workspace settings as they are moved."""
    import ipywidgets as widgets
    backend = widgets.Dropdown(options=list(BACKENDS), value=settings.backend, description="backend")
    block = widgets.BoundedIntText(value=settings.block_size, min=1, max=1024,
                                   description="block size")
    checks = widgets.Checkbox(value=settings.bounds_check, description="bounds checks")
    backend.observe(lambda change: setattr(settings, "backend", change["new"]), names="value")
    block.observe(lambda change: setattr(settings, "block_size", change["new"]), names="value")
    checks.observe(lambda change: setattr(settings, "bounds_check", change["new"]), names="value")
    return widgets.HBox([backend, block, checks])


class _Discard:
    def write(self, text: str) -> int:
        return len(text)
