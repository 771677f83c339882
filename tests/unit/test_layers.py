"""Layers point one way: the package's import graph, read from the source.

Every ``import`` and ``from ... import`` in ``memorybus/`` counts, including the
ones inside functions (a deferred import is still a dependency); only imports
under ``if TYPE_CHECKING:`` (annotations) do not. Modules are grouped into units:
a subpackage (``memorybus.shard``) or a top-level module (``memorybus.memory.model``).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memorybus"



def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _imports() -> dict[str, set[str]]:
    """module -> every module (memorybus or third-party, top name) it imports at run time."""
    out: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}  # fmt: skip
        found: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "memorybus":  # from memorybus import actors: the submodule
                    found |= {f"memorybus.{a.name}" for a in node.names if a.name.islower()}
                else:
                    found.add(node.module)
        out[module] = found
    return out


def _unit_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in _imports().items():
        if module == "memorybus":  # the lazy public facade names everything
            continue
        for target in targets:
            if target.startswith("memorybus.") and _unit(target) != _unit(module):
                graph[_unit(module)].add(_unit(target))
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    graph = _unit_graph()
    assert "memorybus.actors" in graph["memorybus.client"]  # the client drives the Ray layer
    assert "memorybus.client" in graph["memorybus.simulation"]


def test_no_import_cycle_between_units():
    assert _cycles(_unit_graph()) == []


def _module_graph() -> dict[str, set[str]]:
    """module -> the memorybus modules it imports, annotation-only imports included; a
    ``from package import name`` counts as the submodule when ``name`` is one, else as
    the package. The lazy facade ``memorybus`` itself is left out (it names everything)."""
    modules: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[module] = {t for t in found if t in modules and t != module} if module != "memorybus" else set()
    return graph


def test_the_module_graph_is_read():
    graph = _module_graph()
    assert "memorybus.client.handle" in graph["memorybus.client.queries"]  # an annotation-only import
    assert "memorybus.shard.results" in graph["memorybus.shard.ops"]


def test_no_import_cycle_between_modules_not_even_for_annotations():
    """Module by module, ``if TYPE_CHECKING:`` imports included: a package's modules and
    its ``__init__`` never import each other in a circle (issue 31)."""
    assert _cycles(_module_graph()) == []


def test_storage_does_not_import_the_shard():
    assert "memorybus.shard" not in _unit_graph()["memorybus.storage"]


def test_the_ray_layer_imports_neither_the_client_nor_the_simulation():
    graph = _unit_graph()
    assert "memorybus.simulation" not in graph["memorybus.actors"]
    assert "memorybus.client" not in graph["memorybus.actors"]


def test_the_bus_depends_only_on_the_core():
    """The bus (hub, delivery, conflict resolution, evidence) takes its store and its
    shard reads as things it defines (bus/ports.py); beyond that it needs only the core."""
    allowed = {"memorybus.errors", "memorybus.scopes", "memorybus.validation", "memorybus.memory",
               "memorybus.hooks", "memorybus.salience"}  # fmt: skip
    assert _unit_graph()["memorybus.bus"] <= allowed


def test_only_the_ray_layer_imports_ray():
    importers = {m for m, targets in _imports().items() if any(t.split(".")[0] == "ray" for t in targets)}
    assert importers and all(m.startswith("memorybus.actors") for m in importers), importers


def _calls(module: str, method: str) -> bool:
    """Whether ``module`` (a memorybus module name) calls a method named ``method``."""
    path = PACKAGE.parent.joinpath(*module.split("."))
    source = (path / "__init__.py" if path.is_dir() else path.with_suffix(".py")).read_text()
    return any(isinstance(n, ast.Attribute) and n.attr == method for n in ast.walk(ast.parse(source)))


def test_the_shard_not_the_client_decides_what_is_embedded():
    """The client sends memories; the shard picks each one's text and embeds it. The
    client embeds only what it asks with (queries, ``embed``), never what is stored."""
    imports = _imports()
    client = [m for m in imports if _unit(m) == "memorybus.client"]
    assert not [m for m in client if imports[m] & {"memorybus.shard.texts", "memorybus.retrieval.structure"}]
    assert [m for m in client if _calls(m, "encode")] == ["memorybus.client.queries"]
