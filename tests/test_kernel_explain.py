"""The kernel's magics for seeing the memory hierarchy, through jupyter_client: %%costs,
%%memory (and its explorer widgets), %%graph and %lmad (and its playground)."""
import re

import pytest
from jupyter_client.manager import start_new_kernel

from kernels import (
    current_device,
    device_kept,
    displayed,
    execute,
    result_text,
    stdout,
)

NAIVE = ("%%{magic}\ndo<grid> {{\n  xs <- forcePull<grid> (iota (64 * 64));\n"
         "  forcePull<grid> (transpose 64 64 xs)\n}}")


def bundles(messages) -> list[dict]:
    return [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"]


def error_of(reply) -> str:
    assert reply["status"] == "error"
    return "\n".join(reply["traceback"])


@pytest.mark.slow  # 5-7 s
def test_costs_table_counts_the_naive_transpose(kc):
    reply, messages = execute(kc, NAIVE.format(magic="costs"))
    assert reply["status"] == "ok"
    [table] = bundles(messages)
    counters = table["text/plain"].split("\n\n")[0].splitlines()
    rows = {label: values for label, *values in (re.split(r"\s{2,}", line) for line in counters)}
    assert rows[""] == ["kernel0_line2", "kernel1_line3"]
    # 4096 elements over 16 groups of 256; the transpose reads down columns of 64 ints: 32
    # sectors in 32 lines per warp where 4 sectors of 1 line would do, and writes 4 of 1.
    assert rows["work-groups (first launch)"] == ["16", "16"]
    assert rows["sectors per warp load (ideal)"] == ["–", "32 (4)"]
    assert rows["lines per warp load"] == ["–", "32"]
    assert rows["sectors per warp store (ideal)"] == ["4 (4)", "4 (4)"]
    assert rows["SIMT efficiency"] == ["1", "1"]
    assert "<table class='fcl-costs'>" in table["text/html"]
    # Both tables scroll inside the output rather than being cut off at its right edge.
    for kind in ("fcl-costs", "fcl-sites"):
        before = table["text/html"].split(f"<table class='{kind}'>")[0]
        assert before.endswith("<div style='overflow:auto;max-width:100%;max-height:40em'>")
    # Each access below: warp 0 reads down column 0, 64 ints apart, in 32 sectors and lines.
    each = table["text/plain"].split("Each access:\n")[1]
    assert "kernel1_line3, line 3: reads global xs[" in each and "] (arr_1 in the kernel)" in each
    assert "    warp 0:     0 + {(32:64)}\n    32 sectors per warp request (ideal 4) in 32 " \
           "lines" in each
    # ... and each branch its SIMT efficiency: the test of the work-item's element against the
    # array's length (a work-item per element) passes in all 256 work-items.
    assert "kernel1_line3, line 3: takes the if (global_item < 4096)" in each
    assert "    SIMT efficiency 1: 256 of 256 lanes active in 8 warp executions" in each
    assert "<details><summary>each access" in table["text/html"]
    # Warp 2 is work-items 64..95: column 1 (i >> 6 = 1), rows 0..31.
    assert "warp 2:     1 + {(32:64)}" in bundles(execute(
        kc, NAIVE.format(magic="costs --warp 2"))[1])[0]["text/plain"]
    # The cell's definitions are not kept: %%costs only looks.
    execute(kc, "%%costs\nval onlyLooked = 1\nval main = do<grid> { forcePull<grid> (iota 64) }")
    assert execute(kc, "onlyLooked")[0]["status"] == "error"


def test_memory_diagrams_are_svg_with_a_text_fallback(kc):
    reply, messages = execute(kc, NAIVE.format(magic="memory --kernel 1 --pitch 64 --warp 1"))
    assert reply["status"] == "ok"
    [diagram] = bundles(messages)
    assert diagram["image/svg+xml"].startswith("<svg") and "fcl-diagram" in diagram["image/svg+xml"]
    assert diagram["image/svg+xml"] in diagram["text/html"]
    text = diagram["text/plain"]
    assert text.startswith("kernel1_line3: work-group 0 of 16, 256 work-items, warp 1 outlined")
    assert "warp 1's first access: 32 work-items touch 32 sectors of 32 bytes (ideal 4) in 32 " \
           "lines of 128 bytes" in text
    # Warp 1 (work-items 32..63) reads column 0 of rows 32..63: `#` in the first column there.
    grid = dict(re.findall(r"^\s+(\d+) ([#o.]+)$", text, re.M))
    assert grid["2048"][0] == "#" and grid["0"][0] == "o"
    # Without --kernel, one diagram per kernel; --array keeps the kernels touching it.
    assert len(bundles(execute(kc, NAIVE.format(magic="memory"))[1])) == 2
    only = bundles(execute(kc, NAIVE.format(magic="memory --array arr_3"))[1])
    assert len(only) == 1 and "writes global arr_3" in only[0]["text/plain"]
    # An array may be chosen by its FCL name too: xs is written by one kernel, read by the other.
    named = bundles(execute(kc, NAIVE.format(magic="memory --array xs"))[1])
    assert ["writes global xs[" in b["text/plain"] for b in named] == [True, False]
    assert ["reads global xs[" in b["text/plain"] for b in named] == [False, True]


def test_memory_and_costs_of_another_work_group(kc):
    text = bundles(
        execute(kc, NAIVE.format(magic="memory --kernel 1 --group 3"))[1])[0]["text/plain"]
    assert text.startswith("kernel1_line3: work-group 3 of 16")
    table = bundles(execute(kc, NAIVE.format(magic="costs --group 3"))[1])[0]["text/plain"]
    assert "Counted in work-group 3" in table


def test_costs_predict_on_the_gpu_that_config_chose(kc):
    def predicted_rows() -> dict[str, list[str]]:
        [table] = bundles(execute(kc, NAIVE.format(magic="costs"))[1])
        lines = table["text/plain"].split("\n\n")[0].splitlines()
        return {label: values for label, *values in (re.split(r"\s{2,}", line) for line in lines)}

    assert predicted_rows()["occupancy on generic GPU"] == ["100% (threads)"] * 2
    assert "gpu=h100" in stdout(execute(kc, "%config gpu=H100")[1])
    try:
        rows = predicted_rows()
        # Launch-bound: 3 µs each, plus one round trip to memory (500 ns) for the fill and two
        # for the transpose (each warp has 2 requests, and one at a time in flight).
        assert rows["predicted on H100 SXM5"] == ["3.5 µs (launch)", "4 µs (launch)"]
        assert rows["registers per work-item (est.)"] == ["13", "13"]
        [table] = bundles(execute(kc, NAIVE.format(magic="costs"))[1])
        assert "Predicted on NVIDIA H100 SXM5 80 GB (Hopper, GH100), compute capability 9.0: " \
               "the program takes 7.5 µs" in table["text/plain"]
        assert "<th style='text-align:left'>predicted on H100 SXM5</th>" in table["text/html"]
        # ... and next to it, the kernels measured on the device the kernel runs them on.
        assert "<th style='text-align:left'>measured on this device</th>" in table["text/html"]
        assert all(v.endswith(" ms") for v in rows["measured on this device"])
        assert "by OpenCL profiling events" in table["text/plain"]
        reply, _ = execute(kc, "%config gpu=v100")
        assert "no GPU named `v100`; the known GPUs are: a100, generic, h100" in error_of(reply)
        assert "gpu=h100" in stdout(execute(kc, "%config")[1])
    finally:
        execute(kc, "%config gpu=generic")


@pytest.mark.parametrize("magic, message", [
    ("memory --warp 8", "warp 8 does not exist: a work-group of 256 work-items has warps 0 to 7"),
    ("memory --kernel 5", "no kernel `5`; the program's kernels are: kernel0_line2, kernel1_line3"),
    ("memory --array nowhere", "no kernel shown accesses array nowhere"),
    ("memory --pitch 0", "the pitch must be between 1 and 128"),
    ("memory --colour red", "%memory: unrecognized arguments: --colour red"),
    ("costs --group x", "%costs: argument --group: invalid int value: 'x'"),
    ("costs --warp 9", "warp 9 does not exist"),
    ("graph --kernel 9", "no kernel `9`"),
])
def test_bad_options_are_fcl_errors_and_the_kernel_lives_on(kc, magic, message):
    execute(kc, "val survivor = 41")
    reply, _ = execute(kc, NAIVE.format(magic=magic))
    assert reply["ename"] == "FCLError" and message in error_of(reply)
    assert result_text(execute(kc, "survivor + 1")[1]) == "42"


def test_a_broken_cell_under_a_magic_points_at_its_line(kc):
    reply, _ = execute(kc, "%%costs\nval fine = 1\nforcePull<grid> (iota true)")
    assert reply["ename"] == "FCLError"
    assert re.match(r"<cell \d+>:2:", reply["traceback"][0]) and "^" in error_of(reply)


def test_graphs_of_the_structure_and_of_each_kernel(kc):
    [structure] = bundles(execute(kc, NAIVE.format(magic="graph"))[1])
    svg = structure["image/svg+xml"]
    assert svg.lstrip().startswith("<?xml") or svg.lstrip().startswith("<svg")
    assert "kernel0_line2" in svg and "kernel1_line3" in svg and "global memory" in svg
    assert structure["text/plain"].startswith("digraph")  # the DOT source as the text
    kernels = bundles(execute(kc, NAIVE.format(magic="graph --kernels"))[1])
    assert len(kernels) == 2 and "arr_3[i_4]" in kernels[1]["image/svg+xml"]
    assert len(bundles(execute(kc, NAIVE.format(magic="graph --kernel 0"))[1])) == 1


def test_lmad_shows_points_and_a_diagram(kc):
    reply, messages = execute(kc, "%lmad 2 + {(3:5),(4:1)} --pitch 5 --points")
    assert reply["status"] == "ok"
    assert "sorted:      2 3 4 5 7 8 9 10 12 13 14 15" in stdout(messages)
    [picture] = bundles(messages)
    assert picture["text/plain"] == "2 + {(3:5),(4:1)}"
    assert "(pitch 5)" in picture["image/svg+xml"]
    # 15 is reached; 6 is not: a filled cell has a tooltip naming its index tuple.
    assert "<title>15: [2, 3]</title>" in picture["image/svg+xml"]
    assert "<title>6:" not in picture["image/svg+xml"]
    assert "self-overlapping: 12 index tuples" in stdout(execute(kc, "%lmad 0 + {(3:2),(4:1)}")[1])


def test_lmad_compares_two(kc):
    out = stdout(execute(kc, "%lmad 0 + {(8:4)} ; 2 + {(8:6)}")[1])
    assert "overlap:     yes, 2 shared addresses: 8 20" in out
    out = stdout(execute(kc, "%lmad 0 + {(4:16),(8:1)} ; 8 + {(4:16),(8:1)}")[1])
    assert "overlap:     no shared address" in out
    assert "the non-overlap test proves them disjoint" in out
    reply, _ = execute(kc, "%lmad 2 + {(3:")
    assert reply["ename"] == "FCLError" and "%lmad: expected a stride" in reply["evalue"]


def widgets_opened(messages) -> dict[str, dict]:
    """comm id -> widget state, of the widgets a cell opened."""
    return {m["content"]["comm_id"]: m["content"]["data"]["state"] for m in messages
            if m["msg_type"] == "comm_open"}


def move(kc, comm_id: str, value) -> list[dict]:
    """Set a widget's value as the browser would; the updates the kernel sends back."""
    msg = kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
        "method": "update", "state": {"value": value}, "buffer_paths": []}})
    kc.shell_channel.send(msg)
    updates = []
    while True:
        reply = kc.get_iopub_msg(timeout=60)
        if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
            continue
        if reply["msg_type"] == "status" and reply["content"]["execution_state"] == "idle":
            return updates
        if reply["msg_type"] == "comm_msg":
            updates.append(reply["content"])


