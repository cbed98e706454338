"""Which failed check the interpreter reports, the same one as the OpenCL back end.

A check that fails inside parallel code does not stop the interpreter at once: the lanes run in
lockstep, so the first lane to fail is not the one the OpenCL run-time reports. The rule
(docs/language.md, "Run-time checks"): of the first kernel launch that fails, the lowest failing
work-group; in it, the first round (the steps between a group's barriers, here its block-level
forces) that fails; in that round, the lowest failing work-item, with its first failure.

So a failure is recorded per work-group, and the failing lanes go on with harmless values (an
index of 0, a divisor of 1, a length of 0, no write) to the end of the round, where other
work-items may still fail; the group then stops (its loops end, its arrays are empty). Forcing
an array at grid level ends a launch: the recorded failure is raised there.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fcl import checks
from fcl.errors import FCLError, Span
from fcl.interp.lanes import Ctx, lift
from fcl.prelude import PRELUDE_NAME

NO_GROUP = -1  # a grid-level push's elements: work-items of the whole grid


@dataclass
class Failure:
    round: int
    item: int
    error: FCLError


class Faults:
    def __init__(self) -> None:
        self.round = 0
        self.groups: dict[int, Failure] = {}
        # The user's calls being evaluated, innermost last: a check failing in a prelude
        # function is reported at the call (values.locate_in_user_code).
        self.calls: list[Span] = []

    def record(self, ctx: Ctx, failed: np.ndarray, template: str, values: tuple,
               span: Span | None, hint: str) -> None:
        """The lanes of ctx where `failed` holds failed this check (ctx's lanes run in a
        parallel loop: a host-level failure is raised at once, by values.check)."""
        lanes = np.flatnonzero(failed)
        kinds = dict(place_columns(ctx, lanes))
        groups = kinds.get(checks.GROUP, np.full(len(lanes), NO_GROUP))
        item_kinds = [kind for kind in (checks.LOCAL, checks.GLOBAL) if kind in kinds]
        items = kinds[item_kinds[-1]] if item_kinds else np.zeros(len(lanes), dtype=np.int64)
        order = np.lexsort((lanes, items, groups))
        first = order[np.flatnonzero(np.diff(groups[order], prepend=groups[order][0] - 1))]
        picked = [lift(v, ctx) for v in values]
        for k in first:
            group, item = int(groups[k]), int(items[k])
            known = self.groups.get(group)
            if known is not None and (known.round < self.round or known.item <= item):
                continue  # a stopped group, or a lower (or the same) work-item failed first
            error = failure_at(ctx, int(lanes[k]), picked, template, span, hint)
            if self.calls:
                locate_in_user_code(error, self.calls[-1])
            self.groups[group] = Failure(self.round, item, error)

    def end_round(self) -> None:
        """A work-group barrier: the groups that failed so far stop."""
        self.round += 1

    def stopped(self, ctx: Ctx) -> np.ndarray | None:
        """Which lanes of ctx belong to a stopped work-group (None: none do)."""
        done = [group for group, failure in self.groups.items()
                if failure.round < self.round and group != NO_GROUP]
        if not done:
            return None
        kinds = dict(place_columns(ctx, np.arange(ctx.n)))
        if checks.GROUP not in kinds:
            return None
        return np.isin(kinds[checks.GROUP], done)

    def raise_first(self) -> None:
        """End of a kernel launch: raise the lowest failing work-group's failure."""
        if self.groups:
            group = min(self.groups)
            error = self.groups[group].error
            self.groups.clear()
            raise error


def place_columns(ctx: Ctx, lanes: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """For the given lanes of ctx, their index in each enclosing parallel loop, innermost of
    each kind last (a vectorised Ctx.places)."""
    found: list[tuple[str, np.ndarray]] = []
    at: Ctx | None = ctx
    lanes = lanes.astype(np.int64)
    while at is not None:
        if at.place is not None:
            found.append((at.place[0], at.place[1][lanes].astype(np.int64)))
        if at.parent is not None:
            if at.repeat is not None:
                lanes = lanes // at.repeat
            else:
                assert at.parent_index is not None  # a child context has one or the other
                lanes = at.parent_index[lanes]
        at = at.parent
    return found[::-1]


def in_parallel_code(ctx: Ctx, work_items: bool = False) -> bool:
    """Whether ctx's lanes run in a parallel loop; with `work_items`, in one over work-items (a
    force there is private to each: no barrier)."""
    at: Ctx | None = ctx
    while at is not None:
        if at.place is not None and not (work_items and at.place[0] == checks.GROUP):
            return True
        at = at.parent
    return False


def failure_at(ctx: Ctx, lane: int, picked: list, template: str, span: Span | None,
           hint: str) -> FCLError:
    numbers = [int(v[lane]) if isinstance(v, np.ndarray) else int(v) for v in picked]
    places = checks.innermost(ctx.places(lane))
    message = template + checks.where([kind for kind, _ in places])
    return FCLError(message.format(*numbers, *(index for _, index in places)), span,
                    [hint] if hint else [])


def locate_in_user_code(err: FCLError, call: Span | None) -> None:
    """An error inside a prelude function is shown at the user's call, with the prelude line as
    a note: the user wrote the call, not the prelude (the OpenCL back end does the same)."""
    if (err.span is not None and err.span.source.name == PRELUDE_NAME and call is not None
            and call.source.name != PRELUDE_NAME):
        err.notes.insert(0, (err.span, checks.INSIDE_PRELUDE))
        err.span = call
