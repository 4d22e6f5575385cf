"""A fake Telegram Bot API on 127.0.0.1: real HTTP for the real python-telegram-bot, with 429s.

    async with FakeBotApi(token="123:abc") as api:   # api.base_url -> config base_url
        api.user_says(chat_id=42, user_id=7, text="hi")
        await api.wait_until(lambda: api.sent_in(42))

Serves ``/bot{token}/{method}`` for getMe, getUpdates (long polling, honouring ``offset`` and
``timeout``), sendMessage, editMessageText and sendChatAction, like Telegram: message ids per
chat, "message is not modified" (400) for an edit to identical text, 404 for a wrong token.
Files (``user_sends_file``): a photo, document, voice note or audio file in a message, served
as Telegram does through ``getFile`` (``file_path``; 400 "file is too big" past 20 MB) and
``GET /file/bot{token}/{file_path}``; ``file_downloads`` lists the paths fetched.
``setMyCommands`` keeps the bot's command menu in ``commands``; ``deleteMessage`` removes a
message (400 "message to delete not found" when it is not there); message ids are never reused.
``flood(method, retry_after, times)`` answers the next calls of a method with 429 and
``parameters.retry_after``, as Telegram's flood control does.

Drafts (``sendMessageDraft``, Bot API 9.3 / 10.3): private chats only (400 elsewhere), a
non-zero ``draft_id``, 0-4096 UTF-16 units (empty shows "Thinking…"). A draft lives
``draft_life`` seconds (30, as Telegram's) after its last update and is cleared by a message to
the chat; ``draft(chat_id)`` is what the user sees now. ``stop_generation(chat_id)`` presses
the stop button of a draft sent with ``can_stop``: a ``stopped_message_generation`` update
naming the chat and the ``draft_id``; ``press_stop_late`` sends one for any draft id (a press
that arrives after the draft moved on), and ``wait_received`` waits until the bot has polled
past every update pushed so far.
``drafts=False`` is a Bot API without the method (404). The fake puts no rate limit on drafts
(Telegram documents none; they are not messages).

Like Telegram, it limits the whole bot: at most ``bot_rate`` = (30, 1.0) calls (sendMessage,
editMessageText and sendChatAction, every chat together) in any second, counted on arrival;
past it, 429 with ``retry_after``. Chat actions count: a bot that floods typing indicators meets
flood control like one that floods messages. ``chat_rate`` (off unless set, e.g. (1, 1.0) as
Telegram's private chats) limits each chat's sendMessage and editMessageText the same way,
counted on arrival: the time the request reached the server, before its body was read
(``ApiCall.arrived``). ``limited`` counts those 429s (the ones the bot caused, not the scripted
floods), ``chat_limited`` the per-chat ones among them.

Inline keyboards: ``sendMessage`` keeps a message's ``reply_markup`` (``keyboard(chat_id,
message_id)``; ``callback_data`` of 1-64 bytes, else 400 BUTTON_DATA_INVALID), and
``editMessageText`` without one takes it away, as Telegram does; ``editMessageReplyMarkup``
changes it alone. ``press(chat_id, message_id, user_id, data)`` is a person tapping a button:
a ``callback_query`` update (refused with ValueError when the message shows no such button),
whose ``answerCallbackQuery`` is kept in ``answers`` (400 for an unknown or answered query).

A process can be told apart by its base URL: ``base_url_for("a")`` serves the same bot under
``/a/``, and ``polled_by`` lists, per ``getUpdates``, which one asked ("" for ``base_url``).

Groups and topics as Telegram serves them: ``user_says`` gives a message its entities as
Telegram parses them (``mention`` for ``@name``, ``bot_command`` for a leading ``/word`` or
``/word@name``; offsets in UTF-16 code units); ``reply_to`` makes it a reply to a message of the
chat (the bot's, by the id ``sendMessage`` gave it, or a user's, by the id ``user_says``
returned); a message in a forum topic (``thread_id``) that replies to nothing carries the
topic's ``forum_topic_created`` service message as ``reply_to_message``, as Telegram does.
``topic(chat_id, thread_id)`` is what the bot posted in one topic (``message_thread_id``).

Every request is recorded in ``calls`` as ``ApiCall(t, method, params, status)`` (``t`` on the
loop clock); ``chat(chat_id)`` is what the user sees now.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp import web

# Methods that post or change a message, and chat actions: what the bot-wide limit counts.
_MESSAGES = frozenset({"sendMessage", "editMessageText", "sendChatAction"})
# What a chat's own limit counts: messages posted or changed.
_CHAT_MESSAGES = frozenset({"sendMessage", "editMessageText"})
_DOWNLOAD_MAX = 20 * 1024 * 1024  # what getFile serves a bot


@dataclass(frozen=True)
class ApiCall:
    t: float
    method: str
    params: dict[str, Any]
    status: int
    arrived: float = 0.0  # when the request reached the server (``t``: when it was answered)


@dataclass
class _Draft:
    draft_id: int
    text: str
    at: float
    can_stop: bool


@dataclass
class _Flood:
    retry_after: int
    times: int


@dataclass
class FakeBotApi:
    token: str = "123:abc"
    bot_id: int = 123
    calls: list[ApiCall] = field(default_factory=list[ApiCall])
    messages: dict[int, dict[int, str]] = field(default_factory=dict[int, dict[int, str]])
    unmodified: int = 0  # edits that Telegram would reject as "message is not modified"
    commands: list[dict[str, str]] = field(default_factory=list[dict[str, str]])
    bot_rate: tuple[int, float] | None = (30, 1.0)  # messages per window, for the whole bot
    limited: int = 0  # 429s answered for going over ``bot_rate`` or ``chat_rate``
    chat_rate: tuple[int, float] | None = None  # messages per window, for each chat
    chat_limited: int = 0  # 429s answered for going over ``chat_rate``
    _arrivals: list[float] = field(default_factory=list[float])
    _chat_arrivals: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    _updates: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    _next_update: int = 1
    _confirmed: int = 1  # updates before this id were handled (the bot polled past them)
    _floods: dict[str, _Flood] = field(default_factory=dict[str, _Flood])
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    drafts: bool = True
    draft_life: float = 30.0
    chat_types: dict[int, str] = field(default_factory=dict[int, str])
    username: str = "iris_bot"
    # (chat, bot message id) -> the topic it was posted in (None: the chat's main thread)
    threads: dict[tuple[int, int], int | None] = field(
        default_factory=dict[tuple[int, int], int | None]
    )
    _drafts: dict[int, _Draft] = field(default_factory=dict[int, _Draft])
    _runner: web.AppRunner | None = None
    polled_by: list[str] = field(default_factory=list[str])
    markups: dict[tuple[int, int], dict[str, Any]] = field(
        default_factory=dict[tuple[int, int], dict[str, Any]]
    )
    # callback query id -> its answer ({"text", "show_alert"}); None until answered.
    answers: dict[str, dict[str, Any] | None] = field(
        default_factory=dict[str, dict[str, Any] | None]
    )
    _closing: bool = False
    port: int = 0
    # file_id -> (file_path, bytes, the size the API reports); paths of every download.
    files: dict[str, tuple[str, bytes, int]] = field(
        default_factory=dict[str, tuple[str, bytes, int]]
    )
    file_downloads: list[str] = field(default_factory=list[str])
    # file_path -> bytes a download of it streams whatever getFile said (a lying size), and
    # how many of them were taken before the client hung up.
    bottomless: dict[str, int] = field(default_factory=dict[str, int])
    streamed: dict[str, int] = field(default_factory=dict[str, int])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url_for(self, via: str) -> str:
        """The same API under ``/{via}``: its ``getUpdates`` show up as ``via`` in ``polled_by``."""
        return f"{self.base_url}/{via}"

    # -- lifetime -----------------------------------------------------------------------------
    async def __aenter__(self) -> FakeBotApi:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("*", "/{via}/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # pyright: ignore[reportPrivateUsage]
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closing = True  # ends a pending long poll now instead of at its timeout
        async with self._changed:
            self._changed.notify_all()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- test side ----------------------------------------------------------------------------
    def user_says(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        username: str = "",
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: int | None = None,
    ) -> int:
        """A person's message (its entities parsed as Telegram does); its message id."""
        message_id = 10_000 + self._next_update
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if thread_id is not None:
            chat["is_forum"] = True
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": {"id": user_id, "is_bot": False, "first_name": "U", "username": username},
            "text": text,
        }
        if entities := _entities(text):
            message["entities"] = entities
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if reply_to is not None:
            message["reply_to_message"] = self._replied(chat_id, reply_to, thread_id)
        elif thread_id is not None:
            # In a topic, a message that replies to nothing replies to the topic's creation.
            message["reply_to_message"] = {
                "message_id": thread_id,
                "date": int(time.time()),
                "chat": chat,
                "from": {"id": user_id, "is_bot": False, "first_name": "U"},
                "message_thread_id": thread_id,
                "is_topic_message": True,
                "forum_topic_created": {"name": f"topic {thread_id}", "icon_color": 7322096},
            }
        self.chat_types[chat_id] = chat_type
        self._push({"message": message})
        return message_id

    def _replied(self, chat_id: int, message_id: int, thread_id: int | None) -> dict[str, Any]:
        """The message a reply quotes: the bot's when it posted that id, else a person's."""
        text = self.messages.get(chat_id, {}).get(message_id)
        sender: dict[str, Any] = (
            {"id": self.bot_id, "is_bot": True, "first_name": "Iris", "username": self.username}
            if text is not None
            else {"id": 999, "is_bot": False, "first_name": "Someone"}
        )
        replied: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": self.chat_types.get(chat_id, "supergroup")},
            "from": sender,
            "text": text or "an earlier message",
        }
        if thread_id is not None:
            replied["message_thread_id"] = thread_id
            replied["is_topic_message"] = True
        return replied

    def topic(self, chat_id: int, thread_id: int | None) -> list[str]:
        """What the bot's messages in one topic of a chat (None: outside topics) show now."""
        return [
            text
            for message_id, text in self.messages.get(chat_id, {}).items()
            if self.threads.get((chat_id, message_id)) == thread_id
        ]

    def user_sends_file(
        self,
        chat_id: int,
        user_id: int,
        kind: str,
        data: bytes,
        *,
        name: str = "",
        mime: str = "",
        caption: str = "",
        file_size: int | None = None,
    ) -> str:
        """A private message with a ``photo``, ``document``, ``voice`` or ``audio`` (and a
        ``caption``), its file served by ``getFile`` and ``/file/bot<token>/<file_path>``.
        ``file_size``: what the message and getFile say (a lie tests a cap). The file id."""
        number = len(self.files) + 1
        file_id, unique = f"FILE{number}", f"U{number}"
        size = len(data) if file_size is None else file_size
        self.files[file_id] = (f"{kind}s/file_{number}", data, size)
        meta: dict[str, Any] = {"file_id": file_id, "file_unique_id": unique, "file_size": size}
        media: dict[str, Any]
        if kind == "photo":
            small = {**meta, "file_id": f"{file_id}s", "width": 90, "height": 90}
            media = {"photo": [small, {**meta, "width": 800, "height": 600}]}
        elif kind == "document":
            media = {"document": {**meta, "file_name": name, "mime_type": mime}}
        else:
            extra = {"file_name": name} if kind == "audio" and name else {}
            media = {kind: {**meta, **extra, "duration": 3, "mime_type": mime or "audio/ogg"}}
        message: dict[str, Any] = {
            "message_id": 10_000 + self._next_update,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": {"id": user_id, "is_bot": False, "first_name": "U", "username": ""},
            **media,
            **({"caption": caption} if caption else {}),
        }
        self.chat_types[chat_id] = "private"
        self._push({"message": message})
        return file_id

    async def _api_getFile(self, params: dict[str, Any]) -> tuple[int, Any]:
        entry = self.files.get(str(params.get("file_id")))
        if entry is None:
            return 400, "Bad Request: invalid file_id"
        path, _, size = entry
        if size > _DOWNLOAD_MAX:  # the Bot API serves bots 20 MB at most
            return 400, "Bad Request: file is too big"
        return 200, {
            "file_id": params["file_id"],
            "file_unique_id": "U",
            "file_size": size,
            "file_path": path,
        }

    async def _file(self, request: web.Request) -> web.StreamResponse:
        self.file_downloads.append(request.match_info["path"])
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 404}, status=404)
        path = request.match_info["path"]
        if path in self.bottomless:
            return await self._stream(request, path, self.bottomless[path])
        for path, data, _ in self.files.values():
            if path == request.match_info["path"]:
                return web.Response(body=data, content_type="application/octet-stream")
        return web.json_response({"ok": False, "error_code": 404}, status=404)

    async def _stream(self, request: web.Request, path: str, total: int) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "application/octet-stream"})
        await response.prepare(request)
        chunk = b"\0" * (1 << 16)
        self.streamed[path] = 0
        with contextlib.suppress(ConnectionError):
            while self.streamed[path] < total:
                await response.write(chunk)  # waits while the client does not read
                self.streamed[path] += len(chunk)
            await response.write_eof()
        return response

    def _push(self, update: dict[str, Any]) -> None:
        self._updates.append({"update_id": self._next_update, **update})
        self._next_update += 1
        asyncio.get_running_loop().create_task(self._notify())

    def keyboard(self, chat_id: int, message_id: int) -> list[list[dict[str, Any]]]:
        """The inline keyboard the message shows now (no rows: none)."""
        markup = self.markups.get((chat_id, message_id)) or {}
        rows: list[list[dict[str, Any]]] = markup.get("inline_keyboard") or []
        return rows

    def press(
        self,
        chat_id: int,
        message_id: int,
        user_id: int,
        data: str,
        *,
        username: str = "",
        chat_type: str = "private",
        stale: bool = False,
    ) -> str:
        """A person taps the button with ``data`` on a message; the callback query's id.
        ``stale``: a tap that left the phone before the button went (no check it is shown)."""
        buttons = [b for row in self.keyboard(chat_id, message_id) for b in row]
        if not stale and not any(b.get("callback_data") == data for b in buttons):
            raise ValueError(f"message {message_id} in {chat_id} shows no button {data!r}")
        query_id = f"cq{self._next_update}"
        self.answers[query_id] = None
        message = self._message(chat_id, message_id, self.messages[chat_id][message_id])
        message["chat"]["type"] = chat_type
        message["reply_markup"] = self.markups.get((chat_id, message_id), {"inline_keyboard": []})
        query = {
            "id": query_id,
            "from": {"id": user_id, "is_bot": False, "first_name": "U", "username": username},
            "message": message,
            "chat_instance": f"ci{chat_id}",
            "data": data,
        }
        self._push({"callback_query": query})
        return query_id

    def draft(self, chat_id: int) -> str | None:
        """The draft the user sees now in ``chat_id``, or None (none, or it lapsed)."""
        draft = self._drafts.get(chat_id)
        if draft is None or asyncio.get_running_loop().time() - draft.at >= self.draft_life:
            return None
        return draft.text

    def drafts_in(self, chat_id: int) -> list[ApiCall]:
        return self.sent_in(chat_id, "sendMessageDraft")

    def stop_generation(self, chat_id: int) -> bool:
        """Press the stop button of the chat's draft; False when it shows none."""
        draft = self._drafts.get(chat_id)
        if draft is None or not draft.can_stop or self.draft(chat_id) is None:
            return False
        stopped = {"chat": {"id": chat_id, "type": "private"}, "draft_id": draft.draft_id}
        self._push({"stopped_message_generation": stopped})
        return True

    def press_stop_late(self, chat_id: int, draft_id: int) -> None:
        """A press of the stop button of draft ``draft_id`` that reaches the bot only now
        (the draft may be long gone): a ``stopped_message_generation`` update all the same."""
        stopped = {"chat": {"id": chat_id, "type": "private"}, "draft_id": draft_id}
        self._push({"stopped_message_generation": stopped})

    async def wait_received(self, within: float = 10.0) -> None:
        """Wait until the bot has handled every update pushed so far (it polled past them)."""
        await self.wait_until(lambda: self._confirmed >= self._next_update, within)

    def flood(self, method: str, retry_after: int = 1, times: int = 1) -> None:
        self._floods[method] = _Flood(retry_after, times)

    def chat(self, chat_id: int) -> list[str]:
        return list(self.messages.get(chat_id, {}).values())

    def sent_in(self, chat_id: int, *methods: str) -> list[ApiCall]:
        wanted = methods or ("sendMessage", "editMessageText")
        return [
            c
            for c in self.calls
            if c.method in wanted
            and c.status == 200
            and str(c.params.get("chat_id")) == str(chat_id)
        ]

    async def wait_until(self, predicate: Callable[[], bool], within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    # -- the API ------------------------------------------------------------------------------
    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _handle(self, request: web.Request) -> web.Response:
        arrived = asyncio.get_running_loop().time()
        method = request.match_info["method"]
        params = await self._params(request)
        if method == "getUpdates":
            self.polled_by.append(request.match_info.get("via", ""))
            await self._notify()
        if request.match_info["token"] != self.token:
            body = {"ok": False, "error_code": 404, "description": "Not Found"}
            return await self._answer(arrived, method, params, 404, body)
        flood = self._floods.get(method)
        if flood is not None and flood.times > 0:
            flood.times -= 1
            return await self._answer(arrived, method, params, 429, _too_many(flood.retry_after))
        chat = str(params.get("chat_id"))
        if method in _CHAT_MESSAGES and (retry_after := self._over_chat_rate(chat, arrived)):
            self.limited += 1
            self.chat_limited += 1
            return await self._answer(arrived, method, params, 429, _too_many(retry_after))
        if method in _MESSAGES and (retry_after := self._over_bot_rate(arrived)) is not None:
            self.limited += 1
            return await self._answer(arrived, method, params, 429, _too_many(retry_after))
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            body = {"ok": False, "error_code": 404, "description": "Not Found: method not found"}
            return await self._answer(arrived, method, params, 404, body)
        status, result = await handler(params)
        if status != 200:
            body = {"ok": False, "error_code": status, "description": result}
            return await self._answer(arrived, method, params, status, body)
        return await self._answer(arrived, method, params, 200, {"ok": True, "result": result})

    def _over_bot_rate(self, now: float) -> int | None:
        """Count a message against the bot-wide limit; the seconds to wait when over it."""
        if self.bot_rate is None:
            return None
        self._arrivals, wait = _counted(self._arrivals, self.bot_rate, now)
        return wait

    def _over_chat_rate(self, chat: str, now: float) -> int | None:
        """Count a message against its chat's limit; the seconds to wait when over it."""
        if self.chat_rate is None:
            return None
        arrivals, wait = _counted(self._chat_arrivals.get(chat, []), self.chat_rate, now)
        self._chat_arrivals[chat] = arrivals
        return wait

    async def _params(self, request: web.Request) -> dict[str, Any]:
        if request.content_type == "application/json":
            data: dict[str, Any] = await request.json()
            return data
        form = await request.post()
        params: dict[str, Any] = {}
        for key, value in form.items():
            text = str(value)
            try:
                params[key] = json.loads(text)
            except ValueError:
                params[key] = text
        return params

    async def _answer(
        self,
        arrived: float,
        method: str,
        params: dict[str, Any],
        status: int,
        body: dict[str, Any],
    ) -> web.Response:
        if method != "getUpdates":
            now = asyncio.get_running_loop().time()
            self.calls.append(ApiCall(now, method, params, status, arrived))
            await self._notify()
        return web.json_response(body, status=status)

    def _message(self, chat_id: int, message_id: int, text: str) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": self.chat_types.get(chat_id, "private")},
            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Iris"},
            "text": text,
        }
        if (thread_id := self.threads.get((chat_id, message_id))) is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        return message

    async def _api_getMe(self, params: dict[str, Any]) -> tuple[int, Any]:
        return 200, {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Iris",
            "username": self.username,
        }

    async def _api_getUpdates(self, params: dict[str, Any]) -> tuple[int, Any]:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        if offset > self._confirmed:
            # The bot asks past these updates only once it handled them.
            self._confirmed = offset
            await self._notify()
        if not self._updates and timeout:
            try:
                async with asyncio.timeout(timeout), self._changed:
                    await self._changed.wait_for(lambda: bool(self._updates) or self._closing)
            except TimeoutError:
                pass
        return 200, list(self._updates)

    async def _api_sendMessage(self, params: dict[str, Any]) -> tuple[int, Any]:
        chat_id, text = int(params["chat_id"]), str(params["text"])
        if not text or len(text.encode("utf-16-le")) // 2 > 4096:
            return 400, "Bad Request: message text is empty or too long"
        chat = self.messages.setdefault(chat_id, {})
        message_id = max(chat, default=0) + 1  # ids are never reused, deleted or not
        markup = params.get("reply_markup")
        if markup is not None and (invalid := _invalid_markup(markup)):
            return 400, invalid
        chat[message_id] = text
        if markup is not None:
            self.markups[(chat_id, message_id)] = markup
        thread = params.get("message_thread_id")
        self.threads[(chat_id, message_id)] = int(thread) if thread else None
        self._drafts.pop(chat_id, None)  # the message replaces the draft
        return 200, self._message(chat_id, message_id, text)

    async def _api_deleteMessage(self, params: dict[str, Any]) -> tuple[int, Any]:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        chat = self.messages.get(chat_id, {})
        if message_id not in chat:
            return 400, "Bad Request: message to delete not found"
        del chat[message_id]
        return 200, True

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> tuple[int, Any]:
        if not self.drafts:
            return 404, "Not Found: method not found"
        chat_id, draft_id = int(params["chat_id"]), int(params.get("draft_id") or 0)
        text = str(params.get("text") or "")
        if self.chat_types.get(chat_id, "private") != "private":
            return 400, "Bad Request: message drafts can be sent only to private chats"
        if draft_id == 0:
            return 400, "Bad Request: draft_id must be non-zero"
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return 400, "Bad Request: TEXT_TOO_LONG"
        now = asyncio.get_running_loop().time()
        self._drafts[chat_id] = _Draft(draft_id, text, now, bool(params.get("can_stop")))
        return 200, True

    async def _api_editMessageText(self, params: dict[str, Any]) -> tuple[int, Any]:
        chat_id, message_id, text = (
            int(params["chat_id"]),
            int(params["message_id"]),
            str(params["text"]),
        )
        chat = self.messages.get(chat_id, {})
        if message_id not in chat:
            return 400, "Bad Request: message to edit not found"
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return 400, "Bad Request: MESSAGE_TOO_LONG"
        markup = params.get("reply_markup")
        if markup is not None and (invalid := _invalid_markup(markup)):
            return 400, invalid
        key = (chat_id, message_id)
        if chat[message_id] == text and self.markups.get(key) == markup:
            self.unmodified += 1
            return (
                400,
                "Bad Request: message is not modified: specified new message content is exactly the same",
            )
        chat[message_id] = text
        # An edit without reply_markup takes the inline keyboard away.
        if markup is None:
            self.markups.pop(key, None)
        else:
            self.markups[key] = markup
        return 200, self._message(chat_id, message_id, text)

    async def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> tuple[int, Any]:
        chat_id, message_id = int(params["chat_id"]), int(params["message_id"])
        if message_id not in self.messages.get(chat_id, {}):
            return 400, "Bad Request: message to edit not found"
        markup = params.get("reply_markup")
        if markup is not None and (invalid := _invalid_markup(markup)):
            return 400, invalid
        key = (chat_id, message_id)
        if self.markups.get(key) == markup:
            self.unmodified += 1
            return 400, "Bad Request: message is not modified"
        if markup is None:
            self.markups.pop(key, None)
        else:
            self.markups[key] = markup
        return 200, self._message(chat_id, message_id, self.messages[chat_id][message_id])

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> tuple[int, Any]:
        query_id = str(params.get("callback_query_id", ""))
        if query_id not in self.answers or self.answers[query_id] is not None:
            return (
                400,
                "Bad Request: query is too old and response timeout expired or query ID is invalid",
            )
        text = str(params.get("text") or "")
        if len(text) > 200:
            return 400, "Bad Request: MESSAGE_TOO_LONG"
        self.answers[query_id] = {"text": text, "show_alert": bool(params.get("show_alert"))}
        return 200, True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> tuple[int, Any]:
        return 200, True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> tuple[int, Any]:
        commands = params.get("commands")
        if not isinstance(commands, list) or not all(
            isinstance(c, dict) and {"command", "description"} <= c.keys() for c in commands
        ):
            return 400, "Bad Request: can't parse commands"
        self.commands = [
            {"command": str(c["command"]), "description": str(c["description"])} for c in commands
        ]
        return 200, True


