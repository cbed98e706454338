"""FCL: hierarchical functional GPU programming."""
__version__ = "0.1.0"
