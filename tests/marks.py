"""The cases of a long parametrized test that `make test-fast` leaves to `make test`: those marked
slow here. The loop while working keeps a sample that still covers the test's ground."""
from collections.abc import Callable, Iterable
from typing import Any

import pytest


def slow_unless(values: Iterable[Any], fast: Callable[[Any], bool]) -> list[Any]:
    """values as the parameters of a one-argument parametrize, those that are not `fast` marked
    slow (their ids stay what they were: pytest.param keeps the parametrize's `ids`)."""
    return [value if fast(value) else pytest.param(value, marks=pytest.mark.slow)
            for value in values]


def sampled(values: Iterable[Any], n: int) -> list[Any]:
    """values as parameters, every n-th from the first as it is (a sample spread over the whole
    list), the others marked slow."""
    return [value if i % n == 0 else pytest.param(value, marks=pytest.mark.slow)
            for i, value in enumerate(values)]
