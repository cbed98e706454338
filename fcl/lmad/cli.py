"""`fcl lmad EXPR [--points] [--svg FILE] [--pitch N]`: inspect an LMAD (or compare two) from the
command line."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import LMADError
from .report import report
from .svg import render_svg


class _ArgumentParser(argparse.ArgumentParser):
    # Report usage errors like every other error instead of exiting the caller's process.
    def error(self, message: str) -> None:  # type: ignore[override]
        raise LMADError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="fcl lmad",
        description="Print an LMAD's normal form, shape and points, and optionally draw it. "
                    "Write the LMAD as one argument, e.g. '2 + {(3:5),(4:1)}' "
                    "(use -- before an LMAD that starts with a minus sign and has no spaces).")
    parser.add_argument("expr", metavar="EXPR", help="the LMAD, in the notation τ + {(σ:δ),…}; "
                        "two separated by `;` are also compared (shared addresses, and whether "
                        "the non-overlap test proves them disjoint)")
    parser.add_argument("--points", action="store_true", help="also print the sorted points")
    parser.add_argument("--svg", metavar="FILE", help="write a grid diagram of the points to FILE")
    parser.add_argument("--pitch", metavar="N", type=int,
                        help="row width of the diagram (default: the largest stride ≤ 32)")
    return parser


def main_lmad(argv: Sequence[str] | None = None) -> int:
    """Run `fcl lmad` with the arguments after `lmad`; return the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as stop:  # --help
        return stop.code if isinstance(stop.code, int) else 0
    except LMADError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        lmads, lines = report(args.expr, args.points)
        if args.svg and len(lmads) == 2:
            raise LMADError("--svg draws one LMAD; give the two one at a time")
        if args.svg:
            with open(args.svg, "w", encoding="utf-8") as out:
                out.write(render_svg(lmads[0], args.pitch))
    except (LMADError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    if args.svg:
        print(f"svg:         {args.svg}")
    return 0
