"""The package's import structure: no module imports itself again through others, so every
stage can be read (and loaded) after the ones it builds on."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fcl", "fcl_kernel")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The project's modules that `path` imports, at any depth of its code (imports inside
    functions too: a lazy import hides a dependency, it does not remove it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from fcl import pipeline` imports the module fcl.pipeline, as `import
            # fcl.pipeline` does; only names that are not modules come from `fcl` itself.
            named = {f"{node.module}.{alias.name}" for alias in node.names}
            found |= named
            if named - modules:
                found.add(node.module)
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) - {module_name(p)} for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]


@pytest.mark.slow  # 0.6-0.7 s
def test_the_graph_sees_the_pipeline():
    graph = import_graph()
    assert "fcl.pipeline" in graph["fcl.cli"]
    # `fcl.load` is the library's: the package imports it, the compiler's stages do not.
    assert "fcl.python.library" in graph["fcl"]
    assert "fcl" not in graph["fcl.pipeline"]
    assert {"fcl.il.lower", "fcl.steps", "fcl.backend"} <= graph["fcl.pipeline"]
    # The steps after lowering, listed in one place (fcl.steps); the back end runs its part of
    # them for either kind of device, then the printer.
    assert {"fcl.il.passes", "fcl.il.unnest", "fcl.memory.shortcircuit", "fcl.codegen.kernelize",
            "fcl.codegen.order", "fcl.codegen.tiles", "fcl.codegen.registers", "fcl.codegen.shape",
            "fcl.codegen.widen"} <= graph["fcl.steps"]
    assert {"fcl.steps", "fcl.codegen.emit"} <= graph["fcl.backend"]
    # The back end's parts are composed above them (fcl.steps, fcl.backend), never by each other.
    assert not any(m in ("fcl.steps", "fcl.backend", "fcl.pipeline")
                   for name, deps in graph.items() if name.startswith("fcl.codegen") for m in deps)
    # The compiler's back end knows nothing of running its output: devices, buffers, servers.
    assert not any(m.startswith(("fcl.runtime", "fcl.server")) for name, deps in graph.items()
                   if name.startswith("fcl.codegen") for m in deps)
    # The back end's stages build on the IL, never the other way round.
    assert not any(m.startswith(("fcl.codegen", "fcl.runtime")) for name, deps in graph.items()
                   if name.startswith("fcl.il") for m in deps)


def test_the_interpreter_needs_no_opencl_code():
    # The reference interpreter is the oracle the OpenCL back end is checked against: it must
    # run where OpenCL cannot, and share nothing with the back end it judges.
    graph = import_graph()
    seen, todo = set(), ["fcl.interp.eval"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, set())
    assert not [m for m in seen if m.startswith(("fcl.codegen", "fcl.runtime", "fcl.server"))], \
        sorted(seen)
