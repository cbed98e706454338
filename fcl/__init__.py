"""FCL: hierarchical functional GPU programming.

From Python: `fcl.load(source)` or `fcl.load_file(path)` gives a library whose FCL functions take
numpy arrays (fcl.python); `%load_ext fcl` adds `%%fcl` to IPython.
"""
# The package's one version: pyproject.toml reads it (dynamic version), and so do `fcl
# --version` and the kernel's banner.
__version__ = "0.1.0"


def __getattr__(name: str):
    # Imported on first use: the command line and the kernel import fcl without needing these.
    if name in ("load", "load_file", "Library", "EntryPoint"):
        from fcl.python import library
        return getattr(library, name)
    raise AttributeError(f"module 'fcl' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    """`%load_ext fcl`: the %%fcl magics in an IPython kernel (fcl.python.ipython)."""
    from fcl.python.ipython import register
    register(ipython)
