"""One way to act on each kind of statement: a visitor that dispatches on the statement's class.

`visit(s, *args)` calls `visit_Declare(s, *args)` for a Declare, and so on, for the first class of
the statement's MRO that has a method: a later stage's subclass (the back end's SerialFor, a
SeqFor) is handled as its base unless the visitor says otherwise. A statement no method takes
goes to `visit_other`, which by default is an error: a pass that meets a statement it does not
know stops there rather than passing it over.
"""
from __future__ import annotations

from typing import Any, ClassVar

from fcl.il import ir


class StmtVisitor:
    _methods: ClassVar[dict[type, str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = {}  # per visitor class: a statement class's method name, once found

    def visit(self, s: ir.Stmt, *args: Any) -> Any:
        name = self._methods.get(type(s))
        if name is None:
            name = next((f"visit_{c.__name__}" for c in type(s).__mro__
                         if hasattr(self, f"visit_{c.__name__}")), "visit_other")
            self._methods[type(s)] = name
        return getattr(self, name)(s, *args)

    def visit_other(self, s: ir.Stmt, *args: Any) -> Any:
        raise TypeError(f"{type(self).__name__} does not handle {type(s).__name__} statements")