def find(widgets: dict, model: str, description: str | None = None) -> str:
    return next(comm for comm, state in widgets.items() if state["_model_name"] == model
                and (description is None or state.get("description") == description))


def test_memory_explorer_redraws_for_the_chosen_warp_and_group(kc):
    reply, messages = execute(kc, NAIVE.format(magic="memory --explore --pitch 64"))
    assert reply["status"] == "ok"
    widgets = widgets_opened(messages)
    assert any("widget-view+json" in str(b) for b in bundles(messages))
    picture = find(widgets, "HTMLModel")
    assert "warp 0 outlined" in widgets[picture]["value"]
    assert "kernel1_line3" in widgets[picture]["value"]  # the last kernel is shown first
    updates = move(kc, find(widgets, "IntSliderModel", "warp"), 3)
    assert "warp 3 outlined" in drawn(updates, picture)
    updates = move(kc, find(widgets, "BoundedIntTextModel", "work-group"), 5)
    assert "work-group 5 of 16, 256 work-items, warp 3 outlined" in drawn(updates, picture)
    updates = move(kc, find(widgets, "IntSliderModel", "pitch"), 32)
    # The array is called by its FCL name, and by its name in the kernel.
    assert "reads global xs[" in drawn(updates, picture)
    assert "(arr_1 in the kernel, line 3)" in drawn(updates, picture)


