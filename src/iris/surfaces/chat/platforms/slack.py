"""The Slack adapter: Web API sends and edits through slack-sdk; receiving over Socket Mode.

- ``send`` is ``chat.postMessage`` (its ``ts`` is the message id), ``edit_message`` is
  ``chat.update``; both carry ``thread_ts`` when the reply belongs to a thread. Slack limits
  each method: ``chat.postMessage`` about once a second per channel (each chat's throttle),
  ``chat.update`` (Tier 3) about 50 a minute for the whole workspace (``budget``, shared by
  every channel: ``platforms.slack.budgets``); each stream method (Tier 4) has a budget of its
  own (``budgets.stream``), so streamed replies do not wait for ``chat.update``'s, and so does
  ``chat.delete`` (Tier 3, ``budgets.delete``: a fresh final's preview, a surplus message).
- Typing: the Web API has no typing indicator for bots. In a thread, ``send_typing`` sets the
  AI-assistant status (``assistant.threads.setStatus``, "is thinking…") until the reply's
  first post, which clears it (see ``_ThinkingStatus``); outside threads it does nothing. An
  app or thread that refuses the status is not asked again.
- Receiving: ``message`` events of the Events API arrive over Socket Mode (the app-level
  token); each envelope is acknowledged before the runner sees the message, and a redelivered
  event is handed over only once. ``app_mention`` events (an app subscribed to mentions only)
  are messages too; with both subscriptions Slack sends both for one message, handed over once
  (by channel and ``ts``).
- Groups: in a channel a message addresses the bot when it mentions it (``<@U…>``, which is
  cut from the text, or an ``app_mention``); a thread whose parent message is the bot's
  (``parent_user_id``) counts as a thread the bot answered in.
- slack-sdk's retry handlers are off: one call, one request (a retried ``chat.postMessage``
  after a dropped connection could post the reply twice).
- Native streaming (``native_for``): in a thread, or in a DM (under the person's message:
  ``chat.startStream`` needs a ``thread_ts``), a reply streams with ``chat.startStream`` /
  ``chat.appendStream`` / ``chat.stopStream`` (Tier 4), text as escaped ``markdown_text``
  deltas and tool calls as ``task_update`` chunks. Any refusal of ``startStream`` is
  ``NativeRefused``; stopping a stream that already ended is success.
- Approval prompts (``prompts``): a Block Kit message, the prompt's text as a ``plain_text``
  section (3000 characters at most: shown as written, no mrkdwn) and an ``actions`` block of
  three buttons; a press arrives over Socket Mode as an ``interactive`` envelope of type
  ``block_actions`` (acknowledged first, like every envelope). A press that changed nothing is
  answered with an ephemeral message to the presser (``chat.postEphemeral``); closing the
  prompt is a ``chat.update`` with the section alone.
"""

from __future__ import annotations

import html
import logging
import re
import urllib.parse
from collections import OrderedDict
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar, cast

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from iris.config import SlackConfig
from iris.surfaces.chat.budget import CallKind, Limit, SharedBudget, rate_budget, whole_chat
from iris.surfaces.chat.downloads import read_capped
from iris.surfaces.chat.platforms.base import (
    Attachment,
    Capabilities,
    IncomingMessage,
    Native,
    NativeRefused,
    OnMessage,
    PlatformError,
    PlatformRateLimited,
    Task,
    aiohttp_failures,
)
from iris.surfaces.chat.prompts import Press, Prompt, is_button

log = logging.getLogger(__name__)

THREAD_KEY = "thread_ts"
TYPING_STATUS = "is thinking…"

# Answers meaning the app cannot set an assistant status at all (not a passing failure).
_NO_ASSISTANT = {"missing_scope", "not_allowed_token_type", "unknown_method", "no_permission"}
# Message subtypes that are still a person writing to us; the rest are edits, joins, bots.
_USER_SUBTYPES = {None, "thread_broadcast", "file_share"}
_SEEN_LIMIT = 1024
# chat.stopStream on a message whose stream already ended (a retried stop that had landed).
_NOT_STREAMING = "message_not_in_streaming_state"

