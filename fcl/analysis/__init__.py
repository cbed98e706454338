"""What the generated kernels do to memory: traced accesses, their index functions (LMADs when
affine), and cost counters (coalescing, bank conflicts, barriers).

trace.py runs a compiled program with instrumented kernels and logs one work-group's accesses;
access.py groups them into warp accesses and fits LMADs; costs.py counts per kernel.
"""
