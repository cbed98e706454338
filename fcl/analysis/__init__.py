"""What the generated kernels do to memory and how long they would take on a GPU: traced
accesses, their index functions (LMADs when affine), cost counters (32-byte sectors, bank
conflicts, barriers, SIMT efficiency), occupancy and a predicted time.

trace.py runs a compiled program with instrumented kernels and logs one work-group's accesses
and branches; access.py groups them into warp requests and fits LMADs; costs.py counts per
kernel; gpu.py reads the GPU profiles of fcl/gpus/; occupancy.py and predict.py turn the counts
into resident warps and time on one of them (docs/costs.md).
"""
