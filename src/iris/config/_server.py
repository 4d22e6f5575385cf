"""The ``server`` section (the bind, the HTTP guards, ``/metrics``), ``telemetry``, and the
sections of what the server answers itself: ``platforms.api_server``, ``platforms.iris`` (the
socket and its Web Push) and ``platforms.a2a``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from iris.config._section import Section
from iris.proxies import parse_networks


class MetricsConfig(Section):
    """``GET /metrics`` (Prometheus text) and the ``/status`` page; off by default."""

    enabled: bool = False
    # Bearer token a scrape (and the status page) must send; None: only from loopback clients
    # when the server is bound to loopback (see docs/observability.md).
    token: str | None = None


class TelemetryConfig(Section):
    """OpenTelemetry traces by OTLP/HTTP; off unless ``otlp_endpoint`` is set."""

    otlp_endpoint: str | None = None  # a collector's base URL, e.g. http://127.0.0.1:4318

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (OTLP/HTTP)")
        return value


class ServerConfig(Section):
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
    # Reverse proxies (addresses or CIDRs, "*" any) whose X-Forwarded-For / Forwarded name the
    # client, for the auth-failure throttle, the logs and the metrics (``iris.proxies``).
    trusted_proxies: list[str] = Field(default_factory=list[str])
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                parse_networks([entry])
            except ValueError:
                raise ValueError(f"{entry!r} is not an address, a CIDR network or '*'") from None
        return value


class ApiServerConfig(Section):
    enabled: bool = True
    api_key: str | None = None
    max_concurrent: int = Field(default=16, ge=1)
    # Responses turns held for an mcp_approval_response at once; past it a new one is a 429.
    max_held_turns: int = Field(default=64, ge=1)
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    # Per-request caps, checked before any work: OpenAI's own cap on `messages` is 2048; a
    # million characters of text is past every model's context window.
    max_messages: int = Field(default=2048, ge=1)
    max_input_chars: int = Field(default=1_000_000, ge=1)
    # Bytes of items one stored conversation (/v1/conversations) may hold; past it adding items
    # or a response that extends it is a 400 (conversation_too_large).
    max_conversation_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    # Who gets Iris's own tools (terminal, read_file, MCP): ``on_request`` only a request for
    # the model ``iris-agent``; ``always`` every request without tools of its own; ``never``
    # nobody. Never a request with ``response_format`` or an app's background task (an Open
    # WebUI title), and never without ``api_key``. (``true``/``false``: ``always``/``never``.)
    agent_tools: Literal["on_request", "always", "never"] = "on_request"

    @field_validator("agent_tools", mode="before")
    @classmethod
    def _agent_tools_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return "always" if value else "never"
        return value

    # Background responses: the events of an ended one are kept this many seconds for
    # resumed streams, and at most this many ended ones (the stored response outlives both).
    background_ttl: float = Field(default=3600.0, gt=0)
    background_keep: int = Field(default=1000, ge=1)


class PushConfig(Section):
    """``platforms.iris.push``: Web Push to the web app (VAPID keys in Iris's private files)."""

    enabled: bool = True


class SocketConfig(Section):
    enabled: bool = True
    tokens: list[str] = Field(default_factory=list[str])
    max_text: int = Field(default=32_000, ge=1)
    log_max_frames: int = Field(default=5_000, ge=10)
    log_max_age: float = Field(default=24 * 3600, gt=0)
    queue_size: int = Field(default=256, ge=8)
    # Running turns one device token may have at once, across all its chats.
    max_turns_per_token: int = Field(default=4, ge=1)
    push: PushConfig = Field(default_factory=PushConfig)


class A2aSkill(Section):
    """One skill the agent card names (``platforms.a2a.skills``)."""

    id: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    tags: list[str] = Field(default_factory=list[str])
    examples: list[str] = Field(default_factory=list[str])


class A2aConfig(Section):
    """The A2A server (``/.well-known/agent-card.json``, ``POST /a2a``)."""

    enabled: bool = False
    # The bearer key A2A clients send; None: the API server's key (platforms.api_server).
    api_key: str | None = None
    name: str = "Iris"
    description: str = "A streaming-first AI agent with tools."
    # The address clients reach this server at (the card's URL); None: server.host:port.
    url: str | None = None
    skills: list[A2aSkill] = Field(default_factory=list[A2aSkill])
    # Push callbacks go to HTTPS URLs on public addresses or to loopback; a private network
    # address only when it falls in one of these (CIDRs, e.g. 10.0.0.0/8).
    push_allow: list[str] = Field(default_factory=list[str])

    @field_validator("push_allow")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        import ipaddress

        for entry in value:
            ipaddress.ip_network(entry, strict=False)  # a ValueError names the bad entry
        return value
