"""``iris.config`` is the one place config names are imported from: the public names its private
modules define are all in its ``__all__``, and every name there imports (the package was one
module, and every importer kept ``from iris.config import X``)."""

from __future__ import annotations

import ast
from pathlib import Path

import iris.config


def defined(path: Path) -> set[str]:
    """The public names a module defines at its top level (classes, functions, constants)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return {name for name in names if not name.startswith("_")}


def test_every_public_name_of_the_config_modules_is_exported() -> None:
    package = Path(iris.config.__file__).parent
    modules = [path for path in package.glob("_*.py") if path.name != "__init__.py"]
    public = set().union(*(defined(path) for path in modules)) - {"Section"}  # the shared base
    assert public <= set(iris.config.__all__)
    assert {"Config", "load_config", "config_from_dict", "McpServerName", "Surface"} <= public


def test_every_exported_name_imports() -> None:
    namespace: dict[str, object] = {}
    exec("from iris.config import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(iris.config.__all__)
    assert iris.config.Config().server.port == 8642
