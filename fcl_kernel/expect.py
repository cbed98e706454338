"""`%%expect`: compare a cell's result with a value computed by numpy, and its program's costs
with budgets, for self-checking exercises.

    %%expect [--strict] NUMPY-EXPR [--budget NAME<=NUMBER ...]

The expectation is a Python expression with `np` (numpy) in scope, evaluated in the kernel's
process; the user owns the kernel, so this is no more powerful than the cell itself. A budget
bounds a figure of the cost model (FIGURES) measured on the cell's program. A failed check is
reported as an ordinary output (a red ✗), not as an error, so that "Run All" goes on past an
exercise that is not solved yet; with `--strict`, or while nbgrader runs the notebook to grade
it, a failed check is an error, which nbgrader scores 0.
"""
from __future__ import annotations

import difflib
import html
import math
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fcl.analysis.costs import KernelCosts, intensity
from fcl.errors import FCLError
from fcl.explain import Explanation
from fcl.highlight import theme_colour

SHOW_MISMATCHES = 8
# The theme's success and error colours: each reaches contrast 4.5 on its own theme's background
# (JupyterLab's success-color1 and error-color0 do not, in the light and the dark theme).
OK_COLOUR = theme_colour("jp-success-color0", "gitDecoration-addedResourceForeground", "#1a7f37")
WRONG_COLOUR = theme_colour("jp-error-color1", "errorForeground", "#cf222e")


# ---- the arguments ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Figure:
    """A figure of the cost model that a budget can bound."""

    label: str  # as a check line names it; {gpu} stands for the chosen GPU's name
    measure: Callable[[list[KernelCosts]], float]
    unit: str = ""


def _summed(attribute: str) -> Callable[[list[KernelCosts]], float]:
    return lambda costs: float(sum(getattr(c, attribute) for c in costs))


def _largest(attribute: str) -> Callable[[list[KernelCosts]], float]:
    return lambda costs: float(max((getattr(c, attribute) for c in costs), default=0))


def _least_occupancy(costs: list[KernelCosts]) -> float:
    return min((c.predicted.occupancy.occupancy for c in costs if c.predicted), default=0.0)


def _densest(count: str) -> Callable[[list[KernelCosts]], float]:
    return lambda costs: max((x for c in costs if (x := intensity(c, count)) is not None),
                             default=0.0)


def _predicted_us(costs: list[KernelCosts]) -> float:
    times = [c.predicted.time_s if c.predicted else None for c in costs]
    # None: a kernel cannot run on that GPU (too much local memory, too large a work-group).
    return math.inf if None in times else sum(t for t in times if t is not None) * 1e6


# A program without kernels (a pure value) reads 0 for each.
FIGURES = {
    "kernels": Figure("kernel launches", _summed("launches")),
    "global_loads": Figure("global loads per work-item", _summed("global_loads")),
    "global_stores": Figure("global stores per work-item", _summed("global_stores")),
    "sectors_per_load": Figure("32-byte sectors per warp load (worst kernel)",
                               _largest("load_sectors")),
    "sectors_per_store": Figure("32-byte sectors per warp store (worst kernel)",
                                _largest("store_sectors")),
    "lines_per_load": Figure("128-byte lines per warp load (worst kernel)",
                             _largest("load_lines")),
    "lines_per_store": Figure("128-byte lines per warp store (worst kernel)",
                              _largest("store_lines")),
    "dram_sectors": Figure("32-byte sectors from DRAM per work-group", _summed("distinct_sectors")),
    "flops": Figure("operations on doubles per work-item", _summed("flops")),
    "intensity": Figure("operations on doubles per DRAM byte (densest kernel)",
                        _densest("flops")),
    "float_flops": Figure("operations on floats per work-item", _summed("float_flops")),
    "float_intensity": Figure("operations on floats per DRAM byte (densest kernel)",
                              _densest("float_flops")),
    "local_loads": Figure("local loads per work-item", _summed("local_loads")),
    "local_stores": Figure("local stores per work-item", _summed("local_stores")),
    "bank_conflicts": Figure("bank conflicts per work-group", _summed("bank_conflicts")),
    "barriers": Figure("barriers per work-group", _summed("barriers")),
    "simt": Figure("SIMT efficiency (worst kernel)",
                   lambda costs: min((c.simt_efficiency for c in costs), default=0.0)),
    "local_bytes": Figure("local memory per work-group (largest kernel)",
                          _largest("local_bytes"), " B"),
    "occupancy": Figure("occupancy on {gpu} (worst kernel)", _least_occupancy),
    "predicted_us": Figure("predicted time on {gpu}", _predicted_us, " µs"),
}
COMPARISONS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "<=": ("≤", operator.le), ">=": ("≥", operator.ge), "==": ("=", operator.eq),
    "<": ("<", operator.lt), ">": (">", operator.gt),
}
CLAUSE = re.compile(r"(\w+)(<=|>=|==|<|>)(\S+)")
OPTION = re.compile(r"(?<!\S)(--[A-Za-z][\w-]*)(?!\S)")  # a whole word: not `x--1`
USAGE = "`%%expect [--strict] NUMPY-EXPR [--budget NAME<=NUMBER ...]`"


