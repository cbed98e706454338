"""Evaluation environments shared by the interpreter and the lowering."""
from __future__ import annotations


class Env:
    """A persistent chain of bindings: extending it never changes what others see."""

    __slots__ = ("name", "value", "parent")

    def __init__(self, name, value, parent):
        self.name, self.value, self.parent = name, value, parent

    def lookup(self, name):
        env = self
        while env is not None:
            if env.name == name:
                return env.value
            env = env.parent
        raise KeyError(name)
