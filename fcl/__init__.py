"""FCL: hierarchical functional GPU programming."""
# The package's one version: pyproject.toml reads it (dynamic version), and so do `fcl
# --version` and the kernel's banner.
__version__ = "0.1.0"
