"""What the model is given to act with: ``tools`` (the terminal and its sandbox, read_file,
approvals, the MCP limits), ``mcp_servers`` and ``a2a_agents``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from iris.config._section import Section

# What the terminal tool's commands see of Iris's environment: enough for a shell to work.
TERMINAL_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TERM", "TZ")
_SECRET = re.compile(
    r"^(IRIS|HERMES)_|(^|_)(KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)"
)


def looks_secret(name: str) -> bool:
    """Does an environment variable name look like it holds a key or an Iris setting?"""
    return bool(_SECRET.search(name.upper()))


class Bind(Section):
    """A folder (or file) of the host a sandboxed command sees at the same path."""

    path: str
    mode: Literal["ro", "rw"] = "ro"

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not Path(value).expanduser().is_absolute():
            raise ValueError("must be an absolute path (or start with ~)")
        return value


class SandboxLimits(Section):
    """``tools.terminal.limits``: the rlimits every sandboxed command runs under."""

    cpu_s: int = Field(default=60, ge=1)  # CPU seconds (RLIMIT_CPU)
    memory_mb: int = Field(default=1024, ge=16)  # address space (RLIMIT_AS)
    processes: int = Field(default=64, ge=2)  # processes of the sandbox (RLIMIT_NPROC)
    file_mb: int = Field(default=256, ge=1)  # the largest file it may write (RLIMIT_FSIZE)
    open_files: int = Field(default=256, ge=16)  # descriptors per process (RLIMIT_NOFILE)


class TerminalTool(Section):
    # Where commands run with ``sandbox: none`` (the sandbox runs them in the workspace).
    cwd: str = "."
    timeout: float = Field(default=60.0, gt=0)
    output_limit: int = Field(default=16_000, ge=100)
    # The only environment variables a command sees (when Iris has them).
    env: list[str] = Field(default_factory=lambda: list(TERMINAL_ENV))
    # auto: bubblewrap where it runs, else no terminal; none: on the host (``iris.agent.sandbox``).
    sandbox: Literal["auto", "bwrap", "none"] = "auto"
    # The sandbox's read-write folder; null: ``workspace`` beside the store (``~/.iris``).
    workspace: str | None = None
    # chat: one folder per conversation under the workspace; shared: the workspace itself.
    workspace_scope: Literal["chat", "shared"] = "chat"
    network: bool = False  # true shares the host's network (loopback included)
    binds: list[Bind] = Field(default_factory=list[Bind])
    hide: list[str] = Field(default_factory=list[str])  # paths of /etc, /usr... masked inside
    limits: SandboxLimits = Field(default_factory=SandboxLimits)

    @field_validator("env")
    @classmethod
    def _no_secrets(cls, names: list[str]) -> list[str]:
        secret = [name for name in names if looks_secret(name)]
        if secret:
            raise ValueError(f"{', '.join(secret)} looks like a secret; commands never see one")
        return names


class ReadFileTool(Section):
    max_bytes: int = Field(default=64_000, ge=100)
    # Folders read_file may read from (symlinks resolved); empty means the terminal cwd.
    roots: list[str] = Field(default_factory=list[str])


class ApprovalConfig(Section):
    """``tools.approval``: which tool calls wait for a person's yes (``iris.agent.approvals``).

    ``ask``: ``terminal``, every MCP tool (``mcp_*``) and ``ha_call_service`` wait, unless ``auto`` names them (a
    name or a glob); ``off``: nothing is asked. ``timeout``: seconds a request waits before it
    counts as refused. ``allow_ttl`` and ``group_allow``: how long and for whom "allow in this
    chat" holds."""

    mode: Literal["ask", "off"] = "ask"
    auto: list[str] = Field(default_factory=list[str])
    timeout: float = Field(default=120.0, gt=0, le=86_400)
    # Seconds an "allow in this chat" lasts (until /new at the latest; the Redis set's expiry).
    allow_ttl: float = Field(default=86_400.0, gt=0, le=30 * 86_400)
    # In a group, "allow in this chat" lets the tool run unasked for the person who pressed it
    # (person) or for every member of the group (group).
    group_allow: Literal["person", "group"] = "person"


class McpLimits(Section):
    """What MCP servers may hand the model (``tools.mcp``); past a cap a tool or a result is
    dropped, logged once per server."""

    # Tools offered in all (the built-ins included; OpenAI takes 128) and per server.
    max_tools: int = Field(default=128, ge=1, le=4096)
    max_tools_per_server: int = Field(default=128, ge=1, le=4096)
    # Bytes of one tool's input schema (as JSON).
    max_schema_bytes: int = Field(default=16_384, ge=256)
    # Bytes of one message from a server (a call's result): read through, never held whole.
    max_result_bytes: int = Field(default=4_194_304, ge=65_536)