@dataclass(frozen=True)
class Budget:
    name: str
    comparison: str  # a key of COMPARISONS
    bound: float

    def holds(self, value: float) -> bool:
        # Figures are sums and quotients of counts: 4.000000000000001 µs is within 4 µs.
        if math.isclose(value, self.bound, rel_tol=1e-9, abs_tol=1e-12):
            value = self.bound
        return COMPARISONS[self.comparison][1](value, self.bound)


@dataclass(frozen=True)
class Expectation:
    expression: str
    strict: bool
    budgets: tuple[Budget, ...]


def parse_expectation(args: str) -> Expectation:
    """The arguments of `%%expect`: the numpy expression, --strict, and --budget clauses."""
    expression, *rest = OPTION.split(args)
    expression = expression.strip()
    strict, budgets = False, []
    for option, text in zip(rest[::2], rest[1::2]):
        if option == "--strict":
            if text.strip() and expression:
                raise FCLError(f"%%expect: `--strict` takes no value, but `{text.strip()}` "
                               f"follows it; the form is {USAGE}")
            expression = expression or text.strip()  # `--strict EXPR`
            strict = True
        elif option == "--budget":
            if not text.split():
                raise FCLError("%%expect: `--budget` needs one or more budgets, e.g. "
                               "`--budget kernels<=1 global_loads<=1`")
            budgets += [parse_budget(word) for word in text.split()]
        else:
            raise FCLError(f"%%expect: no option `{option}`; the form is {USAGE}")
    return Expectation(expression, strict, tuple(budgets))


def parse_budget(word: str) -> Budget:
    """`NAME OP NUMBER` without spaces, e.g. `kernels<=1`."""
    match = CLAUSE.fullmatch(word)
    bound = _number(match.group(3)) if match else None
    if match is None or bound is None:
        raise FCLError(f"%%expect: cannot read the budget `{word}`: write NAME OP NUMBER without "
                       f"spaces, e.g. `kernels<=1`, OP one of {' '.join(COMPARISONS)}")
    name, comparison = match.group(1), match.group(2)
    if name not in FIGURES:
        close = difflib.get_close_matches(name, FIGURES, n=1)
        guess = f" (did you mean `{close[0]}`?)" if close else ""
        raise FCLError(f"%%expect: no budget named `{name}`{guess}; the budgets are: "
                       f"{', '.join(FIGURES)}")
    return Budget(name, comparison, bound)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ---- the checks -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    """One ✓/✗ line: the value, or one budget."""

    ok: bool
    text: str
    # The value's first wrong (index, got): never the expected values, which would show an
    # exercise's answer under its starter.
    rows: tuple[tuple[int, str], ...] = ()


