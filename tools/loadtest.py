"""`make loadtest N=20`: a class on a real JupyterHub, on this machine.

Starts `jupyterhub` on localhost (free ports, a scratch directory) behind the proxy it always runs,
configurable-http-proxy (`make test-setup` installs it into build/proxy), with the
SimpleLocalProcessSpawner (each student's server a local process of this user) and the
DummyAuthenticator. Then N simulated students at once, each as a browser would go, through the
Hub's REST API and the proxy: a user and a token (made by an admin service), the student's server
started, an FCL kernel opened over its websocket, and every code cell of a course notebook run in
order. Then fair sharing: all students but one run a light cell over and over, first alone, then
while the first student runs a heavy benchmark cell.

One table row per N: cells run, failed cells, lost kernels, the cells' p50 and p95 latency
(request to reply); a student's kernel's memory once idle (with its children: the build helper,
until it exits): private (what each student adds: resident memory less the clean pages of
files, the libraries' code the system keeps once for all kernels) and resident (RSS, those pages
counted in every kernel); its peak RSS, sampled twice a second; the largest single-user server's
memory, private and RSS; and the light cells' p95 alone and during the benchmark.

    python -m tools.loadtest [--students 5,20] [--notebook PATH] [--keep DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import WebSocketClientConnection, websocket_connect

from fcl_kernel.install import write_kernel_spec
from tools.lab import free_port

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "build" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
NOTEBOOK = ROOT / "notebooks" / "03-coalescing.ipynb"

# What a student does between reading: a small program, built once and then run.
LIGHT = "forcePull<grid> (generate 4096 (fn i => i * 2))"
# A benchmark that keeps PoCL busy for seconds with little memory: a naive 512 x 512 matrix
# product (notebook 07's first version), 30 timed runs.
HEAVY = """\
fun dot n xs ys i =
  let row = i / n in
  let col = i % n
  in return<thread> (foldl addi 0 (generate n (fn k =>
                       index xs (row * n + k) * index ys (k * n + col))))

fun product n xs ys =
  splitUp #BlockSize (iota (n * n))
  |> map (fn group => map (dot n xs ys) group |> concat<thread> 1)
  |> concat<block> #BlockSize

val n = 512
val main = do<grid> {
  xs <- forcePull<grid> (generate (n * n) (fn i => i % 7));
  ys <- forcePull<grid> (generate (n * n) (fn i => i % 5));
  benchmark 30 (forceM<grid> (product n xs ys))
  }
