"""The chat-platform adapter interface: what the stream consumer and the runner need of a platform.

One implementation per platform (``TelegramPlatform``, ``DiscordPlatform``, ``SlackPlatform``),
each a thin layer over the platform's real client library with a configurable API base URL.

What the consumer relies on from every adapter:

- One call, one request: ``send``/``edit_message`` never retry or sleep on their own. A 429 /
  flood-control answer raises ``PlatformRateLimited(retry_after)`` at once; the consumer's
  throttle owns waiting and backing off (a library that retries internally would spend the
  chat's budget behind the throttle's back). Disable such retries in the client.
- Any other failure raises ``PlatformError``; ``maybe_landed=True`` when the request may have
  reached the platform (timeout after sending), so the consumer never re-sends it. A chat the
  platform will take nothing in for now raises ``ChatClosed``: nothing more of the reply is tried.
- An edit to identical text ("message is not modified") is success, not an error.
- ``thread`` (from ``IncomingMessage.thread``) goes with every send, edit and typing call.
- In a group, ``IncomingMessage.addressed`` says the message is meant for the bot (the
  runner's group gating, ``platforms.<name>.groups``), with the mention stripped from ``text``.
- ``budget`` is the bot's ``SharedBudget``: one per adapter instance, built from
  ``platforms.<name>.budgets``; the adapter also draws on it for calls outside the throttle
  (typing) and tells it about a platform-wide 429.
- Texts handed to ``send``/``edit_message`` already fit ``capabilities.max_length``; they are
  plain text (no parse mode), so an adapter sends them verbatim.

Native streaming is optional: an adapter that can show a reply natively in some chats has
``native_for(message)`` (which kind, in which thread) and the calls of that kind
(``DraftPlatform``, ``StreamPlatform``); the same one-call-one-request rules hold. A native call
the platform refuses for good (no such method, wrong chat type, missing scope) raises
``NativeRefused``: the reply falls back to edits.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

import aiohttp

from iris.surfaces.chat.budget import RateBudget, SharedBudget

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from iris.state.deliveries import Deliveries
    from iris.surfaces.chat.prompts import Press, Prompt


@dataclass(frozen=True, slots=True)
class Capabilities:
    can_edit: bool
    max_length: int  # in ``length_unit``
    length_unit: Literal["utf16", "chars"]  # Telegram counts UTF-16 code units
    rate: RateBudget  # per private chat / channel
    group_rate: RateBudget | None = None  # per group chat, where stricter (Telegram: 20/min)
    # Answers go out once, whole, whatever the streaming settings (Home Assistant
    # notifications): no preview, no tool progress, never half an answer.
    whole: bool = False


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file sent with a message, as the platform describes it; its bytes are fetched later
    through the platform's file API (``FilePlatform.download``). ``ref`` is the platform's
    handle (a Telegram ``file_id``, a Discord attachment URL, a Slack file id, a WhatsApp
    media id), never shown to the model. ``size`` as the platform reported it (0: not said)."""

    kind: Literal["image", "audio", "file"]
    name: str
    mime: str
    ref: str
    size: int = 0


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    platform: str
    chat_id: str
    user_id: str
    text: str
    user_name: str = ""
    is_group: bool = False
    message_id: str = ""
    # Thread metadata that must go with every send and edit of the reply
    # (Telegram ``message_thread_id``, Slack ``thread_ts``, Discord thread channel).
    thread: Mapping[str, str] = field(default_factory=dict[str, str])
    # In a group: the message addresses the bot (mentions it, replies to one of its messages,
    # or is a command with its name, ``/status@botname``); the mention is already out of
    # ``text``. ``bot_thread``: the thread hangs from a message of the bot (Slack's
    # ``parent_user_id``), so a follow-up there is one to a thread the bot answered in.
    addressed: bool = False
    bot_thread: bool = False
    # Not a message: the person pressed the platform's stop button on the reply being written,
    # on its draft ``draft_id`` (Telegram).
    stop: bool = False
    draft_id: int | None = None
    # Photos, documents, voice notes sent with the text (``iris.surfaces.chat.attachments``).
    attachments: tuple[Attachment, ...] = ()
    # Not a message: the person pressed a button of an approval prompt (``prompts``).
    press: Press | None = None


class PlatformError(Exception):
    """A send/edit failed. ``maybe_landed``: the request may have reached the platform (the
    answer was lost), so re-sending could duplicate the message."""

    def __init__(self, message: str, *, maybe_landed: bool = False) -> None:
        super().__init__(message)
        self.maybe_landed = maybe_landed


class ChatClosed(PlatformError):
    """The platform takes no message in this chat for now (WhatsApp outside the 24-hour
    customer-service window: only templates may be sent until the user writes again). Not
    retried: the reply's remaining messages are dropped, said once in the log."""


class NativeRefused(PlatformError):
    """The platform refused a native-streaming call for this chat: use edits instead."""


