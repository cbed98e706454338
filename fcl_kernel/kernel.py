"""The FCL Jupyter kernel: a thin ipykernel wrapper around fcl.notebook.Workspace."""
from __future__ import annotations

import os
import re
import traceback
from contextlib import redirect_stderr
from pathlib import Path

from ipykernel.kernelapp import IPKernelApp
from ipykernel.kernelbase import Kernel
from jupyter_core.paths import jupyter_config_path
from traitlets import Bool, Integer, Type, Unicode
from traitlets.config import Application

from fcl import __version__
from fcl.analysis.gpu import DEFAULT_GPU
from fcl.defaults import BLOCK_SIZE
from fcl.errors import FCLError
from fcl.notebook import Workspace, render
from fcl.runtime.device import free_held_memory
from fcl.server.lean import lean_process
from fcl_kernel import complete
from fcl_kernel.history import History
from fcl_kernel.magics import Magics, split_magics

HELP = re.compile(r"\?([#A-Za-z][\w#']*)|([#A-Za-z][\w#']*)\?")  # `?name` or `name?`


# The documentation site (docs/): built in a checkout by `make docs`, else its sources online.
LOCAL_DOCS = Path(__file__).resolve().parents[1] / "build" / "docs"
ONLINE_DOCS = "https://github.com/fcl-jupyter/fcl-jupyter/blob/main/docs/"
DOC_PAGES = [("documentation", "index"), ("the language", "language"),
             ("magics", "magics"), ("the fcl command", "command-line")]


def docs_url(page: str) -> str:
    if (LOCAL_DOCS / f"{page}.html").is_file():
        return (LOCAL_DOCS / f"{page}.html").as_uri()
    return f"{ONLINE_DOCS}{page}.md"


class StreamWriter:
    """A file-like object that sends what is written to the notebook as it comes."""

    def __init__(self, kernel: FCLKernel, name: str):
        self.kernel, self.name = kernel, name

    def write(self, text: str) -> int:
        if text:
            self.kernel.send_response(self.kernel.iopub_socket, "stream",
                                      {"name": self.name, "text": text})
        return len(text)

    def flush(self) -> None:
        pass


