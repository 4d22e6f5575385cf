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
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from iris.errors import ConfigError
from iris.private import private_dir, write_private
from iris.proxies import parse_networks

Surface = Literal[
    "cli",
    "telegram",
    "discord",
    "slack",
    "whatsapp",
    "matrix",
    "homeassistant",
    "api_server",
    "iris",
]
ToolProgressMode = Literal["off", "new", "all", "verbose"]
ReasoningStyle = Literal["code", "blockquote", "subtext"]
# How a chat reply is shown while it streams: the platform's native preview (Telegram drafts in
# private chats, Slack streams in threads and DMs), edits of a posted message, paragraph-sized
# messages as it forms (``blocks``: what ``auto`` means where a platform cannot edit), or one
# message at the end (``final``).
Transport = Literal["auto", "native", "edit", "blocks", "final"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ExtraParams(_Section):
    """``model.extra_params``: the extension parameters (``top_k``, ``min_p``, OpenRouter's
    ``provider``...) this endpoint takes besides its kind's list (``iris.llm.params``).
    ``allow``: more names passed on as sent; ``deny``: names refused with a 400; ``set``: values
    sent on every request (a client's own value replaces one, unless its name is denied)."""

    allow: list[str] = Field(default_factory=list[str])
    deny: list[str] = Field(default_factory=list[str])
    set: dict[str, Any] = Field(default_factory=dict[str, Any])


class ModelEndpoint(_Section):
    provider: Literal["chat_completions", "responses", "local"] = "chat_completions"
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    name: str = ""
    timeout: float = 60.0
    extra_params: ExtraParams = Field(default_factory=ExtraParams)

    @model_validator(mode="after")
    def _extras_fit(self) -> ModelEndpoint:
        extra = self.extra_params
        if self.provider == "responses" and (extra.allow or extra.set):
            raise ValueError(
                "extra_params: a responses provider (OpenAI's Responses API) takes no "
                "extension parameters; allow and set are for chat_completions and local"
            )
        return self

    def resolved_api_key(self) -> str:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env, "")
        return os.environ.get("OPENAI_API_KEY", "") or "not-needed"


class LocalModelConfig(_Section):
    """``model.local``: the embedded model's llama.cpp server (``iris.llm.local``)."""

    # Turns it generates at once (continuous batching): each slot keeps its own context window.
    # 2 by default: on 2 cores a second chat starts at once instead of waiting for the first.
    parallel: int = Field(default=2, ge=1, le=64)


class ModelConfig(ModelEndpoint):
    provider: Literal["chat_completions", "responses", "local"] = "local"
    fallback: list[ModelEndpoint] = Field(default_factory=list[ModelEndpoint])
    # How long a model that rejected stream=True is asked without streaming.
    stream_reject_ttl: float = 600.0
    # Embedded model: path to a GGUF file; empty means the packaged Gemma 3 270M.
    local_path: str = ""
    local: LocalModelConfig = Field(default_factory=LocalModelConfig)
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
    # The model sees image content parts. Off by default and always for the embedded model:
    # an image sent to a model that cannot see it is an error or silently ignored upstream.
    vision: bool = False


class StreamingConfig(_Section):
    enabled: bool = False
    cli: bool | None = None
    telegram: bool | None = None
    discord: bool | None = None
    slack: bool | None = None
    whatsapp: bool | None = None
    matrix: bool | None = None
    homeassistant: bool | None = None  # never streams: its answers go out whole
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
    # Blocks transport: a block goes once a paragraph (or code block) is complete and this many
    # characters gathered, or after ``block_idle`` seconds of silence.
    min_block_chars: int | None = Field(default=None, ge=0)
    block_idle: float | None = Field(default=None, gt=0)


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
    min_block_chars: int = 400
    block_idle: float = 3.0


class MetricsConfig(_Section):
    """``GET /metrics`` (Prometheus text) and the ``/status`` page; off by default."""

    enabled: bool = False
    # Bearer token a scrape (and the status page) must send; None: only from loopback clients
    # when the server is bound to loopback (see docs/observability.md).
    token: str | None = None