def drawn(updates: list[dict], comm_id: str) -> str:
    """The last value the kernel gave the widget `comm_id`."""
    values = [u["data"]["state"]["value"] for u in updates
              if u["comm_id"] == comm_id and "value" in u["data"]["state"]]
    assert values, "the widget was not redrawn"
    return values[-1]


def test_lmad_playground_redraws_as_sliders_move(kc):
    _reply, messages = execute(kc, "%lmad")
    widgets = widgets_opened(messages)
    texts = [c for c, s in widgets.items() if s["_model_name"] == "HTMLModel"]
    assert any("2 + {(3:5),(4:1)}" in widgets[c]["value"] for c in texts)
    facts, picture = texts
    updates = move(kc, find(widgets, "IntSliderModel", "stride δ2"), 2)
    assert "lmad:        2 + {(3:5),(4:2)}" in drawn(updates, facts)
    assert "<svg" in drawn(updates, picture)
    # A self-overlapping LMAD is said to be one.
    updates = move(kc, find(widgets, "IntSliderModel", "stride δ1"), 2)
    assert "self-overlapping: 12 index tuples" in drawn(updates, facts)


def test_every_new_magic_is_listed_and_documented(kc):
    listed = stdout(execute(kc, "%lsmagic")[1])
    for name in ("%%costs", "%%memory", "%%graph", "%lmad"):
        assert name in listed
    assert "--explore" in stdout(execute(kc, "%memory?")[1])
    assert "playground" in stdout(execute(kc, "%lmad?")[1])
    assert "bank conflicts" in stdout(execute(kc, "%costs?")[1])


