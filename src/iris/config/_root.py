"""``Config``, the whole file: its sections, the small ones that have no module of their own
(``store``, ``attachments``, ``schedules``), and the streaming precedence rule."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypeVar

from pydantic import Field, field_validator, model_validator

from iris.config._chat import (
    DiscordConfig,
    HomeAssistantConfig,
    MatrixConfig,
    SlackConfig,
    TelegramConfig,
    WhatsAppConfig,
)
from iris.config._display import (
    DisplayConfig,
    DisplayOverride,
    ResolvedDisplay,
    StreamingConfig,
    Surface,
)
from iris.config._model import ModelConfig
from iris.config._section import Section
from iris.config._server import (
    A2aConfig,
    ApiServerConfig,
    ServerConfig,
    SocketConfig,
    TelemetryConfig,
)
from iris.config._tools import A2aAgentConfig, McpServerConfig, McpServerName, ToolsConfig


class PlatformsConfig(Section):
    api_server: ApiServerConfig = Field(default_factory=ApiServerConfig)
    iris: SocketConfig = Field(default_factory=SocketConfig)
    a2a: A2aConfig = Field(default_factory=A2aConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    whatsapp: WhatsAppConfig = Field(default_factory=WhatsAppConfig)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    homeassistant: HomeAssistantConfig = Field(default_factory=HomeAssistantConfig)


class StoreConfig(Section):
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
    # single: store.url is one Redis primary. cluster: a Redis Cluster (store.url names any
    # node, or store.nodes several). sentinel: the primary store.sentinels call
    # store.sentinel_master, found again after a failover (store.url, if set, gives only the
    # password, database and TLS). See docs/deploy.md.
    mode: Literal["single", "cluster", "sentinel"] = "single"
    nodes: list[str] = Field(default_factory=list[str])
    sentinels: list[str] = Field(default_factory=list[str])
    sentinel_master: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("nodes", "sentinels")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{address!r} is not host:port")
        return value

    @model_validator(mode="after")
    def _mode_settings(self) -> StoreConfig:
        if self.mode == "cluster" and self.url is None and not self.nodes:
            raise ValueError("store.mode cluster needs store.url or store.nodes (host:port)")
        if self.mode == "sentinel" and (not self.sentinels or self.sentinel_master is None):
            raise ValueError(
                "store.mode sentinel needs store.sentinels (host:port) and store.sentinel_master"
            )
        if self.mode != "cluster" and self.nodes:
            raise ValueError("store.nodes is for store.mode cluster")
        if self.mode != "sentinel" and (self.sentinels or self.sentinel_master):
            raise ValueError(
                "store.sentinels and store.sentinel_master are for store.mode sentinel"
            )
        return self

    @property
    def shared(self) -> bool:
        """Is there a Redis every process shares (``store.url``, or a cluster / Sentinel)?"""
        return self.url is not None or self.mode != "single"

    def resolved_path(self) -> Path:
        return Path(self.path).expanduser()


class AttachmentsConfig(Section):
    """``attachments``: what files sent with a message become (``iris.agent.attachments``)."""

    max_bytes: int = Field(default=20_000_000, ge=1024)  # one file as downloaded or sent
    max_text_bytes: int = Field(default=200_000, ge=1)  # a text document attached as text
    # Images larger than this many pixels on their longer edge are downscaled (Pillow).
    max_edge: int = Field(default=2048, ge=64, le=16384)
    # A transcription model (``/v1/audio/transcriptions`` of the model's provider) for voice
    # notes and audio; None: the user is told they were not transcribed.
    transcribe: str | None = None
    timeout: float = Field(default=30.0, gt=0)  # seconds one download or transcription may take


class SchedulesConfig(Section):
    """``schedules``: the chats' scheduled runs (``/remind``, ``/every``)."""

    max_per_chat: int = Field(default=20, ge=0)  # and as many per user, across their chats
    min_interval_s: float = Field(default=60, ge=0)  # the shortest gap between two runs of a rule
    # A run that was due while every process was down: run once at start with a note, or skip.
    missed: Literal["run_once", "skip"] = "run_once"


class Config(Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)
    display: DisplayConfig = Field(default_factory=DisplayConfig)
    server: ServerConfig = Field(default_factory=ServerConfig)
    platforms: PlatformsConfig = Field(default_factory=PlatformsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    attachments: AttachmentsConfig = Field(default_factory=AttachmentsConfig)
    schedules: SchedulesConfig = Field(default_factory=SchedulesConfig)
    mcp_servers: dict[McpServerName, McpServerConfig] = Field(
        default_factory=dict[McpServerName, McpServerConfig]
    )
    # Remote A2A agents, each offered to the model as the tool ``a2a_<name>``.
    a2a_agents: dict[McpServerName, A2aAgentConfig] = Field(
        default_factory=dict[McpServerName, A2aAgentConfig]
    )
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
            min_block_chars=_pick(over.min_block_chars, 400),
            block_idle=_pick(over.block_idle, 3.0),
        )


_T = TypeVar("_T")


def _pick(override: _T | None, default: _T) -> _T:
    return default if override is None else override
