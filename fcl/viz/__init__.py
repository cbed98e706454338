"""Drawings: memory diagrams of traced accesses, and graphs of programs and kernels."""