class TelemetryConfig(_Section):
    """OpenTelemetry traces by OTLP/HTTP; off unless ``otlp_endpoint`` is set."""

    otlp_endpoint: str | None = None  # a collector's base URL, e.g. http://127.0.0.1:4318

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL (OTLP/HTTP)")
        return value


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


class ApiServerConfig(_Section):
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


class PushConfig(_Section):
    """``platforms.iris.push``: Web Push to the web app (VAPID keys in Iris's private files)."""

    enabled: bool = True


class SocketConfig(_Section):
    enabled: bool = True
    tokens: list[str] = Field(default_factory=list[str])
    max_text: int = Field(default=32_000, ge=1)
    log_max_frames: int = Field(default=5_000, ge=10)
    log_max_age: float = Field(default=24 * 3600, gt=0)
    queue_size: int = Field(default=256, ge=8)
    # Running turns one device token may have at once, across all its chats.
    max_turns_per_token: int = Field(default=4, ge=1)
    push: PushConfig = Field(default_factory=PushConfig)


# Seconds added to every budget's window (``platforms.<p>.budgets.<name>.margin``): calls leave
# Iris paced as ``calls`` per ``per + margin`` seconds, so two calls sent one interval apart
# still arrive one interval apart when the first took up to this much longer to get there.
# Measured on the Telegram stand-in over loopback, 20 chats at once on 2 cores: arrival delays
# spread by up to 60 ms (176 ms with the rest of the benchmark loading the machine;
# bench/edit_cadence.py, "split reply"). A chat's own budget also counts each call from its
# answer (iris.surfaces.chat.throttle), which covers any spread between its calls; the margin
# separates calls whose answers came back at once, and on the bot's shared limits (counted
# from the send) adds to the room their defaults leave under the platform's figure. 50 ms:
# most of the spread seen, at 5 % of a private chat's pace and of the bot-wide one.
BUDGET_MARGIN = 0.05


class Rate(_Section):
    """A call budget: at most ``calls`` calls in any ``per`` seconds (paced over
    ``per + margin``)."""

    calls: int = Field(ge=1)
    per: float = Field(gt=0)
    margin: float = Field(default=BUDGET_MARGIN, ge=0, le=10)


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
    # chat.delete, Tier 3: about 50 a minute per workspace (fresh final, surplus messages)
    delete: Rate = Field(default_factory=lambda: Rate(calls=45, per=60.0))


