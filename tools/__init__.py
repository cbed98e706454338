"""Maintainers' tools, run as modules (`python -m tools.loadtest`): the load test of a class on
a JupyterHub, the README's screenshots, the kernel's logos."""
