"""FCL from Python: a program's top-level functions, called on numpy arrays.

    lib = fcl.load(source)                       # or fcl.load_file("prog.fcl")
    ys = lib.revAll(np.arange(1000, dtype=np.int32))

A top-level function whose parameters are ints, doubles, bools or arrays of them, and whose
result is a `Program <grid>` of such values (pairs of them too) or such a value itself, is an
entry point: an attribute of the library. It is compiled on its first call with its arrays'
lengths as run-time values (ir.Input), so one compiled program, one OpenCL build, serves every
length; type variables stand for int, double or bool, taken from the arguments, one compiled
instance per combination. Arguments are checked against the FCL type before anything runs, and
a mismatch is a TypeError or ValueError naming the parameter; a failed run-time check is an
FCLError carrying the FCL location. `backend="interp"` runs the same calls on the reference
interpreter, without OpenCL; the default, `auto`, is OpenCL where a device works and the
interpreter otherwise, with a note on stderr saying why (once per process).
"""
from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

import numpy as np

from fcl import pipeline
from fcl.analysis.gpu import DEFAULT_GPU, load_gpu
from fcl.codegen.kernel import Compiled
from fcl.defaults import BLOCK_SIZE, WARP_SIZE
from fcl.errors import FCLError, Source
from fcl.explain import Explanation
from fcl.interp import streams
from fcl.interp.eval import Interpreter, RunConfig
from fcl.interp.values import Buffer, PushArray, RecordBuffer, record_dtype
from fcl.memory.layouts import LAYOUTS
from fcl.mono import MonoProgram
from fcl.notebook import to_host
from fcl.python import opencl
from fcl.python.arguments import DTYPES, Parameter, argument
from fcl.runtime.device import BACKENDS, choose_backend, open_device
from fcl.runtime.streams import StreamOptions, parse_bytes
from fcl.session import Session
from fcl.syntax import ast
from fcl.timing import Policy, Sample, Timing, repeat
from fcl.types.types import (
    Namer,
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
    level_depth,
    show_type,
)
from fcl.types.unify import unify
from fcl.viz.timeline import Timeline

RESULTS = ("host", "device")