@pytest.mark.slow  # a kernel of its own: 1.3-2.7 s
def test_graph_without_graphviz_shows_the_dot_text_and_a_note(tmp_path):
    import os
    km, client = start_new_kernel(kernel_name="fcl", env={**os.environ, "PATH": str(tmp_path)})
    try:
        reply, messages = execute(client, NAIVE.format(magic="graph"))
        assert reply["status"] == "ok"
        assert displayed(messages)[0].startswith("digraph {")
        notes = "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")
        assert "Graphviz's `dot` program is not installed" in notes
    finally:
        client.stop_channels()
        km.shutdown_kernel(now=True)


def test_magic_describes_every_magic_and_aliases_work(kc):
    described = stdout(execute(kc, "%magic")[1])
    for name in ("lsmagic", "type", "device", "config", "load", "who", "reset", "lmad", "opencl",
                 "il", "costs", "memory", "graph", "bench", "check", "time", "expect"):
        assert f"%{name}: " in described, name
    _, messages = execute(kc, "%%cl\nforcePull<grid> (generate 8 (fn i => i * 2))")
    assert "__kernel void" in displayed(messages)[0]
    _, messages = execute(kc, "%%time\n6 * 7")
    assert result_text(messages) == "42" and "Wall time" in stdout(messages)


