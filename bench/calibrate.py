"""Micro-benchmarks for the GPU profiles' assumed entries (fcl/analysis/gpu.py, docs/costs.md):
launch overhead, memory latency and the latency of a load the caches hold, the requests a warp
keeps in flight, bandwidth, the cost of a barrier and the rate of atomics, each measured with
profiling events on the device given, as the median of a few runs."""
from __future__ import annotations

import statistics
import time

import numpy as np
import pyopencl as cl

from fcl.runtime.device import Device

KERNELS = """
__kernel void empty(__global int* x) { }

// One work-item follows a chain of indices: each load waits for the one before it.
__kernel void chase(__global const int* next, __global int* out, int steps) {
    int at = 0;
    for (int k = 0; k < steps; k++) at = next[at];
    out[0] = at;
}

// The same with WAYS chains at once, each load independent of the other chains': what one
// work-item overlaps (the model's REQUESTS_IN_FLIGHT).
#define CHASES(WAYS) \
__kernel void chase##WAYS(__global const int* next, __global int* out, int steps, int apart) { \
    int at[WAYS]; \
    for (int w = 0; w < WAYS; w++) at[w] = w * apart; \
    for (int k = 0; k < steps; k++) { \
        _Pragma("unroll") for (int w = 0; w < WAYS; w++) at[w] = next[at[w]]; \
    } \
    int sum = 0; \
    for (int w = 0; w < WAYS; w++) sum += at[w]; \
    out[0] = sum; \
}
CHASES(2)
CHASES(4)
CHASES(8)
CHASES(16)

__kernel void copy(__global const int4* in, __global int4* out) {
    size_t i = get_global_id(0);
    out[i] = in[i];
}

// `rounds` barriers per work-group, with a local store between them so none can be dropped.
__kernel void barriers(__global int* out, int rounds) {
    __local int slot[1024];
    int t = get_local_id(0);
    int x = t;
    for (int r = 0; r < rounds; r++) {
        slot[t] = x;
        barrier(CLK_LOCAL_MEM_FENCE);
        x += slot[(t + 1) % get_local_size(0)];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    out[get_global_id(0)] = x;
}

// Every work-item adds 1 to element i % spread: spread 1 is all on one element.
__kernel void atomics(__global int* counts, int spread) {
    atomic_add(&counts[get_global_id(0) % spread], 1);
}
"""


def _median_ms(run, repeats: int) -> float:
    run()  # a warm-up: the first launch builds and maps what the rest reuse
    times = []
    for _ in range(repeats):
        events = run()
        cl.wait_for_events(events)
        times.append(sum(e.profile.end - e.profile.start for e in events) / 1e6)
    return statistics.median(times)


def calibrate(device: Device, scale: float = 1.0, repeats: int = 5) -> dict[str, float]:
    """The measured entries; `scale` below 1 shrinks the work (a quick check, not a figure)."""
    ctx, queue = device.context, device.queue
    built = cl.Program(ctx, KERNELS).build()
    k = {kernel.function_name: kernel for kernel in built.all_kernels()}
    group = min(256, device.device.max_work_group_size)
    flags = cl.mem_flags
    scratch = cl.Buffer(ctx, flags.READ_WRITE, 4 * 1024 * 1024)

    # Launch overhead: the host's wall time per launch of an empty kernel, many in a row.
    launches = max(10, int(200 * scale))
    k["empty"](queue, (group,), (group,), scratch).wait()
    start = time.perf_counter()
    for _ in range(launches):
        k["empty"](queue, (group,), (group,), scratch)
    queue.finish()
    launch_us = (time.perf_counter() - start) / launches * 1e6

    # Memory latency: a random cycle through 64 MB (beyond the caches of a GPU's L2 and most
    # CPUs'), one dependent load at a time.
    n = max(1 << 12, int((16 << 20) * scale))
    order = np.random.default_rng(1).permutation(n).astype(np.int32)
    chain = np.empty(n, np.int32)
    chain[order] = np.roll(order, -1)
    nexts = cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=chain)
    steps = max(1000, int(200_000 * scale))
    chase_ms = _median_ms(lambda: [k["chase"](queue, (1,), (1,), nexts, scratch,
                                                 np.int32(steps))], repeats)
    latency_ns = chase_ms * 1e6 / steps
    # ... and through 1 KB, which an L1 cache holds after the first lap.
    small = 256
    order = np.random.default_rng(2).permutation(small).astype(np.int32)
    cycle = np.empty(small, np.int32)
    cycle[order] = np.roll(order, -1)
    held = cl.Buffer(ctx, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=cycle)
    cached_ms = _median_ms(lambda: [k["chase"](queue, (1,), (1,), held, scratch,
                                                  np.int32(steps))], repeats)
    cache_ns = cached_ms * 1e6 / steps

    # Requests in flight: w chains at once take w steps per step of one chain where nothing
    # overlaps, one where all do. The most overlapped over w = 2, 4, 8, 16; w chains overlap
    # at most w, so a ratio above it is the timing's noise (a busy machine, or chains that fit
    # a cache at the quick sizes) and counts as w.
    overlapped = 1.0
    for ways in (2, 4, 8, 16):
        ways_ms = _median_ms(lambda ways=ways: [k[f"chase{ways}"](
            queue, (1,), (1,), nexts, scratch, np.int32(steps), np.int32(n // ways))], repeats)
        overlapped = max(overlapped, min(ways, ways * chase_ms / ways_ms))

    # Bandwidth: a copy of 2 x 64 MB of int4s.
    words = max(1 << 12, int((4 << 20) * scale))
    source = cl.Buffer(ctx, flags.READ_ONLY, 16 * words)
    target = cl.Buffer(ctx, flags.WRITE_ONLY, 16 * words)
    cl.enqueue_fill_buffer(queue, source, np.ones(1, np.int32), 0, 16 * words).wait()
    copy_ms = _median_ms(lambda: [k["copy"](queue, (words,), None, source, target)], repeats)
    bandwidth = 2 * 16 * words / (copy_ms / 1000)

    # A barrier: one work-group's time with 2 x rounds barriers, less its time with none.
    rounds = max(10, int(2000 * scale))
    with_ms = _median_ms(lambda: [k["barriers"](queue, (group,), (group,), scratch,
                                                   np.int32(rounds))], repeats)
    without_ms = _median_ms(lambda: [k["barriers"](queue, (group,), (group,), scratch,
                                                      np.int32(0))], repeats)
    barrier_ns = max(0.0, with_ms - without_ms) * 1e6 / (2 * rounds)

    # Atomics: adds to distinct elements, and all to one.
    items = max(group, int((1 << 22) * scale)) // group * group
    counts = cl.Buffer(ctx, flags.READ_WRITE, 4 * items)
    rates = {}
    for name, spread in (("atomics_distinct_per_s", items), ("atomics_one_element_per_s", 1)):
        ms = _median_ms(lambda spread=spread: [k["atomics"](queue, (items,), (group,), counts,
                                                               np.int32(spread))], repeats)
        rates[name] = items / (ms / 1000)
    return {"launch_overhead_us": launch_us, "memory_latency_ns": latency_ns,
            "cache_latency_ns": cache_ns, "requests_in_flight": overlapped,
            "memory_bandwidth_bytes_per_s": bandwidth, "barrier_ns": barrier_ns, **rates}