def _fcl_errors(function):
    """FCL errors raised from the caller's line: the compiler's frames say nothing to a Python
    user, and the error names the FCL file, line and column itself."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except FCLError as err:
            raise err.with_traceback(None) from None
    return wrapper


@_fcl_errors
def load(source: str, *, backend: str = "auto", device: str | None = None,
         block_size: int = BLOCK_SIZE, checks: bool = True, name: str = "<fcl>",
         warp_size: int = WARP_SIZE, flatten: bool = True, device_memory: int | str | None = None,
         chunk: int | None = None, overlap: bool = True, layout: str = "auto") -> Library:
    """The entry points of FCL source text. `device` picks the OpenCL device as `fcl run
    --device` does (default: PYOPENCL_CTX, else a GPU, else PoCL); `checks=False` leaves out
    the run-time checks, as `--unsafe` does; `block_size` and `warp_size` are #BlockSize and
    #WarpSize; `flatten=False` gives each row of an irregular array to one work-item, as
    `--no-flatten` does. Sequence arguments (`Seq int`) are streamed through the device in
    chunks that fit `device_memory` (bytes, or as "64M"; default FCL_DEVICE_MEMORY, else the
    device's memory), of `chunk` elements if given; `overlap=False` moves each chunk before its
    kernels instead of during the previous chunk's."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    session = Session.new()
    session.add_file(Source(name, source))
    backend = choose_backend(backend, device, asked_as='`backend="opencl"`',
                             note=lambda text: print(text, file=sys.stderr, flush=True))
    try:
        budget = parse_bytes(device_memory) if device_memory is not None \
            else StreamOptions.from_environment().budget
        streaming = StreamOptions(budget, chunk, overlap)
    except ValueError as err:
        raise ValueError(f"fcl.load: {err}") from None
    if layout not in ("auto", *LAYOUTS):
        raise ValueError(f"fcl.load: layout is auto, {', '.join(LAYOUTS)}; not {layout!r}")
    library = Library(session, source, backend, device, block_size, checks, warp_size, flatten)
    library.streaming, library.layout = streaming, layout
    return library


def load_file(path: str | os.PathLike, **options) -> Library:
    """load() of a file's text, its errors located in the file."""
    return load(Path(path).read_text(), name=str(path), **options)


class Library:
    """The callable functions of an FCL program, as attributes; `entry_points` lists them."""

    def __init__(self, session: Session, source: str, backend: str, device: str | None,
                 block_size: int, checks: bool, warp_size: int = WARP_SIZE,
                 flatten: bool = True):
        self.session, self.source, self.backend = session, source, backend
        self.device, self.block_size, self.checks = device, block_size, checks
        self.warp_size = warp_size
        self.flatten = flatten
        self.streaming = StreamOptions()  # how sequence arguments are streamed (fcl.load)
        self.layout = "auto"  # arrays of records in global memory (fcl.memory.layouts)
        self.entry_points: dict[str, EntryPoint] = {}
        self.not_callable: dict[str, str] = {}  # other top-level names: why they are not
        for decl in session.user_decls():
            binding = session.scope.names.get(decl.name)
            if binding is None or binding.scheme is not decl.scheme:
                continue  # shadowed by a later definition
            try:
                params = _signature(decl)
            except _NotCallable as reason:
                self.not_callable[decl.name] = str(reason)
                self.entry_points.pop(decl.name, None)
            else:
                self.entry_points[decl.name] = EntryPoint(self, decl, params)
                self.not_callable.pop(decl.name, None)

    def __getattr__(self, name: str) -> EntryPoint:
        if name.startswith("__") or name in ("entry_points", "not_callable"):
            raise AttributeError(name)
        if name in self.entry_points:
            return self.entry_points[name]
        if name in self.not_callable:
            raise AttributeError(f"`{name}` cannot be called from Python: "
                                 f"{self.not_callable[name]}")
        raise AttributeError(f"the FCL program defines no `{name}`; its entry points are: "
                             f"{', '.join(self.entry_points) or 'none'}")

    @property
    def queue(self):
        """The pyopencl command queue of the library's device: arrays made with it (e.g.
        `pyopencl.array.to_device(lib.queue, xs)`) are used in place."""
        return open_device(self.device).queue

    def __dir__(self):
        return [*super().__dir__(), *self.entry_points]

    def __repr__(self) -> str:
        lines = [f"FCL library ({self.backend}) with {len(self.entry_points)} entry points:"]
        lines += [f"  {entry.signature}" for entry in self.entry_points.values()]
        return "\n".join(lines)


class EntryPoint:
    """One callable FCL function: `f(*args, out="host")`, `f.bench(*args)`, `f.costs(*args)`.

    A polymorphic function (`forall 'a. ['a] -> ...`) takes its type variables from the
    arguments' dtypes and is compiled once per combination of them."""

    def __init__(self, library: Library, decl: ast.Decl, params: list[Parameter]):
        self.library, self.decl, self.params = library, decl, params
        self.name = decl.name
        self.signature = f"{decl.name} : {decl.scheme}"
        self.__doc__ = self.signature
        # The scheme's type variables, in the order of the parameters that fix them.
        self.type_vars = list(dict.fromkeys(p.kind for p in params if p.polymorphic))
        self._instances: dict[tuple[str, ...], Instance] = {}

    def __repr__(self) -> str:
        return f"<FCL entry point {self.signature}>"

    # ---- calling
    @_fcl_errors
    def __call__(self, *args, out: str = "host"):
        """The function's result on these arguments: numpy arrays and scalars (tuples for
        pairs, None for unit); with out="device", arrays as pyopencl arrays left on the device
        (the OpenCL back end only)."""
        if out not in RESULTS:
            raise ValueError(f"out must be one of {', '.join(RESULTS)}, not {out!r}")
        instance, values = self._check(args)
        if self.library.backend == "interp":
            if out == "device":
                raise ValueError("out='device' needs the OpenCL back end; this library runs on "
                                 "the interpreter")
            return instance.interpret(values)
        return opencl.call(self, instance, values, out)

    def _check(self, args: tuple) -> tuple[Instance, list]:
        """The instance these arguments call, and the arguments as the back ends take them."""
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params) or "none"
            raise TypeError(f"{self.name} takes {len(self.params)} arguments ({names}), "
                            f"not {len(args)}")
        values: list = []
        kinds: dict[str, tuple[str, str]] = {}  # a type variable: (its kind, who fixed it)
        for param, arg in zip(self.params, args):
            value, kind = argument(self.name, param, arg)
            if param.polymorphic:
                first = kinds.setdefault(param.kind, (kind, param.name))
                if first[0] != kind:
                    raise TypeError(f"{self.name}: parameter `{param.name}` is {param}, and "
                                    f"`{first[1]}` made {param.kind} {first[0]}; got {kind}")
            values.append(value)
        return self.instance(tuple(kinds[v][0] for v in self.type_vars)), values

    def instance(self, kinds: tuple[str, ...]) -> Instance:
        """The function with its type variables set to `kinds` (int, double or bool)."""
        if kinds not in self._instances:
            self._instances[kinds] = Instance(self, dict(zip(self.type_vars, kinds)))
        return self._instances[kinds]

    def compiled(self) -> Compiled:
        """The OpenCL program (fcl.codegen.kernel.Compiled); of a polymorphic function, its
        instance on ints, as FCL defaults type variables."""
        return self.instance(tuple("int" for _ in self.type_vars)).compiled()

    @property
    def opencl(self) -> str:
        """The OpenCL C of the function's kernels (see compiled)."""
        return self.compiled().source

    # ---- timing and costs
    @_fcl_errors
    def bench(self, *args, runs: int | None = None, budget_s: float = 2.0) -> Timing:
        """Time calls on these arguments with the timer of `%%bench`: on OpenCL the kernels by
        profiling events (the arguments moved to the device once, before timing), on the
        interpreter the wall time of a call; repeated until the spread settles, `runs` times,
        or `budget_s` seconds. Its repr is the report."""
        policy = Policy(budget_s=budget_s, runs=runs)
        instance, values = self._check(args)
        self._replayable(values, "bench")
        if self.library.backend == "opencl":
            return opencl.bench(self, instance, values, policy)

        def once() -> Sample:
            start = time.perf_counter()
            instance.interpret(values)
            return Sample((time.perf_counter() - start) * 1000)

        once()
        return repeat(once, policy)

    def _replayable(self, values: list, what: str) -> None:
        """`what` runs the call more than once: an iterator would be empty the second time."""
        for param, value in zip(self.params, values):
            if param.sequence and not isinstance(value, np.ndarray):
                raise TypeError(f"{self.name}.{what} runs the call more than once, and an "
                                f"iterator can be read once: give `{param.name}` an array or a "
                                "memmap")

    @_fcl_errors
    def timeline(self, *args) -> Timeline:
        """Run a call on the OpenCL back end and give its sequences' timeline: when each chunk's
        data moved and its kernels ran, the chunk size and the peak of device memory (its
        `.text()`, `.plot()` and `.summary()`)."""
        instance, values = self._check(args)
        found: list[Timeline] = []
        opencl.call(self, instance, values, "host", on_timeline=found.append)
        if not found:
            raise ValueError(f"{self.name} streams no sequence: it has no timeline")
        return found[0]

    @_fcl_errors
    def costs(self, *args, gpu: str = DEFAULT_GPU) -> Explanation:
        """What a call on these arguments does on the device: its cost table (the repr in a
        notebook), `.memory()` diagrams and predicted time on `gpu`, from the OpenCL program
        (traced on the OpenCL device whichever back end the library runs on)."""
        chosen = load_gpu(gpu)  # an unknown GPU is an error before anything runs
        instance, values = self._check(args)
        self._replayable(values, "costs")
        return opencl.explain_call(self, instance, values, chosen)


