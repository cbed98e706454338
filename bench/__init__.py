"""`make bench` (python -m bench.run): FCL against the best reference kernels, the original's
benchmarks, compile times and the Jupyter kernel's responsiveness and memory (README.md here)."""
