"""The `fcl` command: check, run and inspect FCL programs.

    fcl check [--types] [--no-prelude] FILE...
    fcl run [--backend interp] [--no-prelude] [--block-size N] FILE...

Files are read in order after the prelude, like the original compiler; options may come before
or after the files. Errors go to stderr as `file:line:col: error: ...` and the exit status is 1.
"""
from __future__ import annotations

import argparse
import sys

from fcl.errors import FCLError, Source
from fcl.session import Session, print_warnings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fcl", description="FCL: hierarchical functional GPU "
                                     "programming (check, run and inspect FCL programs)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="parse and type-check programs")
    check.add_argument("--types", action="store_true",
                       help="print `name : type` for every definition (the original's --typecheck)")
    _common(check)

    run = commands.add_parser("run", help="run a program's `main`")
    run.add_argument("--backend", choices=["interp"], default="interp",
                     help="where to run: the reference interpreter")
    run.add_argument("--block-size", type=int, default=256, metavar="N",
                     help="work-group size, the value of #BlockSize (default 256)")
    _common(run)

    lmad = commands.add_parser("lmad", help="show an LMAD: its points and a memory diagram")
    lmad.add_argument("args", nargs=argparse.REMAINDER)
    return parser


def _common(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--no-prelude", action="store_true", help="do not load the prelude")
    cmd.add_argument("files", nargs="+", metavar="FILE", help="FCL source files")


def load(files: list[str], prelude: bool) -> Session:
    session = Session.new(prelude=prelude)
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as err:
            raise FCLError(f"cannot read `{path}`: {err.strerror or err}") from None
        except UnicodeDecodeError:
            raise FCLError(f"cannot read `{path}`: it is not UTF-8 text") from None
        session.add_file(Source(path, text))
    print_warnings(session)
    return session


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "lmad":
        from fcl.lmad.cli import main_lmad
        return main_lmad(args.args)
    try:
        session = load(args.files, prelude=not args.no_prelude)
        if args.command == "check":
            if args.types:
                decls = session.decls if not args.no_prelude else session.user_decls()
                for decl in decls:
                    print(f"{decl.name} : {decl.scheme}")
            return 0
        from fcl.driver import main_root, run_interpreter
        from fcl.interp.eval import RunConfig
        run_interpreter(session, main_root(session), RunConfig(block_size=args.block_size))
        return 0
    except FCLError as err:
        sys.stdout.flush()
        print(err.render(), file=sys.stderr)
        return 1
    except RecursionError:
        print("error: the program nests too deeply for the interpreter", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
