"""`%%expect`: compare a cell's result with a value computed by numpy, for self-checking exercises.

The expectation is a Python expression with `np` (numpy) in scope, evaluated in the kernel's
process; the user owns the kernel, so this is no more powerful than the cell itself. A mismatch
is reported as an ordinary output (a red ✗ with the first wrong positions), not as an error, so
that "Run All" goes on past an exercise that is not solved yet.
"""
from __future__ import annotations

import html

import numpy as np

from fcl.errors import FCLError

SHOW_MISMATCHES = 8


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


def compare(got, expected, rtol: float = 1e-6, atol: float = 1e-9) -> tuple[bool, dict]:
    """(whether `got` matches `expected`, a mime bundle that says so)."""
    if got is None:
        return False, _bundle(False, "nothing to check yet: the cell has no result (end it with "
                                     "an expression or a grid program)")
    if isinstance(got, tuple) or isinstance(expected, tuple):
        if not (isinstance(got, tuple) and isinstance(expected, tuple)
                and len(got) == len(expected)):
            return False, _bundle(False, f"expected {_short(expected)}, got {_short(got)}")
        verdicts = [compare(g, e, rtol, atol) for g, e in zip(got, expected)]
        ok = all(v[0] for v in verdicts)
        text = "; ".join(f"component {k + 1}: {v[1]['text/plain']}" for k, v in enumerate(verdicts))
        return ok, _bundle(ok, text)
    try:
        want = np.asarray(expected)
        have = np.asarray(got)
    except Exception:
        return False, _bundle(False, f"expected {_short(expected)}, got {_short(got)}")
    if want.ndim > 1:
        want = want.reshape(-1)  # FCL arrays are flat: a numpy matrix is compared row-major
    if have.shape != want.shape:
        what = "a scalar" if have.ndim == 0 else f"{have.size} elements"
        wanted = "a scalar" if want.ndim == 0 else f"{want.size} elements"
        return False, _bundle(False, f"expected {wanted}, got {what}: {_short(got)}")
    if want.dtype.kind in "fc" or have.dtype.kind in "fc":
        wrong = ~np.isclose(have.astype(float), want.astype(float), rtol=rtol, atol=atol)
    else:
        wrong = have != want
    wrong = np.atleast_1d(wrong)
    if not wrong.any():
        text = "the value matches" if have.ndim == 0 else f"all {have.size} elements match"
        return True, _bundle(True, f"{text} numpy")
    if have.ndim == 0:
        return False, _bundle(False, f"expected {_short(expected)}, got {_short(got)}")
    positions = np.flatnonzero(wrong)
    rows = [(int(i), _item(have[i]), _item(want[i])) for i in positions[:SHOW_MISMATCHES]]
    text = (f"{len(positions)} of {have.size} elements differ; first at index {rows[0][0]}: "
            f"got {rows[0][1]}, expected {rows[0][2]}")
    return False, _bundle(False, text, rows)


def _item(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v.item() if hasattr(v, "item") else v)


def _short(v) -> str:
    text = np.array2string(v, threshold=12) if isinstance(v, np.ndarray) else repr(v)
    return text if len(text) < 120 else text[:117] + "..."


def _bundle(ok: bool, text: str, rows: list | None = None) -> dict:
    mark, colour = ("✓", "#1a7f37") if ok else ("✗", "#cf222e")
    plain = f"{mark} {text}"
    if rows:
        plain += "\n" + "\n".join(f"  [{i}] got {g}, expected {e}" for i, g, e in rows)
    table = ""
    if rows:
        cells = "".join(f"<tr><td>{i}</td><td>{html.escape(g)}</td><td>{html.escape(e)}</td></tr>"
                        for i, g, e in rows)
        table = ("<table style='font-family:monospace;margin-top:.3em'><tr><th>index</th>"
                 f"<th>got</th><th>expected</th></tr>{cells}</table>")
    return {"text/plain": plain,
            "text/html": f"<div class='fcl-expect fcl-expect-{'ok' if ok else 'wrong'}' "
                         f"style='color:{colour};font-weight:bold'>{mark} {html.escape(text)}</div>"
                         + table}
