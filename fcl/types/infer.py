"""Type inference: Hindley–Milner with level polymorphism and kinds (thesis §5.3.1).

Algorithm W in the original compiler's order of work, so printed schemes letter their variables
the same way. Differences from the original: level arguments may be left out and are inferred;
declared level parameters are rigid; kinds BT/GT/TYP are checked; a signature may be an instance
of the inferred type (as in ML); every error is located and explained.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from fcl.errors import FCLError, Source, Span
from fcl.syntax import ast
from fcl.syntax.parser import parse_scheme
from fcl.types.builtins import BUILTINS, PUSH_FORMS
from fcl.types.names import Chain, Names
from fcl.types.types import (
    BOOL,
    BT,
    DOUBLE,
    FLOAT,
    GT,
    INT,
    RT,
    STRING,
    TYP,
    UNIT,
    WARP,
    Level,
    LStep,
    LVar,
    Namer,
    Scheme,
    TArrow,
    TCon,
    TPair,
    TProgram,
    TPull,
    TPush,
    TSeq,
    TVar,
    Type,
    chase,
    chase_level,
    free_vars,
    level_of_depth,
    map_type,
    show_types,
    zonk,
)
from fcl.types.unify import (
    KindError,
    LevelError,
    UnifyError,
    restrict_kind,
    unify,
    unify_fresh,
)

_T = TypeVar("_T")
CONCRETE_LEVELS = {"thread": 0, "block": 1, "grid": 2, "Z": 0}
LEVEL_NAMES = ["thread", "warp", "block", "grid"]
# Why a builtin's type variable is restricted to a kind: what it is, in the builtin's type.
KIND_REASONS = {"push": "the elements of push arrays", "pull": "the elements of pull arrays",
                "program": "the results of programs"}


@dataclass
class Binding:
    """What a name in scope stands for."""

    scheme: Scheme
    origin: str                      # "builtin", "top" (a declaration) or "local"
    span: Span | None = None         # where it is defined
    doc: str | None = None
    push_form: Scheme | None = None  # a builtin's type where its first argument is a push array
    # In a definition: its `x-1`s (`x` applied to -1) whose `x` is a parameter, which make it
    # take a function where a number may have been meant.
    misread: list[ast.App] = field(default_factory=list)


@dataclass
class Instance:
    """Recorded on each Var: the scheme it instantiated and the types/levels chosen."""

    binding: Binding
    types: list[Type]
    levels: list[Level]


@dataclass
class Overload:
    """A use of a builtin with a push form, until its first argument's type picks the form."""

    var: ast.Var
    arg: Type                 # the type of its first argument
    forms: tuple[Type, Type]  # that argument's type in the builtin's first and in its push form


@dataclass
class Scope:
    names: Names[Binding]
    # of the enclosing lambda/let variables (not generalized)
    open_types: Chain[Type] = field(default_factory=Chain)
    levels: dict[str, LVar] = field(default_factory=dict)

    def bind(self, name: str, binding: Binding, open_type: Type | None = None) -> Scope:
        opens = self.open_types if open_type is None else self.open_types.push(open_type)
        return Scope(self.names.bind(name, binding), opens, self.levels)

    def with_levels(self, levels: dict[str, LVar]) -> Scope:
        return Scope(self.names, self.open_types, {**self.levels, **levels})


