"""The chat platforms' sections (``platforms.telegram`` … ``platforms.homeassistant``): the
keys they all have, who is answered in a group, and each platform's call budgets."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import Field, field_validator

from iris.config._section import Section

# An iris chat's id, as a device opens it (``platforms.iris``; the wire's ``ChatId``).
CHAT_ID = r"[A-Za-z0-9._:@-]{1,128}"

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


class Rate(Section):
    """A call budget: at most ``calls`` calls in any ``per`` seconds (paced over
    ``per + margin``)."""

    calls: int = Field(ge=1)
    per: float = Field(gt=0)
    margin: float = Field(default=BUDGET_MARGIN, ge=0, le=10)


# Defaults from each platform's documentation, a little under the documented figure where the
# limit is shared by the whole bot: calls leave Iris evenly spaced but reach the platform with
# network jitter, and the platform counts arrivals.
class TelegramBudgets(Section):
    # documented: about 30 messages a second per bot
    bot: Rate = Field(default_factory=lambda: Rate(calls=25, per=1.0))
    # about one message a second per chat
    private_chat: Rate = Field(default_factory=lambda: Rate(calls=1, per=1.0))
    # 20 messages a minute per group
    group_chat: Rate = Field(default_factory=lambda: Rate(calls=20, per=60.0))


class DiscordBudgets(Section):
    # documented: 50 requests a second per bot (global)
    bot: Rate = Field(default_factory=lambda: Rate(calls=40, per=1.0))
    # messages per channel; the headers may say stricter
    channel: Rate = Field(default_factory=lambda: Rate(calls=5, per=5.0))


class SlackBudgets(Section):
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
class GroupsConfig(Section):
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


class _ChatPlatformConfig(Section):
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


class WhatsAppBudgets(Section):
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


class MatrixBudgets(Section):
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


class HomeAssistantWatch(Section):
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


class HomeAssistantVoice(Section):
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

    @field_validator("owner_chat")
    @classmethod
    def _owner_chat(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(CHAT_ID, value):
            raise ValueError(f"must be an iris chat id ({CHAT_ID}), as a device opens it")
        return value

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
