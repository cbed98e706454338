"""Driving a real FCL Jupyter kernel from tests, through jupyter_client: a kernelspec for this
interpreter (found through JUPYTER_PATH, no installation needed), running cells and reading what
they sent. conftest.py imports this, so every test finds the kernelspec, and gives the fixtures
of a kernel shared by a test module."""
import os
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

from fcl_kernel.install import write_kernel_spec

_SPEC_DIR = write_kernel_spec(Path(tempfile.mkdtemp(prefix="fcl-kernelspec-")))
os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(_SPEC_DIR),
                                                           os.environ.get("JUPYTER_PATH")]))


def execute(kc, code: str, timeout: float = 120):
    """(reply content, iopub messages of the execution)."""
    msg_id = kc.execute(code)
    reply = kc.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    messages = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
        messages.append(msg)
    return reply["content"], messages


def stdout(messages) -> str:
    return "".join(m["content"]["text"] for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


def result_text(messages) -> str | None:
    found = [m["content"]["data"]["text/plain"] for m in messages
             if m["msg_type"] == "execute_result"]
    return found[0] if found else None


def settings_of(kc) -> dict[str, str]:
    """The kernel's settings as `%config` lists them: backend, block_size, checks, device, gpu."""
    reply, messages = execute(kc, "%config")
    assert reply["status"] == "ok", reply
    return dict(re.findall(r"(\w+)=(\S+)", stdout(messages)))


def restore_settings(kc, settings: dict[str, str]) -> None:
    """`%config` back to `settings` (from `settings_of`). The device is not among them: a test
    that chooses one with `%device` chooses the kernel's own again itself (`device_kept`)."""
    line = " ".join(f"{key}={value}" for key, value in settings.items() if key != "device")
    assert execute(kc, f"%config {line}")[0]["status"] == "ok"


def current_device(kc) -> str:
    """The id (`1:0`; `oclgrind`) of the device the kernel's cells run on: the line that
    `%device` marks in its listing. Tests name devices by it, never by a device's or platform's
    name or by the order of the platforms, which differ between machines (two PoCLs, say)."""
    listed = stdout(execute(kc, "%device")[1]).splitlines()
    [marked] = [line for line in listed if line.startswith("* ")]
    return marked[2:].split()[0]


@contextmanager
def device_kept(kc):
    """The kernel's device, chosen again by its id when the block ends (passed or failed)."""
    original = current_device(kc)
    try:
        yield original
    finally:
        assert execute(kc, f"%device {original}")[0]["status"] == "ok"


def displayed(messages) -> list[str]:
    return [m["content"]["data"]["text/plain"] for m in messages if m["msg_type"] == "display_data"]


def rss_bytes(km) -> int:
    status = Path(f"/proc/{km.provisioner.process.pid}/status").read_text()
    kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(kb) * 1024


def big_cell(n: int) -> str:
    """Three arrays of n ints, the last element of the last one the result (2 n)."""
    return (f"do<grid> {{ a <- forcePull<grid> (generate {n} (fn i => i)) ;"
            " b <- forcePull<grid> (mapPull (fn x => x + 1) a) ;"
            " c <- forcePull<grid> (mapPull (fn x => x * 2) b) ;"
            f" return<grid> (index c {n - 1}) }}")


# 8 million ints (32 MB) forced three times per run: a run that kept its arrays would grow the
# kernel by about 100 MB each time.
BIG_CELL = big_cell(8_000_000)