class Checker:
    """Holds the fresh-variable counters; one per program or notebook session."""

    def __init__(self):
        self.next_tvar = 0
        self.next_lvar = 0
        self.overloads: list[Overload] = []  # of the declaration being checked
        self.builtins = {}
        for name, (text, kinds, doc) in BUILTINS.items():
            scheme = self._builtin_scheme(name, text, kinds)
            push_form = (self._builtin_scheme(name, PUSH_FORMS[name], kinds, like=scheme)
                         if name in PUSH_FORMS else None)
            self.builtins[name] = Binding(scheme, "builtin", None, doc, push_form)

    # ---- fresh variables
    def fresh(self, kind: int = TYP, reason: str | None = None) -> TVar:
        v = TVar(self.next_tvar, kind, reason)
        self.next_tvar += 1
        return v

    def fresh_level(self, name: str | None = None, rigid: bool = False) -> LVar:
        v = LVar(self.next_lvar, name, rigid)
        self.next_lvar += 1
        return v

    def _builtin_scheme(self, name: str, text: str, kinds: dict[str, int],
                        like: Scheme | None = None) -> Scheme:
        """The scheme written `text`; with `like`, over the same variables as that scheme (a
        builtin's push form is instantiated along with its first form)."""
        syntax = parse_scheme(Source(f"<builtin {name}>", text))
        tvars = {v: TVar(-1 - i, kinds.get(v, TYP),
                         _kind_reason(syntax.body, v, kinds[v]) if v in kinds else None, name=v)
                 for i, v in enumerate(syntax.type_vars)}
        lvars = {v: LVar(-1 - i, v) for i, v in enumerate(syntax.level_vars)}
        if like is not None:
            tvars = {v.name: v for v in like.type_vars if v.name is not None}
            lvars = {v.name: v for v in like.level_vars if v.name is not None}
        body = self.type_from_syntax(syntax.body, tvars, lvars, implicit=False)
        return Scheme(list(lvars.values()), list(tvars.values()), body, declared=len(lvars))

    def initial_scope(self) -> Scope:
        return Scope(Names(self.builtins))

    # ---- declarations
    def check_decl(self, scope: Scope, decl: ast.Decl) -> Scope:
        """Type-check one top-level declaration; return the scope extended with it."""
        def check(value: ast.Expr) -> Scheme:
            self.overloads = []
            return self.infer_binding(scope, decl.name, decl.level_params, decl.sig, value,
                                      decl.name_span)

        scheme = self.hinting_minus(check, decl.value)
        decl.scheme = scheme
        misread = [app for app in _misread_minuses(decl.value)
                   if isinstance(app.fn, ast.Var) and app.fn.inst.binding.origin == "local"]
        return scope.bind(decl.name, Binding(scheme, "top", decl.name_span, misread=misread))

    def check_expr(self, scope: Scope, e: ast.Expr) -> Type:
        def check(e: ast.Expr) -> Type:
            self.overloads = []
            t = self.infer(scope, e)
            self.settle_overloads(scope=scope)
            return t

        return self.hinting_minus(check, e)

    def hinting_minus(self, check: Callable[[ast.Expr], _T], e: ast.Expr) -> _T:
        """check(e). If that fails where e has an `x-1` (`x` applied to the number -1), and
        reading each as `x - 1` gets past the error, the error says so."""
        try:
            return check(e)
        except FCLError as err:
            misread = [app for app in _misread_minuses(e)
                       if isinstance(app.arg, ast.Lit) and isinstance(app.arg.value, int)]
            if misread and err.span is not None and not any(
                    hint.startswith("did you mean") for hint in err.hints):
                try:
                    check(_as_subtractions(e, {id(app) for app in misread}))
                    fixed = True
                except FCLError as again:
                    fixed = (again.span is not None and again.span.source is err.span.source
                             and again.span.start > err.span.start)
                except RecursionError:
                    fixed = False
                if fixed:
                    _explain_minus(err, misread[0])
            raise

    def infer_binding(self, scope: Scope, name: str, level_params: list[str],
                      sig: ast.SchemeSyntax | None, value: ast.Expr, name_span: Span) -> Scheme:
        declared = {}
        for lname in level_params:
            declared[lname] = self.fresh_level(lname, rigid=True)
        t = self.infer(scope.with_levels(declared), value)
        scheme = self.generalize(scope, list(declared.values()), t)
        for v in declared.values():
            v.rigid = False  # rigid only while checking the body; now a quantified variable
        if sig is not None:
            scheme = self.check_signature(scheme, sig, name, value)
        return scheme

    def generalize(self, scope: Scope, declared: list[LVar], t: Type) -> Scheme:
        self.settle_overloads(scope=scope)
        t = zonk(t)
        tvs: dict[int, TVar] = {}
        lvs: dict[int, LVar] = {}
        free_vars(t, tvs, lvs)
        env_tvs: dict[int, TVar] = {}
        env_lvs: dict[int, LVar] = {}
        for open_type in scope.open_types:
            free_vars(open_type, env_tvs, env_lvs)
        tvars = sorted((v for i, v in tvs.items() if i not in env_tvs), key=lambda v: v.id)
        implicit = [v for i, v in lvs.items() if i not in env_lvs and v not in declared]
        return Scheme(declared + implicit, tvars, t, declared=len(declared))

    def check_signature(self, inferred: Scheme, sig: ast.SchemeSyntax, name: str,
                        value: ast.Expr) -> Scheme:
        """Accept a signature that is the inferred scheme or an instance of it."""
        tvars = {v: TVar(self._take_id(), TYP, rigid=True, name=v) for v in sig.type_vars}
        lvars = {v: self.fresh_level(v, rigid=True) for v in sig.level_vars}
        sig_type = self.type_from_syntax(sig.body, tvars, lvars, implicit=True)
        inst_types = [self.fresh(v.kind, v.kind_reason) for v in inferred.type_vars]
        inst_levels = [self.fresh_level() for _ in inferred.level_vars]
        instance = substitute(inferred.body, dict(zip(inferred.type_vars, inst_types)),
                              dict(zip(inferred.level_vars, inst_levels)))
        try:
            unify(instance, sig_type)
        except UnifyError as err:
            raise self._signature_error(inferred, sig_type, sig, name, err) from None
        for lv in lvars.values():
            lv.rigid = False
        images = [chase(t) for t in inst_types]
        level_images = [_chase_lvar(lv) for lv in inst_levels]
        renaming = (all(isinstance(t, TVar) for t in images)
                    and len(set(map(id, images))) == len(images)
                    and all(lv is not None for lv in level_images)
                    and len(set(map(id, level_images))) == len(level_images))
        for tv in tvars.values():
            tv.rigid = False
        if renaming:
            return inferred
        # The signature is more specific: the definition takes the signature's type.
        for tvar, image in zip(inferred.type_vars, inst_types):
            tvar.ref = image
        for lvar, level_image in zip(inferred.level_vars, inst_levels):
            lvar.ref = level_image
        sig_tvars: dict[int, TVar] = {}
        sig_lvars: dict[int, LVar] = {}
        free_vars(sig_type, sig_tvars, sig_lvars)
        return Scheme(list(sig_lvars.values()), sorted(sig_tvars.values(), key=lambda v: v.id),
                      zonk(sig_type), declared=min(inferred.declared, len(sig_lvars)))

    def _take_id(self) -> int:
        self.next_tvar += 1
        return self.next_tvar - 1

    def _signature_error(self, inferred: Scheme, sig_type: Type, sig: ast.SchemeSyntax, name: str,
                         err: UnifyError) -> FCLError:
        shown_sig = sig.span.text.strip()
        error = FCLError(f"the signature of `{name}` does not match its definition: it is "
                         f"declared as `{shown_sig}` but the definition has type `{inferred}`",
                         sig.span)
        if ((isinstance(err, LevelError) and err.rigid is not None)
                or (isinstance(err.left, TVar) and err.left.rigid)
                or (isinstance(err.right, TVar) and err.right.rigid)):
            error.hints.append("the signature is more general than the definition: a type or "
                               "level variable in it would have to be a particular type or level")
        return error

    # ---- types written in the source
    def type_from_syntax(self, t: ast.TypeSyntax, tvars: dict[str, TVar], lvars: dict[str, LVar],
                         implicit: bool) -> Type:
        def conv(t: ast.TypeSyntax) -> Type:
            if t.con in ("int", "double", "float", "bool", "string", "unit"):
                return {"int": INT, "double": DOUBLE, "float": FLOAT, "bool": BOOL,
                        "string": STRING, "unit": UNIT}[t.con]
            if t.con == "var":
                name = t.var
                assert name is not None  # the parser names every type variable
                if name not in tvars:
                    if not implicit:
                        raise FCLError(f"type variable `'{name}` is not in scope", t.span)
                    tvars[name] = TVar(self._take_id(), TYP, rigid=True, name=name)
                return tvars[name]
            args = [conv(a) for a in t.args]
            if t.con == "arrow":
                return TArrow(*args)
            if t.con == "pair":
                return TPair(*args)
            if t.con == "pull":
                return TPull(args[0])
            if t.con == "seq":
                return TSeq(args[0])
            assert t.level is not None  # the parser gives push and program types a level
            level = self.level_from_syntax(t.level, lvars, implicit)
            return TPush(level, args[0]) if t.con == "push" else TProgram(level, args[0])
        return conv(t)

    def level_from_syntax(self, lvl: ast.LevelSyntax, scope: dict[str, LVar],
                          implicit: bool = False) -> Level:
        """The level written `lvl`: a concrete level, or a level variable in `scope` (in a
        signature, `implicit`, a new one). A name close to a concrete level is a misspelling,
        not a new level variable."""
        if lvl.name in scope:
            base = scope[lvl.name]
        elif lvl.name in CONCRETE_LEVELS:
            return level_of_depth(CONCRETE_LEVELS[lvl.name] + lvl.steps)
        elif lvl.name == "warp":
            return WARP if lvl.steps == 0 else level_of_depth(lvl.steps)
        else:
            # The name is the last thing in `1+...+name`.
            span = Span(lvl.span.source, lvl.span.end - len(lvl.name), lvl.span.end)
            declare = (f"forall <{lvl.name}>. ..." if implicit
                       else f"fun f<{lvl.name}> x = ...")
            misspelt = difflib.get_close_matches(lvl.name.lower(), LEVEL_NAMES, n=1, cutoff=0.7)
            if misspelt:
                raise FCLError(f"`{lvl.name}` is not a level", span,
                               [f"did you mean `{misspelt[0]}`?",
                                f"the levels are thread, warp, block and grid; a level variable is "
                                f"declared, as in `{declare}`"])
            if not implicit:
                close = difflib.get_close_matches(lvl.name, list(scope), n=1, cutoff=0.75)
                raise FCLError(f"level variable `{lvl.name}` is not in scope", span,
                               [f"did you mean `{c}`?" for c in close] +
                               [f"declare it on the definition, as in `{declare}`, or use "
                                "thread, warp, block or grid"])
            base = scope[lvl.name] = self.fresh_level(lvl.name, rigid=True)
        return level_of_depth(lvl.steps, base)

    # ---- expressions
    def infer(self, scope: Scope, e: ast.Expr) -> Type:
        t = self._infer(scope, e)
        e.type = t
        if e.do_levels is not None:
            self.check_do_levels(scope, e, t)
        return t

    def check_do_levels(self, scope: Scope, e: ast.Expr, t: Type) -> None:
        """The one statement of `do<levels> { e }`, checked as the `bind` that a statement
        before it would have made checks it: the levels exist and `e` is a program at them."""
        assert e.do_levels is not None
        levels, do_span = e.do_levels
        bind = ast.Var(do_span, "bind", levels, builtin=True)
        t_bind = self.infer(scope, bind)
        try:
            unify(t_bind, TArrow(t, self.fresh()))
        except UnifyError as err:
            raise self.application_error(ast.App(e.span, bind, e), t_bind, t, err) from None

    def _infer(self, scope: Scope, e: ast.Expr) -> Type:
        if isinstance(e, ast.Lit):
            return {"int": INT, "double": DOUBLE, "float": FLOAT, "bool": BOOL,
                    "string": STRING}[e.kind]
        if isinstance(e, ast.UnitLit):
            return UNIT
        if isinstance(e, ast.Var):
            return self.infer_var(scope, e)
        if isinstance(e, ast.App):
            t_fn = self.infer(scope, e.fn)
            t_arg = self.infer(scope, e.arg)
            result = self.fresh()
            fn = chase(t_fn)
            try:
                if isinstance(fn, TArrow):  # as unify(t_fn, TArrow(t_arg, result)) would
                    unify_fresh(fn.res, result)
                    unify(fn.arg, t_arg)
                else:
                    unify(t_fn, TArrow(t_arg, result))
            except UnifyError as err:
                raise self.application_error(e, t_fn, t_arg, err) from None
            self.settle_overloads(app=e)
            return result
        if isinstance(e, ast.Pair):
            return TPair(self.infer(scope, e.fst), self.infer(scope, e.snd))
        if isinstance(e, ast.If):
            t_cond = self.infer(scope, e.cond)
            t_then = self.infer(scope, e.then)
            t_else = self.infer(scope, e.else_)
            self.expect(t_cond, BOOL, e.cond.span, "the condition of `if` must be a bool")
            try:
                unify(t_then, t_else)
            except UnifyError as err:
                then_s, else_s = show_types(t_then, t_else)
                raise FCLError(f"the branches of this `if` have different types: `{then_s}` "
                               f"and `{else_s}`", e.span, _hints_for(err)) from None
            try:
                restrict_kind(t_then, RT, "the branches of `if`")
            except KindError:
                raise FCLError("`if` can only choose between base values (int, double, float or "
                               "bool) or records of them (pairs), but its branches have type "
                               f"`{show_types(t_then)[0]}`", e.span,
                               ["choose between the scalars inside instead, e.g. in the index "
                                "function of a `generate`"]) from None
            return t_then
        if isinstance(e, ast.Lam):
            param = self.fresh()
            body = self.infer(scope.bind(e.param, Binding(Scheme([], [], param), "local",
                                                          e.param_span), param), e.body)
            return TArrow(param, body)
        if isinstance(e, ast.Let):
            scheme = self.infer_binding(scope, e.name, e.level_params, e.sig, e.value, e.name_span)
            e.scheme = scheme
            # The scheme's free variables are free in the scope already: no new open type.
            inner = scope.bind(e.name, Binding(scheme, "local", e.name_span))
            return self.infer(inner, e.body)
        raise TypeError(e)  # pragma: no cover

    def expect(self, actual: Type, expected: Type, span: Span, message: str) -> None:
        try:
            unify(actual, expected)
        except UnifyError as err:
            shown = show_types(actual)[0]
            raise FCLError(f"{message}, but this has type `{shown}`", span,
                           _hints_for(err)) from None

    def infer_var(self, scope: Scope, e: ast.Var) -> Type:
        binding = self.builtins.get(e.name) if e.builtin else scope.names.get(e.name)
        if binding is None:
            raise self.unknown_name(scope, e)
        scheme = binding.scheme
        declared = scheme.level_vars[:scheme.declared]
        if e.levels is not None and len(e.levels) != len(declared):
            given = len(e.levels)
            # A builtin named by the parser is the `bind` of a `do` block.
            hint = ("write one level, as in `do<block> { ... }`" if e.builtin
                    else f"its type is `{scheme}`")
            raise FCLError(f"{_describe_head(e)} takes {_plural(len(declared), 'level argument')}"
                           f", but {given} {'was' if given == 1 else 'were'} given", e.span, [hint])
        levels: list[Level] = []
        for i in range(len(scheme.level_vars)):
            if e.levels is not None and i < len(declared):
                levels.append(self.level_from_syntax(e.levels[i], scope.levels))
            else:
                levels.append(self.fresh_level())
        # Fresh variables in reverse quantifier order, like the original.
        types: list[Type] = [None] * len(scheme.type_vars)  # type: ignore[list-item]
        for i in reversed(range(len(scheme.type_vars))):
            v = scheme.type_vars[i]
            types[i] = self.fresh(v.kind, v.kind_reason)
        instance = substitute(scheme.body, dict(zip(scheme.type_vars, types)),
                              dict(zip(scheme.level_vars, levels)))
        e.inst = Instance(binding, types, levels)
        if binding.push_form is not None:
            instance = self.overload(e, instance, substitute(
                binding.push_form.body, dict(zip(scheme.type_vars, types)),
                dict(zip(scheme.level_vars, levels))))
        result = self.fresh()
        unify_fresh(instance, result)
        return result

    # ---- builtins with a push form
    def overload(self, e: ast.Var, first: Type, push: Type) -> Type:
        """The type of a use of a builtin with two forms, which differ in their first argument:
        that argument's type is left open until it is known (settle_overloads)."""
        first, push = chase(first), chase(push)
        assert isinstance(first, TArrow) and isinstance(push, TArrow)  # see PUSH_FORMS
        arg = self.fresh()
        self.overloads.append(Overload(e, arg, (first.arg, push.arg)))
        return TArrow(arg, first.res)  # the forms' results are the same type

    def settle_overloads(self, app: ast.App | None = None, scope: Scope | None = None) -> None:
        """Give each builtin use with two forms the one its first argument's type asks for: the
        push form for a push array, else the first form. One whose argument's type is still
        open waits, unless it is about to be generalized (at a binding's `scope`): nothing else
        can decide it then, and it takes the first form."""
        if not self.overloads:
            return
        open_tvs: dict[int, TVar] | None = None
        if scope is not None:
            open_tvs = {}
            for open_type in scope.open_types:
                free_vars(open_type, open_tvs, {})
        waiting = []
        for overload in self.overloads:
            arg = chase(overload.arg)
            if isinstance(arg, TVar) and (open_tvs is None or arg.id in open_tvs):
                waiting.append(overload)
                continue
            first, push = overload.forms
            try:
                unify(arg, push if isinstance(arg, TPush) else first)
            except UnifyError as err:
                self.overloads = []
                span = (app.arg.span if app is not None and app.fn is overload.var
                        else overload.var.span)
                first_s, push_s, arg_s = show_types(first, push, arg)
                raise FCLError(f"{_describe_head(overload.var)} expects its 1st argument to have "
                               f"type `{first_s}` or `{push_s}`, but this has type `{arg_s}`",
                               span, _hints_for(err)) from None
        self.overloads = waiting

    # ---- error messages
    def unknown_name(self, scope: Scope, e: ast.Var) -> FCLError:
        error = FCLError(f"`{e.name}` is not defined", e.span)
        close = difflib.get_close_matches(e.name, list(scope.names), n=3, cutoff=0.75)
        if close:
            error.hints.append("did you mean " + " or ".join(f"`{c}`" for c in close) + "?")
        return error

    def do_binding_error(self, e: ast.App, fn: TArrow, t_cont: Type, err: UnifyError) -> FCLError:
        """A `x <- stmt ; rest` whose statement yields something `rest` cannot use as x."""
        lam, bind_stmt = e.arg, e.fn
        assert isinstance(lam, ast.Lam) and isinstance(bind_stmt, ast.App)  # see _is_do_bind
        produced, rest = chase(fn.arg), chase(t_cont)
        if isinstance(produced, TArrow) and isinstance(rest, TArrow):
            given_s, used_s = show_types(produced.arg, rest.arg)
            if given_s != used_s:
                return FCLError(f"`{lam.param}` gets a value of type `{given_s}` from this "
                                f"statement, but the rest of the `do` block uses it as `{used_s}`",
                                bind_stmt.arg.span, _hints_for(err))
            result_s, want_s = show_types(produced.res, rest.res)
            return FCLError(f"the rest of this `do` block has type `{want_s}`, but it must be a "
                            f"program like the statements before it: `{result_s}`",
                            lam.body.span, _hints_for(err))
        return FCLError("this statement does not fit the `do` block it is in", bind_stmt.arg.span,
                        _hints_for(err))

    def application_error(self, e: ast.App, t_fn: Type, t_arg: Type, err: UnifyError) -> FCLError:
        head, position = _application_head(e)
        fn = chase(t_fn)
        if isinstance(fn, TArrow):
            expected_s, actual_s = show_types(fn.arg, t_arg)
            who = _describe_head(head)
            what = f"{_ordinal(position)} argument" if position else "argument"
            if isinstance(err, KindError):
                reason = err.var.kind_reason or "this position"
                return FCLError(f"`{show_types(err.type)[0]}` is not {_kind_name(err.kind)}, "
                                f"but {reason} must be", e.arg.span,
                                [f"{who} expects its {what} to have type `{expected_s}`"])
            if err.detail == "occurs":
                return FCLError(f"this {what} of {who} would need an infinite type: `{expected_s}` "
                                f"cannot equal `{actual_s}`", e.arg.span)
            if _is_do_bind(head, position, e):
                return self.do_binding_error(e, fn, t_arg, err)
            error = FCLError(f"{who} expects its {what} to have type `{expected_s}`, but this has "
                             f"type `{actual_s}`", e.arg.span, _hints_for(err))
            if (isinstance(head, ast.Var) and head.inst is not None and head.inst.binding.misread
                    and isinstance(chase(fn.arg), TArrow)
                    and not isinstance(chase(t_arg), TArrow | TVar)):
                _explain_minus(error, head.inst.binding.misread[0], head.name)
            return error
        if err.detail == "occurs":
            var_s, type_s = show_types(err.left, err.right)
            return FCLError(f"this application would need an infinite type: `{var_s}` would have "
                            f"to equal `{type_s}`", e.span)
        shown = show_types(t_fn)[0]
        error = FCLError(f"this is not a function, so it cannot be applied to an argument: it has "
                         f"type `{shown}`", e.fn.span)
        if _is_misread_minus(e):
            _explain_minus(error, e)
        elif isinstance(head, ast.Var) and position > 1:
            error.hints.append(f"`{head.name}` may be applied to too many arguments")
        return error


