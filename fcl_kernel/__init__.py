"""The FCL Jupyter kernel."""