def test_device_chooses_where_cells_run(kc):
    # The kernel's own device is chosen again by its id in the listing, not by a name: on a
    # machine with two PoCLs, `%device Portable` would choose the first, whichever the kernel had.
    with device_kept(kc) as own:
        assert stdout(execute(kc, "%device oclgrind")[1]).startswith("using Oclgrind Simulator")
        listed = stdout(execute(kc, "%device")[1])
        assert any(line.startswith("* ") and "Oclgrind" in line for line in listed.splitlines())
        assert (result_text(execute(kc, "forcePull<grid> (generate 4 (fn i => 3 * i))")[1])
                == "[0,3,6,9]")
        reply, _ = execute(kc, "%device no-such-device")
        assert reply["ename"] == "FCLError"
    assert current_device(kc) == own != "oclgrind"


@pytest.mark.slow  # 1-1.5 s
def test_memory_explorer_of_one_array_offers_the_kernels_touching_it(kc):
    _, messages = execute(kc, NAIVE.format(magic="memory --explore --array arr_1"))
    widgets = widgets_opened(messages)
    [dropdown] = [s for s in widgets.values() if s["_model_name"] == "DropdownModel"]
    assert dropdown["_options_labels"] == ["kernel0_line2", "kernel1_line3"]
    reply, _ = execute(kc, NAIVE.format(magic="memory --explore --array nowhere"))
    assert (reply["ename"] == "FCLError"
            and "no kernel shown accesses array nowhere" in reply["evalue"])


CONCAT_CELL = ("%%{magic}\ndo<grid> {{\n  a <- forcePull<grid> (generate 100 (fn i => i * i)) ;\n"
               "  b <- forcePull<grid> (generate 50 (fn i => 3 * i)) ;\n"
               "  c <- forcePull<grid> (generate 150 (fn i => if i < 100 then index a i "
               "else index b (i - 100))) ;\n"
               "  forcePull<grid> (generate 8 (fn i => index c (i * 18)))\n}}")


@pytest.mark.slow  # 3 s
def test_memory_blocks_show_the_plan_and_config_turns_planning_off(kc):
    reply, messages = execute(kc, CONCAT_CELL.format(magic="memory --blocks"))
    assert reply["status"] == "ok"
    [plan] = bundles(messages)
    lines = plan["text/plain"].splitlines()
    assert lines[0].startswith("global memory: 632 bytes in 2 blocks (without planning: "
                               "1,232 bytes); copies removed: 2")
    assert "  arr_3      at 100 + {(50:1)} (line 3)" in lines
    # Drawn: a bar per block, each part at its place.
    assert plan["text/html"].count("<rect") >= 6 and "arr_3: 100 + {(50:1)}" in plan["text/html"]
    costs = bundles(execute(kc, CONCAT_CELL.format(magic="costs"))[1])[0]["text/plain"]
    assert "kernel2_line" in costs and "kernel3_line" not in costs  # the copy is gone
    assert "Global memory, planned runs: planned 632 bytes, unplanned 1,232 bytes; the 2 " \
           "copies removed by planning move 1,200 bytes" in costs
    try:
        shown = stdout(execute(kc, "%config short_circuit=off")[1])
        assert "short_circuit=off" in shown
        off = bundles(execute(kc, CONCAT_CELL.format(magic="memory --blocks"))[1])[0]
        assert off["text/plain"].startswith("memory planning is off (short_circuit=off)")
        costs = bundles(execute(kc, CONCAT_CELL.format(magic="costs"))[1])[0]["text/plain"]
        assert "Global memory, unplanned (short_circuit=off) runs" in costs
        assert "kernel3_line" in costs  # the copy kernel runs
    finally:
        execute(kc, "%config short_circuit=on")
