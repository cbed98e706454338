"""Index functions beyond one LMAD ([M] §3.4.1): rotation and compositions of LMADs.

Rotation makes the algebra leave the set of single LMADs (a slice of a rotated LMAD may
not be one), so Futhark dropped it; it is kept here to reproduce the thesis's examples.
A composition is a list of index functions applied in turn, unranking between them
(ApplyLMADs, proc. 3.1); it represents e.g. a reshape that no single LMAD captures.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .core import LMAD, unrank
from .errors import LMADError


@dataclass(frozen=True)
class RotatedLMAD:
    """An LMAD whose dimensions carry rotation amounts ρ, written `τ + {(σ:δ:ρ),…}`."""

    lmad: LMAD
    rotations: tuple[int, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "rotations", tuple(self.rotations))
        if len(self.rotations) != self.lmad.rank:
            raise LMADError(f"{self.lmad} needs {self.lmad.rank} rotation amounts, "
                            f"got {len(self.rotations)}")

    @property
    def shape(self) -> tuple[int, ...]:
        """The sizes of the underlying LMAD."""
        return self.lmad.shape

    def apply(self, index: Sequence[int]) -> int:
        """Application_rot: τ + Σ ((yi + ρi) mod σi)·δi."""
        index = tuple(index)
        self.lmad.apply(index)  # checks arity and range
        rotated = [(component + rotation) % size
                   for component, rotation, size in zip(index, self.rotations, self.shape)]
        return self.lmad.apply(rotated)

    def __str__(self) -> str:
        dims = ",".join(f"({size}:{stride}:{rotation})"
                        for (size, stride), rotation in zip(self.lmad.dims, self.rotations))
        return f"{self.lmad.offset} + {{{dims}}}"


IndexFunction = LMAD | RotatedLMAD


def apply_lmads(first: IndexFunction, second: IndexFunction, index: Sequence[int]) -> int:
    """ApplyLMADs (proc. 3.1): apply `first`, unrank by `second`'s shape, apply `second`."""
    return Composition((first, second)).apply(index)


@dataclass(frozen=True)
class Composition:
    """An index function given as a list of LMADs, outermost (applied first) first."""

    parts: tuple[IndexFunction, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", tuple(self.parts))
        if not self.parts:
            raise LMADError("a composition needs at least one LMAD")

    @property
    def shape(self) -> tuple[int, ...]:
        """The index space: the shape of the first part."""
        return self.parts[0].shape

    def apply(self, index: Sequence[int]) -> int:
        """Apply the parts in turn, unranking between them (ApplyLMADs generalised to n parts)."""
        address = self.parts[0].apply(index)
        for part in self.parts[1:]:
            address = part.apply(unrank(part.shape, address))
        return address

    def __str__(self) -> str:
        return "[" + ", ".join(str(part) for part in self.parts) + "]"