_ENTITY = re.compile(r"^/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?|(?<![\w@])@[A-Za-z0-9_]{5,32}")


def _entities(text: str) -> list[dict[str, Any]]:
    """The ``mention`` and ``bot_command`` entities Telegram finds in ``text`` (UTF-16)."""
    entities: list[dict[str, Any]] = []
    for match in _ENTITY.finditer(text):
        offset = len(text[: match.start()].encode("utf-16-le")) // 2
        length = len(match.group().encode("utf-16-le")) // 2
        kind = "bot_command" if match.group().startswith("/") else "mention"
        entities.append({"type": kind, "offset": offset, "length": length})
    return entities


def _counted(
    arrivals: list[float], rate: tuple[int, float], now: float
) -> tuple[list[float], int | None]:
    """The calls of a limit's window after one more arriving ``now``, and the seconds to wait
    when it is over the limit (the call is then not counted)."""
    calls, window = rate
    arrivals = [t for t in arrivals if now - t < window]
    if len(arrivals) >= calls:
        # Telegram answers whole seconds, at least one.
        return arrivals, max(1, math.ceil(window - (now - arrivals[0])))
    return [*arrivals, now], None


def _invalid_markup(markup: Any) -> str:
    """Why Telegram would refuse this ``reply_markup`` ("" when it takes it)."""
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list):
        return "Bad Request: can't parse reply keyboard markup JSON object"
    for row in cast(list[Any], rows):
        if not isinstance(row, list):
            return "Bad Request: can't parse inline keyboard button"
        for button in cast(list[Any], row):
            if not isinstance(button, dict) or not button.get("text"):
                return "Bad Request: can't parse inline keyboard button: text is empty"
            data = cast(dict[str, Any], button).get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= 64:
                return "Bad Request: BUTTON_DATA_INVALID"
    return ""


def _too_many(retry_after: int) -> dict[str, Any]:
    return {
        "ok": False,
        "error_code": 429,
        "description": f"Too Many Requests: retry after {retry_after}",
        "parameters": {"retry_after": retry_after},
    }
