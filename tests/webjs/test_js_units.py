"""The web app's JS (``src/iris/web/js``) under node: its unit tests (``node --test``), its
types (``tsc --noEmit``, every module is ``// @ts-check`` with JSDoc) and its lint (ESLint).

The tools are this folder's pinned devDependencies (``package.json``, installed by ``npm ci``
here; ``.ci/run`` does it). Node 22 is the one ``tests/interop/node`` installs, else the
``node`` on PATH (the tests need 20 or newer). Skipped only when there is no node at all; with
node here and the packages missing, each test fails saying to run ``npm ci``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
MODULES = HERE / "node_modules"
PACKAGED_NODE = ROOT / "tests" / "interop" / "node" / "node_modules" / ".bin" / "node"
NODE = str(PACKAGED_NODE) if PACKAGED_NODE.exists() else shutil.which("node")

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(NODE is None, reason="node is not installed (the web app's JS unit tests)"),
]


def run(args: list[str], cwd: Path) -> None:
    """Run a node tool; fail with its own output when it fails."""
    assert NODE is not None
    if not MODULES.is_dir():
        pytest.fail(f"the JS tools are not installed: run `npm ci` in {HERE.relative_to(ROOT)}")
    done = subprocess.run(
        [NODE, *args], cwd=cwd, capture_output=True, text=True, timeout=110, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def test_the_pure_modules_pass_their_unit_tests() -> None:
    run(["--test"], HERE)  # *.test.mjs here: view, reveal, graphemes, mdstream, heal


def test_the_modules_type_check() -> None:
    run([str(MODULES / "typescript" / "bin" / "tsc"), "--noEmit", "-p", str(HERE)], HERE)


def test_the_modules_are_lint_clean() -> None:
    eslint = MODULES / "eslint" / "bin" / "eslint.js"
    config = HERE / "eslint.config.js"
    run([str(eslint), "-c", str(config), "src/iris/web", "tests/webjs"], ROOT)