def _is_misread_minus(e: ast.App) -> bool:
    """`x-1`, which is `x` applied to the number -1 (no space after the `x`), not a subtraction."""
    arg = e.arg
    return (isinstance(arg, ast.Lit) and isinstance(arg.value, int | float) and arg.value < 0
            and arg.span.start == e.fn.span.end)


def _misread_minuses(e: ast.Expr) -> list[ast.App]:
    found, todo = [], [e]
    while todo:
        e = todo.pop()
        if isinstance(e, ast.App) and _is_misread_minus(e):
            found.append(e)
        todo.extend(reversed(ast.children(e)))
    return found


def _as_subtractions(e: ast.Expr, misread: set[int]) -> ast.Expr:
    """A copy of e in which the applications `x-1` whose ids are in `misread` are `x - 1`."""
    if id(e) in misread:
        assert isinstance(e, ast.App) and isinstance(e.arg, ast.Lit)
        value, number = e.arg.value, e.arg.span
        assert isinstance(value, int)  # only int literals are read as subtractions
        minus = ast.Var(Span(number.source, number.start, number.start + 1), "subi", builtin=True)
        fn = _as_subtractions(e.fn, misread)
        return ast.App(e.span, ast.App(fn.span, minus, fn),
                       ast.Lit(Span(number.source, number.start + 1, number.end), -value, "int"))
    children: dict[str, Any] = {
        f.name: _as_subtractions(getattr(e, f.name), misread)
        for f in fields(e) if f.init and isinstance(getattr(e, f.name), ast.Expr)}
    copy = replace(e, **children)  # with none of the annotations the failed check left
    copy.do_levels = e.do_levels
    return copy


