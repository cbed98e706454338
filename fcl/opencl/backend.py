"""The back end's stages, from the optimised IL to OpenCL, for a GPU or a CPU device.

    in place   fcl.opencl.inplace: kernels that may write over their input
    kernelize  fcl.opencl.kernelize: host statements and kernels
    shape      fcl.opencl.shape: work-groups, memory and index decisions per kernel
    emit       fcl.opencl.emit: OpenCL C and its line table

A GPU runs a work-group's work-items side by side, so a block-level loop spreads its iterations
over them with a barrier after it. A CPU device runs work-items one after another: PoCL makes
each stretch between barriers a loop over the work-group's work-items, keeps what lives across a
barrier in per-work-item memory, and its vectoriser then gathers and scatters. For CPU devices
the work-group kernels are therefore serial: one work-item per group runs each block-level loop
as a plain loop, with no barriers (bench/README.md, "Serial work-groups", has the measurements).
A program compiled without a stated target is shaped for a GPU and reshaped for a CPU device when
it runs on one (`for_device`).
"""
from __future__ import annotations

from fcl.il import ir
from fcl.il.verify import verify
from fcl.opencl.emit import opencl_source
from fcl.opencl.inplace import in_place
from fcl.opencl.kernel import Compiled
from fcl.opencl.kernelize import kernelize
from fcl.opencl.shape import shape
from fcl.opencl.verify import verify_kernels

TARGETS = ("auto", "gpu", "cpu")


def compile_il(il: list[ir.Stmt], block_size: int, target: str = "auto",
               verify_il: bool = False) -> Compiled:
    """The host program, kernels and OpenCL source for `target` ("auto": a GPU's, reshaped for a
    CPU device at run time)."""
    if target not in TARGETS:
        raise ValueError(target)
    with ir.key_scope():
        return _compile_il(il, block_size, target, verify_il)


def _compile_il(il: list[ir.Stmt], block_size: int, target: str, verify_il: bool) -> Compiled:
    rewritten = in_place(il)
    if verify_il:
        verify("in place", rewritten)
    host, kernels = kernelize(rewritten, block_size, serial=target == "cpu")
    shape(kernels)
    if verify_il:
        verify_kernels(host, kernels)
    source, table = opencl_source(kernels)
    return Compiled(il, host, kernels, source, table, block_size,
                    target="cpu" if target == "cpu" else "gpu", portable=target == "auto")


def for_device(compiled: Compiled, cpu: bool) -> Compiled:
    """`compiled` as it runs on a CPU (cpu) or GPU device: a portable program's kernels are
    reshaped for a CPU device, once."""
    if not compiled.portable or cpu == (compiled.target == "cpu") \
            or compiled.block_size is None \
            or not any(kernel.group_var is not None for kernel in compiled.kernels):
        # Only work-group kernels (not grid loops) of a known group size are shaped otherwise.
        return compiled
    if compiled.reshaped is None:
        compiled.reshaped = compile_il(compiled.il, compiled.block_size, "cpu" if cpu else "gpu")
    return compiled.reshaped