# The stream methods, by the kind of call the transport names (``budget.CallKind``).
_STREAM_METHODS: dict[CallKind, str] = {
    "stream_start": "chat.startStream",
    "stream_append": "chat.appendStream",
    "stream_stop": "chat.stopStream",
}

_T = TypeVar("_T")


class SlackRefused(PlatformError):
    """Slack answered ``{"ok": false, "error": …}``: the request did not take effect."""

    def __init__(self, error: str) -> None:
        super().__init__(f"slack: {error}")
        self.error = error


class SlackPlatform:
    """``ChatPlatform`` for Slack, built from ``config.platforms.slack``."""

    name = "slack"
    approval_limit = 3000  # a section block's text
    asks_questions = True  # any number of buttons: an MCP server's question (``questions``)
    capabilities: Capabilities  # per chat, from platforms.slack.budgets
    budget: SharedBudget  # shared by every chat of the bot

    def __init__(
        self, config: SlackConfig, *, request_timeout: int = 10, ping_interval: float = 5.0
    ) -> None:
        self._config = config
        self._timeout = request_timeout
        self._ping_interval = ping_interval
        budgets = config.budgets
        # Per channel: chat.postMessage's pace (edits go slower, by the workspace budget).
        self.capabilities = Capabilities(
            can_edit=True, max_length=40_000, length_unit="chars", rate=rate_budget(budgets.post)
        )
        # Slack limits each method per workspace, for all channels together: chat.update
        # (Tier 3), and each stream method (Tier 4, "generous burst behavior": forty replies
        # may open, or end, their streams at once) on its own.
        stream = rate_budget(budgets.stream)
        self.budget = SharedBudget(
            [
                Limit("chat.update", rate_budget(budgets.update)),
                *(Limit(method, stream, burst=True) for method in _STREAM_METHODS.values()),
                Limit("chat.delete", rate_budget(budgets.delete)),
            ],
            {
                "edit": ["chat.update"],
                "delete": ["chat.delete"],
                **{k: [m] for k, m in _STREAM_METHODS.items()},
            },
            scope=whole_chat,  # chat.postMessage's pace is per channel, threads included
        )
        self._web = self._web_client(config.bot_token)
        self._http: aiohttp.ClientSession | None = None
        self._socket: SocketModeClient | None = None
        self._on_message: OnMessage | None = None
        self._bot_user_id = ""
        self._assistant_status = True
        self._status = _ThinkingStatus()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def connect(self, on_message: OnMessage) -> None:
        """Check the bot token, then open Socket Mode; returns once the WebSocket is up."""
        if self._socket is not None:
            self._on_message = on_message  # already receiving: only the hand-off changes
            return
        missing = [key for key in ("bot_token", "app_token") if not getattr(self._config, key)]
        if missing:
            raise PlatformError(f"slack: platforms.slack.{missing[0]} is not set")
        try:
            auth = await self._call(self._api.auth_test())
            self._bot_user_id = str(auth.get("user_id", ""))
            self._on_message = on_message
            # The app-level token goes with apps.connections.open only; slack-sdk passes it
            # per call.
            socket = SocketModeClient(
                app_token=self._config.app_token,
                web_client=self._web_client(None),
                ping_interval=self._ping_interval,
            )
            socket.socket_mode_request_listeners.append(self._on_request)
            self._socket = socket
            # Asked here, not inside connect(): slack-sdk would retry a bad app token forever.
            socket.wss_uri = await self._call(socket.issue_new_wss_url())
            await socket.connect()
        except BaseException:
            await self.disconnect()
            raise

    async def disconnect(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()
        http, self._http = self._http, None
        if http is not None:
            await http.close()

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        thread_ts = _thread_ts(thread)
        response = await self._call(
            self._api.chat_postMessage(channel=chat_id, text=_escape(text), thread_ts=thread_ts)
        )
        if thread_ts is not None:
            self._status.replied((chat_id, thread_ts))
        return str(response["ts"])

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        # chat.update finds the message by channel + ts; thread_ts goes along so every call of
        # a threaded reply names its thread.
        await self._call(
            self._api.chat_update(
                channel=chat_id, ts=message_id, text=_escape(text), thread_ts=_thread_ts(thread)
            )
        )

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        """``chat.delete`` of a message of this bot (a preview replaced by a fresh final)."""
        try:
            await self._call(self._api.chat_delete(channel=chat_id, ts=message_id))
        except SlackRefused as exc:
            if exc.error != "message_not_found":  # already gone: what a retry wanted
                raise

    def native_for(self, message: IncomingMessage) -> Native | None:
        """Streams in threads and DMs; a channel's top level keeps edits."""
        if THREAD_KEY in message.thread:
            return Native("stream", message.thread)
        if not message.is_group and message.message_id:
            return Native("stream", {THREAD_KEY: message.message_id})
        return None

    async def start_stream(
        self,
        chat_id: str,
        text: str,
        *,
        thread: Mapping[str, str] | None = None,
        tasks: Sequence[Task] = (),
    ) -> str:
        thread_ts = _thread_ts(thread)
        if thread_ts is None:
            raise NativeRefused("slack: a stream needs a thread")
        try:
            response = await self._call(
                self._api.chat_startStream(
                    channel=chat_id,
                    thread_ts=thread_ts,
                    markdown_text=_escape(text) or None,
                    chunks=_chunks(tasks),
                )
            )
        except SlackRefused as exc:
            raise NativeRefused(str(exc)) from None
        self._status.replied((chat_id, thread_ts))
        return str(response["ts"])

    async def append_stream(
        self, chat_id: str, message_id: str, text: str, *, tasks: Sequence[Task] = ()
    ) -> None:
        await self._call(
            self._api.chat_appendStream(
                channel=chat_id,
                ts=message_id,
                markdown_text=_escape(text) or None,
                chunks=_chunks(tasks),
            )
        )

    async def stop_stream(
        self, chat_id: str, message_id: str, text: str = "", *, tasks: Sequence[Task] = ()
    ) -> None:
        try:
            await self._call(
                self._api.chat_stopStream(
                    channel=chat_id,
                    ts=message_id,
                    markdown_text=_escape(text) or None,
                    chunks=_chunks(tasks),
                )
            )
        except SlackRefused as exc:
            if exc.error != _NOT_STREAMING or text:
                raise

    async def send_prompt(
        self, chat_id: str, prompt: Prompt, *, thread: Mapping[str, str] | None = None
    ) -> str:
        buttons: list[dict[str, Any]] = []
        for button in prompt.buttons:
            # An approval's allow and deny stand out; an MCP server's question's are plain.
            style = {"once": "primary", "deny": "danger"}.get(button.decision or "")
            element: dict[str, Any] = {
                "type": "button",
                "text": {"type": "plain_text", "text": button.label},
                "action_id": button.data,
                "value": button.data,
            }
            if style is not None:
                element["style"] = style
            buttons.append(element)
        blocks = [_section(prompt.text), {"type": "actions", "elements": buttons}]
        thread_ts = _thread_ts(thread)
        response = await self._call(
            self._api.chat_postMessage(
                channel=chat_id, text=_escape(prompt.text), blocks=blocks, thread_ts=thread_ts
            )
        )
        if thread_ts is not None:
            self._status.replied((chat_id, thread_ts))
        return str(response["ts"])

    async def send_as_written(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        thread_ts = _thread_ts(thread)
        response = await self._call(
            self._api.chat_postMessage(
                channel=chat_id, text=_escape(text), blocks=[_section(text)], thread_ts=thread_ts
            )
        )
        if thread_ts is not None:
            self._status.replied((chat_id, thread_ts))
        return str(response["ts"])

    async def close_prompt(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        await self._call(
            self._api.chat_update(
                channel=chat_id, ts=message_id, text=_escape(text), blocks=[_section(text)]
            )
        )

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        thread_ts = _thread_ts(thread)
        if thread_ts is None or not self._assistant_status:
            return
        key = (chat_id, thread_ts)
        if not self._status.allowed(key):
            return
        try:
            await self._set_status(chat_id, thread_ts, TYPING_STATUS)
        except SlackRefused as exc:
            # Typing is a courtesy: a refusal never fails the turn.
            if exc.error in _NO_ASSISTANT:
                log.info("slack: no assistant status for this app (%s); typing is off", exc)
                self._assistant_status = False
            else:
                log.debug("slack: no assistant status in this thread: %s", exc)
                self._status.refused(key)
            return
        if not self._status.allowed(key):
            # The reply was posted while the status was on its way; if Slack applied the status
            # last, only an explicit clear removes it.
            await self._set_status(chat_id, thread_ts, "")

    # -- internals --------------------------------------------------------------------------

    async def _set_status(self, chat_id: str, thread_ts: str, status: str) -> None:
        await self._call(
            self._api.assistant_threads_setStatus(
                channel_id=chat_id, thread_ts=thread_ts, status=status
            )
        )

    @property
    def _api(self) -> AsyncWebClient:
        """The bot's Web API client on one kept-alive session (created in the running loop).

        Without it slack-sdk opens a new connection, TLS included, for every call: a delay on
        every edit of a streaming reply."""
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
            self._web.session = self._http
        return self._web

    def _web_client(self, token: str | None) -> AsyncWebClient:
        return AsyncWebClient(
            token=token,
            base_url=self._config.base_url,
            timeout=self._timeout,
            retry_handlers=[],
        )

    async def _call(self, call: Awaitable[_T]) -> _T:
        try:
            with aiohttp_failures("slack"):
                return await call
        except SlackApiError as exc:
            raise _platform_error(exc) from None

    async def _on_request(
        self, client: AsyncBaseSocketModeClient, request: SocketModeRequest
    ) -> None:
        # Ack first: Slack redelivers an envelope that is not acknowledged within 3 s.
        await client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        if request.type == "interactive" and self._on_message is not None:
            for press in self._presses(request.payload):
                await self._on_message(press)
            return
        if request.type != "events_api" or self._on_message is None:
            return
        event: Any = request.payload.get("event")
        if not isinstance(event, dict):
            return
        incoming = incoming_message(event, bot_user_id=self._bot_user_id)
        if incoming is None or self._redelivered(incoming):
            return
        if thread_ts := _thread_ts(incoming.thread):
            self._status.asked((incoming.chat_id, thread_ts))
        await self._on_message(incoming)

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """``files.info`` for the file's private URL, then the file from it with the bot token
        (``files:read``). The token goes only to Slack's own hosts (or ``base_url``'s)."""
        info: Any = await self._call(self._api.files_info(file=attachment.ref))
        file: Any = info.get("file") or {}
        if int(file.get("size") or 0) > max_bytes:
            raise PlatformError(f"larger than {max_bytes} bytes")
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        if not self._slack_host(url):
            raise PlatformError("slack: the file has no private URL on Slack's hosts")
        headers = {"Authorization": f"Bearer {self._config.bot_token}"}
        assert self._http is not None  # made by ``_api`` above
        with aiohttp_failures("slack"):
            async with self._http.get(url, headers=headers) as response:
                if response.status != 200:
                    raise PlatformError(f"slack: the file answered {response.status}")
                if response.content_type == "text/html" and "html" not in attachment.mime:
                    # What url_private answers a token without files:read: the login page.
                    raise PlatformError("slack: a login page, not the file (files:read scope?)")
                return await read_capped(response.content.iter_chunked(1 << 16), max_bytes, "slack")

    def _slack_host(self, url: str) -> bool:
        parts, base = urllib.parse.urlsplit(url), urllib.parse.urlsplit(self._config.base_url)
        if parts.scheme == "https" and (parts.hostname or "").endswith(".slack.com"):
            return True
        return bool(parts.netloc) and (parts.scheme, parts.netloc) == (base.scheme, base.netloc)

    def _presses(self, payload: Mapping[str, Any]) -> list[IncomingMessage]:
        """The approval buttons pressed in a ``block_actions`` payload."""
        if payload.get("type") != "block_actions":
            return []
        user: Any = payload.get("user") or {}
        channel: Any = payload.get("channel") or {}
        container: Any = payload.get("container") or {}
        message: Any = payload.get("message") or {}
        actions: Any = payload.get("actions") or []
        if not all(isinstance(x, dict) for x in (user, channel, container, message)):
            return []
        chat_id = str(channel.get("id") or container.get("channel_id") or "")
        user_id = str(user.get("id") or "")
        thread_ts = message.get("thread_ts")
        thread = {THREAD_KEY: str(thread_ts)} if thread_ts else {}

        async def answer(text: str, refused: bool) -> None:
            if refused:  # seen by the presser only; an accepted press shows in the message
                await self._call(
                    self._api.chat_postEphemeral(
                        channel=chat_id,
                        user=user_id,
                        text=_escape(text),
                        thread_ts=_thread_ts(thread),
                    )
                )

        presses: list[IncomingMessage] = []
        for action in actions if isinstance(actions, list) else []:
            value = str(action.get("value") or "") if isinstance(action, dict) else ""
            if not is_button(value):
                continue
            presses.append(
                IncomingMessage(
                    platform="slack",
                    chat_id=chat_id,
                    user_id=user_id,
                    text="",
                    user_name=str(user.get("username") or ""),
                    is_group=not chat_id.startswith("D"),  # D…: a direct message
                    message_id=str(container.get("message_ts") or message.get("ts") or ""),
                    thread=thread,
                    press=Press(value, answer),
                )
            )
        return presses

    def _redelivered(self, incoming: IncomingMessage) -> bool:
        key = (incoming.chat_id, incoming.message_id)
        if key in self._seen:
            return True
        self._seen[key] = None
        if len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        return False


class _ThinkingStatus:
    """Which threads may show the "is thinking…" status now.

    Only between a person's message and the first post of the reply: Slack clears the status
    when the app posts, but not when it edits, so a status set while the reply grows by edits
    would outlive the reply by up to two minutes (a stuck indicator). Threads where Slack
    refuses a status (not an assistant thread) stay quiet for good."""

    def __init__(self) -> None:
        # (channel, thread_ts) -> True when refused for good, False when already replied to.
        self._quiet: OrderedDict[tuple[str, str], bool] = OrderedDict()

    def allowed(self, key: tuple[str, str]) -> bool:
        return key not in self._quiet

    def asked(self, key: tuple[str, str]) -> None:
        if self._quiet.get(key) is False:
            del self._quiet[key]

    def replied(self, key: tuple[str, str]) -> None:
        if key not in self._quiet:
            self._remember(key, refused=False)

    def refused(self, key: tuple[str, str]) -> None:
        self._remember(key, refused=True)

    def _remember(self, key: tuple[str, str], *, refused: bool) -> None:
        self._quiet[key] = refused
        self._quiet.move_to_end(key)
        if len(self._quiet) > _SEEN_LIMIT:
            self._quiet.popitem(last=False)


def incoming_message(event: Mapping[str, Any], *, bot_user_id: str) -> IncomingMessage | None:
    """Plain data for the runner from a ``message`` event, or None when no person wrote it.

    ``user_id`` is the Slack user id (``U…``) that ``allowed_users`` lists."""
    kind = event.get("type")
    if kind not in ("message", "app_mention") or event.get("subtype") not in _USER_SUBTYPES:
        return None
    user = event.get("user")
    if not user or event.get("bot_id") or user == bot_user_id:
        return None
    thread_ts = event.get("thread_ts")
    raw = str(event.get("text", ""))
    # A mention of the bot (``<@U…>`` or ``<@U…|name>``) is addressing, not content.
    mention = re.compile(rf"\s?<@{re.escape(bot_user_id)}(?:\|[^>]*)?>") if bot_user_id else None
    text = mention.sub("", raw) if mention else raw
    return IncomingMessage(
        platform="slack",
        chat_id=str(event.get("channel", "")),
        user_id=str(user),
        text=html.unescape(text.strip()),
        # app_mention events carry no channel_type: they come from channels only.
        is_group=event.get("channel_type") != "im",
        message_id=str(event.get("ts", "")),
        thread={THREAD_KEY: str(thread_ts)} if thread_ts else {},
        addressed=kind == "app_mention" or text != raw,
        bot_thread=bool(bot_user_id) and event.get("parent_user_id") == bot_user_id,
        attachments=_attachments(event.get("files")),
    )


def _attachments(files: Any) -> tuple[Attachment, ...]:
    """The files of a ``file_share`` message (``ref``: the file id, for ``files.info``);
    files Slack hides (``mode: tombstone``, ``hidden_by_limit``) have nothing to read."""
    found: list[Attachment] = []
    for file in cast(list[Any], files) if isinstance(files, list) else []:
        if not isinstance(file, dict) or not file.get("id"):  # pyright: ignore[reportUnknownMemberType]
            continue
        entry = cast(dict[str, Any], file)
        if entry.get("mode") in ("tombstone", "hidden_by_limit"):
            continue
        mime = str(entry.get("mimetype") or "")
        kind = (
            "image"
            if mime.startswith("image/")
            else "audio"
            if mime.startswith("audio/")
            else "file"
        )
        name = str(entry.get("name") or entry.get("title") or entry["id"])
        found.append(Attachment(kind, name, mime, str(entry["id"]), int(entry.get("size") or 0)))
    return tuple(found)


def _section(text: str) -> dict[str, Any]:
    # plain_text: shown as written (no mrkdwn, no mentions), so the command is not escaped.
    return {"type": "section", "text": {"type": "plain_text", "text": text, "emoji": True}}


def _thread_ts(thread: Mapping[str, str] | None) -> str | None:
    return (thread or {}).get(THREAD_KEY) or None


def _escape(text: str) -> str:
    # Slack reads <…> as links and mentions (<!channel> pings everyone) and &…; as entities;
    # escaping the three shows the reply as written and lets a model's text ping no one.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _chunks(tasks: Sequence[Task]) -> list[dict[str, str]] | None:
    chunks: list[dict[str, str]] = []
    for t in tasks:
        chunk = {"type": "task_update", "id": t.id, "title": _escape(t.title), "status": t.status}
        if t.details:
            # Shown under the title; Slack takes at most 256 characters (escaped), and an
            # entity cut in half would show as text.
            raw = t.details[:_DETAILS]
            while len(_escape(raw)) > _DETAILS:
                raw = raw[:-1]
            chunk["details"] = _escape(raw)
        chunks.append(chunk)
    return chunks or None


_DETAILS = 256


def _platform_error(exc: SlackApiError) -> PlatformError:
    response = exc.response
    # A proxy in front of Slack can answer with a text body; only a dict carries "error".
    error = str(response.data.get("error") or "") if isinstance(response.data, dict) else ""
    if response.status_code == 429 or error == "ratelimited":
        try:
            retry_after = float(response.headers.get("Retry-After", "1"))
        except ValueError:
            retry_after = 1.0
        # Slack limits each Web API method per workspace.
        return PlatformRateLimited(
            retry_after, f"slack: {error or 'ratelimited'}", scope="workspace"
        )
    if response.status_code >= 500:
        # Slack received the request; whether it posted the message is unknown.
        return PlatformError(f"slack: server error {response.status_code}", maybe_landed=True)
    return SlackRefused(error or f"http_{response.status_code}")