class Instance:
    """An entry point at concrete types: its expression, type-checked and compiled once."""

    def __init__(self, entry: EntryPoint, kinds: dict[str, str]):
        self.library = entry.library
        self.params, self.kinds = entry.params, kinds
        session = self.library.session
        self.root = ast.Var(entry.decl.name_span, entry.name)
        t = chase(session.checker.check_expr(session.scope, self.root))
        for param in entry.params:
            assert isinstance(t, TArrow)
            if param.polymorphic:
                fresh = chase(t.arg)
                unify(chase(fresh.elem) if isinstance(fresh, (TPull, TSeq)) else fresh,
                      TCon(kinds[param.kind]))
            t = chase(t.res)
        self.result_type = chase(t.result) if isinstance(t, TProgram) else t
        self._compiled: Compiled | None = None
        self._mono: MonoProgram | None = None

    def compiled(self) -> Compiled:
        if self._compiled is None:
            library = self.library
            options = pipeline.CompileOptions(library.block_size, library.checks,
                                              warp_size=library.warp_size,
                                              flatten=library.flatten, layout=library.layout)
            self._compiled = pipeline.compile_program(library.session, self.root, options,
                                                      entry=True)
        return self._compiled

    def interpret(self, values: list):
        if self._mono is None:
            self._mono = pipeline.mono_program(self.library.session, self.root)
        interpreter = Interpreter(RunConfig(self.library.block_size, sys.stdout, sys.stderr,
                                            self.library.warp_size))
        arguments = [
            streams.argument(v, DTYPES[self.kinds.get(p.kind, p.kind)], position)
            if p.sequence
            else RecordBuffer(p.record_dtypes(), [Buffer(a, np.int64(0), np.int32(len(a)))
                                                  for a in v]) if p.record is not None
            else Buffer(v, np.int64(0), np.int32(len(v))) if isinstance(v, np.ndarray) else v
            for position, (p, v) in enumerate(zip(self.params, values))]
        value = pipeline.on_big_stack(interpreter.run)(self._mono, arguments)
        return _interpreted_result(interpreter, value, self.result_type)