class ToolsConfig(Section):
    # The built-ins, and MCP tools by name (mcp_<server>_<tool>) or glob (mcp_<server>_*).
    enabled: list[str] = Field(default_factory=lambda: ["terminal", "read_file"])
    terminal: TerminalTool = Field(default_factory=TerminalTool)
    read_file: ReadFileTool = Field(default_factory=ReadFileTool)
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)
    mcp: McpLimits = Field(default_factory=McpLimits)
    max_iterations: int = Field(default=8, ge=1)

    @field_validator("enabled")
    @classmethod
    def _known_tools(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in ("terminal", "read_file") and not _MCP_TOOL.match(name):
                raise ValueError(
                    f"unknown tool {name!r}: terminal, read_file, mcp_<server>_<tool> or "
                    "mcp_<server>_*"
                )
        return names


# -- MCP tool servers (iris.agent.mcp) ---------------------------------------------------------
MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
_MCP_TOOL = re.compile(r"^mcp_[A-Za-z0-9][A-Za-z0-9_-]*(\*)?$")


class McpSampling(Section):
    """Whether a server may ask Iris's model (MCP ``sampling/createMessage``): off by default;
    at most ``max_per_minute`` requests; ``model`` (default: ``model.name``), without tools."""

    enabled: bool = False
    max_per_minute: int = Field(default=10, ge=1)
    model: str | None = None


class McpServerConfig(Section):
    """One MCP server: a command Iris starts (stdio) or a Streamable HTTP ``url``."""

    command: str | None = None
    args: list[str] = Field(default_factory=list[str])
    # The child's environment besides tools.terminal.env's allow-list (nothing else of Iris's).
    env: dict[str, str] = Field(default_factory=dict[str, str])
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    # The server's own tool names (globs allowed); empty include means all of them.
    include: list[str] = Field(default_factory=list[str])
    exclude: list[str] = Field(default_factory=list[str])
    # Seconds a call may go without a result or a progress notification.
    timeout: float = Field(default=60.0, gt=0)
    connect_timeout: float = Field(default=10.0, gt=0)
    # Seconds a call may run at most, progress or not.
    max_duration: float = Field(default=600.0, gt=0)
    enabled: bool = True
    # A stdio server run in the terminal's sandbox (tools.terminal's hide and limits but
    # cpu_s), with its own folder as cwd, these binds and this network switch.
    sandbox: bool = False
    binds: list[Bind] = Field(default_factory=list[Bind])
    network: bool = False
    sampling: McpSampling = Field(default_factory=McpSampling)
    # ``oauth``: a url server's sign-in (the MCP authorization flow; ``iris mcp login NAME``).
    auth: Literal["none", "oauth"] = "none"
    # A client registered by hand with the authorization server (else dynamic registration),
    # the variable holding its secret, and the loopback port its redirect URI names.
    client_id: str | None = None
    client_secret_env: str | None = None
    callback_port: int = Field(default=0, ge=0, le=65535)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (Streamable HTTP)")
        if self.url is not None:
            if not self.url.startswith(("http://", "https://")):
                raise ValueError("url must be an http:// or https:// URL")
            if self.args or self.env:
                raise ValueError("args and env are for a command; a url server takes headers")
        elif self.headers:
            raise ValueError("headers are for a url server")
        if self.url is not None and (self.sandbox or self.binds or self.network):
            raise ValueError("sandbox, binds and network are for a command (stdio) server")
        if not self.sandbox and (self.binds or self.network):
            raise ValueError("binds and network are the sandbox's: set sandbox: true")
        return self._check_auth()

    def _check_auth(self) -> McpServerConfig:
        if self.auth == "oauth":
            if self.url is None:
                raise ValueError("auth: oauth is for a url server")
            if any(key.lower() == "authorization" for key in self.headers):
                raise ValueError("auth: oauth sends its own Authorization header; drop it")
        elif self.client_id or self.client_secret_env or self.callback_port:
            raise ValueError("client_id, client_secret_env and callback_port need auth: oauth")
        if self.client_secret_env and not self.client_id:
            raise ValueError("client_secret_env is the secret of a client_id: set client_id")
        return self


McpServerName = Annotated[str, StringConstraints(pattern=MCP_SERVER_NAME.pattern)]


# -- remote A2A agents (iris.agent.peers) ------------------------------------------------------
class A2aAgentConfig(Section):
    """A remote A2A agent offered to the model as the tool ``a2a_<name>``."""

    url: str
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    timeout: float = Field(default=600.0, gt=0)  # seconds one call may run at most

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must be an http:// or https:// URL")
        return value
