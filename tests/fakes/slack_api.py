"""A fake Slack Web API and Socket Mode server on 127.0.0.1, on the real wire.

Web API: ``auth.test``, ``apps.connections.open`` (answers with a ``ws://`` URL of this
server), ``chat.postMessage``, ``chat.update``, ``chat.delete`` and
``assistant.threads.setStatus``, ``files.info`` (files put there by ``share_file``, their bytes
at ``url_private`` for the bot token only); it keeps
each message's current text (what a user would see) and records every call.

Streams: ``chat.startStream`` (needs ``thread_ts``), ``chat.appendStream`` (``markdown_text``
deltas of at most 12 000 characters, else ``msg_too_long``; ``chunks`` of ``task_update``
kept per task id) and ``chat.stopStream``; appending to or stopping a message that is not
streaming is ``message_not_in_streaming_state``. The three are Tier 4 (``LIMITS``:
100 calls of one method a minute, then 429 with ``Retry-After``). ``streams=False``
is a workspace without them (``unknown_method``). Socket Mode: the
WebSocket says ``hello``, then a test pushes ``events_api`` envelopes and waits for their acks::

    async with SlackAPI() as api:
        api.script(Scripted(429, retry_after=2))      # the next Web API call is rate limited
        envelope = await api.push_event({"type": "message", ...})
        await api.wait_for_ack(envelope)

Like Slack, it limits each method: ``chat.update`` (Tier 3) to 50 calls a minute for the whole
workspace, ``chat.postMessage`` to about one a second per channel (bursts of up to 5 in 5 s
pass), counted on arrival; past a limit, HTTP 429 with ``Retry-After``. ``limited`` counts those
429s (the ones the app caused, not the scripted ones); ``limits`` may be changed by a test.
Block Kit: ``chat.postMessage`` and ``chat.update`` keep a message's ``blocks`` (a section's
text of 3000 characters at most, an ``actions`` block of buttons with an ``action_id`` and a
``value``; anything else ``invalid_blocks``); an update without ``blocks`` leaves them.
``press(channel, ts, user, value)`` is a person clicking a button: an ``interactive``
Socket Mode envelope of type ``block_actions``, as Slack sends it (ValueError when the message
shows no such button); ``chat.postEphemeral`` is kept in ``ephemerals`` (seen by one user).

Threads as Slack serves them: an event pushed with a ``thread_ts`` whose parent is a message
the app posted gets ``parent_user_id`` (the bot's user id), as Slack's thread replies carry
their parent's author. ``app_mention_event`` builds the event an app subscribed to mentions
gets (no ``channel_type``); ``message_event`` a ``message`` event.
``views`` records each message's text after every call that changed it (a stream's text so
far after each start, append and stop), with the time: what the person saw, and when.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import WSMsgType, web

BOT_USER_ID = "UBOT0001"
CHANNEL = "C0000001"
API_PREFIX = "/api/"


@dataclass(frozen=True)
class MethodLimit:
    calls: int
    per: float
    per_channel: bool = False  # counted per channel, else for the whole workspace


# Slack's documented limits for the methods the adapter uses (https://api.slack.com/apis/rate-limits).
LIMITS: dict[str, MethodLimit] = {
    "chat.update": MethodLimit(50, 60.0),
    "chat.postMessage": MethodLimit(5, 5.0, per_channel=True),
    # The stream methods are Tier 4 ("100+ per minute"): 100 a minute here.
    "chat.startStream": MethodLimit(100, 60.0),
    "chat.appendStream": MethodLimit(100, 60.0),
    "chat.stopStream": MethodLimit(100, 60.0),
}


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    authorization: str
    ok: bool = False
    status: int = 200
    connection: int = 0  # the client's port: calls on one kept-alive connection share it
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class View:
    """What a message showed after a call that changed it (for benches: time to visible)."""

    at: float
    channel: str
    ts: str
    text: str


@dataclass
class Scripted:
    """The answer to the next call of ``method`` (any method when empty)."""

    status: int = 200
    error: str = ""  # {"ok": false, "error": error}
    retry_after: int = 0
    hang: bool = False
    method: str = ""
    until: asyncio.Event | None = None  # hold the call until set, then answer it normally


@dataclass
class Message:
    channel: str
    ts: str
    text: str
    thread_ts: str | None
    edits: int = 0
    streaming: bool = False
    appends: int = 0
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict[str, dict[str, Any]])
    blocks: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])

    def buttons(self) -> list[dict[str, Any]]:
        return [e for b in self.blocks if b.get("type") == "actions" for e in b.get("elements", [])]


class SlackAPI:
    def __init__(self, *, bot_token: str = "xoxb-test", app_token: str = "xapp-test") -> None:
        self.bot_token = bot_token
        self.app_token = app_token
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], Message] = {}
        self.statuses: list[dict[str, Any]] = []
        self.acks: list[dict[str, Any]] = []
        self.ephemerals: list[dict[str, Any]] = []
        self.held = 0  # calls waiting on a Scripted.until
        self.streams = True
        self.limits = dict(LIMITS)
        self.limited = 0  # 429s answered for going over ``limits``
        # Every change of a message's text as the person sees it: posts, updates, and a
        # stream's accumulated text after each start/append/stop.
        self.views: list[View] = []
        self._arrivals: dict[tuple[str, str], list[float]] = {}
        self._scripted: list[Scripted] = []
        self._ts = itertools.count(1)
        self._envelopes = itertools.count(1)
        self._sockets: list[web.WebSocketResponse] = []
        self._changed = asyncio.Condition()
        self._release = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.base_url = ""
        self._origin = ""
        self.files: dict[str, dict[str, Any]] = {}  # file id -> the file object of files.info
        self.file_bytes: dict[str, bytes] = {}  # url_private path -> bytes
        self.file_fetches: list[tuple[str, str]] = []  # (path, Authorization) per fetch

    async def __aenter__(self) -> SlackAPI:
        app = web.Application()
        app.router.add_post(API_PREFIX + "{method}", self._api)
        app.router.add_get(API_PREFIX + "{method}", self._api)  # files.info is a GET
        app.router.add_get("/files-pri/{team_file}/{name}", self._private_file)
        app.router.add_get("/link/", self._link)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        port = self._runner.addresses[0][1]
        self._origin = f"127.0.0.1:{port}"
        self.base_url = f"http://{self._origin}{API_PREFIX}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._release.set()
        for socket in self._sockets:
            await socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what tests use ----------------------------------------------------------------------

    def script(self, *answers: Scripted) -> None:
        self._scripted.extend(answers)

    def calls_to(self, *methods: str) -> list[Call]:
        return [c for c in self.calls if c.method in methods]

    async def push_event(self, event: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Deliver an Events API envelope over the open Socket Mode connection."""
        thread_ts = event.get("thread_ts")
        parent = self.messages.get((str(event.get("channel", "")), str(thread_ts)))
        if thread_ts and thread_ts != event.get("ts") and "parent_user_id" not in event:
            # Slack names the thread's parent author on every reply in it.
            event = {**event, "parent_user_id": BOT_USER_ID if parent else "U0PARENT"}
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._sockets))
        envelope_id = f"env-{next(self._envelopes)}"
        envelope = {
            "envelope_id": envelope_id,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
            "payload": {
                "token": "verification-token",
                "team_id": "T0001",
                "api_app_id": "A0001",
                "type": "event_callback",
                "event_id": f"Ev{envelope_id}",
                "event_time": int(time.time()),
                "event": event,
            },
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def press(
        self, channel: str, ts: str, user: str, value: str, *, stale: bool = False
    ) -> str:
        """``user`` clicks the button with ``value`` on message ``ts``: a ``block_actions``
        envelope over Socket Mode; its envelope id. ``stale``: a click sent before the button
        went (no check that it is shown)."""
        message = self.messages[(channel, ts)]
        button = next((b for b in message.buttons() if b.get("value") == value), None)
        if button is None and stale:
            button = {"action_id": value, "text": {"type": "plain_text", "text": "?"}}
        if button is None:
            raise ValueError(f"message {ts} in {channel} shows no button {value!r}")
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._sockets))
        envelope_id = f"env-{next(self._envelopes)}"
        shown: dict[str, Any] = {
            "type": "message",
            "user": BOT_USER_ID,
            "text": message.text,
            "ts": ts,
            "blocks": message.blocks,
        }
        if message.thread_ts:
            shown["thread_ts"] = message.thread_ts
        payload = {
            "type": "block_actions",
            "user": {
                "id": user,
                "username": user.lower(),
                "name": user.lower(),
                "team_id": "T0001",
            },
            "api_app_id": "A0001",
            "token": "verification-token",
            "container": {
                "type": "message",
                "message_ts": ts,
                "channel_id": channel,
                "is_ephemeral": False,
            },
            "trigger_id": f"trigger-{envelope_id}",
            "team": {"id": "T0001", "domain": "iris-test"},
            "channel": {"id": channel, "name": "general"},
            "message": shown,
            "response_url": f"http://{self._origin}/actions/{envelope_id}",
            "actions": [
                {
                    "action_id": button["action_id"],
                    "block_id": "approval",
                    "text": button["text"],
                    "value": value,
                    "type": "button",
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        envelope = {
            "envelope_id": envelope_id,
            "type": "interactive",
            "accepts_response_payload": False,
            "payload": payload,
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def wait_until(self, ready: Callable[[], bool]) -> None:
        """Wait until ``ready()`` holds, checked after every Web API call and ack."""
        async with self._changed:
            await self._changed.wait_for(ready)

    async def wait_for_ack(self, envelope_id: str) -> None:
        async with self._changed:
            await self._changed.wait_for(
                lambda: any(a.get("envelope_id") == envelope_id for a in self.acks)
            )

    # -- Web API -----------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        call = Call(method, await _arguments(request), request.headers.get("Authorization", ""))
        peer = request.transport.get_extra_info("peername") if request.transport else None
        call.connection = peer[1] if peer else 0
        response = await self._answer(call)
        call.status = response.status
        call.ok = response.content_type == "application/json" and '"ok": true' in (
            response.text or ""
        )
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        return response

    async def _answer(self, call: Call) -> web.Response:
        token = self.app_token if call.method == "apps.connections.open" else self.bot_token
        if call.authorization != f"Bearer {token}":
            return _json({"ok": False, "error": "invalid_auth"})
        for index, scripted in enumerate(self._scripted):
            if scripted.method in ("", call.method):
                del self._scripted[index]
                if scripted.until is None:
                    return await self._scripted_answer(scripted)
                async with self._changed:
                    self.held += 1
                    self._changed.notify_all()
                await scripted.until.wait()
                break
        if (retry_after := self._over_limit(call)) is not None:
            self.limited += 1
            headers = {"Retry-After": str(retry_after)}
            return _json({"ok": False, "error": "ratelimited"}, status=429, headers=headers)
        handler = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._connections_open,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "assistant.threads.setStatus": self._set_status,
            "chat.delete": self._delete,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "files.info": self._files_info,
        }.get(call.method)
        if call.method.endswith("Stream") and not self.streams:
            handler = None
        if handler is None:
            return _json({"ok": False, "error": "unknown_method"})
        return handler(call.args)

    def _over_limit(self, call: Call) -> int | None:
        """Count the call against its method's limit; the seconds to wait when over it."""
        limit = self.limits.get(call.method)
        if limit is None:
            return None
        key = (call.method, str(call.args.get("channel", "")) if limit.per_channel else "")
        now = time.monotonic()
        window = [t for t in self._arrivals.get(key, []) if now - t < limit.per]
        self._arrivals[key] = window
        if len(window) >= limit.calls:
            return max(1, math.ceil(limit.per - (now - window[0])))
        window.append(now)
        return None

    async def _scripted_answer(self, scripted: Scripted) -> web.Response:
        if scripted.hang:
            await self._release.wait()
        if scripted.status == 429:
            headers = {"Retry-After": str(scripted.retry_after)}
            return _json({"ok": False, "error": "ratelimited"}, status=429, headers=headers)
        if scripted.status >= 500:
            return web.Response(status=scripted.status, text="upstream connect error")
        return _json({"ok": False, "error": scripted.error or "internal_error"})

    def _auth_test(self, args: dict[str, Any]) -> web.Response:
        return _json(
            {
                "ok": True,
                "url": "https://iris-test.slack.com/",
                "team": "Iris Test",
                "user": "iris",
                "team_id": "T0001",
                "user_id": BOT_USER_ID,
                "bot_id": "B0001",
            }
        )

    def _connections_open(self, args: dict[str, Any]) -> web.Response:
        return _json({"ok": True, "url": f"ws://{self._origin}/link/?ticket=t-1"})

    def _post_message(self, args: dict[str, Any]) -> web.Response:
        channel, text = str(args.get("channel", "")), args.get("text")
        if not channel:
            return _json({"ok": False, "error": "channel_not_found"})
        if not text:
            return _json({"ok": False, "error": "no_text"})
        if len(text) > 40_000:
            return _json({"ok": False, "error": "msg_too_long"})
        blocks, invalid = _blocks(args.get("blocks"))
        if invalid:
            return _json({"ok": False, "error": "invalid_blocks"})
        ts = f"{1764453600 + next(self._ts)}.000100"
        thread_ts = args.get("thread_ts")
        self.messages[(channel, ts)] = Message(channel, ts, text, thread_ts, blocks=blocks or [])
        self._viewed(self.messages[(channel, ts)])
        message = {"type": "message", "user": BOT_USER_ID, "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        return _json({"ok": True, "channel": channel, "ts": ts, "message": message})

    def _update(self, args: dict[str, Any]) -> web.Response:
        channel, ts, text = str(args.get("channel", "")), str(args.get("ts", "")), args.get("text")
        message = self.messages.get((channel, ts))
        if message is None:
            return _json({"ok": False, "error": "message_not_found"})
        if not text:
            return _json({"ok": False, "error": "no_text"})
        if len(text) > 40_000:
            return _json({"ok": False, "error": "msg_too_long"})
        blocks, invalid = _blocks(args.get("blocks"))
        if invalid:
            return _json({"ok": False, "error": "invalid_blocks"})
        message.text = text
        if blocks is not None:
            message.blocks = blocks
        message.edits += 1
        self._viewed(message)
        return _json({"ok": True, "channel": channel, "ts": ts, "text": text})

    def _delete(self, args: dict[str, Any]) -> web.Response:
        key = (str(args.get("channel", "")), str(args.get("ts", "")))
        if self.messages.pop(key, None) is None:
            return _json({"ok": False, "error": "message_not_found"})
        return _json({"ok": True, "channel": key[0], "ts": key[1]})

    def _post_ephemeral(self, args: dict[str, Any]) -> web.Response:
        if not args.get("channel") or not args.get("user"):
            return _json({"ok": False, "error": "channel_not_found"})
        if not args.get("text"):
            return _json({"ok": False, "error": "no_text"})
        self.ephemerals.append(dict(args))
        return _json({"ok": True, "message_ts": f"{time.time():.6f}"})

    def _start_stream(self, args: dict[str, Any]) -> web.Response:
        channel, thread_ts = str(args.get("channel", "")), args.get("thread_ts")
        if not channel:
            return _json({"ok": False, "error": "channel_not_found"})
        if not thread_ts:
            return _json({"ok": False, "error": "invalid_arguments"})
        ts = f"{1764453600 + next(self._ts)}.000100"
        message = Message(channel, ts, "", str(thread_ts), streaming=True)
        self.messages[(channel, ts)] = message
        error = _stream_into(message, args)
        if error:
            return _json({"ok": False, "error": error})
        self._viewed(message)
        return _json({"ok": True, "channel": channel, "ts": ts})

    def _append_stream(self, args: dict[str, Any]) -> web.Response:
        message = self.messages.get((str(args.get("channel", "")), str(args.get("ts", ""))))
        if message is None:
            return _json({"ok": False, "error": "message_not_found"})
        if not message.streaming:
            return _json({"ok": False, "error": "message_not_in_streaming_state"})
        if not args.get("markdown_text") and not args.get("chunks"):
            return _json({"ok": False, "error": "no_text"})
        error = _stream_into(message, args)
        if error:
            return _json({"ok": False, "error": error})
        message.appends += 1
        self._viewed(message)
        return _json({"ok": True, "channel": message.channel, "ts": message.ts})

    def _stop_stream(self, args: dict[str, Any]) -> web.Response:
        message = self.messages.get((str(args.get("channel", "")), str(args.get("ts", ""))))
        if message is None:
            return _json({"ok": False, "error": "message_not_found"})
        if not message.streaming:
            return _json({"ok": False, "error": "message_not_in_streaming_state"})
        error = _stream_into(message, args)
        if error:
            return _json({"ok": False, "error": error})
        message.streaming = False
        self._viewed(message)
        return _json({"ok": True, "channel": message.channel, "ts": message.ts})

    def share_file(self, name: str, mimetype: str, data: bytes) -> dict[str, Any]:
        """A file as a ``file_share`` message's ``files`` lists it (no URL: that comes from
        ``files.info``), its bytes at ``url_private``, served only with the bot token; without
        it, Slack's login page (HTML, 200), as Slack answers."""
        file_id = f"F{len(self.files) + 1:07d}"
        path = f"/files-pri/T0000001-{file_id}/{name}"
        url = f"http://{self._origin}{path}"
        self.files[file_id] = {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": name.rsplit(".", 1)[-1],
            "size": len(data),
            "url_private": url,
            "url_private_download": f"{url}?download=1",
        }
        self.file_bytes[path] = data
        return {k: v for k, v in self.files[file_id].items() if not k.startswith("url_")}

    def _files_info(self, args: dict[str, Any]) -> web.Response:
        file = self.files.get(str(args.get("file", "")))
        if file is None:
            return _json({"ok": False, "error": "file_not_found"})
        return _json({"ok": True, "file": file})

    async def _private_file(self, request: web.Request) -> web.Response:
        self.file_fetches.append((request.path, request.headers.get("Authorization", "")))
        if request.headers.get("Authorization") != f"Bearer {self.bot_token}":
            return web.Response(
                text="<html><body>Sign in to Slack</body></html>", content_type="text/html"
            )
        data = self.file_bytes.get(request.path)
        if data is None:
            return web.Response(status=404, text="Not Found")
        return web.Response(body=data, content_type="application/octet-stream")

    def _viewed(self, message: Message) -> None:
        self.views.append(View(time.monotonic(), message.channel, message.ts, message.text))

    def _set_status(self, args: dict[str, Any]) -> web.Response:
        self.statuses.append(args)
        return _json({"ok": True})

    # -- Socket Mode -------------------------------------------------------------------------

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        hello = {
            "type": "hello",
            "num_connections": 1,
            "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A0001"},
        }
        await socket.send_str(json.dumps(hello))
        async with self._changed:
            self._sockets.append(socket)
            self._changed.notify_all()
        async for frame in socket:
            if frame.type is WSMsgType.TEXT:
                async with self._changed:
                    self.acks.append(json.loads(frame.data))
                    self._changed.notify_all()
        return socket


async def _arguments(request: web.Request) -> dict[str, Any]:
    args: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        args.update(await request.json())
    elif request.can_read_body:
        args.update(await request.post())
    return args


def _blocks(raw: Any) -> tuple[list[dict[str, Any]] | None, bool]:
    """A call's ``blocks`` (None when it has none) and whether Slack would refuse them."""
    if raw is None:
        return None, False
    blocks: Any = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(blocks, list):
        return None, True
    for block in cast(list[Any], blocks):
        if not isinstance(block, dict):
            return None, True
        block = cast(dict[str, Any], block)
        if block.get("type") == "section":
            text: Any = block.get("text") or {}
            if not 1 <= len(str(text.get("text") or "")) <= 3000:
                return None, True
        elif block.get("type") == "actions":
            elements: Any = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(cast(list[Any], elements)) <= 25:
                return None, True
            for element in cast(list[dict[str, Any]], elements):
                if not 1 <= len(str(element.get("action_id") or "")) <= 255:
                    return None, True
                if len(str(element.get("value") or "")) > 2000:
                    return None, True
        else:
            return None, True
    return cast(list[dict[str, Any]], blocks), False


def _stream_into(message: Message, args: dict[str, Any]) -> str:
    """Append a stream call's text and task chunks; an error code, or "" when taken."""
    text = str(args.get("markdown_text") or "")
    if len(text) > 12_000:
        return "msg_too_long"
    chunks: Any = args.get("chunks") or []
    if isinstance(chunks, str):
        chunks = json.loads(chunks)
    for chunk in chunks:
        if chunk.get("type") != "task_update" or not chunk.get("id"):
            return "invalid_chunks"
        if chunk.get("status") not in ("pending", "in_progress", "complete", "error"):
            return "invalid_chunks"
        if len(str(chunk.get("details", ""))) > 256:  # Slack's limit on a task's details
            return "invalid_chunks"
        message.tasks[str(chunk["id"])] = dict(chunk)
    message.text += text
    return ""


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json; charset=utf-8"},
    )


def message_event(user: str, text: str, **extra: Any) -> dict[str, Any]:
    """A ``message`` event in ``CHANNEL``, as the Events API delivers it; ``extra`` overrides."""
    return {
        "type": "message",
        "channel": CHANNEL,
        "channel_type": "channel",
        "user": user,
        "text": text,
        "ts": "1764453100.000300",
        "event_ts": "1764453100.000300",
        **extra,
    }


def app_mention_event(user: str, text: str, **extra: Any) -> dict[str, Any]:
    """An ``app_mention`` event in ``CHANNEL`` (its text holds ``<@BOT_USER_ID>``)."""
    return {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": user,
        "text": text,
        "ts": "1764453100.000300",
        "event_ts": "1764453100.000300",
        **extra,
    }
