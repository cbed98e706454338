"""From a checked session to a result: pick the root, monomorphize, run on a back end."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from fcl.errors import FCLError
from fcl.interp.eval import Interpreter, RunConfig
from fcl.mono import MonoProgram, level_number, monomorphize
from fcl.session import Session
from fcl.syntax import ast
from fcl.types.types import TProgram, chase, show_types


def main_root(session: Session) -> ast.Expr:
    """The expression `main`, checked to be a grid-level program."""
    decl = next((d for d in reversed(session.decls) if d.name == "main"), None)
    if decl is None:
        raise FCLError("there is no `main` to run: define `val main = ...` of type "
                       "`Program <grid> 'a`")
    root = ast.Var(decl.name_span, "main")
    t = chase(session.checker.check_expr(session.scope, root))
    if not (isinstance(t, TProgram) and level_number(t.level) == 2
            and session.type_of("main").level_vars == []):
        raise FCLError(f"`main` must have type `Program <grid> 'a` to be run, but it has type "
                       f"`{show_types(t)[0]}`", decl.name_span,
                       ["wrap a pure value with `return<grid>`, or build the result with "
                        "`forceAndPrint`"])
    return root


def mono_program(session: Session, root: ast.Expr) -> MonoProgram:
    return monomorphize(session.decls, root)


@contextmanager
def _depth_guard(root: ast.Expr, what: str):
    """Turn Python running out of stack on a deeply nested program into a located FCL error."""
    try:
        yield
    except RecursionError:
        raise FCLError(f"the program is nested too deeply {what}", root.span,
                       ["split deeply nested expressions into smaller definitions"]) from None


def run_interpreter(session: Session, root: ast.Expr, config: RunConfig | None = None):
    with _depth_guard(root, "for the interpreter to run"):
        return Interpreter(config).run(mono_program(session, root))


@dataclass
class CompileOptions:
    block_size: int = 256
    bounds_check: bool = False
    keep_result: bool = False  # end by handing main's result back to the host (notebooks)


def lower(session: Session, root: ast.Expr, options: CompileOptions | None = None) -> list:
    """The IL host program for `root`."""
    from fcl.il.lower import lower_program
    options = options or CompileOptions()
    with _depth_guard(root, "to compile"):
        return lower_program(mono_program(session, root), options.block_size, options.bounds_check,
                         options.keep_result)


def compile_opencl(session: Session, root: ast.Expr, options: CompileOptions | None = None):
    """Host program, kernels and OpenCL source (with its line table) for `root`."""
    return compile_with_il(session, root, options)[1]


def compile_with_il(session: Session, root: ast.Expr, options: CompileOptions | None = None):
    """(the IL before kernels are cut out, the compiled program) for `root`."""
    from fcl.opencl.host import compile_host_program
    options = options or CompileOptions()
    il = lower(session, root, options)
    with _depth_guard(root, "to compile"):
        return il, compile_host_program(il, options.block_size)


def run_opencl(session: Session, root: ast.Expr, options: CompileOptions | None = None,
               device: str | None = None, out=None, err=None):
    from fcl.opencl.host import run_compiled
    options = options or CompileOptions()
    compiled = compile_opencl(session, root, options)
    return run_compiled(compiled, device, options.block_size, out, err)
