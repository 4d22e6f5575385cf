"""What the built-in tools can reach (issue 10, finding 7): ``read_file`` reads regular files
inside its roots only, symlinks resolved first; ``terminal`` sees an allow-listed environment."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from iris.agent.tools import Tool, ToolResult, builtin_tools
from iris.config import ConfigError, config_from_dict
from tests.conftest import MakeConfig

pytestmark = pytest.mark.timeout(20)


def tool(
    make_config: MakeConfig, name: str, private: tuple[Path, ...] = (), **tools: object
) -> Tool:
    config = make_config(tools=tools)
    data_dir = config.store.resolved_path().parent  # the test's tmp_path, never ~/.iris
    registry = builtin_tools(config.tools, private=private, data_dir=data_dir)
    found = registry.get(name)
    assert found is not None
    return found


async def run(tool: Tool, **args: str) -> ToolResult:
    return await tool.run(dict(args), lambda _note: None)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    return folder


async def test_reads_a_file_inside_the_terminal_cwd_by_default(
    make_config: MakeConfig, root: Path
) -> None:
    read = tool(make_config, "read_file", terminal={"cwd": str(root)})
    assert await run(read, path="notes.txt") == ToolResult(True, "hello")


@pytest.mark.parametrize("path", ["/etc/shadow", "/etc/passwd", "/proc/self/environ", "../x"])
async def test_paths_outside_the_roots_are_refused(
    make_config: MakeConfig, root: Path, path: str
) -> None:
    (root.parent / "x").write_text("secret")
    read = tool(make_config, "read_file", terminal={"cwd": str(root)})
    result = await run(read, path=path)
    assert not result.ok and "outside" in result.output
    assert "secret" not in result.output and "root:" not in result.output


async def test_a_symlink_pointing_out_of_the_root_is_refused(
    make_config: MakeConfig, root: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("the key is 42")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    read = tool(make_config, "read_file", terminal={"cwd": str(root)})
    result = await run(read, path="link.txt")
    assert not result.ok and "outside" in result.output and "42" not in result.output


async def test_configured_roots_replace_the_default(
    make_config: MakeConfig, root: Path, tmp_path: Path
) -> None:
    other = tmp_path / "docs"
    other.mkdir()
    (other / "a.md").write_text("# A")
    read = tool(
        make_config, "read_file", terminal={"cwd": str(root)}, read_file={"roots": [str(other)]}
    )
    assert await run(read, path=str(other / "a.md")) == ToolResult(True, "# A")
    refused = await run(read, path="notes.txt")
    assert not refused.ok and "outside" in refused.output


async def test_iris_own_files_are_refused_even_inside_a_root(
    make_config: MakeConfig, root: Path
) -> None:
    (root / "config.yaml").write_text("model: {api_key: sk-secret}")
    read = tool(make_config, "read_file", (root / "config.yaml",), terminal={"cwd": str(root)})
    result = await run(read, path="config.yaml")
    assert not result.ok and "sk-secret" not in result.output


async def test_a_fifo_is_refused_without_blocking(make_config: MakeConfig, root: Path) -> None:
    os.mkfifo(root / "pipe")
    read = tool(make_config, "read_file", terminal={"cwd": str(root)})
    # Nobody ever writes to the pipe: a blocking open would hang here until the timeout.
    result = await asyncio.wait_for(run(read, path="pipe"), timeout=5)
    assert not result.ok and "not a regular file" in result.output


async def test_a_path_with_a_nul_byte_is_refused(make_config: MakeConfig, root: Path) -> None:
    read = tool(make_config, "read_file", terminal={"cwd": str(root)})
    result = await run(read, path="notes.txt\x00.png")
    assert not result.ok and "not a valid path" in result.output


async def test_a_directory_is_refused(make_config: MakeConfig, root: Path) -> None:
    (root / "sub").mkdir()
    read = tool(make_config, "read_file", terminal={"cwd": str(root)})
    result = await run(read, path="sub")
    assert not result.ok and "not a regular file" in result.output


async def test_a_large_file_is_cut_at_max_bytes(make_config: MakeConfig, root: Path) -> None:
    (root / "big.txt").write_text("x" * 1000)
    read = tool(make_config, "read_file", terminal={"cwd": str(root)}, read_file={"max_bytes": 100})
    result = await run(read, path="big.txt")
    assert result.ok and result.output.startswith("x" * 100 + "\n[truncated at 100 bytes]")


async def test_terminal_environment_has_no_provider_keys(
    make_config: MakeConfig, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-leak-2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-leak-3")
    monkeypatch.setenv("IRIS_CONFIG", "/leak/4")
    monkeypatch.setenv("LANG", "C.UTF-8")
    terminal = tool(make_config, "terminal", terminal={"cwd": str(root)})
    result = await run(terminal, command="env")
    assert result.ok
    assert "leak" not in result.output
    assert "LANG=C.UTF-8" in result.output and "PATH=" in result.output


async def test_terminal_environment_is_the_configured_allow_list(
    make_config: MakeConfig, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROJECT_MODE", "dev")
    terminal = tool(make_config, "terminal", terminal={"cwd": str(root), "env": ["PROJECT_MODE"]})
    result = await run(terminal, command="env")
    names = {line.split("=", 1)[0] for line in result.output.splitlines()}
    # The shell itself adds its own PWD (and bash SHLVL and _); the sandbox sets its own HOME
    # (the workspace), PATH and TMPDIR.
    assert names - {"PWD", "SHLVL", "_"} == {"PROJECT_MODE", "HOME", "PATH", "TMPDIR"}
    assert "HOME=/workspace" in result.output.splitlines()


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "GITHUB_TOKEN", "IRIS_CONFIG", "DB_PASSWORD"])
def test_a_secret_in_the_allow_list_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match=f"tools.terminal.env.*{name}"):
        config_from_dict({"tools": {"terminal": {"env": ["PATH", name]}}}, env={})
