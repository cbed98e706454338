"""A growing FCL program: the prelude, then files or notebook cells, type-checked as they come.

This is the front end's entry point for the CLI and the Jupyter kernel alike. Adding source is
transactional: when anything in it fails, the session is left exactly as it was.
"""
from __future__ import annotations

import contextlib
import copy
import sys
from dataclasses import dataclass, field
from functools import cache

from fcl.deep import LARGE_SOURCE, collections_paused, compiler_stage, depth_guard
from fcl.errors import FCLError, Source, Span
from fcl.prelude import PRELUDE_PATH
from fcl.syntax import ast
from fcl.syntax.parser import parse_cell, parse_program
from fcl.types.infer import Checker, Scope
from fcl.types.types import Scheme


@dataclass
class Session:
    checker: Checker
    scope: Scope
    decls: list[ast.Decl] = field(default_factory=list)
    user_from: int = 0  # decls before this index come from the prelude
    warnings: list[str] = field(default_factory=list)
    large: bool = False  # a source of LARGE_SOURCE characters or more: see fcl.deep
    files: list[str] = field(default_factory=list)  # the names of the files added

    @classmethod
    def new(cls, prelude: bool = True) -> Session:
        base = _prelude_session() if prelude else _empty_session()
        session = copy.copy(base)
        session.checker = copy.copy(base.checker)
        session.decls = list(base.decls)
        session.warnings = []
        session.files = []
        return session

    def snapshot(self) -> tuple:
        return (self.checker.next_tvar, self.checker.next_lvar, self.scope, len(self.decls),
                len(self.warnings))

    def restore(self, snap: tuple) -> None:
        self.checker.next_tvar, self.checker.next_lvar, self.scope, n, warned = snap
        del self.decls[n:]
        del self.warnings[warned:]  # about source that is not kept

    @compiler_stage
    def add_decls(self, decls: list[ast.Decl]) -> None:
        """Type-check declarations in order and add them; all or nothing."""
        snap = self.snapshot()
        try:
            for decl in decls:
                self._warn_sig_name(decl)
                with _depth_guard(decl.name_span, f"the definition of `{decl.name}`"):
                    self.scope = self.checker.check_decl(self.scope, decl)
                self.decls.append(decl)
        except BaseException:
            self.restore(snap)
            raise

    def add_file(self, source: Source) -> list[ast.Decl]:
        self.large = self.large or len(source.text) >= LARGE_SOURCE
        with collections_paused() if self.large else contextlib.nullcontext():
            decls = parse_program(source).decls
        self.add_decls(decls)
        self.files.append(source.name)
        return decls

    def add_cell(self, source: Source) -> tuple[list[ast.Decl], ast.Expr | None]:
        """Add a cell's declarations and type-check its final expression (if any)."""
        self.large = self.large or len(source.text) >= LARGE_SOURCE
        return self._add_cell(source)

    @compiler_stage
    def _add_cell(self, source: Source) -> tuple[list[ast.Decl], ast.Expr | None]:
        module = parse_cell(source)
        snap = self.snapshot()
        self.add_decls(module.decls)
        if module.expr is not None:
            try:
                with _depth_guard(module.expr.span, "this expression"):
                    self.checker.check_expr(self.scope, module.expr)
            except BaseException:
                self.restore(snap)
                raise
        return module.decls, module.expr

    def type_of(self, name: str) -> Scheme | None:
        binding = self.scope.names.get(name)
        return binding.scheme if binding else None

    def user_decls(self) -> list[ast.Decl]:
        return self.decls[self.user_from:]

    def _warn_sig_name(self, decl: ast.Decl) -> None:
        if decl.sig_name and decl.sig_name[0] != decl.name:
            name, span = decl.sig_name
            self.warnings.append(FCLError(f"this signature names `{name}` but is followed by the "
                                          f"definition of `{decl.name}`", span,
                                          kind="warning").render())


def _depth_guard(span: Span, what: str):
    return depth_guard(span, f"{what} is nested too deeply to type-check")


@cache
def _prelude_session() -> Session:
    session = _empty_session()
    session.add_file(Source(str(PRELUDE_PATH), PRELUDE_PATH.read_text()))
    session.user_from = len(session.decls)
    return session


@cache
def _empty_session() -> Session:
    checker = Checker()
    return Session(checker, checker.initial_scope())


def print_warnings(session: Session) -> None:
    for warning in session.warnings:
        print(warning, file=sys.stderr)
