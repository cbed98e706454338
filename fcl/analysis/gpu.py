"""GPU profiles: one TOML file per GPU in fcl/gpus/, the figures that occupancy and predicted times
are computed from.

The files are data so that a figure can be checked against the source it cites, and a GPU added
without touching code. Vendor figures sit at the top level of a file; the model's own guesses
(launch overhead, memory latency) sit in its [assumed] table, so that nobody mistakes them for
vendor figures. CUDA's words are kept ("block", "shared memory", "SM"), as in the sources.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from fcl.analysis.access import BANKS, LINE_BYTES, SECTOR_BYTES, WARP_SIZE
from fcl.errors import FCLError

PROFILES = Path(__file__).resolve().parent.parent / "gpus"
DEFAULT_GPU = "generic"


@dataclass(frozen=True)
class Citation:
    title: str
    url: str
    figures: str  # which of the profile's figures it supports


@dataclass(frozen=True)
class GPU:
    key: str                  # the file's name: what --gpu and %config gpu= take
    name: str
    description: str
    compute_capability: str
    sms: int
    warp_size: int
    sector_bytes: int
    line_bytes: int
    memory_bandwidth: int     # bytes/s
    host_bandwidth: int       # bytes/s each way between the host and the GPU (its PCIe link)
    l2_bytes: int
    shared_memory_per_sm: int
    shared_memory_per_block: int
    shared_memory_reserved_per_block: int
    registers_per_sm: int
    registers_per_thread: int
    register_allocation_unit: int  # per warp
    max_threads_per_block: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_warps_per_sm: int
    clock_hz: int
    shared_memory_banks: int
    fp64_flops: float         # FLOP/s on doubles, an FMA counting two (the vendors' peak)
    fp32_flops: float         # FLOP/s on floats, the same way
    launch_overhead_us: float  # assumed
    memory_latency_ns: float   # assumed
    cache_latency_ns: float    # assumed: a load its SM's L1 holds
    sources: tuple[Citation, ...]

    @property
    def double_ops(self) -> float:
        """Operations on doubles per second, each an instruction of its own (FCL contracts no
        multiply and add into an FMA): half the peak FLOP/s, which counts an FMA as two."""
        return self.fp64_flops / 2

    @property
    def float_ops(self) -> float:
        """Operations on floats per second, as `double_ops` counts those on doubles."""
        return self.fp32_flops / 2


def gpu_names() -> list[str]:
    return sorted(path.stem for path in PROFILES.glob("*.toml"))


@functools.cache
def load_gpu(name: str) -> GPU:
    """The profile fcl/gpus/NAME.toml (the name in any case)."""
    key = name.strip().lower()
    if key not in gpu_names():
        raise FCLError(f"no GPU named `{name}`; the known GPUs are: {', '.join(gpu_names())}")
    data = tomllib.loads((PROFILES / f"{key}.toml").read_text(encoding="utf-8"))
    assumed = data.pop("assumed")
    sources = tuple(Citation(**source) for source in data.pop("sources"))
    gpu = GPU(key=key, **data, **assumed, sources=sources)
    # The tracer counts (and the diagrams draw) NVIDIA's units; another GPU needs other counts.
    units = (gpu.warp_size, gpu.sector_bytes, gpu.line_bytes, gpu.shared_memory_banks)
    if units != (WARP_SIZE, SECTOR_BYTES, LINE_BYTES, BANKS):
        raise FCLError(f"GPU {key}: warps of {gpu.warp_size}, {gpu.sector_bytes}-byte sectors, "
                       f"{gpu.line_bytes}-byte lines and {gpu.shared_memory_banks} banks differ "
                       f"from the {WARP_SIZE}, {SECTOR_BYTES}, {LINE_BYTES} and {BANKS} that "
                       "fcl counts")
    return gpu
