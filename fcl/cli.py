"""The `fcl` command: check, run and inspect FCL programs.

    fcl --version
    fcl check [--types] [--no-prelude] FILE...
    fcl run [--backend auto|opencl|interp] [--device D] [--block-size N] [--unsafe]
            [--no-short-circuit] [--no-flatten] FILE...
    fcl compile [-o out.cl] [--dump-il] FILE...
    fcl devices                                              # exit status 1: none usable
    fcl costs [--group G] [--warp W] [--gpu NAME] FILE...  # memory traffic, occupancy, time
    fcl memory [--kernel K] [--array A] [--group G] [--warp W] [--pitch P] [--svg OUT]
               [--gpu NAME] FILE...
    fcl memory --blocks [--svg OUT] FILE...  # the global memory plan: blocks, copies removed
    fcl graph [--kernels | --kernel K] [--svg OUT] FILE...   # Graphviz DOT, or SVG with --svg
    fcl lmad EXPR [--points] [--svg FILE] [--pitch N]
    fcl lsp                                                  # language server on stdio

Files are read in order after the prelude, like the original compiler; options may come before
or after the files. Errors go to stderr as `file:line:col: error: ...` and the exit status is 1.
"""
from __future__ import annotations

import argparse
import difflib
import sys

from fcl import __version__, pipeline
from fcl.analysis.gpu import DEFAULT_GPU, gpu_names
from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.errors import FCLError, Source
from fcl.explain import explain
from fcl.il.ir import show_stmts
from fcl.interp.eval import RunConfig
from fcl.lmad.cli import main_lmad
from fcl.memory.layouts import LAYOUTS
from fcl.runtime.device import (
    BACKENDS,
    any_usable_device,
    choose_backend,
    describe_devices,
)
from fcl.runtime.oclgrind import run_checked
from fcl.runtime.streams import StreamOptions, parse_bytes
from fcl.session import Session, print_warnings
from fcl.viz.blocks import plan_svg
from fcl.viz.timeline import Timeline


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fcl", description="FCL: hierarchical functional GPU "
                                     "programming (check, run and inspect FCL programs)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = commands.add_parser("check", help="parse and type-check programs")
    check.add_argument("--types", action="store_true",
                       help="print `name : type` for every definition (the original's --typecheck)")
    _common(check)

    run = commands.add_parser("run", help="run a program's `main`")
    run.add_argument("--backend", choices=BACKENDS, default="auto",
                     help="where to run: generated OpenCL, or the reference interpreter; auto "
                          "(the default) is OpenCL where a device works, else the interpreter "
                          "(with a note saying why)")
    run.add_argument("--device", metavar="D",
                     help="OpenCL device: `platform:device` (see `fcl devices`) or part of its "
                          "name")
    _compile_options(run)
    run.add_argument("--device-memory", metavar="BYTES",
                     help="a budget of device memory for the run (as 64M or 2G; default: "
                          "FCL_DEVICE_MEMORY, else the device's): sequences are streamed in "
                          "chunks that fit it")
    run.add_argument("--chunk", metavar="N", type=int,
                     help="elements per chunk of a sequence (a fold's rounded up to a multiple "
                          "of 256; default: from the budget)")
    run.add_argument("--no-overlap", action="store_true",
                     help="move a sequence's next chunk to the device only after the kernels "
                          "of this one (to compare)")
    run.add_argument("--timeline", action="store_true",
                     help="after the run, draw on stderr when each chunk's data moved and its "
                          "kernels ran")
    run.add_argument("--dump-il", action="store_true", help="print the IL before running")
    run.add_argument("--check", action="store_true",
                     help="run on Oclgrind and report data races, out-of-bounds accesses and "
                          "uninitialized reads at FCL lines")
    _common(run)

    comp = commands.add_parser("compile", help="write the generated OpenCL kernels")
    comp.add_argument("-o", "--output", metavar="FILE",
                      help="write the kernels here (default: stdout)")
    comp.add_argument("--dump-il", action="store_true", help="print the IL instead of OpenCL")
    comp.add_argument("--after", metavar="STEP",
                      help="print the program after compiler step STEP instead of OpenCL "
                           "(see --list-steps)")
    comp.add_argument("--list-steps", action=_ListSteps,
                      help="list the compiler's steps after lowering, in order, and exit")
    comp.add_argument("--verify-il", action="store_true",
                      help="check the IL's invariants after every compiler pass (for compiler "
                           "developers: a failure is a bug in FCL)")
    _compile_options(comp)
    _common(comp)

    commands.add_parser("devices", help="list the OpenCL devices, each usable or why not")

    costs = commands.add_parser("costs", help="count each kernel's memory traffic (one traced "
                                "work-group): loads, stores, sectors, bank conflicts; and predict "
                                "its occupancy and time on a GPU, next to the time measured "
                                "on this device")
    _explain_options(costs)
    costs.add_argument("--warp", type=int, default=0, metavar="W",
                       help="the warp whose accesses are described as an LMAD (default 0)")
    memory = commands.add_parser("memory", help="draw which elements each work-item of a traced "
                                 "work-group touches (text, or SVG with --svg)")
    _explain_options(memory)
    memory.add_argument("--kernel", metavar="K", help="only kernel K (its name or number)")
    memory.add_argument("--array", metavar="A", help="only the accesses to array A (its name "
                        "in the kernels, or the one the program binds it to)")
    memory.add_argument("--warp", type=int, default=0, metavar="W",
                        help="the warp whose first access is outlined (default 0)")
    memory.add_argument("--pitch", type=int, metavar="P", help="elements per row of global memory")
    memory.add_argument("--blocks", action="store_true", help="the global memory plan instead: "
                        "each block, the arrays placed in it, and every copy removed or kept, "
                        "and why (needs no device)")
    memory.add_argument("--svg", metavar="OUT", help="write the diagrams as SVG to OUT (one file "
                        "per kernel: OUT with the kernel's name before the suffix when several)")
    graph = commands.add_parser("graph", help="the program's structure (or its kernels' IL) as "
                                "a Graphviz graph")
    _compile_options(graph)
    graph.add_argument("--kernels", action="store_true", help="every statement of each kernel")
    graph.add_argument("--kernel", metavar="K", help="every statement of kernel K")
    graph.add_argument("--svg", metavar="OUT", help="write SVG (needs Graphviz's `dot`) instead "
                       "of printing DOT")
    _common(graph)

    lmad = commands.add_parser("lmad", help="show an LMAD: its points and a memory diagram")
    lmad.add_argument("args", nargs=argparse.REMAINDER)

    commands.add_parser("lsp", help="run the language server for .fcl files on stdin/stdout "
                        "(diagnostics, hover, completion, go to definition), for an editor")
    return parser


