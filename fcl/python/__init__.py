"""FCL from Python: `fcl.load` (library.py) turns an FCL program's functions into Python
callables on numpy arrays, run on OpenCL (opencl.py) or the interpreter; arguments.py checks
what they are given; ipython.py is the `%load_ext fcl` extension."""