"""
LIGHT_RUNS = 10  # per student, alone
LIGHT_MAX_RUNS = 200  # per student, while the heavy cell runs (it stops them sooner)
CELL_TIMEOUT = 600.0  # s: a cell that takes longer counts as a lost kernel
START_TIMEOUT = 600  # s for a server to start: 20 of them at once on 2 cores take minutes


IPC_KERNELS = "--KernelManager.transport=ipc"


def proxy_command() -> str | None:
    """configurable-http-proxy: the one `make test-setup` installs, else one on PATH."""
    return str(PROXY) if PROXY.exists() else shutil.which("configurable-http-proxy")


def code_cells(notebook: Path) -> list[str]:
    return [cell.source for cell in nbformat.read(notebook, as_version=4).cells
            if cell.cell_type == "code"]


def kernel_name(notebook: Path) -> str:
    """The kernel the notebook runs on: `fcl`, or `python3` for FCL from Python."""
    return nbformat.read(notebook, as_version=4).metadata.kernelspec.name


# ---- the hub ------------------------------------------------------------------------------------

@dataclass
class Hub:
    url: str  # the proxy's, where students go
    token: str  # the admin service's
    process: subprocess.Popen
    log: Path


def hub_settings(workdir: Path, proxy: str, token: str, port: int) -> dict[str, object]:
    """jupyterhub_config.py's assignments, `Class.trait: value`."""
    # This interpreter's FCL kernel, for the servers the hub starts (their JUPYTER_PATH).
    write_kernel_spec(workdir / "jupyter")
    return {
        "JupyterHub.bind_url": f"http://127.0.0.1:{port}",
        "JupyterHub.hub_bind_url": f"http://127.0.0.1:{free_port()}",
        "ConfigurableHTTPProxy.api_url": f"http://127.0.0.1:{free_port()}",
        "ConfigurableHTTPProxy.command": [proxy],
        "ConfigurableHTTPProxy.pid_file": str(workdir / "proxy.pid"),
        "JupyterHub.db_url": f"sqlite:///{workdir / 'jupyterhub.sqlite'}",
        "JupyterHub.cookie_secret_file": str(workdir / "cookie_secret"),
        "JupyterHub.authenticator_class": "dummy",
        "Authenticator.allow_all": True,
        "JupyterHub.spawner_class": "simple",
        "SimpleLocalProcessSpawner.home_dir_template": str(workdir / "home" / "{username}"),
        "Spawner.cmd": [sys.executable, "-m", "jupyterhub.singleuser"],
        # Kernels on Unix sockets, as deploy/jupyterhub_config.py has them: with TCP, servers
        # starting kernels at once pick the same free ports, and a kernel that cannot bind dies.
        # jupyter_server refuses to run as root unless told it may (CI runs as root).
        "Spawner.args": [IPC_KERNELS] + (["--allow-root"] if os.geteuid() == 0 else []),
        # The bound on PoCL's threads is the kernel's default on a hub, unless given here.
        # The kernels' sockets in a short directory: a Unix socket's path has at most 107 bytes,
        # and a student's home under a scratch directory leaves too few for a kernel's.
        "Spawner.environment": {"JUPYTER_PATH": str(workdir / "jupyter"),
                                "JUPYTER_RUNTIME_DIR": str(workdir / "rt"), **{
            name: os.environ[name] for name in ("FCL_CPU_THREADS",) if name in os.environ}},
        "Spawner.start_timeout": START_TIMEOUT,
        "Spawner.http_timeout": START_TIMEOUT,
        "JupyterHub.services": [{"name": "loadtest", "api_token": token}],
        "JupyterHub.load_roles": [{"name": "admin", "services": ["loadtest"]}],
    }


@contextlib.contextmanager
def running_hub(workdir: Path, proxy: str) -> Iterator[Hub]:
    """A hub on free localhost ports, its state in workdir; stopped with everything it started."""
    token, port = secrets.token_hex(16), free_port()
    settings = hub_settings(workdir, proxy, token, port)
    config = workdir / "jupyterhub_config.py"
    config.write_text("c = get_config()  # noqa\n" + "".join(
        f"c.{key} = {value!r}\n" for key, value in settings.items()))
    with running_hub_from(config, workdir, port, token) as hub:
        yield hub


