"""Linear Memory Access Descriptors: the algebra and overlap analysis of [M] ch. 3.

[M] is P. Munksgaard's thesis (seed 004); section numbers in docstrings refer to it, and
"reference notes" to /work/shared/reference/lmad-and-seeds.md.
"""
from .compose import Composition, RotatedLMAD, apply_lmads
from .core import LMAD, expand, nest, unrank
from .errors import LMADError
from .overlap import SOSI, disjoint, disjoint_1d, self_overlaps
from .svg import render_svg

__all__ = [
    "LMAD", "LMADError", "disjoint", "disjoint_1d", "self_overlaps", "SOSI",
    "expand", "nest", "unrank", "RotatedLMAD", "Composition", "apply_lmads", "render_svg",
]