def _explain_minus(error: FCLError, e: ast.App, definition: str | None = None) -> None:
    """Add to error that `x-1` at e applies x to -1 (in `definition`, if not where error is)."""
    number = e.arg.span.text
    words = e.fn.span.text.split()
    left = words[-1] if words else e.fn.span.text
    where = f" in the definition of `{definition}`" if definition else ""
    error.hints.append(f"did you mean `{left} - {number[1:]}`{where}? `{left}{number}` applies "
                       f"`{left}` to the number `{number}`")
    span = error.span
    if span is None or not span.start <= e.span.start < span.end:
        error.notes.append((e.span, f"`{left}` is applied to the number `{number}` here"))


def substitute(t: Type, tmap: dict, lmap: dict) -> Type:
    """t with quantified variables replaced (tmap/lmap keyed by variable object)."""
    return map_type(t, lambda v: tmap.get(v, v), lambda level: substitute_level(level, lmap))


def substitute_level(level: Level, lmap: dict) -> Level:
    level = chase_level(level)
    if isinstance(level, LStep):
        return LStep(substitute_level(level.inner, lmap))
    if isinstance(level, LVar):
        return lmap.get(level, level)
    return level


def _kind_reason(t: ast.TypeSyntax, var: str, kind: int) -> str | None:
    """Why builtin type variable `var` has `kind`: base types because it is the element of a
    push array; otherwise what it first is in t (a pull array element, a program result)."""
    found: list[str] = []

    def walk(t: ast.TypeSyntax, inside: str | None) -> None:
        if t.con == "var" and t.var == var and inside is not None:
            found.append(inside)
        inner = t.con if t.con in KIND_REASONS else inside if t.con == "pair" else None
        for arg in t.args:
            walk(arg, inner)

    walk(t, None)
    if kind in (BT, RT) and "push" in found:
        return KIND_REASONS["push"]
    return KIND_REASONS[found[0]] if found else None


