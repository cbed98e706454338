"""The compiler's stages, composed: the one place that says what runs after what.

    parse, check   fcl.session (a program grows by files or notebook cells)
    root           main_root: the expression to run
    mono           fcl.mono: one copy of each definition per type it is used at
    lower          fcl.il.lower + fcl.il.builtins: compile-time evaluation into the IL
    steps          fcl.steps: the list of steps after lowering, each a function from a program
                   to a new one: optimisation passes, unnest, then the back end's (in place,
                   kernelize, the decisions about each kernel), for a GPU or a CPU
    emit           fcl.codegen.emit: OpenCL C (fcl.backend)
    run            fcl.runtime.host (a device) or fcl.interp (the reference interpreter)

The CLI, the notebook workspace, the explain module and the Oclgrind check all come here.
With `verify_il`, the program is verified after every step (fcl.il.verify, fcl.codegen.verify).
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace

from fcl import backend
from fcl.codegen.kernel import Compiled
from fcl.deep import compiler_stage, depth_guard, on_big_stack
from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.errors import FCLError
from fcl.hostio import Writer
from fcl.il import ir
from fcl.il.builtins import make_primitive
from fcl.il.lower import Lowerer
from fcl.interp.eval import Interpreter, RunConfig
from fcl.mono import GRID, MonoProgram, level_number, monomorphize
from fcl.runtime.host import run_compiled
from fcl.runtime.oclgrind import Finding, parse_reports
from fcl.runtime.streams import StreamOptions
from fcl.session import Session
from fcl.steps import (
    IL_STEPS,
    Observer,
    Program,
    Settings,
    run_steps,
    show_program,
    step_names,
    verifier,
)
from fcl.syntax import ast
from fcl.types.types import TProgram, chase, show_types
from fcl.viz.timeline import Timeline


@dataclass
class CompileOptions:
    block_size: int = BLOCK_SIZE
    checks: bool = True        # run-time checks (fcl.checks); off: `--unsafe`, checks=off
    keep_result: bool = False  # end by handing main's result back to the host (notebooks)
    verify_il: bool = False    # check the IL's invariants after every pass
    target: str = "auto"       # kernels for a "gpu" or "cpu" device, or "auto" (fcl.backend)
    short_circuit: bool = True  # the memory steps (fcl.memory); off: each array its own buffer
    # Arrays sharing blocks (fcl.memory.blocks); off under Oclgrind, whose reports of elements
    # read before they are written a reused block would hide.
    share_blocks: bool = True
    warp_size: int = WARP_SIZE  # the value of #WarpSize
    flatten: bool = True  # irregular arrays flattened (fcl.il.rows); off: a work-item per row
    layout: str = "auto"  # arrays of records: soa, aos, aosoa or auto (fcl.memory.layouts)


def main_root(session: Session) -> ast.Expr:
    """The expression `main`, checked to be a grid-level program."""
    decl = next((d for d in reversed(session.decls) if d.name == "main"), None)
    if decl is None:
        where = f" in {', '.join(session.files)}" if session.files else ""
        raise FCLError(f"there is no `main` to run{where}: define `val main = ...` of type "
                       "`Program <grid> 'a`")
    root = ast.Var(decl.name_span, "main")
    t = chase(session.checker.check_expr(session.scope, root))
    scheme = session.type_of("main")
    assert scheme is not None  # main is declared, and checked just now
    if not (isinstance(t, TProgram) and level_number(t.level) == GRID
            and scheme.level_vars == []):
        raise FCLError(f"`main` must have type `Program <grid> 'a` to be run, but it has type "
                       f"`{show_types(t)[0]}`", decl.name_span,
                       ["wrap a pure value with `return<grid>`, or build the result with "
                        "`forceAndPrint`"])
    return root


# The stages below run on a large stack (fcl.deep), so that deeply nested programs compile, and
# the compiler's with Python's cyclic collector paused (fcl.deep.collections_paused).
@compiler_stage
def mono_program(session: Session, root: ast.Expr) -> MonoProgram:
    with _depth_guard(root, "to compile"):
        return monomorphize(session.decls, root)


def _depth_guard(root: ast.Expr, what: str):
    return depth_guard(root.span, f"the program is nested too deeply {what}")


@on_big_stack
def run_interpreter(session: Session, root: ast.Expr, config: RunConfig | None = None):
    return Interpreter(config).run(mono_program(session, root))


@compiler_stage
def lower(session: Session, root: ast.Expr, options: CompileOptions | None = None,
          entry: bool = False, observe: Observer | None = None) -> list[ir.Stmt]:
    """The optimised IL host program for `root`, before kernels are cut out; an `entry` root is a
    function called from Python (fcl.python, ir.Input). `observe(step, program)` is told the
    lowered IL (step "lower") and the program after each step (fcl.steps)."""
    return lowered(session, root, options or CompileOptions(), entry, observe)[0]


def lowered(session: Session, root: ast.Expr, options: CompileOptions, entry: bool,
             observe: Observer | None) -> tuple[list[ir.Stmt], bool]:
    """`lower`'s IL, and whether the program has irregular rows (fcl.il.rows)."""
    if options.target == "cpu":
        options = replace(options, flatten=False)  # see compile_program
    with _depth_guard(root, "to compile"), ir.key_scope():
        lowerer = Lowerer(make_primitive, options.block_size, options.checks, options.warp_size,
                          options.flatten)
        il = lowerer.lower(mono_program(session, root), options.keep_result, entry)
        observers = _observers(options, observe)
        if observers is not None:
            observers(LOWER, il)
        optimized = run_steps(il, IL_STEPS, Settings(options.block_size), observers)
        assert isinstance(optimized, list)
        return optimized, lowerer.irregular