@contextlib.contextmanager
def running_hub_from(config: Path, workdir: Path, port: int, token: str) -> Iterator[Hub]:
    """jupyterhub started with this configuration file (serving on port, with token an admin
    service's), its log in workdir; stopped with everything it started."""
    log = (workdir / "hub.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "jupyterhub", "-f", str(config)],
                               cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield Hub(f"http://127.0.0.1:{port}", token, process, workdir / "hub.log")
    finally:
        _stop(process)
        log.close()


async def wait_for_api(hub: Hub, timeout: float = 120) -> dict:
    """The hub's answer to GET /hub/api/ (its version), once it gives one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and hub.process.poll() is None:
        try:
            return await call(hub, "GET", "/hub/api/")
        except (OSError, HTTPClientError):
            await asyncio.sleep(0.5)
    raise RuntimeError(f"the hub did not answer; its log ends:\n{hub.log.read_text()[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    """Stop the hub (it stops the servers and the proxy), then whatever it left running."""
    started = psutil.Process(process.pid).children(recursive=True) if process.poll() is None \
        else []
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    for child in started:
        if child.is_running():
            child.kill()


async def call(hub: Hub, method: str, path: str, body: dict | None = None,
               token: str | None = None) -> dict:
    """The JSON answer of a request to the hub or a server behind its proxy."""
    request = HTTPRequest(hub.url + path, method=method,
                          headers={"Authorization": f"token {token or hub.token}"},
                          body=None if method == "GET" else json.dumps(body or {}),
                          request_timeout=CELL_TIMEOUT)
    response = await AsyncHTTPClient().fetch(request)
    return json.loads(response.body) if response.body else {}


# ---- the students -------------------------------------------------------------------------------

class LostKernel(Exception):
    pass


@dataclass
class Student:
    name: str
    token: str = ""
    kernel: str = ""  # its kernel's id
    channel: KernelChannel | None = None
    latencies: list[float] = field(default_factory=list)  # s, one per cell run
    failures: list[str] = field(default_factory=list)
    lost: str = ""  # why its kernel was lost, if it was

    def connected(self) -> KernelChannel:
        """Its kernel's channel: cells run only after open_kernel has opened it."""
        assert self.channel is not None, f"{self.name} has no kernel open"
        return self.channel


class KernelChannel:
    """A kernel's websocket, as JupyterLab uses it: Jupyter messages as JSON."""

    def __init__(self, socket: WebSocketClientConnection, name: str):
        self.socket, self.session = socket, Session(username=name)

    async def execute(self, code: str) -> tuple[str, float]:
        """(the reply's status, or the error's name and value; seconds to the reply)."""
        request = self.session.msg("execute_request", {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": False})
        request["channel"] = "shell"
        msg_id, start = request["header"]["msg_id"], time.perf_counter()
        await self.socket.write_message(json.dumps(request, default=json_default))
        status, error, idle = None, "", False
        while status is None or not idle:
            text = await asyncio.wait_for(self.socket.read_message(), CELL_TIMEOUT)
            if text is None:
                raise LostKernel("its websocket closed")
            if not isinstance(text, str):  # binary frames carry widget buffers
                continue
            msg = json.loads(text)
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] in ("dead", "restarting"):
                raise LostKernel(f"it was {content['execution_state']}")
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if kind == "execute_reply":
                status, seconds = content["status"], time.perf_counter() - start
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            idle = idle or (kind == "status" and content["execution_state"] == "idle")
        return (status if status == "ok" else error or status), seconds


async def enrol(hub: Hub, names: list[str]) -> list[Student]:
    await call(hub, "POST", "/hub/api/users", {"usernames": names})
    students = []
    for name in names:
        answer = await call(hub, "POST", f"/hub/api/users/{name}/tokens", {"note": "load test"})
        students.append(Student(name, answer["token"]))
    return students


async def open_kernel(hub: Hub, student: Student, kernel: str) -> None:
    """Start the student's server, wait until it is ready, and open a kernel on it."""
    await call(hub, "POST", f"/hub/api/users/{student.name}/server", token=student.token)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        user = await call(hub, "GET", f"/hub/api/users/{student.name}", token=student.token)
        if user["servers"].get("", {}).get("ready"):
            break
        if time.monotonic() > deadline:
            raise LostKernel("its server did not start")
        await asyncio.sleep(1)
    server = f"/user/{student.name}/api/kernels"
    student.kernel = (await call(hub, "POST", server, {"name": kernel}, student.token))["id"]
    url = hub.url.replace("http", "ws", 1) + f"{server}/{student.kernel}/channels"
    socket = await websocket_connect(HTTPRequest(
        url, headers={"Authorization": f"token {student.token}"}, request_timeout=CELL_TIMEOUT),
        max_message_size=1 << 30)
    student.channel = KernelChannel(socket, student.name)


async def attend(hub: Hub, student: Student, cells: list[str], kernel: str) -> None:
    """The student's session: a kernel, then every cell of the notebook in order."""
    try:
        await open_kernel(hub, student, kernel)
        for number, cell in enumerate(cells, 1):
            status, seconds = await student.connected().execute(cell)
            student.latencies.append(seconds)
            if status != "ok":
                student.failures.append(f"cell {number}: {status}")
    except (LostKernel, HTTPClientError, OSError, TimeoutError) as err:
        student.lost = str(err) or type(err).__name__
        if student.kernel:  # what the server says of the kernel: dead, or alive and unreachable
            with contextlib.suppress(HTTPClientError, OSError):
                model = await call(hub, "GET", f"/user/{student.name}/api/kernels/"
                                   f"{student.kernel}", token=student.token)
                student.lost += f" (the server says the kernel is {model['execution_state']})"


async def run_light(student: Student, until: asyncio.Task | None = None) -> list[float]:
    """The light cell's latencies: LIGHT_RUNS runs, or runs until `until` is done."""
    found: list[float] = []
    while len(found) < (LIGHT_MAX_RUNS if until else LIGHT_RUNS) and not (until and until.done()):
        status, seconds = await student.connected().execute(LIGHT)
        if status != "ok":
            student.failures.append(f"light cell: {status}")
        found.append(seconds)
    return found


async def share(students: list[Student]) -> dict[str, float]:
    """The light cells' p95 alone and while the first student runs the heavy cell."""
    heavy_student, others = students[0], students[1:]
    await asyncio.gather(*(s.connected().execute(LIGHT) for s in students))  # built, not timed
    alone = await asyncio.gather(*(run_light(s) for s in others))
    start = time.perf_counter()
    heavy = asyncio.create_task(heavy_student.connected().execute(HEAVY))
    during = await asyncio.gather(*(run_light(s, heavy) for s in others))
    status, _ = await heavy
    if status != "ok":
        heavy_student.failures.append(f"heavy cell: {status}")
    return {"light_p95_alone": percentile([t for run in alone for t in run], 95),
            "light_p95_during": percentile([t for run in during for t in run], 95),
            "heavy_s": time.perf_counter() - start}


# ---- memory -------------------------------------------------------------------------------------

def kernel_process(hub: Hub, kernel_id: str) -> psutil.Process | None:
    """The process of the kernel with this id, among the hub's: its connection file names it."""
    for process in psutil.Process(hub.process.pid).children(recursive=True):
        try:
            if any(f"kernel-{kernel_id}.json" in arg for arg in process.cmdline()):
                return process
        except psutil.Error:
            continue
    return None


def _family_total(process: psutil.Process, measure: Callable[[psutil.Process], int]) -> int:
    """measure summed over a process and its children (the kernel's: its build helper), those
    that exit meanwhile left out."""
    total = 0
    for member in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.Error, OSError):
            total += measure(member)
    return total


def family_rss(process: psutil.Process) -> int:
    """The resident memory of a process and its children."""
    return _family_total(process, lambda member: member.memory_info().rss)


async def watch_memory(hub: Hub, students: list[Student], peaks: dict[str, int]) -> None:
    """Keep each student's peak of family_rss, sampled twice a second, until cancelled."""
    processes: dict[str, psutil.Process] = {}
    while True:
        for student in students:
            if student.kernel and student.name not in processes:
                found = await asyncio.to_thread(kernel_process, hub, student.kernel)
                if found:
                    processes[student.name] = found
        for name, process in processes.items():
            peaks[name] = max(peaks.get(name, 0), family_rss(process))
        await asyncio.sleep(0.5)


def family_private(process: psutil.Process) -> int:
    """The private memory of a process and its children: their resident memory less the clean
    pages of files (the code of Python, numpy, PoCL's LLVM: 50 MB of libpocl alone), which the
    system keeps once for every kernel on the server. The dirty pages of /proc's smaps_rollup."""
    return _family_total(process, _dirty_bytes)


def _dirty_bytes(process: psutil.Process) -> int:
    rollup = Path(f"/proc/{process.pid}/smaps_rollup").read_text().splitlines()
    return 1024 * sum(int(line.split()[1]) for line in rollup
                      if line.startswith(("Private_Dirty:", "Shared_Dirty:")))


async def settled_memory(processes: dict[str, psutil.Process]) -> dict[str, dict[str, int]]:
    """Each kernel's family_private and family_rss once its build helper has exited, idle (at
    most a minute on)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
            process.is_running() and process.children() for process in processes.values()):
        await asyncio.sleep(1)
    return {name: {"private": family_private(process), "rss": family_rss(process)}
            for name, process in processes.items()}


# ---- a round ------------------------------------------------------------------------------------

def percentile(values: list[float], p: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def run_class(n: int, notebook: Path = NOTEBOOK, workdir: Path | None = None,
              proxy: str | None = None) -> dict:
    """A fresh hub, n students through the notebook, then fair sharing (on FCL kernels): the
    table's row."""
    proxy = proxy or proxy_command()
    if proxy is None:
        raise RuntimeError("no configurable-http-proxy: `make test-setup` installs it")
    with tempfile.TemporaryDirectory(prefix="fcl-loadtest-") as scratch:
        workdir = workdir or Path(scratch)
        with running_hub(workdir, proxy) as hub:
            return asyncio.run(_round(hub, n, code_cells(notebook), kernel_name(notebook)))


async def _round(hub: Hub, n: int, cells: list[str], kernel: str) -> dict:
    # Tornado's default of 10 requests at once would queue the students' (and time them out).
    AsyncHTTPClient.configure(None, max_clients=4 * n + 10)
    await wait_for_api(hub)
    students = await enrol(hub, [f"student{i:02d}" for i in range(1, n + 1)])
    peaks: dict[str, int] = {}
    watching = asyncio.create_task(watch_memory(hub, students, peaks))
    await asyncio.gather(*(attend(hub, s, cells, kernel) for s in students))
    sharing = await share(students) \
        if n > 1 and kernel == "fcl" and not any(s.lost for s in students) else {}
    watching.cancel()
    kernels = {s.name: kernel_process(hub, s.kernel) for s in students if s.kernel}
    for student in students:
        if not student.lost and kernels.get(student.name) is None:
            student.lost = "its process is gone"
    alive = {name: process for name, process in kernels.items() if process is not None}
    settled = await settled_memory(alive)
    # A student's server: its process, without the kernel (one per student here).
    servers = [{"rss": family_rss(process.parent()) - family_rss(process),
                "private": family_private(process.parent()) - family_private(process)}
               for process in alive.values()]
    latencies = [seconds for s in students for seconds in s.latencies]
    return {"students": n, "cells": len(latencies),
            "failures": [f"{s.name} {f}" for s in students for f in s.failures],
            "lost": [f"{s.name}: {s.lost}" for s in students if s.lost],
            "p50_s": percentile(latencies, 50), "p95_s": percentile(latencies, 95),
            "settled": settled, "peak_bytes": peaks,
            "server_rss": max((s["rss"] for s in servers), default=0),
            "server_private": max((s["private"] for s in servers), default=0), **sharing}


def settled_mb(row: dict, kind: str) -> list[float]:
    """The students' kernels' memory once idle ("private" or "rss"), in MB."""
    return [memory[kind] / 1e6 for memory in row["settled"].values()] or [0.0]


def table(rows: list[dict]) -> str:
    lines = ["| students | cells run | failures | lost kernels | cell p50 | cell p95 | "
             "kernel private MB after (max, median) | kernel RSS MB after (max) | "
             "kernel RSS MB peak | server MB private, RSS | light p95 alone | "
             "light p95 during a benchmark | benchmark cell |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        private = settled_mb(r, "private")
        sharing = " | ".join(f"{r[key]:.2f} s" if key in r else "–"
                             for key in ("light_p95_alone", "light_p95_during", "heavy_s"))
        lines.append(f"| {r['students']} | {r['cells']} | {len(r['failures'])} | "
                     f"{len(r['lost'])} | {r['p50_s']:.2f} s | {r['p95_s']:.2f} s | "
                     f"{max(private):.0f}, {statistics.median(private):.0f} | "
                     f"{max(settled_mb(r, 'rss')):.0f} | "
                     f"{max(r['peak_bytes'].values(), default=0) / 1e6:.0f} | "
                     f"{r['server_private'] / 1e6:.0f}, {r['server_rss'] / 1e6:.0f} | {sharing} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", default="20",
                        help="how many at once, or several rounds: 5,10,20 (default 20)")
    parser.add_argument("--notebook", type=Path, default=NOTEBOOK,
                        help=f"the course notebook each runs (default {NOTEBOOK.name})")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep each round's hub directory (hub.log, with the servers' and "
                             "kernels' logs; the students' homes) in DIR/N")
    args = parser.parse_args(argv)
    rows = []
    for n in (int(part) for part in args.students.replace(",", " ").split()):
        workdir = args.keep / str(n) if args.keep else None
        if workdir:
            workdir.mkdir(parents=True, exist_ok=True)
        rows.append(run_class(n, args.notebook, workdir))
        for problem in rows[-1]["failures"] + rows[-1]["lost"]:
            print(f"{n} students: {problem}")
    threads = os.environ.get("FCL_CPU_THREADS", "1 (the default on a hub)")
    print(f"{args.notebook.name} on {psutil.cpu_count()} cores, "
          f"{psutil.virtual_memory().total / 2**30:.0f} GiB; FCL_CPU_THREADS={threads}\n")
    print(table(rows))
    return 1 if any(r["failures"] or r["lost"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
