"""Lanes: how the interpreter runs work-items in lockstep with numpy.

A `Ctx` is a set of lanes (work-items, blocks, loop iterations, elements being computed), each
lane a child of one lane of its parent context. A scalar is either uniform (a numpy scalar, the
same in every lane) or a `Vec`: one value per lane of some context. Operations bring their
operands to the deepest context involved by gathering along the parent links, so a value is only
ever as wide as the parallelism it really has.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from fcl.errors import FCLError, Span

# Every lane keeps its index, its parent link and the temporaries of the expressions it
# evaluates in numpy arrays, tens of bytes a lane in all: beyond this many lanes (or array
# elements) at once the interpreter would exhaust an ordinary machine's memory, so it refuses
# before allocating anything. The OpenCL back end has the device's own limits instead.
MAX_ELEMENTS = 1 << 26


def too_large(count: int, span=None) -> FCLError:
    """The error for a parallel loop or array of `count` elements, over MAX_ELEMENTS."""
    return FCLError(f"this needs {count} elements at once, more than the interpreter's limit of "
                    f"{MAX_ELEMENTS} (2^26)", span,
                    ["the OpenCL back end (`--backend opencl`, `%config backend=opencl`) runs "
                     "larger sizes; the interpreter is meant for small inputs"])


class FaultLog(Protocol):
    """Where failed checks are recorded: interp.faults.Faults, which imports this module."""

    def record(self, ctx: Ctx, failed: np.ndarray, template: str, values: tuple,
               span: Span | None, hint: str) -> None: ...


class Ctx:
    """A set of `n` lanes, each the child of one lane of `parent`: lane k's parent lane is
    `parent_index[k]`, or, for a regular expansion, k // `repeat`."""

    __slots__ = ("n", "parent", "parent_index", "repeat", "depth", "restriction", "place",
                 "faults")

    def __init__(self, n: int, parent: Ctx | None = None, parent_index: np.ndarray | None = None,
                 restricted: bool = False, repeat: int | None = None):
        self.n = n
        self.parent = parent
        self.parent_index = parent_index
        self.repeat = repeat
        self.depth: int = 0 if parent is None else parent.depth + 1
        # The nearest context at or above this one that holds only some of its parent's lanes
        # (a branch of an `if`, the active lanes of a loop): values from above it must be
        # narrowed to it, or lanes that do not run would be computed and checked.
        self.restriction: Ctx | None = \
            self if restricted else parent.restriction if parent else None
        # The lanes of a parallel loop: its kind (fcl.checks) and each lane's index in it.
        self.place: tuple[str, np.ndarray] | None = None
        # The root's: the failed checks of the run (interp.faults).
        self.faults: FaultLog | None = None

    def root(self) -> Ctx:
        ctx = self
        while ctx.parent is not None:
            ctx = ctx.parent
        return ctx

    def parent_lane(self, lane: int) -> int:
        if self.repeat is not None:
            return lane // self.repeat
        assert self.parent_index is not None
        return int(self.parent_index[lane])

    def places(self, lane: int) -> list[tuple[str, int]]:
        """The parallel loops around `lane` and its index in each, outermost first."""
        found = []
        ctx: Ctx | None = self
        while ctx is not None:
            if ctx.place is not None:
                found.append((ctx.place[0], int(ctx.place[1][lane])))
            if ctx.parent is not None:
                lane = ctx.parent_lane(lane)
            ctx = ctx.parent
        return found[::-1]

    def pull_down(self, data: np.ndarray, ancestor: Ctx) -> np.ndarray:
        """Per-lane data of `ancestor`, as seen from each lane of this context."""
        if self is ancestor:
            return data
        if self.parent is None:
            raise AssertionError("context is not a descendant")
        data = self.parent.pull_down(data, ancestor)
        if self.repeat is not None:
            return np.repeat(data, self.repeat)
        return data[self.parent_index]


class Vec:
    """One scalar per lane of `ctx`."""

    __slots__ = ("ctx", "data")

    def __init__(self, ctx: Ctx, data: np.ndarray):
        self.ctx = ctx
        self.data = data

    def __repr__(self) -> str:
        return f"Vec(n={self.ctx.n}, {self.data[:8]!r})"


def lift(value, ctx: Ctx) -> np.ndarray | np.generic:
    """The value's data as seen from the lanes of ctx (uniform values stay scalars)."""
    if not isinstance(value, Vec):
        return value
    return ctx.pull_down(value.data, value.ctx)


def host_int(value, ctx: Ctx) -> int:
    """A value the host holds (the same in every lane) as a Python int."""
    return int(lift_full(value, ctx, np.int64)[0])


def lift_full(value, ctx: Ctx, dtype) -> np.ndarray:
    """Like lift, but always an array of ctx.n elements."""
    data = lift(value, ctx)
    if isinstance(data, np.ndarray):
        return data
    return np.full(ctx.n, data, dtype=dtype)


def deepest(*values) -> Ctx | None:
    ctx = None
    for v in values:
        if isinstance(v, Vec) and (ctx is None or v.ctx.depth > ctx.depth):
            ctx = v.ctx
    return ctx


def elementwise(fn, *values, ctx: Ctx):
    """Apply a numpy function lane by lane, evaluated in the current context `ctx`.

    The result lives in the deepest context of the operands (uniform operands give a uniform
    result), narrowed to ctx's restriction when the operands come from above it.
    """
    target = deepest(*values)
    if target is None:
        return fn(*values)
    narrowed = ctx.restriction
    if narrowed is not None and target.depth < narrowed.depth:
        target = narrowed
    return Vec(target, fn(*(lift(v, target) for v in values)))


def expand(ctx: Ctx, counts, place: str | None = None) -> tuple[Ctx, Vec]:
    """A child context with counts[k] lanes under each lane k of ctx, and each new lane's
    local index 0..counts[k]-1; `place`, the kind of parallel loop it is (if it is one)."""
    child, local = _expand(ctx, counts)
    if place is not None:
        child.place = (place, local.data)
    return child, local


def _expand(ctx: Ctx, counts) -> tuple[Ctx, Vec]:
    counts = lift(counts, ctx)
    if isinstance(counts, np.ndarray):
        counts = counts.astype(np.int64)
        total = int(counts.sum())
        if total > MAX_ELEMENTS:
            raise too_large(total)
        parent_index = np.repeat(np.arange(ctx.n), counts)
        starts = np.cumsum(counts) - counts
        local = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
        child = Ctx(total, ctx, parent_index)
        return child, Vec(child, local.astype(np.int32))
    count = int(counts)
    if ctx.n * count > MAX_ELEMENTS:
        raise too_large(ctx.n * count)
    child = Ctx(ctx.n * count, ctx, repeat=count)
    return child, Vec(child, np.tile(np.arange(count, dtype=np.int32), ctx.n))


def restrict(ctx: Ctx, mask: np.ndarray) -> tuple[Ctx, np.ndarray]:
    """The sub-context of the lanes where mask holds, and their indices in ctx."""
    idx = np.flatnonzero(mask)
    return Ctx(len(idx), ctx, idx, restricted=True), idx
