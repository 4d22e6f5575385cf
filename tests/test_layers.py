"""The packages of ``src/iris`` form a strict order: none imports one above it, and no two files
import each other at run time.

Read from the source (``ast``), so a violation is found without importing anything: an import
under ``if TYPE_CHECKING:`` is for the type checker only and does not count; an import inside a
function does (it runs). ``from package import name`` counts as importing ``package.name`` when
that is a module, else ``package``.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top. A name is a package or a top-level module of ``iris``.
LAYERS: list[set[str]] = [
    {
        "events",
        "errors",
        "config",
        "private",
        "tasks",
        "segments",
        "auth_throttle",
        "turn_slots",
        "proxies",
    },
    {"formats"},
    {"observability"},
    {"llm"},
    {"state"},
    {"fanout"},
    {"agent"},
    {"protocol"},
    {"runtime"},  # the composition root of iris serve: what the surfaces are given
    {"surfaces"},
    {"server"},
    {"app", "web", "cli"},  # the clients and the command line, over everything
]


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "iris":
        return None
    if len(parts) == 1:
        return 0  # ``iris`` itself: its exports load lazily, on first use
    return next((i for i, names in enumerate(LAYERS) if parts[1] in names), None)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((SRC / "iris").rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


@functools.cache
def _parsed(path: Path) -> ast.Module:
    # CPython 3.11.7 sometimes fails a parse with "AST constructor recursion depth mismatch"
    # (gh-106905, fixed in 3.11.8) under the suite's workers: the same source parses again.
    try:
        return ast.parse(path.read_text())
    except SystemError:
        return ast.parse(path.read_text())


def imports(path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The ``iris`` modules ``path`` imports at run time, with the line of each import."""
    found: list[tuple[str, int]] = []

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if _type_checking(node.test):
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            found.extend((alias.name, node.lineno) for alias in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level or node.module is None:
                return
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((sub if sub in known else node.module, node.lineno))

    Visitor().visit(_parsed(path))
    return iter([(name, line) for name, line in found if name.split(".")[0] == "iris"])


def test_no_package_imports_one_above_it() -> None:
    known = modules()
    upward: list[str] = []
    for name, path in known.items():
        mine = layer_of(name)
        assert mine is not None, f"{name}: not in any layer of tests/test_layers.py"
        for imported, line in imports(path, known):
            theirs = layer_of(imported)
            if theirs is not None and theirs > mine:
                upward.append(f"{path.relative_to(SRC)}:{line} imports {imported}")
    assert upward == []


def test_no_two_files_import_each_other_at_run_time() -> None:
    known = modules()
    graph = {
        name: {i for i, _ in imports(path, known) if i in known and i != name}
        for name, path in known.items()
    }
    # A package's __init__ runs before any of its modules: an edge from a module to its own
    # package's __init__ is not a cycle the import order can trip on.
    for name, edges in graph.items():
        edges -= {p for p in edges if name.startswith(p + ".")}
    cycles = [sorted(c) for c in _strongly_connected(graph) if len(c) > 1]
    assert cycles == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components, iteratively (the graph is a few hundred files deep at most)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, set())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components