def evaluate_expected(text: str):
    """The value of the numpy expression `text`."""
    if not text.strip():
        raise FCLError("`%%expect` needs a numpy expression to compare with, e.g. "
                       "`%%expect np.arange(8) * 2`")
    namespace = {"np": np, "numpy": np}
    try:
        # eval is the point: the expression is the user's own, run in their own kernel.
        return eval(compile(text, "<%%expect>", "eval"), namespace)
    except Exception as err:
        raise FCLError(f"the expectation `{text}` is not a valid numpy expression: "
                       f"{type(err).__name__}: {err}") from None


def compare(got, expected, rtol: float = 1e-6, atol: float = 1e-9) -> Check:
    """Whether `got` matches `expected`, and where not."""
    if got is None:
        return Check(False, "nothing to check yet: the cell has no result (end it with an "
                            "expression or a grid program)")
    if isinstance(got, tuple) or isinstance(expected, tuple):
        if not (isinstance(got, tuple) and isinstance(expected, tuple)
                and len(got) == len(expected)):
            return Check(False, f"expected {_kind(expected)}, got {_short(got)}")
        checks = [compare(g, e, rtol, atol) for g, e in zip(got, expected)]
        return Check(all(c.ok for c in checks),
                     "; ".join(f"component {k + 1}: {_mark(c.ok)} {c.text}"
                               for k, c in enumerate(checks)))
    try:
        want = np.asarray(expected)
        have = np.asarray(got)
    except Exception:
        return Check(False, f"expected {_kind(expected)}, got {_short(got)}")
    if want.ndim > 1:
        want = want.reshape(-1)  # FCL arrays are flat: a numpy matrix is compared row-major
    if have.shape != want.shape:
        what = "a scalar" if have.ndim == 0 else f"{have.size} elements"
        wanted = "a scalar" if want.ndim == 0 else f"{want.size} elements"
        return Check(False, f"expected {wanted}, got {what}: {_short(got)}")
    if want.dtype.kind in "fc" or have.dtype.kind in "fc":
        wrong = ~np.isclose(have.astype(float), want.astype(float), rtol=rtol, atol=atol)
    else:
        wrong = have != want
    wrong = np.atleast_1d(wrong)
    if not wrong.any():
        text = "the value matches" if have.ndim == 0 else f"all {have.size} elements match"
        return Check(True, f"{text} numpy")
    if have.ndim == 0:
        return Check(False, f"got {_item(have)}, which is not numpy's value")
    positions = np.flatnonzero(wrong)
    rows = tuple((int(i), _item(have[i])) for i in positions[:SHOW_MISMATCHES])
    return Check(False, f"{len(positions)} of {have.size} elements differ from numpy's; the "
                        f"first at index {rows[0][0]}: got {rows[0][1]}", rows)


def check_budgets(budgets: tuple[Budget, ...], explanation: Explanation | None) -> list[Check]:
    """Each budget against its figure, counted in one traced work-group per kernel of the
    explained program (None: the cell has no program to measure)."""
    costs = explanation.costs() if explanation is not None else []
    checks = []
    for budget in budgets:
        figure = FIGURES[budget.name]
        label = figure.label.format(gpu=explanation.gpu.name if explanation else "the GPU")
        symbol = COMPARISONS[budget.comparison][0]
        wanted = f"(budget {symbol} {_figure(budget.bound)}{figure.unit})"
        if explanation is None:
            checks.append(Check(False, f"{label}: not measured, the cell has no program {wanted}"))
            continue
        value = figure.measure(costs)
        shown = "cannot run there" if value == math.inf else f"{_figure(value)}{figure.unit}"
        if not costs and budget.name != "kernels":
            shown += ", no kernels"
        checks.append(Check(budget.holds(value), f"{label}: {shown} {wanted}"))
    return checks


# ---- the verdict ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    ok: bool
    summary: str
    bundles: list[dict]  # to display in order; the last is the cell's verdict


