"""The back end, from the optimised IL to OpenCL, for a GPU or a CPU device: its steps
(fcl.steps.BACKEND_STEPS: in place, kernelize, then the decisions about each kernel), then the
printer (fcl.codegen.emit: OpenCL C and its line table).

A GPU runs a work-group's work-items side by side, so a block-level loop spreads its iterations
over them with a barrier after it. A CPU device runs work-items one after another: PoCL makes
each stretch between barriers a loop over the work-group's work-items, keeps what lives across a
barrier in per-work-item memory, and its vectoriser then gathers and scatters. For CPU devices
the work-group kernels are therefore serial: one work-item per group runs each block-level loop
as a plain loop, with no barriers (bench/README.md, "Serial work-groups", has the measurements);
and each work-item of a grid loop runs a run of consecutive iterations, a loop that LLVM
vectorizes whether or not PoCL vectorizes across work-items (bench/README.md, "Runs of
consecutive iterations").
A program compiled without a stated target is shaped for a GPU and reshaped for a CPU device when
it runs on one (`for_device`).
"""
from __future__ import annotations

from fcl.codegen.emit import opencl_source
from fcl.codegen.kernel import Compiled, array_labels
from fcl.il import ir
from fcl.steps import BACKEND_STEPS, KernelProgram, Observer, Settings, run_steps

TARGETS = ("auto", "gpu", "cpu")


def compile_il(il: list[ir.Stmt], block_size: int, target: str = "auto",
               observe: Observer | None = None, home: str | None = None,
               plan_memory: bool = True, share_blocks: bool = True,
               layout: str = "auto", cpu_il: list[ir.Stmt] | None = None) -> Compiled:
    """The host program, kernels and OpenCL source for `target` ("auto": a GPU's, reshaped for a
    CPU device at run time); `observe(step, program)` after each step (fcl.steps); `home` the
    source of the program's root (Settings.home); `plan_memory` runs the memory steps
    (fcl.memory), `share_blocks` the one that gives arrays shared blocks; `layout` is the
    layout of arrays of records ("auto": the one the kernels' accesses favour); `cpu_il`, for
    "auto", the IL to reshape for a CPU device where it is not `il` (irregular rows not
    flattened)."""
    if target not in TARGETS:
        raise ValueError(target)
    with ir.key_scope():
        shaped = run_steps(il, BACKEND_STEPS, Settings(block_size, target == "cpu", home,
                                                           plan_memory, share_blocks, layout),
                           observe)
        assert isinstance(shaped, KernelProgram)
        labels = array_labels(il + shaped.host)
        source, table = opencl_source(shaped.kernels, labels)
    return Compiled(il, shaped.host, shaped.kernels, source, table, block_size,
                    target="cpu" if target == "cpu" else "gpu", portable=target == "auto",
                    home=home, plan_memory=plan_memory, share_blocks=share_blocks,
                    layout=layout, labels=labels, cpu_il=cpu_il)


def for_device(compiled: Compiled, cpu: bool) -> Compiled:
    """`compiled` as it runs on a CPU (cpu) or GPU device: a portable program's kernels are
    reshaped for a CPU device, once."""
    if not compiled.portable or cpu == (compiled.target == "cpu") \
            or compiled.block_size is None or not compiled.kernels:
        # Only kernels of a known group size are shaped otherwise.
        return compiled
    if compiled.reshaped is None:
        il = compiled.cpu_il if cpu and compiled.cpu_il is not None else compiled.il
        compiled.reshaped = compile_il(il, compiled.block_size, "cpu" if cpu else "gpu",
                                       home=compiled.home, plan_memory=compiled.plan_memory,
                                       share_blocks=compiled.share_blocks,
                                       layout=compiled.layout)
    return compiled.reshaped
