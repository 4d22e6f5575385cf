"""Test modules never import each other: what two test files share lives in a helper module
(``harness.py``, ``mcp_turns.py``...). Importing a ``test_*`` module runs its module-level code
and fixtures a second time under another name, and ties one file's tests to another's."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FROM_TEST_MODULE = re.compile(
    r"^\s*(from\s+(tests(\.\w+)*)?\.?test_\w+\s+import|from\s+tests(\.\w+)*\.test_\w+\s+import"
    r"|import\s+tests(\.\w+)*\.test_\w+)",
    re.MULTILINE,
)


def test_no_test_module_imports_another() -> None:
    found = [
        f"{path.relative_to(TESTS)}: {match.group(0).strip()}"
        for path in sorted(TESTS.rglob("*.py"))
        if "node_modules" not in path.parts
        for match in FROM_TEST_MODULE.finditer(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "move what they share into a helper module"
