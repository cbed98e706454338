"""Records: nested pairs of base types, the values that push arrays and memory hold
(docs/language.md, "Records"). Both back ends keep an array of records as an array per field
(structure of arrays), in field order: a record's leaves, left to right."""
from __future__ import annotations


def leaves(shape, value) -> list:
    """The base values of a record value of `shape` (a leaf, or a pair of shapes), in field
    order."""
    if isinstance(shape, tuple):
        return leaves(shape[0], value[0]) + leaves(shape[1], value[1])
    return [value]


def rebuild(shape, items: list):
    """A record value of `shape` from its base values in field order (taking them from the
    front of `items`)."""
    if isinstance(shape, tuple):
        first = rebuild(shape[0], items)
        return (first, rebuild(shape[1], items))
    return items.pop(0)