# Who the bot answers in a group, channel or thread (``platforms.<p>.groups``); private chats
# always answer. ``mention``: a message that mentions the bot, replies to one of its messages or
# is a command addressed to it (``/status@botname``); in a thread the bot answered in,
# follow-ups too unless ``strict_mention``. ``all``: every message of an allowed user.
# ``free_channels``: chat (or Discord thread channel) ids answered as with ``all``.
class GroupsConfig(_Section):
    respond: Literal["mention", "all"] = "mention"
    free_channels: list[str] = Field(default_factory=list[str])
    strict_mention: bool = False

    @field_validator("free_channels", mode="before")
    @classmethod
    def _ids(cls, value: object) -> object:
        # Telegram's group ids are numbers in YAML; ids compare as text.
        if isinstance(value, list):
            return [str(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
        return value


# Messages that wait for a turn slot per platform (over server.max_turns or max_turns_per_user)
# before the busy note.
QUEUE_SIZE = 100


class _ChatPlatformConfig(_Section):
    """The keys every chat platform's section has (Telegram, Discord, Slack, WhatsApp)."""

    enabled: bool = False
    max_text: int = Field(default=32_000, ge=1)  # characters of one message, like the iris socket's
    # Seconds of quiet that end a burst: messages of one chat closer than this are one turn.
    debounce: float = Field(default=1.5, ge=0, le=60)
    # Running turns one user may have at once, across all their chats and threads.
    max_turns_per_user: int = Field(default=2, ge=1)
    queue_size: int = Field(default=QUEUE_SIZE, ge=0)  # waiting for a turn; 0: busy at once


class _GroupPlatformConfig(_ChatPlatformConfig):
    """The keys the platforms with groups and user names add (Telegram, Discord, Slack)."""

    # allowed_users by user id; user names too only with this (a name can change hands).
    match_usernames: bool = False
    groups: GroupsConfig = Field(default_factory=GroupsConfig)


class TelegramConfig(_GroupPlatformConfig):
    token: str = ""
    base_url: str = "https://api.telegram.org"
    allowed_users: list[str | int] = Field(default_factory=list[str | int])
    poll_timeout: float = Field(default=10.0, ge=0)
    budgets: TelegramBudgets = Field(default_factory=TelegramBudgets)


class DiscordConfig(_GroupPlatformConfig):
    token: str = ""
    base_url: str = "https://discord.com/api/v10"
    allowed_users: list[str | int] = Field(default_factory=list[str | int])
    budgets: DiscordBudgets = Field(default_factory=DiscordBudgets)


class SlackConfig(_GroupPlatformConfig):
    bot_token: str = ""
    app_token: str = ""
    base_url: str = "https://slack.com/api/"
    allowed_users: list[str] = Field(default_factory=list[str])
    budgets: SlackBudgets = Field(default_factory=SlackBudgets)


class WhatsAppBudgets(_Section):
    # documented pair rate limit: one message every 6 seconds to the same user (error 131056)
    pair: Rate = Field(default_factory=lambda: Rate(calls=1, per=6.0))
    # documented throughput: 80 messages a second per business phone number
    number: Rate = Field(default_factory=lambda: Rate(calls=70, per=1.0))


class WhatsAppConfig(_ChatPlatformConfig):
    """The WhatsApp Business Cloud API: replies through the Graph API, messages in through the
    webhook at ``/platforms/whatsapp/webhook``."""

    base_url: str = "https://graph.facebook.com/v21.0"
    phone_number_id: str = ""
    access_token: str = ""
    access_token_env: str | None = None
    # The app secret signs every webhook POST (X-Hub-Signature-256); without it none is taken.
    app_secret: str = ""
    app_secret_env: str | None = None
    verify_token: str = ""  # Meta's webhook verification (GET hub.verify_token)
    # Seconds: a message whose ``timestamp`` is older is not answered (Meta redelivers for days;
    # a signed body replayed later is refused); each message id is taken once within it.
    max_age: float = Field(default=3600.0, gt=0)
    # Phone numbers only: a profile name is anyone's to choose (no match_usernames here).
    allowed_users: list[str] = Field(default_factory=list[str])
    budgets: WhatsAppBudgets = Field(default_factory=WhatsAppBudgets)

    @field_validator("allowed_users", mode="before")
    @classmethod
    def _phone_numbers(cls, value: object) -> object:
        # "+1 555-0100" and "15550100" are one number: WhatsApp's ids are the digits alone.
        if isinstance(value, list):
            return [re.sub(r"[\s\-().+]", "", str(v)) for v in value]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
        return value

    def resolved_access_token(self) -> str:
        if self.access_token:
            return self.access_token
        return os.environ.get(self.access_token_env, "") if self.access_token_env else ""

    def resolved_app_secret(self) -> str:
        if self.app_secret:
            return self.app_secret
        return os.environ.get(self.app_secret_env, "") if self.app_secret_env else ""


class MatrixBudgets(_Section):
    # Synapse's default ``rc_message``: 0.2 events a second with a burst of 10, per user (the
    # bot), edits and reactions included; a homeserver that lifts the bot's limit
    # (``override_ratelimit``) lets these go higher.
    bot: Rate = Field(default_factory=lambda: Rate(calls=10, per=50.0))
    # per room: about one event a second, as people read it
    room: Rate = Field(default_factory=lambda: Rate(calls=1, per=1.0))


class MatrixConfig(_GroupPlatformConfig):
    """A Matrix bot account on any homeserver (Synapse, Conduit/continuwuity, matrix.org): the
    client-server API over long-polled ``/sync``. Encrypted rooms are not read."""

    homeserver: str = "http://127.0.0.1:8008"
    user_id: str = ""  # @iris:example.org
    access_token: str = ""
    access_token_env: str | None = "MATRIX_TOKEN"
    # Without a token: logged in once with the password, the token kept in Iris's private files.
    password: str = ""
    password_env: str | None = None
    allowed_users: list[str] = Field(default_factory=list[str])  # Matrix ids, exact
    rooms: list[str] = Field(default_factory=list[str])  # joined at start (ids or aliases)
    auto_join: bool = True  # join a room an allowed user invites the bot to
    sync_timeout: float = Field(default=30.0, ge=0, le=300)  # seconds a /sync long-polls
    budgets: MatrixBudgets = Field(default_factory=MatrixBudgets)

    def resolved_access_token(self) -> str:
        if self.access_token:
            return self.access_token
        return os.environ.get(self.access_token_env, "") if self.access_token_env else ""

    def resolved_password(self) -> str:
        if self.password:
            return self.password
        return os.environ.get(self.password_env, "") if self.password_env else ""


class HomeAssistantWatch(_Section):
    """``platforms.homeassistant.watch``: the state changes that become messages to the agent.

    An entity is watched when ``entities`` (ids or globs: ``binary_sensor.front_*``) or
    ``domains`` name it and ``ignore`` (ids or globs) does not; both empty: nothing is."""

    entities: list[str] = Field(default_factory=list[str])
    domains: list[str] = Field(default_factory=list[str])
    ignore: list[str] = Field(default_factory=list[str])
    # Seconds after a message about an entity before the next one about it (changes in
    # between are one message: the first old state, the newest new one).
    cooldown: float = Field(default=30.0, ge=0)
    attributes: bool = False  # an attribute change alone (the state the same) counts


class HomeAssistantVoice(_Section):
    """``platforms.homeassistant.voice``: Assist's conversation agent on the API server."""

    model: str = "iris-voice"  # the model id /v1/models lists for speech
    # Seconds without an answer begun before the spoken reply says it will come later.
    ack_after: float = Field(default=8.0, gt=0)
    # The iris chat (``platforms.iris``, e.g. ``main``) whose devices show a voice turn's
    # approvals (None: a tool that needs one is refused in one spoken sentence).
    owner_chat: str | None = None
    # The satellite that speaks an answer that came after the spoken reply ended
    # (``assist_satellite.<name>``; None: it comes as a notification).
    satellite: str | None = None
    # Assist's tools (names or globs: ``HassUnlock``, ``Hass*``) that wait for a person's yes
    # on the owner chat's devices; none by default (see docs/platforms.md).
    approval: list[str] = Field(default_factory=list[str])

    @field_validator("satellite")
    @classmethod
    def _satellite(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"assist_satellite\.[a-z0-9_]+", value):
            raise ValueError("must be an assist_satellite.<name> entity id")
        return value


# The one user the house is: every message of the platform comes from it.
HOUSE_USER = "homeassistant"


class HomeAssistantConfig(_ChatPlatformConfig):
    """Home Assistant: state changes in over its WebSocket API, answers out as notifications."""

    url: str = "http://homeassistant.local:8123"
    token: str = ""  # a long-lived access token (Home Assistant: your profile, Security)
    token_env: str | None = "HASS_TOKEN"
    watch: HomeAssistantWatch = Field(default_factory=HomeAssistantWatch)
    # ``persistent_notification`` or a ``notify.<service>`` (``notify.mobile_app_pixel``).
    notify: str = "persistent_notification"
    title: str = "Iris"  # the notifications' title
    # Entities (ids or globs) and domains the agent's house tools may read and act on.
    expose: list[str] = Field(default_factory=list[str])
    voice: HomeAssistantVoice = Field(default_factory=HomeAssistantVoice)

    @field_validator("notify")
    @classmethod
    def _service(cls, value: str) -> str:
        if value != "persistent_notification" and not re.fullmatch(r"notify\.[a-z0-9_]+", value):
            raise ValueError("must be persistent_notification or notify.<service>")
        return value

    @property
    def allowed_users(self) -> list[str]:
        """The house is one user: its messages are always let in."""
        return [HOUSE_USER]

    def resolved_token(self) -> str:
        if self.token:
            return self.token
        return os.environ.get(self.token_env, "") if self.token_env else ""


class A2aSkill(_Section):
    """One skill the agent card names (``platforms.a2a.skills``)."""

    id: str = Field(min_length=1, max_length=64)
    name: str = Field(min_length=1, max_length=128)
    description: str = ""
    tags: list[str] = Field(default_factory=list[str])
    examples: list[str] = Field(default_factory=list[str])


class A2aConfig(_Section):
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


class A2aAgentConfig(_Section):
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


class PlatformsConfig(_Section):
    api_server: ApiServerConfig = Field(default_factory=ApiServerConfig)
    iris: SocketConfig = Field(default_factory=SocketConfig)
    a2a: A2aConfig = Field(default_factory=A2aConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    whatsapp: WhatsAppConfig = Field(default_factory=WhatsAppConfig)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    homeassistant: HomeAssistantConfig = Field(default_factory=HomeAssistantConfig)


# What the terminal tool's commands see of Iris's environment: enough for a shell to work.
TERMINAL_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TERM", "TZ")
_SECRET = re.compile(
    r"^(IRIS|HERMES)_|(^|_)(KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)"
)


def looks_secret(name: str) -> bool:
    """Does an environment variable name look like it holds a key or an Iris setting?"""
    return bool(_SECRET.search(name.upper()))


class Bind(_Section):
    """A folder (or file) of the host a sandboxed command sees at the same path."""

    path: str
    mode: Literal["ro", "rw"] = "ro"

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not Path(value).expanduser().is_absolute():
            raise ValueError("must be an absolute path (or start with ~)")
        return value


class SandboxLimits(_Section):
    """``tools.terminal.limits``: the rlimits every sandboxed command runs under."""

    cpu_s: int = Field(default=60, ge=1)  # CPU seconds (RLIMIT_CPU)
    memory_mb: int = Field(default=1024, ge=16)  # address space (RLIMIT_AS)
    processes: int = Field(default=64, ge=2)  # processes of the sandbox (RLIMIT_NPROC)
    file_mb: int = Field(default=256, ge=1)  # the largest file it may write (RLIMIT_FSIZE)
    open_files: int = Field(default=256, ge=16)  # descriptors per process (RLIMIT_NOFILE)


class TerminalTool(_Section):
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


class ReadFileTool(_Section):
    max_bytes: int = Field(default=64_000, ge=100)
    # Folders read_file may read from (symlinks resolved); empty means the terminal cwd.
    roots: list[str] = Field(default_factory=list[str])


class ApprovalConfig(_Section):
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


class McpLimits(_Section):
    """What MCP servers may hand the model (``tools.mcp``); past a cap a tool or a result is
    dropped, logged once per server."""

    # Tools offered in all (the built-ins included; OpenAI takes 128) and per server.
    max_tools: int = Field(default=128, ge=1, le=4096)
    max_tools_per_server: int = Field(default=128, ge=1, le=4096)
    # Bytes of one tool's input schema (as JSON).
    max_schema_bytes: int = Field(default=16_384, ge=256)
    # Bytes of one message from a server (a call's result): read through, never held whole.
    max_result_bytes: int = Field(default=4_194_304, ge=65_536)


class ToolsConfig(_Section):
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


class McpSampling(_Section):
    """Whether a server may ask Iris's model (MCP ``sampling/createMessage``): off by default;
    at most ``max_per_minute`` requests; ``model`` (default: ``model.name``), without tools."""

    enabled: bool = False
    max_per_minute: int = Field(default=10, ge=1)
    model: str | None = None


class McpServerConfig(_Section):
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


def _check_mcp(config: Config) -> None:
    """Every MCP entry of tools.enabled names a configured server, and no server's name starts
    with another's and ``_`` (``a`` and ``a_b``: a's tool ``b_c`` and a_b's tool ``c`` would
    both be ``mcp_a_b_c``)."""
    names = sorted(config.mcp_servers)
    for short, long in ((a, b) for a in names for b in names if b.startswith(f"{a}_")):
        raise ConfigError(
            f"{config.source + ': ' if config.source else ''}config key 'mcp_servers': the "
            f"server names {short!r} and {long!r} clash (mcp_{long}_x could be a tool of "
            f"either); rename one, e.g. {long.replace('_', '-')!r}"
        )
    for entry in config.tools.enabled:
        if entry.startswith("mcp_") and not any(
            entry.startswith(f"mcp_{name}_") for name in config.mcp_servers
        ):
            raise ConfigError(
                f"{config.source + ': ' if config.source else ''}config key 'tools.enabled': "
                f"{entry!r} names no server of mcp_servers"
            )


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


class AttachmentsConfig(_Section):
    """``attachments``: what files sent with a message become (``iris.agent.attachments``)."""

    max_bytes: int = Field(default=20_000_000, ge=1024)  # one file as downloaded or sent
    max_text_bytes: int = Field(default=200_000, ge=1)  # a text document attached as text
    # Images larger than this many pixels on their longer edge are downscaled (Pillow).
    max_edge: int = Field(default=2048, ge=64, le=16384)
    # A transcription model (``/v1/audio/transcriptions`` of the model's provider) for voice
    # notes and audio; None: the user is told they were not transcribed.
    transcribe: str | None = None
    timeout: float = Field(default=30.0, gt=0)  # seconds one download or transcription may take


class SchedulesConfig(_Section):
    """``schedules``: the chats' scheduled runs (``/remind``, ``/every``)."""

    max_per_chat: int = Field(default=20, ge=0)  # and as many per user, across their chats
    min_interval_s: float = Field(default=60, ge=0)  # the shortest gap between two runs of a rule
    # A run that was due while every process was down: run once at start with a note, or skip.
    missed: Literal["run_once", "skip"] = "run_once"


class Config(_Section):
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
  # cli: true                      # per-surface overrides: cli, telegram, discord, slack, whatsapp, matrix, api_server, iris
  # edit_interval: 1.5             # seconds between message edits on chat platforms
  # min_tokens: 20                 # deltas before the first visible message on chat platforms

# display:
#   show_reasoning: false
#   reasoning_style: code          # code | blockquote | subtext
#   tool_progress: all             # off | new | all | verbose
#   platforms:                     # per chat platform: streaming, edit_interval, ...
#     telegram: {transport: auto}  # auto | native | edit | blocks | final (drafts in private chats)
#     whatsapp: {transport: blocks}  # blocks | final: platforms that cannot edit

# server: {host: 127.0.0.1, port: 8642, allowed_hosts: [], cors_origins: [], max_turns: 32}
# platforms:
#   api_server: {enabled: true, api_key: null, max_concurrent: 16, agent_tools: on_request}
#   iris: {enabled: true, tokens: [change-me]}
# tools:
#   enabled: [terminal, read_file]
#   terminal: {timeout: 60, env: [PATH, LANG]}   # env: what commands see
#     # sandbox: auto                # auto (bubblewrap, else no terminal) | bwrap | none (host)
#     # network: false               # true: the host's network, loopback included
#     # binds: [{path: /srv/data, mode: ro}]   # host folders a command sees (ro | rw)
#   read_file: {roots: ["."]}      # folders read_file may read; default: the terminal cwd
# mcp_servers:                     # MCP tool servers (docs/tools.md); tools: mcp_<server>_<tool>
#   files: {command: npx, args: ["-y", "@modelcontextprotocol/server-filesystem", "/some/dir"]}
#   search: {url: "http://127.0.0.1:9000/mcp", headers: {}}
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
    _check_mcp(config)
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
    got = err.get("input")
    # A whole section is not echoed: it may hold keys (an MCP server's env or headers).
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{where}config key '{key}': {err['msg']}{shown}"