class PlatformRateLimited(PlatformError):
    """The platform answered 429 / flood control; do not call again for ``retry_after`` s.

    ``scope``: what the platform limited (``chat``, ``bot``, ``workspace``), or ``local`` when
    Iris held the call itself because the platform's last headers said the bucket was dry."""

    def __init__(
        self, retry_after: float, message: str = "rate limited", *, scope: str = "chat"
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.scope = scope


@contextlib.contextmanager
def aiohttp_failures(platform: str) -> Generator[None]:
    """A request's transport failure as a ``PlatformError`` (for the aiohttp-based adapters).

    A refused connection never reached the platform; a timeout or a connection that broke
    after the request went out may have posted it (``maybe_landed``)."""
    try:
        yield
    except TimeoutError:
        raise PlatformError(f"{platform}: no answer in time", maybe_landed=True) from None
    except aiohttp.ClientConnectorError as exc:
        raise PlatformError(f"{platform}: cannot connect: {exc}") from None
    except (aiohttp.ClientError, OSError) as exc:
        raise PlatformError(f"{platform}: connection lost: {exc}", maybe_landed=True) from None


OnMessage = Callable[[IncomingMessage], Awaitable[None]]

NativeKind = Literal["draft", "stream"]


@dataclass(frozen=True, slots=True)
class Native:
    """How a platform shows a reply natively in one chat: ``kind``, and the thread the whole
    reply goes to (Slack streams need one: a DM reply streams under the person's message)."""

    kind: NativeKind
    thread: Mapping[str, str] = field(default_factory=dict[str, str])


@dataclass(frozen=True, slots=True)
class Task:
    """One tool call as a native timeline shows it (Slack ``task_update`` chunks)."""

    id: str
    title: str
    status: Literal["in_progress", "complete", "error"]
    details: str = ""  # the call's latest progress note, under its title


class ChatPlatform(Protocol):
    name: str  # "telegram" | "discord" | "slack" | "whatsapp" | "homeassistant"
    capabilities: Capabilities
    # The bot's limits shared by all its chats (bot-wide, global, per method): every chat's
    # throttle takes a seat at it. An empty budget limits nothing beyond each chat's own.
    budget: SharedBudget

    async def connect(self, on_message: OnMessage) -> None:
        """Start receiving; call ``on_message`` for each user message. Returns once connected."""
        ...

    async def disconnect(self) -> None: ...

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """Send a new message; return its platform message id."""
        ...

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        """Replace the text of a message this bot sent."""
        ...

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        """Show the typing indicator (platforms expire it after a few seconds)."""
        ...


class FilePlatform(Protocol):
    """A platform whose messages carry files (Telegram, Discord, Slack, WhatsApp)."""

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The file's bytes through the platform's file API; ``PlatformError`` when it cannot
        be had, or is over ``max_bytes`` (read no further than that)."""
        ...


class QuotingPlatform(Protocol):
    """A platform whose messages can quote one of the user's (WhatsApp ``context``)."""

    async def send_quoting(
        self, chat_id: str, text: str, quoted: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """``send``, the message shown as a reply to the user's message ``quoted``."""
        ...


class DraftPlatform(Protocol):
    """Telegram ``sendMessageDraft``: an animated preview in a private chat, not a message."""

    async def send_draft(
        self,
        chat_id: str,
        draft_id: int,
        text: str,
        *,
        thread: Mapping[str, str] | None = None,
        can_stop: bool = False,
    ) -> None:
        """Show (or replace) the draft ``draft_id``; empty text shows "Thinking…"."""
        ...


class StreamPlatform(Protocol):
    """Slack ``chat.startStream`` / ``appendStream`` / ``stopStream``: a message that grows by
    deltas (``STREAM_APPEND_MAX`` characters at most per call)."""

    async def start_stream(
        self,
        chat_id: str,
        text: str,
        *,
        thread: Mapping[str, str] | None = None,
        tasks: Sequence[Task] = (),
    ) -> str:
        """Open a streamed message with ``text``; return its message id."""
        ...

    async def append_stream(
        self, chat_id: str, message_id: str, text: str, *, tasks: Sequence[Task] = ()
    ) -> None: ...

    async def stop_stream(
        self, chat_id: str, message_id: str, text: str = "", *, tasks: Sequence[Task] = ()
    ) -> None:
        """Append the last ``text`` and end the stream: the message is final."""
        ...


class ApprovalPlatform(Protocol):
    """A platform that shows approval prompts with buttons (``prompts``); a press arrives as
    an ``IncomingMessage`` with ``press``. The one-call-one-request rules hold."""

    # The most text a prompt message takes, in ``capabilities.length_unit``.
    approval_limit: int

    async def send_prompt(
        self, chat_id: str, prompt: Prompt, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """Send ``prompt.text`` with its buttons; return the message id."""
        ...

    async def send_as_written(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """Send ``text`` shown exactly as written (no markdown): a part of a long command."""
        ...

    async def close_prompt(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        """Replace the prompt's text with ``text`` and take its buttons away."""
        ...


@runtime_checkable
class WebhookPlatform(Protocol):
    """A platform whose messages come to a webhook ``iris serve`` serves (WhatsApp): it
    receives in every process, so it is connected everywhere and never polled; a delivery may
    come twice, to any process, so the server gives it where taken ones are kept."""

    deliveries: Deliveries

    def routes(self) -> list[BaseRoute]:
        """The webhook's routes, mounted beside the API's."""
        ...


def approval_platform(platform: ChatPlatform) -> ApprovalPlatform | None:
    """The platform as one that shows approval prompts with buttons, if it is one."""
    if callable(getattr(platform, "send_prompt", None)) and callable(
        getattr(platform, "close_prompt", None)
    ):
        return cast(ApprovalPlatform, platform)
    return None