class _ListSteps(argparse.Action):
    """--list-steps: print the steps and exit, as --version does (no files needed)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        for name, purpose in pipeline.stage_purposes():
            print(f"{name:12} {purpose}")
        parser.exit()


def _compile_options(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--block-size", type=int, default=BLOCK_SIZE, metavar="N",
                     help=f"work-group size, the value of #BlockSize (default {BLOCK_SIZE})")
    cmd.add_argument("--warp-size", type=int, default=WARP_SIZE, metavar="N",
                     help=f"lanes of a warp, the value of #WarpSize (default {WARP_SIZE})")
    cmd.add_argument("--unsafe", action="store_true",
                     help="no run-time checks (indices, divisors, lengths): a faulty program may "
                          "then print garbage instead of an error at its FCL location")
    cmd.add_argument("--no-short-circuit", action="store_true",
                     help="no memory planning: every array gets its own buffer and every copy "
                          "runs (to compare; `fcl memory --blocks` shows what is planned)")
    cmd.add_argument("--no-flatten", action="store_true",
                     help="irregular arrays not flattened: reduceRows and scanRows give each "
                          "row to one work-item, however long (to compare; the same results)")
    cmd.add_argument("--target", choices=("gpu", "cpu"), default=None,
                     help="shape the kernels for a GPU or a CPU device (default: `compile` "
                          "shows a GPU's; `run` shapes them for its device)")
    cmd.add_argument("--layout", choices=("auto", *LAYOUTS), default="auto",
                     help="arrays of records in global memory: an array per field (soa), of "
                          "whole records (aos) or of tiles of 32 records (aosoa); auto, the "
                          "default, picks the one whose accesses touch the fewest sectors")


def _compile_options_of(args):
    if args.block_size < 1:
        raise FCLError(f"the block size must be positive, not {args.block_size}")
    if args.warp_size < 1:
        raise FCLError(f"the warp size must be positive, not {args.warp_size}")
    return pipeline.CompileOptions(args.block_size, not args.unsafe,
                                   verify_il=getattr(args, "verify_il", False),
                                   target=args.target or "auto",
                                   short_circuit=not args.no_short_circuit,
                                   warp_size=args.warp_size, flatten=not args.no_flatten,
                                   layout=args.layout)


def _explain_options(cmd: argparse.ArgumentParser) -> None:
    _compile_options(cmd)
    cmd.add_argument("--device", metavar="D", help="OpenCL device (see `fcl devices`)")
    cmd.add_argument("--group", type=int, default=0, metavar="G",
                     help="the work-group to trace (default 0)")
    cmd.add_argument("--gpu", default=DEFAULT_GPU, metavar="NAME",
                     help=f"the GPU whose figures occupancy and predicted times use, one of "
                          f"{', '.join(gpu_names())} (default {DEFAULT_GPU}; see fcl/gpus/)")
    _common(cmd)


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
        return main_lmad(args.args)
    if args.command == "lsp":
        # Imported here: pygls and lsprotocol take longer to load than the rest of `fcl`.
        from fcl.lsp import serve
        return serve()
    try:
        if args.command == "devices":
            print("\n".join(describe_devices()))
            return 0 if any_usable_device() else 1
        session = load(args.files, prelude=not args.no_prelude)
        if args.command == "check":
            if args.types:
                decls = session.decls if not args.no_prelude else session.user_decls()
                for decl in decls:
                    print(f"{decl.name} : {decl.scheme}")
            return 0
        if args.command in ("costs", "memory", "graph"):
            return _explain(args, session)
        return _run_or_compile(args, session)
    except FCLError as err:
        sys.stdout.flush()
        print(err.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: a running kernel or loop was stopped (see host.py)
        sys.stdout.flush()
        print("error: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as shells report a program stopped by Ctrl-C
    except BrokenPipeError:  # the reader (e.g. `head`) went away: nothing more to say
        sys.stderr.close()
        return 0


def _run_or_compile(args, session: Session) -> int:
    options = _compile_options_of(args)
    root = pipeline.main_root(session)
    if args.dump_il:
        print(show_stmts(pipeline.lower(session, root, options)))
        if args.command == "compile":
            return 0
    if args.command == "compile" and args.after:
        print(_after(session, root, options, args.after))
        return 0
    if args.command == "compile":
        source = pipeline.compile_program(session, root, options).source
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(source)
        else:
            print(source)
        return 0
    if args.command == "run" and args.check:
        return _check(args, session, root, options)
    backend = choose_backend(args.backend, args.device, asked_as="`--backend opencl`",
                             note=lambda text: print(text, file=sys.stderr, flush=True))
    if backend == "interp":
        config = RunConfig(block_size=args.block_size, warp_size=args.warp_size)
        pipeline.run_interpreter(session, root, config)
    else:
        streaming = _streaming(args)
        timelines: list[Timeline] = []
        pipeline.run_opencl(session, root, options, device=args.device, streaming=streaming,
                            on_timeline=timelines.append if args.timeline else None)
        for timeline in timelines:
            print(timeline.text(), file=sys.stderr)
    return 0


def _streaming(args) -> StreamOptions:
    try:
        budget = parse_bytes(args.device_memory) if args.device_memory \
            else StreamOptions.from_environment().budget
        return StreamOptions(budget, args.chunk, not args.no_overlap)
    except ValueError as err:
        raise FCLError(str(err)) from None


def _after(session: Session, root, options, step: str) -> str:
    """The program after `step` (its last run, for a step of a fixpoint)."""
    names = pipeline.stage_names()
    if step not in names:
        close = difflib.get_close_matches(step, names, n=1)
        raise FCLError(f"there is no compiler step `{step}`",
                       hints=[f"did you mean `{close[0]}`?"] if close else
                       ["`fcl compile --list-steps` lists them"])
    return [text for name, text in pipeline.compile_steps(session, root, options)
            if name == step][-1]


def _explain(args, session: Session) -> int:
    explanation = explain(session, pipeline.main_root(session), _compile_options_of(args),
                          getattr(args, "device", None), getattr(args, "gpu", DEFAULT_GPU))
    if args.command == "costs":
        print(explanation.costs_bundle(args.group, args.warp)["text/plain"])
        return 0
    if args.command == "memory" and args.blocks:
        if args.svg:
            _write(args.svg, plan_svg(explanation.memory_plan()))
        print(explanation.blocks_bundle()["text/plain"])
        return 0
    if args.command == "memory":
        diagrams = explanation.memory(args.kernel, args.array, args.group, args.warp, args.pitch)
        if args.svg:
            for name, diagram in diagrams:
                _write(_numbered(args.svg, name, len(diagrams)), diagram.svg)
        print("\n\n".join(d.text for _, d in diagrams))
        return 0
    if args.kernels or args.kernel:
        drawings = [(k.name, d) for k, d in explanation.kernel_graphs(args.kernel)]
    else:
        drawings = [("structure", explanation.structure())]
    for name, drawing in drawings:
        if not args.svg:
            print(drawing.dot)
        elif drawing.svg is None:
            raise FCLError(drawing.note)
        else:
            _write(_numbered(args.svg, name, len(drawings)), drawing.svg)
    return 0


def _numbered(path: str, name: str, count: int) -> str:
    """`path`, or `stem-NAME.suffix` when several files are written."""
    if count == 1:
        return path
    stem, dot, suffix = path.rpartition(".")
    return f"{stem}-{name}.{suffix}" if dot else f"{path}-{name}"


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as err:
        raise FCLError(f"cannot write `{path}`: {err.strerror or err}") from None


def _check(args, session: Session, root, options) -> int:
    options = pipeline.for_run_on(options, "oclgrind")
    compiled = pipeline.compile_program(session, root, options)
    argv = [*args.files, "--block-size", str(args.block_size)]
    argv += ["--no-prelude"] * args.no_prelude + ["--unsafe"] * args.unsafe
    argv += ["--no-short-circuit"] * args.no_short_circuit + ["--no-flatten"] * args.no_flatten
    argv += ["--layout", args.layout]
    status, stdout, findings = run_checked(argv, compiled)
    sys.stdout.write(stdout)
    sys.stdout.flush()
    for finding in findings:
        print(finding.as_error().render(), file=sys.stderr)
    if findings:
        print(f"Oclgrind found {len(findings)} problem(s)", file=sys.stderr)
    return 1 if findings or status else 0


if __name__ == "__main__":
    sys.exit(main())