class FCLKernel(Kernel):
    implementation = "fcl_kernel"
    implementation_version = __version__
    banner = f"FCL {__version__} — hierarchical functional GPU programming (thread, block, grid)"
    language_info = {
        "name": "fcl",
        "version": __version__,
        "mimetype": "text/x-fcl",
        "file_extension": ".fcl",
        "pygments_lexer": "fcl",
        # The CodeMirror language that the JupyterLab/Notebook 7 extension in labextension/
        # registers under this name and mimetype.
        "codemirror_mode": "fcl",
    }
    @property
    def help_links(self) -> list[dict[str, str]]:  # type: ignore[override]
        """The documentation site's main pages (JupyterLab's Help menu): the local build of a
        checkout when there is one (`make docs`, readable offline), else the published pages."""
        return [{"text": f"FCL: {title}", "url": docs_url(page)} for title, page in DOC_PAGES]

    @property
    def kernel_info(self) -> dict:
        # ipykernel's base class offers "debugger" whenever debugpy is importable, but the
        # debugger it means steps through Python code, which an FCL cell is not.
        info = super().kernel_info
        info["supported_features"] = [f for f in info["supported_features"] if f != "debugger"]
        return info

    async def do_debug_request(self, msg: dict) -> dict:
        """A Debug Adapter Protocol error response: the base class raises NotImplementedError,
        and the front end waits for a reply that never comes."""
        return {"type": "response", "request_seq": msg.get("seq", 0), "seq": 0,
                "command": msg.get("command", ""), "success": False,
                "message": "the FCL kernel has no debugger"}

    # Defaults for every session, from Jupyter configuration (`c.FCLKernel.block_size = 128` in
    # a jupyter_config.py, for example a hub's); `%config` changes them for one session.
    block_size = Integer(BLOCK_SIZE, config=True, help="the work-group size, #BlockSize")
    backend = Unicode("auto", config=True, help="auto (OpenCL where a device works, else the "
                      "interpreter), opencl or interp")
    checks = Bool(True, config=True, help="run-time checks of indices, divisors and lengths")
    gpu = Unicode(DEFAULT_GPU, config=True, help="the GPU whose occupancy and time %%costs "
                  "predicts (one of fcl/gpus/)")
    cpu_threads = Unicode("", config=True, help="threads PoCL's CPU device may use: a number, or "
                          "`all` (default: all, 1 on a JupyterHub); FCL_CPU_THREADS wins")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.cpu_threads:
            os.environ.setdefault("FCL_CPU_THREADS", self.cpu_threads)
        lean_process()  # a class may share this machine: bounded threads, memory given back
        self.workspace = Workspace()
        for key in ("block_size", "backend", "checks", "gpu"):
            value = getattr(self, key)
            try:
                self.workspace.settings.set(key, str(value))
            except FCLError as err:  # a mistake in the configuration: the default, and why
                self.log.warning("c.FCLKernel.%s: %s", key, err.message)
        self.magics = Magics(self)
        self.history = History()
        self.payload: list[dict] = []    # what the cell asks the front end to do (the pager)
        self.last_result: str | None = None
        self.out = StreamWriter(self, "stdout")
        self.err = StreamWriter(self, "stderr")
        self._setup_widgets()

    def _setup_widgets(self) -> None:
        """Route widget comms (ipywidgets) through the comm manager ipywidgets itself uses."""
        try:
            import comm
            manager = comm.get_comm_manager()
        except Exception:  # pragma: no cover - comm is a dependency; stay usable without it
            return
        self.comm_manager = manager
        for msg_type in ("comm_open", "comm_msg", "comm_close"):
            self.shell_handlers[msg_type] = getattr(manager, msg_type)
        try:
            import ipywidgets
            ipywidgets.register_comm_target()
        except Exception:  # pragma: no cover - widgets are optional at run time
            pass

    # ---- output helpers used by the magics too
    def display(self, bundle: dict, metadata: dict | None = None) -> None:
        self.send_response(self.iopub_socket, "display_data",
                           {"data": bundle, "metadata": metadata or {}})

    def show_error(self, ename: str, message: str, lines: list[str]) -> dict:
        content = {"ename": ename, "evalue": message, "traceback": lines}
        self.send_response(self.iopub_socket, "error", content)
        return {"status": "error", "execution_count": self.execution_count, **content}

    # ---- the protocol
    # Synchronous, as ipykernel still accepts (it awaits the reply only if it is awaitable),
    # where its signature declares a coroutine taking the cell's id and metadata too.
    def do_execute(self, code, silent, store_history=True,  # type: ignore[override]
                   user_expressions=None, allow_stdin=False):
        self.payload, self.last_result = [], None
        self.workspace.prompt = self.execution_count  # what the cell's errors call it
        reply = self._execute(code, silent)
        if store_history and not silent:
            self.history.add(self.execution_count, code, self.last_result)
        free_held_memory()  # the kernel goes idle: the cell's arrays are no longer needed
        return reply

    def _help(self, name: str) -> None:
        text = self.workspace.describe(name)
        if text is None:
            raise FCLError(f"`{name}` is not defined; `%who` lists your definitions")
        self.page(text)

    def page(self, text: str) -> None:
        """Show a long text in the front end's pager (a help panel, or below the cell)."""
        self.payload.append({"source": "page", "data": {"text/plain": text}, "start": 0})

    def _execute(self, code: str, silent: bool) -> dict:
        try:
            asked = HELP.fullmatch(code.strip())
            if asked:  # `name?`: its type and description in the pager, as IPython does
                self._help(asked.group(1) or asked.group(2))
            else:
                # What OpenCL says on stderr (PYOPENCL_COMPILER_OUTPUT=1: its warnings, the
                # compiler's notes) belongs to the cell, not to the kernel's log.
                with redirect_stderr(self.err):
                    self._run(code, silent)
        except FCLError as err:
            return self.show_error("FCLError", err.message, err.render().splitlines())
        except KeyboardInterrupt:
            return self.show_error("KeyboardInterrupt",
                                   "interrupted; nothing in this cell was kept",
                                   ["Interrupted: the cell stopped and its definitions were not "
                                    "added."])
        except Exception as err:  # a bug in fcl, not in the user's program: keep the kernel alive
            return self.show_error(type(err).__name__, str(err),
                                   ["internal error in the FCL kernel (please report it):"] +
                                   traceback.format_exc().splitlines())
        return {"status": "ok", "execution_count": self.execution_count,
                "payload": self.payload, "user_expressions": {}}

    def _run(self, code: str, silent: bool) -> None:
        line_magics, cell_magic, body = split_magics(code)
        for name, args in line_magics:
            self.magics.run_line(name, args)
        if cell_magic is not None:
            self.magics.run_cell(cell_magic[0], cell_magic[1], body)
        elif body.strip():
            self.run_fcl(body, silent)

    def run_fcl(self, code: str, silent: bool = False) -> None:
        outcome = self.workspace.execute(code, self.out, self.err)
        if outcome.shown and not silent:
            data = render(outcome.value, outcome.type)
            self.last_result = data["text/plain"]
            self.send_response(self.iopub_socket, "execute_result",
                               {"execution_count": self.execution_count, "data": data,
                                "metadata": {}})

    def do_complete(self, code, cursor_pos):
        start, matches = complete.completions(self.workspace, self.magics.names(), code, cursor_pos)
        return {"status": "ok", "matches": matches, "cursor_start": start,
                "cursor_end": cursor_pos, "metadata": {}}

    def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        name = complete.word_at(code, cursor_pos)
        text = self.workspace.describe(name) if name else None
        if text is None and name and name.lstrip("%") in self.magics.names():
            text = self.magics.doc(name.lstrip("%"))
        if text is None:
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": True, "data": {"text/plain": text}, "metadata": {}}

    def do_is_complete(self, code):
        status = complete.is_complete(code)
        reply = {"status": status}
        if status == "incomplete":
            reply["indent"] = "  "
        return reply

    def do_history(self, hist_access_type, output, raw, session=None, start=None, stop=None,
                   n=None, pattern=None, unique=False):
        if hist_access_type == "tail":
            rows = self.history.tail(n, output)
        elif hist_access_type == "range":
            rows = self.history.range(session, start or 0, stop, output)
        elif hist_access_type == "search":
            rows = self.history.search(pattern, unique, n, output)
        else:
            rows = []
        return {"status": "ok", "history": rows}

    def do_shutdown(self, restart):
        return {"status": "ok", "restart": restart}


class FCLKernelApp(IPKernelApp):
    """ipykernel's application, which also reads Jupyter's configuration files (jupyter_config.py
    or .json in `jupyter --paths`' config folders, the user's first) for the FCL kernel's
    settings: IPython's own kernel reads only IPython profiles."""

    name = "fcl-kernel"
    kernel_class = Type(FCLKernel, klass=Kernel, config=True)

    def load_config_file(self, *args, **kwargs) -> None:
        super().load_config_file(*args, **kwargs)
        Application.load_config_file(self, "jupyter_config", path=jupyter_config_path())
