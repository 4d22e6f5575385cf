"""Typed config: loading, validation, environment, and the streaming precedence rule.

Lookup: ``--config FILE``, else ``$IRIS_CONFIG``, else ``~/.iris/config.yaml`` (written from a
commented template on first run, with ``streaming.enabled: true``). Unknown keys and wrong types
are ``ConfigError``s that name the key (``streaming.edit_interval: …``).

Environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``IRIS_MODEL`` configure a
chat-completions provider when the file configures no model; ``IRIS_STREAMING_ENABLED`` (alias
``HERMES_STREAMING_ENABLED``) sets the master streaming switch. With no model anywhere the
provider is ``local``, the embedded demo model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from iris.errors import ConfigError
from iris.private import private_dir, write_private

Surface = Literal["cli", "telegram", "discord", "slack", "api_server", "iris"]
ToolProgressMode = Literal["off", "new", "all", "verbose"]
ReasoningStyle = Literal["code", "blockquote", "subtext"]
# How a chat reply is shown while it streams: the platform's native preview (Telegram drafts in
# private chats, Slack streams in threads and DMs) or edits of a posted message.
Transport = Literal["auto", "native", "edit"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelEndpoint(_Section):
    provider: Literal["chat_completions", "responses", "local"] = "chat_completions"
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    name: str = ""
    timeout: float = 60.0

    def resolved_api_key(self) -> str:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env, "")
        return os.environ.get("OPENAI_API_KEY", "") or "not-needed"


class ModelConfig(ModelEndpoint):
    provider: Literal["chat_completions", "responses", "local"] = "local"
    fallback: list[ModelEndpoint] = Field(default_factory=list[ModelEndpoint])
    # How long a model that rejected stream=True is asked without streaming.
    stream_reject_ttl: float = 600.0
    # Embedded model: path to a GGUF file; empty means the packaged Gemma 3 270M.
    local_path: str = ""
    max_tokens: int | None = None
    system_prompt: str = ""
    # Characters of visible text one turn may produce (reasoning and tool arguments are bounded
    # by the same number): past it the upstream is closed and the turn ends with "length".
    max_output_chars: int = Field(default=200_000, ge=1)
    # Tokens the model reads at once (prompt + reply). None: 2048 for the embedded model, else
    # 32768. Chats whose history Iris keeps fit it (see iris.agent.context).
    context_window: int | None = Field(default=None, ge=256)
    # What happens to older turns that no longer fit: the model summarizes them, or they go.
    compaction: Literal["summarize", "truncate"] = "summarize"


class StreamingConfig(_Section):
    enabled: bool = False
    cli: bool | None = None
    telegram: bool | None = None
    discord: bool | None = None
    slack: bool | None = None
    api_server: bool | None = None
    iris: bool | None = None
    edit_interval: float = Field(default=1.5, gt=0)
    min_tokens: int = Field(default=20, ge=0)
    buffer_threshold: int = Field(default=24, ge=1)


class DisplayOverride(_Section):
    streaming: bool | None = None
    show_reasoning: bool | None = None
    reasoning_style: ReasoningStyle | None = None
    tool_progress: ToolProgressMode | None = None
    edit_interval: float | None = Field(default=None, gt=0)
    buffer_threshold: int | None = Field(default=None, ge=1)
    transport: Transport | None = None
    can_stop: bool | None = None  # Telegram drafts: the stop button interrupts the turn
    # Seconds a preview must have been visible for the final answer to come as a new message
    # (which notifies; an edit does not), the preview deleted. 0: off.
    fresh_final_after: float | None = Field(default=None, ge=0)


class DisplayConfig(_Section):
    show_reasoning: bool = False
    reasoning_style: ReasoningStyle = "code"
    tool_progress: ToolProgressMode = "all"
    platforms: dict[Surface, DisplayOverride] = Field(
        default_factory=dict[Surface, DisplayOverride]
    )


class ResolvedDisplay(BaseModel):
    """Display settings for one platform after applying its overrides."""

    show_reasoning: bool
    reasoning_style: ReasoningStyle
    tool_progress: ToolProgressMode
    edit_interval: float
    buffer_threshold: int
    min_tokens: int
    transport: Transport = "auto"
    can_stop: bool = False
    fresh_final_after: float = 0.0


class ServerConfig(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8642, ge=0, le=65535)
    # Host names accepted besides the bound address ("name" any port, "name:port" exact, "*"
    # any): the DNS-rebinding guard. A reverse proxy's public name goes here.
    allowed_hosts: list[str] = Field(default_factory=list[str])
    # Browser origins ("https://app.example") allowed to call the API and open the iris socket.
    cors_origins: list[str] = Field(default_factory=list[str])
    # Running turns across every surface (API, iris socket, chat platforms).
    max_turns: int = Field(default=32, ge=1)
    # Seconds a connection may take to send a request's line and headers (slowloris guard).
    timeout_headers: float = Field(default=10.0, gt=0)
    # Seconds an API request may take to send its body once the headers are in.
    timeout_body: float = Field(default=30.0, gt=0)
    # Seconds an idle keep-alive connection stays open between requests.
    timeout_keep_alive: int = Field(default=5, ge=1)
    # Open HTTP connections; past it a new one evicts the oldest that has not sent its headers.
    max_connections: int = Field(default=1000, ge=8)


class ApiServerPlatform(_Section):
    enabled: bool = True
    api_key: str | None = None
    max_concurrent: int = Field(default=16, ge=1)
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    # Per-request caps, checked before any work: OpenAI's own cap on `messages` is 2048; a
    # million characters of text is past every model's context window.
    max_messages: int = Field(default=2048, ge=1)
    max_input_chars: int = Field(default=1_000_000, ge=1)
    # Agent tools run inside Iris when the client sends no tools of its own.
    agent_tools: bool = True
    # Background responses: the events of an ended one are kept this many seconds for
    # resumed streams, and at most this many ended ones (the stored response outlives both).
    background_ttl: float = Field(default=3600.0, gt=0)
    background_keep: int = Field(default=1000, ge=1)


class IrisPlatform(_Section):
    enabled: bool = True
    tokens: list[str] = Field(default_factory=list[str])
    max_text: int = Field(default=32_000, ge=1)
    log_max_frames: int = Field(default=5_000, ge=10)
    log_max_age: float = Field(default=24 * 3600, gt=0)
    queue_size: int = Field(default=256, ge=8)
    # Running turns one device token may have at once, across all its chats.
    max_turns_per_token: int = Field(default=4, ge=1)


class Rate(_Section):
    """A call budget: at most ``calls`` calls in any ``per`` seconds."""

    calls: int = Field(ge=1)
    per: float = Field(gt=0)


# Defaults from each platform's documentation, a little under the documented figure where the
# limit is shared by the whole bot: calls leave Iris evenly spaced but reach the platform with
# network jitter, and the platform counts arrivals.
class TelegramBudgets(_Section):
    # documented: about 30 messages a second per bot
    bot: Rate = Field(default_factory=lambda: Rate(calls=25, per=1.0))
    # about one message a second per chat
    private_chat: Rate = Field(default_factory=lambda: Rate(calls=1, per=1.0))
    # 20 messages a minute per group
    group_chat: Rate = Field(default_factory=lambda: Rate(calls=20, per=60.0))


class DiscordBudgets(_Section):
    # documented: 50 requests a second per bot (global)
    bot: Rate = Field(default_factory=lambda: Rate(calls=40, per=1.0))
    # messages per channel; the headers may say stricter
    channel: Rate = Field(default_factory=lambda: Rate(calls=5, per=5.0))


class SlackBudgets(_Section):
    # chat.update, Tier 3: about 50 a minute per workspace
    update: Rate = Field(default_factory=lambda: Rate(calls=45, per=60.0))
    # chat.postMessage: about 1 a second per channel
    post: Rate = Field(default_factory=lambda: Rate(calls=1, per=1.0))
    # chat.startStream, chat.appendStream, chat.stopStream, Tier 4: 100+ a minute per
    # workspace, each method on its own
    stream: Rate = Field(default_factory=lambda: Rate(calls=90, per=60.0))


class TelegramPlatform(_Section):
    enabled: bool = False
    token: str = ""
    base_url: str = "https://api.telegram.org"
    allowed_users: list[str | int] = Field(default_factory=list[str | int])
    # allowed_users by user id; user names too only with this (a name can change hands).
    match_usernames: bool = False
    max_text: int = Field(default=32_000, ge=1)  # characters of one message, like the iris socket's
    # Seconds of quiet that end a burst: messages of one chat closer than this are one turn.
    debounce: float = Field(default=1.5, ge=0, le=60)
    # Running turns one user may have at once, across all their chats and threads.
    max_turns_per_user: int = Field(default=2, ge=1)
    poll_timeout: float = Field(default=10.0, ge=0)
    budgets: TelegramBudgets = Field(default_factory=TelegramBudgets)


class DiscordPlatform(_Section):
    enabled: bool = False
    token: str = ""
    base_url: str = "https://discord.com/api/v10"
    allowed_users: list[str | int] = Field(default_factory=list[str | int])
    # allowed_users by user id; user names too only with this (a name can change hands).
    match_usernames: bool = False
    max_text: int = Field(default=32_000, ge=1)  # characters of one message, like the iris socket's
    # Seconds of quiet that end a burst: messages of one chat closer than this are one turn.
    debounce: float = Field(default=1.5, ge=0, le=60)
    # Running turns one user may have at once, across all their chats and threads.
    max_turns_per_user: int = Field(default=2, ge=1)
    budgets: DiscordBudgets = Field(default_factory=DiscordBudgets)


class SlackPlatform(_Section):
    enabled: bool = False
    bot_token: str = ""
    app_token: str = ""
    base_url: str = "https://slack.com/api/"
    allowed_users: list[str] = Field(default_factory=list[str])
    # allowed_users by user id; user names too only with this (a name can change hands).
    match_usernames: bool = False
    max_text: int = Field(default=32_000, ge=1)  # characters of one message, like the iris socket's
    # Seconds of quiet that end a burst: messages of one chat closer than this are one turn.
    debounce: float = Field(default=1.5, ge=0, le=60)
    # Running turns one user may have at once, across all their chats and threads.
    max_turns_per_user: int = Field(default=2, ge=1)
    budgets: SlackBudgets = Field(default_factory=SlackBudgets)


class PlatformsConfig(_Section):
    api_server: ApiServerPlatform = Field(default_factory=ApiServerPlatform)
    iris: IrisPlatform = Field(default_factory=IrisPlatform)
    telegram: TelegramPlatform = Field(default_factory=TelegramPlatform)
    discord: DiscordPlatform = Field(default_factory=DiscordPlatform)
    slack: SlackPlatform = Field(default_factory=SlackPlatform)


# What the terminal tool's commands see of Iris's environment: enough for a shell to work.
TERMINAL_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TERM", "TZ")
_SECRET = re.compile(
    r"^(IRIS|HERMES)_|(^|_)(KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)"
)


def looks_secret(name: str) -> bool:
    """Does an environment variable name look like it holds a key or an Iris setting?"""
    return bool(_SECRET.search(name.upper()))


class TerminalTool(_Section):
    cwd: str = "."
    timeout: float = Field(default=60.0, gt=0)
    output_limit: int = Field(default=16_000, ge=100)
    # The only environment variables a command sees (when Iris has them).
    env: list[str] = Field(default_factory=lambda: list(TERMINAL_ENV))

    @field_validator("env")
    @classmethod
    def _no_secrets(cls, names: list[str]) -> list[str]:
        secret = [name for name in names if looks_secret(name)]
        if secret:
            raise ValueError(f"{', '.join(secret)} looks like a secret; commands never see one")
        return names


class ReadFileTool(_Section):
    max_bytes: int = Field(default=64_000, ge=100)
    # Folders read_file may read from (symlinks resolved); empty means the terminal cwd.
    roots: list[str] = Field(default_factory=list[str])


class ToolsConfig(_Section):
    enabled: list[Literal["terminal", "read_file"]] = Field(
        default_factory=lambda: ["terminal", "read_file"]
    )
    terminal: TerminalTool = Field(default_factory=TerminalTool)
    read_file: ReadFileTool = Field(default_factory=ReadFileTool)
    max_iterations: int = Field(default=8, ge=1)


class StoreConfig(_Section):
    path: str = "~/.iris/iris.db"
    # Seconds a write waits for a lock another process holds before it fails (503 / error frame).
    busy_timeout: float = Field(default=5.0, gt=0, le=60)
    # redis://[:password@]host:6379/0 (or rediss://, unix://): every process and host on this
    # URL shares chats, history, stored responses and device tokens (see docs/deploy.md).
    url: str | None = None
    # Every key starts with this, so several deployments can share one Redis.
    prefix: str = Field(default="iris", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    # Seconds a running turn's owner (and a bot's poller) holds its lease without renewing it:
    # how long a process killed mid-reply leaves its turn open before another one closes it.
    lease: float = Field(default=10.0, ge=1, le=300)

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return value

    def resolved_path(self) -> Path:
        return Path(self.path).expanduser()


class Config(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)
    display: DisplayConfig = Field(default_factory=DisplayConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    platforms: PlatformsConfig = Field(default_factory=PlatformsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    # Where this config came from (None: defaults and environment only).
    source: str | None = Field(default=None, exclude=True)

    # -- the streaming precedence rule ------------------------------------------------------
    def streams(self, surface: Surface) -> bool:
        """Does ``surface`` stream?

        Per-surface override (``display.platforms.<p>.streaming``, then ``streaming.<surface>``)
        > master switch (environment included) > default off. For ``api_server`` it only says
        whether Iris streams *from the provider* while it builds a non-streamed answer: what
        the API client receives is decided by the request's ``stream`` field alone (absent =
        false, as on OpenAI)."""
        override = self.display.platforms.get(surface)
        if override is not None and override.streaming is not None:
            return override.streaming
        per_surface: bool | None = getattr(self.streaming, surface)
        if per_surface is not None:
            return per_surface
        return self.streaming.enabled

    def display_for(self, platform: Surface) -> ResolvedDisplay:
        base = self.display
        over = base.platforms.get(platform) or DisplayOverride()
        return ResolvedDisplay(
            show_reasoning=_pick(over.show_reasoning, base.show_reasoning),
            reasoning_style=_pick(over.reasoning_style, base.reasoning_style),
            tool_progress=_pick(over.tool_progress, base.tool_progress),
            edit_interval=_pick(over.edit_interval, self.streaming.edit_interval),
            buffer_threshold=_pick(over.buffer_threshold, self.streaming.buffer_threshold),
            min_tokens=self.streaming.min_tokens,
            transport=_pick(over.transport, "auto"),
            can_stop=_pick(over.can_stop, False),
            fresh_final_after=_pick(over.fresh_final_after, 0.0),
        )


_T = TypeVar("_T")


def _pick(override: _T | None, default: _T) -> _T:
    return default if override is None else override


def default_path() -> Path:
    return Path.home() / ".iris" / "config.yaml"


TEMPLATE = """\
# Iris configuration. Every key is optional; see docs/config.md for the full reference.