def verdict(value: Check, budgets: list[Check]) -> Verdict:
    """Without budgets, the value's check is the verdict. With them, the value's and each
    budget's check, then the verdict: the last ✓/✗ line, which the notebook tests read, and the
    one element of class fcl-expect-ok or fcl-expect-wrong, which the browser test counts."""
    if not budgets:
        return Verdict(value.ok, value.text, [_bundle(value.ok, value.text, value.rows)])
    missed = sum(not b.ok for b in budgets)
    ok = value.ok and not missed
    its = f"its {len(budgets)} budgets" if len(budgets) > 1 else "its budget"
    summary = ("the value matches numpy" if value.ok else "the value is wrong") + \
        (f", within {its}" if not missed else " and misses its budget" if len(budgets) == 1
         else f" and misses {missed} of {its}")
    return Verdict(ok, summary, [_checks_bundle([value, *budgets]), _bundle(ok, summary)])


def must_fail(strict: bool) -> bool:
    """Whether a failed check is an error: asked for, or nbgrader is running the notebook to
    grade it (`nbgrader autograde`) or to validate it, which it says to the kernel it starts
    through NBGRADER_EXECUTION (nbgrader/converters/autograde.py, nbgrader/validator.py)."""
    return strict or os.environ.get("NBGRADER_EXECUTION") in ("autograde", "validate")


def failure(result: Verdict, strict: bool) -> FCLError:
    why = "`--strict` makes a failed check an error" if strict else \
        "while nbgrader grades or validates the notebook, a failed check is an error"
    return FCLError(f"the check failed: {result.summary} ({why})")


# ---- showing ----------------------------------------------------------------------------------

def _mark(ok: bool) -> str:
    return "✓" if ok else "✗"


def _figure(value: float) -> str:
    """A whole number as it is (4096, and 4 for 4.000000000000001 µs), else three significant
    digits, without an exponent for the sizes budgets have."""
    if math.isclose(value, round(value), rel_tol=1e-9, abs_tol=1e-12):
        return str(round(value))
    rounded = float(f"{value:.3g}")
    return str(int(rounded)) if rounded == int(rounded) else str(rounded)


def _item(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v.item() if hasattr(v, "item") else v)


def _kind(v) -> str:
    """What a value is, without its contents."""
    if isinstance(v, tuple):
        return f"a tuple of {len(v)}"
    shape = np.shape(v)
    return "a scalar" if not shape else f"{int(np.prod(shape))} elements"


def _short(v) -> str:
    text = np.array2string(v, threshold=12) if isinstance(v, np.ndarray) else repr(v)
    return text if len(text) < 120 else text[:117] + "..."


def _line_html(check: Check, classes: str) -> str:
    colour = OK_COLOUR if check.ok else WRONG_COLOUR
    return (f"<div class='{classes}' style='color:{colour};font-weight:bold'>"
            f"{_mark(check.ok)} {html.escape(check.text)}</div>")


def _rows_text(rows) -> str:
    return "".join(f"\n  [{i}] got {g}" for i, g in rows)


def _rows_html(rows) -> str:
    if not rows:
        return ""
    cells = "".join(f"<tr><td>{i}</td><td>{html.escape(g)}</td></tr>" for i, g in rows)
    return ("<table style='font-family:monospace;margin-top:.3em'><tr><th>index</th>"
            f"<th>got</th></tr>{cells}</table>")


def _bundle(ok: bool, text: str, rows=()) -> dict:
    """The verdict: a ✓ or ✗ line (and the first wrong positions)."""
    check = Check(ok, text)
    return {"text/plain": f"{_mark(ok)} {text}{_rows_text(rows)}",
            "text/html": _line_html(check, f"fcl-expect fcl-expect-{'ok' if ok else 'wrong'}")
            + _rows_html(rows)}


def _checks_bundle(checks: list[Check]) -> dict:
    """The value's and the budgets' checks, one line each, above the verdict."""
    plain = "\n".join(f"{_mark(c.ok)} {c.text}{_rows_text(c.rows)}" for c in checks)
    lines = "".join(_line_html(c, "fcl-expect-check") + _rows_html(c.rows) for c in checks)
    return {"text/plain": plain,
            "text/html": f"<div class='fcl-expect-checks'>{lines}</div>"}