def _chase_lvar(level: Level) -> LVar | None:
    level = chase_level(level)
    return level if isinstance(level, LVar) else None


def _is_do_bind(head: ast.Expr, position: int, e: ast.App) -> bool:
    """The continuation argument of a `bind` that a `do` block was desugared to."""
    return (isinstance(head, ast.Var) and head.builtin and head.name == "bind" and position == 2
            and isinstance(e.arg, ast.Lam) and isinstance(e.fn, ast.App))


def _application_head(e: ast.App) -> tuple[ast.Expr, int]:
    position = 1
    fn = e.fn
    while isinstance(fn, ast.App):
        fn = fn.fn
        position += 1
    return fn, position


def _describe_head(head: ast.Expr) -> str:
    if isinstance(head, ast.Var):
        return f"`{head.span.text}`" if head.builtin else f"`{head.name}`"
    return "this function"


def _ordinal(n: int) -> str:
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _kind_name(kind: int) -> str:
    return {BT: "a base type (int, double, float or bool)",
            RT: "a record of base types (int, double, float, bool, or pairs of them)",
            GT: "a ground type (a non-function type)", TYP: "a type"}[kind]


def _hints_for(err: UnifyError) -> list[str]:
    if isinstance(err, LevelError):
        namer = Namer()  # one namer, so that a level variable has one name in all hints
        left, right = namer.level(err.left), namer.level(err.right)
        hints = [f"the levels `{left}` and `{right}` differ; check the level arguments "
                 "(`<thread>`, `<block>`, `<grid>`) here"]
        if err.rigid is not None and err.other is not None:  # both or neither
            rigid, other = namer.level(err.rigid), namer.level(err.other)
            hints.append(f"`{rigid}` is a declared level parameter, so the definition must work "
                         f"at every level `{rigid}`; it cannot be fixed to `{other}` here")
        return hints
    if err.detail == "level-occurs":
        level, bigger = show_levels(err.left, err.right)
        return [f"the level `{level}` would have to equal `{bigger}`, one level up from itself"]
    if err.detail == "mismatch":
        left_type, right_type = chase(err.left), chase(err.right)
        if not (isinstance(left_type, TCon) and isinstance(right_type, TCon)):
            return []
        if {left_type.name, right_type.name} == {"int", "double"}:
            return ["int and double never mix: convert with `i2d`, and use `addd`, `subd`, "
                    "`muld`, `divd` for double arithmetic"]
        if {left_type.name, right_type.name} == {"int", "float"}:
            return ["int and float never mix: convert with `i2f`, and use `addf`, `subf`, "
                    "`mulf`, `divf` for float arithmetic"]
        if {left_type.name, right_type.name} == {"double", "float"}:
            return ["double and float never mix: convert with `d2f` or `f2d`; a literal is a "
                    "float with an `f` after it (`1.5f`)"]
    return []


def show_levels(*levels: Level) -> list[str]:
    namer = Namer()
    return [namer.level(lv) for lv in levels]