# model:
#   provider: chat_completions     # chat_completions | responses | local (embedded demo model)
#   base_url: http://127.0.0.1:8000/v1
#   api_key_env: OPENAI_API_KEY    # or api_key: sk-...
#   name: some-model
#   fallback:
#     - {provider: chat_completions, base_url: http://127.0.0.1:8001/v1, name: other-model}

streaming:
  enabled: true                    # master switch (the code default is false)
  # cli: true                      # per-surface overrides: cli, telegram, discord, slack, api_server, iris
  # edit_interval: 1.5             # seconds between message edits on chat platforms
  # min_tokens: 20                 # deltas before the first visible message on chat platforms

# display:
#   show_reasoning: false
#   reasoning_style: code          # code | blockquote | subtext
#   tool_progress: all             # off | new | all | verbose
#   platforms:                     # per chat platform: streaming, edit_interval, ...
#     telegram: {transport: auto}  # auto | native | edit (drafts in private chats)

# server: {host: 127.0.0.1, port: 8642, allowed_hosts: [], cors_origins: [], max_turns: 32}
# platforms:
#   api_server: {enabled: true, api_key: null, max_concurrent: 16}
#   iris: {enabled: true, tokens: [change-me]}
# tools:
#   enabled: [terminal, read_file]
#   terminal: {cwd: ".", timeout: 60, env: [PATH, HOME, LANG]}   # env: what commands see
#   read_file: {roots: ["."]}      # folders read_file may read; default: the terminal cwd
"""


def load_config(
    path: str | os.PathLike[str] | None = None, *, write_template: bool = True
) -> Config:
    """Load the config by the lookup order, apply the environment, validate.

    Raises ``ConfigError`` naming the bad key."""
    explicit = path if path is not None else os.environ.get("IRIS_CONFIG") or None
    if explicit is not None:
        file = Path(explicit).expanduser()
        if not file.exists():
            raise ConfigError(f"config file not found: {file}")
    else:
        file = default_path()
        if not file.exists() and write_template:
            try:
                # It will hold keys: private from its first byte.
                private_dir(file.parent)
                write_private(file, TEMPLATE)
            except OSError:
                pass
    data: dict[str, Any] = {}
    if file.exists():
        try:
            loaded = yaml.safe_load(file.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: invalid YAML: {str(exc).splitlines()[0]}") from None
        except OSError as exc:
            raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: the top level must be a mapping of keys")
        data = loaded
    return config_from_dict(data, source=str(file) if file.exists() else None)


def config_from_dict(
    data: Mapping[str, Any], *, source: str | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Validate ``data`` (a parsed config file) and apply the environment."""
    environ = os.environ if env is None else env
    merged: dict[str, Any] = dict(data)
    if "model" not in merged and (environ.get("OPENAI_BASE_URL") or environ.get("IRIS_MODEL")):
        merged["model"] = {
            "provider": "chat_completions",
            "base_url": environ.get("OPENAI_BASE_URL") or None,
            "name": environ.get("IRIS_MODEL", "") or "gpt-4o-mini",
        }
    elif isinstance(merged.get("model"), dict) and "provider" not in merged["model"]:
        # A model section that names an endpoint means a remote provider.
        model = dict(merged["model"])
        if model.get("base_url") or model.get("name"):
            model["provider"] = "chat_completions"
        merged["model"] = model
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    config.source = source
    flag = _env_flag(environ)
    if flag is not None:
        config.streaming.enabled = flag
    return config


def _env_flag(environ: Mapping[str, str]) -> bool | None:
    for name in ("IRIS_STREAMING_ENABLED", "HERMES_STREAMING_ENABLED"):
        value = environ.get(name, "").strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return None


def _describe(exc: ValidationError, source: str | None) -> str:
    err = exc.errors()[0]
    key = ".".join(str(part) for part in err["loc"]) or "(top level)"
    where = f"{source}: " if source else ""
    if err["type"] == "extra_forbidden":
        return f"{where}unknown config key '{key}'"
    return f"{where}config key '{key}': {err['msg']} (got {err.get('input')!r})"
