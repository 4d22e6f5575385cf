"""The public API is what ``__all__`` declares, each name imports, and docs/agent.md lists the
same names: nothing more is documented as public, nothing public goes undocumented."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import iris
import iris.agent

DOC = Path(__file__).resolve().parents[1] / "docs" / "agent.md"


def documented() -> dict[str, set[str]]:
    text = DOC.read_text()
    section = text.split("## The public API", 1)[1].split("\n## ", 1)[0]
    names: dict[str, set[str]] = {}
    for item in re.split(r"\n- ", section)[1:]:
        module, rest = item.split(":", 1)
        names[module.strip("` ")] = set(re.findall(r"`(\w+)`", rest))
    return names


@pytest.mark.parametrize("module", ["iris", "iris.agent"])
def test_every_public_name_imports_and_is_the_documented_list(module: str) -> None:
    mod = importlib.import_module(module)
    public = set(mod.__all__)
    assert public == documented()[module]
    for name in public:
        assert getattr(mod, name) is not None, name


def test_star_import_gives_exactly_the_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from iris import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(iris.__all__)


def test_the_re_exports_are_the_defining_modules_objects() -> None:
    from iris.errors import IrisError
    from iris.events import TextDelta

    assert iris.Agent is iris.agent.Agent
    assert iris.TextDelta is TextDelta
    assert iris.IrisError is IrisError


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = iris.nope  # type: ignore[attr-defined]


def test_importing_iris_alone_loads_no_provider_sdk() -> None:
    # the embedded model's worker and `iris --help` import the package, not the agent
    code = "import sys, iris; print('openai' in sys.modules, 'iris.agent' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
