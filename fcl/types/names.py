"""The names in scope: a persistent mapping, cheap to extend by one name."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

V = TypeVar("V")


class Names(Mapping[str, V], Generic[V]):
    """A mapping whose `bind` returns an extended copy and leaves the original as it was (the
    enclosing scope, or a notebook's scope before a cell, is still needed afterwards).

    Copying the whole mapping on each `bind` made n definitions or n nested lets cost O(n²).
    Instead the bindings are kept in layers, oldest first, each more than the size of the next,
    merged like the digits of a binary counter: a `bind` costs O(log n) amortized, and a lookup
    at most one probe per layer, O(log n)."""

    __slots__ = ("_layers",)

    def __init__(self, names: Mapping[str, V] | None = None):
        self._layers: tuple[dict[str, V], ...] = (dict(names),) if names else ()

    def bind(self, name: str, value: V) -> Names[V]:
        layers = list(self._layers)
        top = {name: value}
        while layers and len(layers[-1]) <= len(top):
            top = layers.pop() | top
        extended: Names[V] = Names()
        extended._layers = (*layers, top)
        return extended

    def __getitem__(self, name: str) -> V:
        for layer in reversed(self._layers):
            if name in layer:
                return layer[name]
        raise KeyError(name)

    def get(self, name: str, default=None):
        for layer in reversed(self._layers):
            if name in layer:
                return layer[name]
        return default

    def __contains__(self, name: object) -> bool:
        return any(name in layer for layer in self._layers)

    def __iter__(self) -> Iterator[str]:
        return iter(self._merged())

    def __len__(self) -> int:
        return len(self._merged())

    def _merged(self) -> dict[str, V]:
        merged: dict[str, V] = {}
        for layer in self._layers:
            merged.update(layer)
        return merged


class Chain(Generic[V]):
    """A persistent stack, iterated newest first: `push` returns a longer one and leaves this
    one as it was. (A scope's open types grow by one per enclosing lambda; a tuple copied per
    lambda made n nested lambdas take O(n²) time and memory.)"""

    __slots__ = ("_cell",)

    def __init__(self, cell: tuple[V, Chain[V]] | None = None):
        self._cell = cell

    def push(self, item: V) -> Chain[V]:
        return Chain((item, self))

    def __iter__(self) -> Iterator[V]:
        cell = self._cell
        while cell is not None:
            item, rest = cell
            yield item
            cell = rest._cell
