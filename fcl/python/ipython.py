"""`%load_ext fcl`: FCL in the ordinary Python kernel, next to numpy and matplotlib.

    %%fcl [--backend auto|opencl|interp] [--block-size N] [--unsafe] [--opencl] [--name NAME]
          [--device-memory BYTES] [--chunk N] [--no-overlap]
        compile the cell (fcl.python.library.load); each entry point becomes a name in the
        user's namespace, and the library itself NAME (default `fcl_lib`). --opencl also shows
        each entry point's OpenCL next to the cell, line by line in matching colours. The last
        three say how sequence arguments are streamed (load's device_memory, chunk, overlap).
    %fcl_costs [--gpu NAME] f(args)
        the cost table and memory diagrams of one call, f an entry point (fcl's `%%costs`).
"""
from __future__ import annotations

import argparse
import ast as python_ast
import html
import shlex

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from fcl.analysis.gpu import DEFAULT_GPU
from fcl.defaults import BLOCK_SIZE
from fcl.python.library import EntryPoint, load
from fcl.runtime.device import BACKENDS, free_held_memory
from fcl.server.lean import bound_opencl_threads, use_build_helper
from fcl.viz.codeview import side_by_side


def register(ipython) -> None:
    ipython.register_magics(FCLMagics)
    # As in the FCL kernel, the OpenCL side keeps little while the user reads (a class may share
    # the server): bounded threads, programs built in a helper process, and the device memory
    # pool's unused arrays given back after each cell. Python's own malloc policy stays as it is:
    # numpy's work would pay for fresh pages at every large array.
    bound_opencl_threads()
    use_build_helper()
    ipython.events.register("post_run_cell", _release_held_memory)


def _release_held_memory(result) -> None:
    free_held_memory()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # a usage error is shown as one line, not a SystemExit
        raise UsageError(f"%{self.prog}: {message}")


def _cell_parser() -> _Parser:
    parser = _Parser(prog="fcl", add_help=False)
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument("--block-size", type=int, default=BLOCK_SIZE)
    parser.add_argument("--unsafe", action="store_true")
    parser.add_argument("--opencl", action="store_true")
    parser.add_argument("--name", default="fcl_lib")
    parser.add_argument("--device-memory", default=None)
    parser.add_argument("--chunk", type=int, default=None)
    parser.add_argument("--no-overlap", action="store_true")
    return parser


@magics_class
class FCLMagics(Magics):
    @property
    def ipython(self) -> InteractiveShell:
        assert self.shell is not None  # registered with a shell (register)
        return self.shell

    @cell_magic
    def fcl(self, line: str, cell: str):
        """Compile the cell's FCL: its callable functions become Python functions here."""
        options = _cell_parser().parse_args(shlex.split(line))
        if not options.name.isidentifier():
            raise UsageError(f"%%fcl: --name needs a Python name, not {options.name!r}")
        self.cells = getattr(self, "cells", 0) + 1
        try:
            library = load(cell, backend=options.backend, block_size=options.block_size,
                           checks=not options.unsafe, name=f"<fcl cell {self.cells}>",
                           device_memory=options.device_memory, chunk=options.chunk,
                           overlap=not options.no_overlap)
        except ValueError as err:  # a bad --device-memory or --chunk
            raise UsageError(f"%%fcl: {err}") from None
        self.ipython.push({options.name: library, **library.entry_points})
        if options.opencl:
            for entry in library.entry_points.values():
                compiled = entry.compiled()
                display({"text/plain": f"{entry.signature}\n{compiled.source}",
                         "text/html": f"<div><b>{html.escape(entry.signature)}</b></div>"
                                      + side_by_side(cell, compiled.source,
                                                     compiled.line_table)}, raw=True)
        display({"text/plain": repr(library)}, raw=True)

    @line_magic
    def fcl_costs(self, line: str):
        """`%fcl_costs [--gpu NAME] f(args)`: what one call of entry point f does on the GPU."""
        gpu, call = DEFAULT_GPU, line.strip()
        if call.startswith("--gpu"):
            words = call.split(None, 2)
            if len(words) < 3:
                raise UsageError("%fcl_costs: give --gpu NAME, then the call")
            gpu, call = words[1], words[2]
        try:
            tree = python_ast.parse(call, mode="eval").body
        except SyntaxError:
            tree = None
        if not isinstance(tree, python_ast.Call) or tree.keywords:
            raise UsageError("%fcl_costs: give one call of an FCL function, like "
                             "`%fcl_costs f(xs, 3)`")
        entry = self.ipython.ev(python_ast.unparse(tree.func))
        if not isinstance(entry, EntryPoint):
            raise UsageError(f"%fcl_costs: `{python_ast.unparse(tree.func)}` is not an FCL "
                             "function (define it in a %%fcl cell)")
        args = [self.ipython.ev(python_ast.unparse(arg)) for arg in tree.args]
        explanation = entry.costs(*args, gpu=gpu)
        display(explanation)
        for _, diagram in explanation.memory():
            display({"image/svg+xml": diagram.svg, "text/plain": diagram.text}, raw=True)
