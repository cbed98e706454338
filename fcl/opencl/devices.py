"""Choosing an OpenCL device, and building programs for it once.

Without a choice (the `device` option, else `PYOPENCL_CTX`), the first GPU of any platform is
used, else PoCL's CPU device, which pip installs (`pocl-binary-distribution`), so a machine
without a GPU needs no system OpenCL. Oclgrind, a slow simulator that claims to be every kind of
device, is only used when asked for by name or index.
"""
from __future__ import annotations

import os
import re

import pyopencl as cl

from fcl.errors import FCLError

POCL_PLATFORM = "Portable Computing Language"


def all_devices() -> list[tuple[str, cl.Device]]:
    """Every device as (`platform:device` indices, device)."""
    return [(f"{p}:{d}", device) for p, platform in enumerate(cl.get_platforms())
            for d, device in enumerate(platform.get_devices())]


def describe(device: cl.Device) -> str:
    return f"{device.name.strip()} ({device.platform.name.strip()})"


def select_device(choice: str | None = None) -> cl.Device:
    devices = all_devices()
    if not devices:
        raise FCLError("no OpenCL device found", hints=["install pocl-binary-distribution for "
                                                        "a CPU device"])
    choice = choice or os.environ.get("PYOPENCL_CTX") or None
    if choice is not None:
        return _chosen(choice, devices)
    usable = [device for _, device in devices if not _is_oclgrind(device)]
    gpus = [device for device in usable if device.type & cl.device_type.GPU]
    pocl = [device for device in usable if device.platform.name.strip() == POCL_PLATFORM]
    for candidates in (gpus, pocl, usable):
        if candidates:
            return candidates[0]
    raise FCLError("the only OpenCL device is the Oclgrind simulator, which is very slow",
                   hints=["choose it explicitly (device `oclgrind`), or install "
                          "pocl-binary-distribution for a CPU device"])


def _is_oclgrind(device: cl.Device) -> bool:
    return "oclgrind" in device.platform.name.lower()


def _chosen(choice: str, devices: list[tuple[str, cl.Device]]) -> cl.Device:
    """`p:d` or `p` (indices, or parts of the platform and device names), or part of a name."""
    if ":" in choice or choice.isdigit():
        platform_part, _, device_part = choice.partition(":")
        matches = [device for ident, device in devices
                   if _matches(platform_part, ident.split(":")[0], device.platform.name)
                   and (not device_part or _matches(device_part, ident.split(":")[1], device.name))]
    else:
        matches = [device for _, device in devices
                   if choice.lower() in f"{device.name} {device.platform.name}".lower()]
    if not matches:
        listing = "\n".join(f"  {ident}  {describe(device)}" for ident, device in devices)
        raise FCLError(f"no OpenCL device matches `{choice}`; the devices are:\n{listing}")
    return matches[0]


def _matches(part: str, index: str, name: str) -> bool:
    return part == index if part.isdigit() else part.lower() in name.lower()


_queues: dict[cl.Device, cl.CommandQueue] = {}


def queue_for(device: cl.Device) -> cl.CommandQueue:
    """One context and in-order profiling queue per device, shared, so built programs (which
    belong to a context) can be reused by every runtime on that device."""
    if device not in _queues:
        context = cl.Context([device])
        _queues[device] = cl.CommandQueue(
            context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return _queues[device]


class ProgramCache:
    """Built programs by (source, device): running the same program again does not rebuild."""

    def __init__(self):
        self.kernels: dict[tuple[str, cl.Device], dict[str, cl.Kernel]] = {}
        self.builds = 0

    def kernels_of(self, source: str, queue: cl.CommandQueue) -> dict[str, cl.Kernel]:
        key = (source, queue.device)
        if key not in self.kernels:
            try:
                program = cl.Program(queue.context, source).build()
            except cl.RuntimeError as error:
                raise FCLError("the OpenCL compiler rejected the generated code:\n"
                               + _build_log(str(error))) from None
            self.builds += 1
            self.kernels[key] = {k.function_name: k for k in program.all_kernels()}
        return self.kernels[key]


PROGRAM_CACHE = ProgramCache()


def _build_log(message: str) -> str:
    """The compiler's log from PyOpenCL's build error, which wraps it in repeated status text."""
    log = re.search(r"Build on [^\n]*:\n\n(.*?)\n*\(options:", message, re.DOTALL)
    return log.group(1).strip() if log else message