def _observers(options: CompileOptions, observe: Observer | None) -> Observer | None:
    """The verifier (with `verify_il`) and `observe`, as one observer."""
    each = [o for o in (verifier(options.share_blocks) if options.verify_il else None, observe)
            if o is not None]
    if not each:
        return None

    def observe_all(step: str, program: Program) -> None:
        for observer in each:
            observer(step, program)
    return observe_all


@compiler_stage
def compile_program(session: Session, root: ast.Expr, options: CompileOptions | None = None,
                    entry: bool = False, observe: Observer | None = None) -> Compiled:
    """The IL, host program, kernels and OpenCL source (with its line table) for `root`;
    `observe` as for `lower`."""
    options = options or CompileOptions()
    il, irregular = lowered(session, root, options, entry, observe)
    # Irregular rows are flattened for a GPU, whose warps wait for their longest row; a CPU has
    # no warps, and a work-item per row is 2-3 times faster there (bench/README.md, "Irregular
    # arrays"). A program that may run on either keeps both, the CPU's for reshaping.
    cpu_il = lowered(session, root, replace(options, flatten=False), entry, None)[0] \
        if irregular and options.flatten and options.target == "auto" else None
    with _depth_guard(root, "to compile"):
        return compile_il(il, options, observe, root.span.source.name, cpu_il)


def compile_il(il: list[ir.Stmt], options: CompileOptions, observe: Observer | None = None,
               home: str | None = None, cpu_il: list[ir.Stmt] | None = None) -> Compiled:
    """The back end's steps and printer, from the optimised IL to OpenCL (fcl.backend); `home`
    is the source of the program's root; `cpu_il` the IL to reshape for a CPU device, where it
    differs."""
    return backend.compile_il(il, options.block_size, options.target,
                              _observers(options, observe), home, options.short_circuit,
                              options.share_blocks, options.layout, cpu_il)


LOWER = "lower"  # the first stage shown by compile_steps: the lowered IL
EMIT = "emit"  # the last stage shown by compile_steps: the OpenCL C


def stage_purposes() -> list[tuple[str, str]]:
    """(name, purpose) of what `compile_steps` can show, in order: the lowered IL, each step (a
    fixpoint's own steps indented under it), the OpenCL C."""
    return [(LOWER, "the program lowered to the IL, irregular rows flattened by their shape: "
                    "what the steps start from"), *step_names(),
            (EMIT, "the OpenCL C printed from the kernels: what `fcl compile` prints")]


def stage_names() -> list[str]:
    return [name.strip() for name, _ in stage_purposes()]


def compile_steps(session: Session, root: ast.Expr, options: CompileOptions | None = None
                  ) -> list[tuple[str, str]]:
    """(stage, the program after it, as text) for the lowered IL, each step run (a fixpoint's
    steps once per round, then the fixpoint's name) and the OpenCL C (EMIT)."""
    views: list[tuple[str, str]] = []
    compiled = compile_program(session, root, options,
                               observe=lambda step, program: views.append(
                                   (step, show_program(program))))
    views.append((EMIT, compiled.source))
    return views


def run_opencl(session: Session, root: ast.Expr, options: CompileOptions | None = None,
               device: str | None = None, out: Writer | None = None, err: Writer | None = None,
               streaming: StreamOptions | None = None,
               on_timeline: Callable[[Timeline], None] | None = None):
    options = for_run_on(options or CompileOptions(), device)
    return run_compiled(compile_program(session, root, options), device, options.block_size,
                        out, err, streaming=streaming, on_timeline=on_timeline)


def for_run_on(options: CompileOptions, device: str | None) -> CompileOptions:
    """The options for running on `device`: on Oclgrind, no arrays sharing blocks."""
    return replace(options, share_blocks=False) if device == "oclgrind" else options


def check_on_oclgrind(session: Session, root: ast.Expr, options: CompileOptions,
                      out: Writer | None, err: Writer | None) -> tuple[object, list[Finding]]:
    """Run on Oclgrind in this process (its settings, OCLGRIND_ENV, must have been in the
    environment when OpenCL was first loaded, as the kernel arranges); (result, findings)."""
    options = for_run_on(options, "oclgrind")
    compiled = compile_program(session, root, options)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(capture.fileno(), 2)  # Oclgrind reports on the process's own stderr
        try:
            value = run_compiled(compiled, "oclgrind", options.block_size, out, err)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        capture.seek(0)
        reports = capture.read().decode("utf-8", "replace")
    return value, parse_reports(reports, compiled)
