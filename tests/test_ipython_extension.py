"""`%load_ext fcl` in a real IPython kernel (ipykernel's python3, driven by jupyter_client)."""
import pytest
from jupyter_client.manager import start_new_kernel

from kernels import execute, stdout

ADD_ONE = """\
sig addOne : [int] -> Program <grid> [int]
fun addOne xs = forcePull<grid> (map (fn x => x + 1) xs)

sig total : [int] -> int -> int
fun total xs k = index xs k"""

# Every test runs in the module's IPython kernel, 2.5-4.5 s to start with fcl loaded and its first
# OpenCL library built (`fcl.load` itself is tests/test_python.py's, most of it fast).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def python_kernel():
    km, kc = start_new_kernel(kernel_name="python3")
    reply, _ = execute(kc, "%load_ext fcl\nimport numpy as np")
    assert reply["status"] == "ok", reply
    yield kc
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def displayed(messages) -> list[dict]:
    return [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]


def error_of(reply) -> str:
    assert reply["status"] == "error"
    return f"{reply['ename']}: {reply['evalue']}"


def test_fcl_cells_define_python_functions(python_kernel):
    reply, messages = execute(python_kernel, f"%%fcl\n{ADD_ONE}")
    assert reply["status"] == "ok", reply
    [summary] = displayed(messages)
    assert "addOne : [int] -> Program <grid> [int]" in summary["text/plain"]
    reply, messages = execute(python_kernel, "xs = np.arange(700, dtype=np.int32)\n"
                                             "print(addOne(xs)[-3:].tolist(), total(xs, 5),"
                                             " type(fcl_lib).__name__)")
    assert reply["status"] == "ok", reply
    assert stdout(messages) == "[698, 699, 700] 5 Library\n"


def test_the_interpreter_and_names_of_the_library(python_kernel):
    reply, _ = execute(python_kernel, f"%%fcl --backend interp --name slow\n{ADD_ONE}")
    assert reply["status"] == "ok", reply
    reply, messages = execute(python_kernel, "print(slow.backend, slow.addOne([1, 2]).tolist())")
    assert stdout(messages) == "interp [2, 3]\n"
    reply, _ = execute(python_kernel, "%%fcl --name 2x\nval x = 1")
    assert "--name needs a Python name" in error_of(reply)


def test_the_opencl_view(python_kernel):
    reply, messages = execute(python_kernel, f"%%fcl --opencl\n{ADD_ONE}")
    assert reply["status"] == "ok", reply
    views = [d for d in displayed(messages) if "text/html" in d]
    assert len(views) == 2  # one per entry point
    assert "__kernel void" in views[0]["text/plain"]
    # The cell's line 2 and the OpenCL it became share a background colour.
    assert "fcl-codeview" in views[0]["text/html"] and "addOne" in views[0]["text/html"]


def test_costs_of_one_call(python_kernel):
    execute(python_kernel, f"%%fcl\n{ADD_ONE}")
    reply, messages = execute(python_kernel,
                              "%fcl_costs --gpu h100 addOne(np.arange(1000, dtype=np.int32))")
    assert reply["status"] == "ok", reply
    table, diagram = displayed(messages)
    assert "global loads per work-item" in table["text/plain"]
    assert "predicted on H100" in table["text/plain"] and "<table" in table["text/html"]
    assert diagram["image/svg+xml"].lstrip().startswith("<svg")
    reply, _ = execute(python_kernel, "%fcl_costs np.arange(3)")
    assert "is not an FCL function" in error_of(reply)
    reply, _ = execute(python_kernel, "%fcl_costs addOne")
    assert "give one call of an FCL function" in error_of(reply)


def test_fcl_errors_point_at_the_cell_line(python_kernel):
    reply, _ = execute(python_kernel, "%%fcl\nval ok = 1\nval x = 1 +")
    text = error_of(reply)
    assert text.startswith("FCLError: <fcl cell") and ":2:11: error: unexpected end" in text
    execute(python_kernel, f"%%fcl\n{ADD_ONE}")
    reply, _ = execute(python_kernel, "total(np.arange(3, dtype=np.int32), 8)")
    assert "index 8 is out of bounds for an array of length 3" in error_of(reply)
    reply, _ = execute(python_kernel, "addOne(np.arange(3))")
    assert "parameter `xs` is [int], an array of int32; got an array of int64" in \
        error_of(reply)
