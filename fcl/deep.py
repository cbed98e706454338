"""Running the compiler and the interpreter where deeply nested programs fit.

The type checker, monomorphization, the lowering and the interpreter walk programs recursively:
a program nested 10,000 deep (lets, lambdas, `if`s, parentheses, or a chain of definitions each
using the previous one) needs a Python stack some 100,000 frames deep, far beyond Python's
default limit of 1,000 and, for frames that recurse through C, beyond the main thread's C stack.
`on_big_stack` runs its function on a thread with a large stack, under a recursion limit that
stack can hold, so that a deeper program fails with a RecursionError, which the callers turn into
an FCL error, and never with a crash. The session (type checking) and the pipeline (compiling,
and interpreting for `fcl run`) use it, so the CLI, the notebook workspace and the Jupyter kernel
all do. A notebook's interpreter runs on the kernel's own thread: on a new thread per run, each
run's arrays came from a new malloc arena and the kernel grew with every run.

Ctrl-C (a notebook's interrupt) raises KeyboardInterrupt in the main thread only; while the work
runs on its own thread, the main thread waits for it and passes an interrupt on to it.
"""
from __future__ import annotations

import contextvars
import ctypes
import functools
import gc
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from fcl.errors import FCLError, Span

P = ParamSpec("P")
R = TypeVar("R")

STACK_BYTES = 512 << 20
# Most frames take no C stack (Python 3.11 runs Python-to-Python calls in one C frame); a frame
# called through C (a class's __init__, map, a dunder method) takes some hundreds of bytes. A
# limit of one frame per 1.25 KiB of stack keeps even a walk made only of those within the stack.
RECURSION_LIMIT = STACK_BYTES // 1280

_local = threading.local()  # `deep` is set on the threads on_big_stack starts
_limit_lock = threading.Lock()
_running = 0        # the threads on_big_stack has running, which need the raised limit
_saved_limit = 0    # the limit before the first of them started


_gc_lock = threading.Lock()
_gc_pauses = 0          # compiler stages running with the cyclic collector paused
_gc_was_enabled = False


@contextmanager
def collections_paused():
    """Python's cyclic garbage collector paused while the compiler builds the trees of a large
    program. Each full collection walks every live object, and the compiler's ASTs, types and IL
    are acyclic and live until it finishes: on programs 10,000 deep, collections took 40% of
    the compile time (a lambda chain: 28 s, 17 s without them). Cycles made meanwhile are
    collected after."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


# Sources at least this long (in characters) are compiled with collections paused. Below it,
# collections cost little, and pausing them would delay freeing what earlier work left in
# cycles (the interpreter's arrays): a notebook re-running a cell grew by 100-200 MB per 12 runs.
LARGE_SOURCE = 50_000


def compiler_stage(fn: Callable[P, R]) -> Callable[P, R]:
    """fn (whose first argument is a Session, or has a session's `large`) on a big stack
    (on_big_stack), with collections paused (collections_paused) for a large program."""
    @functools.wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        if not getattr(args[0], "large", False):
            return fn(*args, **kwargs)
        with collections_paused():
            return fn(*args, **kwargs)
    return on_big_stack(paused)


def on_big_stack(fn: Callable[P, R]) -> Callable[P, R]:
    """fn, run on a thread with a large stack (or directly, when already on one)."""
    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        if getattr(_local, "deep", False):
            return fn(*args, **kwargs)
        worker = _Worker(functools.partial(fn, *args, **kwargs))
        if not worker.start_big():  # no memory for the stack: run here, with the usual limit
            return fn(*args, **kwargs)
        return worker.result()
    return run


class _Worker(threading.Thread):
    def __init__(self, work: Callable[[], R]):
        super().__init__(name="fcl-deep", daemon=True)
        # In the caller's context variables (ipykernel finds the cell its output belongs to in
        # one).
        self.context = contextvars.copy_context()
        self.work = work
        self.value: object = None
        self.error: BaseException | None = None
        self.finished = False           # set under `lock`; no interrupt is passed on after it
        self.lock = threading.Lock()
        self.done = threading.Event()   # waited on instead of join: see result()

    def start_big(self) -> bool:
        """Start on a large stack under the raised recursion limit; False if it cannot."""
        global _running, _saved_limit
        with _limit_lock:  # stack_size is process-wide: set it only for this start
            old_size = threading.stack_size()
            try:
                threading.stack_size(STACK_BYTES)
                if _running == 0:
                    _saved_limit = sys.getrecursionlimit()
                    sys.setrecursionlimit(max(RECURSION_LIMIT, _saved_limit))
                _running += 1
                try:
                    self.start()
                except (RuntimeError, MemoryError):
                    self._release_limit()
                    return False
            except ValueError:  # a platform without settable stack sizes
                return False
            finally:
                threading.stack_size(old_size)
        return True

    @staticmethod
    def _release_limit() -> None:
        """Called with _limit_lock held: the thread no longer needs the raised limit."""
        global _running
        _running -= 1
        if _running == 0:
            sys.setrecursionlimit(_saved_limit)

    def run(self) -> None:
        _local.deep = True
        try:
            self.value = self.context.run(self.work)
        except BaseException as error:
            self.error = error
        while True:
            try:
                with self.lock:
                    self.finished = True
                _settle()
                break
            except KeyboardInterrupt:  # passed on as the work ended: there is nothing to stop
                pass
        with _limit_lock:
            self._release_limit()
        self.done.set()

    def result(self):
        """Wait for the work and return its value or raise its exception. An interrupt while
        waiting is passed on to the work, as if it ran here: its loops and kernel waits stop
        on one, and what it raises then is raised here."""
        while True:
            try:
                # Not join(): in Python 3.11, an interrupted join can mark a running thread
                # as stopped.
                self.done.wait()
                break
            except KeyboardInterrupt:
                with self.lock:
                    if not self.finished:
                        _raise_in(self, KeyboardInterrupt)
        error, self.error = self.error, None  # no cycle through the traceback
        if error is not None:
            raise error
        return self.value


def _settle() -> None:
    """Nothing. Calling it raises an interrupt that was passed on before `finished` was set,
    which would otherwise surface at some later call, after the thread's last `try`."""


def _raise_in(thread: threading.Thread, exception: type[BaseException]) -> None:
    """Raise `exception` in `thread` at its next Python instruction."""
    assert thread.ident is not None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                               ctypes.py_object(exception))


@contextmanager
def depth_guard(span: Span | None, message: str):
    """Turn running out of stack (the recursion limit) into an FCL error at `span`."""
    try:
        yield
    except RecursionError:
        raise FCLError(message, span, [
            "FCL handles programs nested at least 10,000 deep (lets, lambdas, `if`s, "
            "parentheses, applications, or definitions each using the one before); make this "
            "one shallower"]) from None