class _NotCallable(Exception):
    pass


def _signature(decl: ast.Decl) -> list[Parameter]:
    """The parameters of a callable definition, or _NotCallable saying why it is not one."""
    scheme = decl.scheme
    namer = Namer(scheme.type_vars, scheme.level_vars)
    names = []
    value = decl.value
    while isinstance(value, ast.Lam):
        names.append(value.param)
        value = value.body
    params: list[Parameter] = []
    t = chase(scheme.body)
    while isinstance(t, TArrow):
        position = len(params)
        name = names[position] if position < len(names) else f"argument {position + 1}"
        params.append(_parameter(name, chase(t.arg), namer))
        t = chase(t.res)
    fixed = {p.kind for p in params if p.polymorphic}
    if isinstance(t, TProgram):
        if level_depth(t.level) != (2, None):
            raise _NotCallable("its result is a program at a level below <grid>; only "
                               "`Program <grid>` runs from the host")
        t = chase(t.result)
    _check_result(t, namer, fixed)
    return params


def _parameter(name: str, t: Type, namer: Namer) -> Parameter:
    elem = chase(t.elem) if isinstance(t, (TPull, TSeq)) else t
    if isinstance(t, TPull) and isinstance(elem, TPair):
        return Parameter(name, show_type(elem, namer), True, record=_record_kinds(name, t, elem,
                                                                                 namer))
    if isinstance(elem, TCon) and elem.name in DTYPES:
        return Parameter(name, elem.name, isinstance(t, TPull), isinstance(t, TSeq))
    if isinstance(elem, TVar):
        return Parameter(name, namer.tvar(elem), isinstance(t, TPull), isinstance(t, TSeq))
    raise _NotCallable(f"its parameter `{name}` has type `{show_type(t, namer)}`; Python can "
                       "pass ints, doubles, bools and arrays of them")


def _record_kinds(name: str, t: Type, elem: Type, namer: Namer):
    """The base types of an array of records' fields, nested as its pairs are."""
    elem = chase(elem)
    if isinstance(elem, TPair):
        return (_record_kinds(name, t, elem.fst, namer), _record_kinds(name, t, elem.snd, namer))
    if isinstance(elem, TCon) and elem.name in DTYPES:
        return elem.name
    raise _NotCallable(f"its parameter `{name}` has type `{show_type(t, namer)}`; Python can "
                       "pass arrays of records of ints, doubles and bools, with concrete types "
                       "(give the function a signature)")


def _check_result(t: Type, namer: Namer, fixed: set[str]) -> None:
    """Whether Python can take a result of type t (its type variables `fixed` by parameters)."""
    elem = chase(t.elem) if isinstance(t, (TPull, TPush)) else t
    if isinstance(t, (TPull, TPush)) and isinstance(elem, TPair):
        _check_result(chase(elem.fst), namer, fixed)  # a tuple of arrays, one per field
        _check_result(chase(elem.snd), namer, fixed)
        return
    if isinstance(elem, TCon) and (elem.name in DTYPES or (elem is t and elem.name == "unit")):
        return
    if isinstance(elem, TVar):
        if namer.tvar(elem) in fixed:
            return
        raise _NotCallable(f"the type `{namer.tvar(elem)}` of its result is not the type of "
                           "any parameter; give it a signature with concrete types (`sig`)")
    if isinstance(t, TPair):
        _check_result(chase(t.fst), namer, fixed)
        _check_result(chase(t.snd), namer, fixed)
        return
    raise _NotCallable(f"its result has type `{show_type(t, namer)}`; Python can take ints, "
                       "doubles, bools, arrays of them and pairs of these")


def _interpreted_result(interpreter: Interpreter, value, t: Type):
    """An interpreter result as the OpenCL back end gives it: push arrays forced."""
    t = chase(t)
    if isinstance(t, TProgram):
        t = chase(t.result)
    if isinstance(value, tuple) and isinstance(t, TPair):
        return tuple(_interpreted_result(interpreter, v, u) for v, u in zip(value, (t.fst, t.snd)))
    if isinstance(value, PushArray):
        assert isinstance(t, TPush)
        value = interpreter.force(value, interpreter.host, record_dtype(t.elem), None)
        t = TPull(t.elem)
    return to_host(value, t, interpreter)
