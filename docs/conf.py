"""Sphinx configuration of FCL's documentation site (`make docs`; tests/test_docs.py builds it
with warnings as errors). Pages are Markdown, read by MyST; the reference pages of the command
line, the magics and the course are generated from the code itself (_ext/fcl_reference.py)."""
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

import fcl  # noqa: E402

project = "FCL for Jupyter"
author = "the FCL for Jupyter authors"
release = version = fcl.__version__
extensions = ["myst_parser", "sphinx.ext.autodoc", "fcl_reference"]
source_suffix = {".md": "markdown"}
# The package index's readme is its own page, not part of the site.
exclude_patterns = ["_build", "package-readme.md"]
myst_heading_anchors = 3  # `[errors](#errors)` links to a heading, as on GitHub
html_theme = "alabaster"
html_title = f"FCL for Jupyter {version}"
autodoc_member_order = "bysource"
nitpicky = False
