"""``MatrixPlatform``: a Matrix bot account over the client-server API (``matrix_api``).

Receiving is a long-polled ``/sync`` (``platforms.matrix.sync_timeout``). Its ``next_batch``
token is kept in Iris's private files (``<store dir>/matrix/``) before the events it brought
are handed on, so a restart goes on from there and never answers a message twice; the very
first start answers nothing that was said before it (its first sync only learns where the
rooms stand). A failed sync backs off (1 s doubling to 30 s); an ``M_LIMIT_EXCEEDED`` waits
what the homeserver said. The bot's own events are never read as messages.

Rooms: one of two members (the person and the bot) is a direct room and always answered;
in a larger room a message addresses the bot (``IncomingMessage.addressed``) when it mentions
it (``m.mentions``, a pill, its user id in the text: cut out of the text) or replies to one of
its messages. A message in a thread (``m.thread``) is its own conversation (``thread_root``),
and every new message of the reply goes into that thread. The bot joins ``rooms`` at start and,
with ``auto_join``, a room an allowed user invites it to.

A reply grows by edits (``m.replace``): Matrix counts no characters but 65536 bytes per event,
and an edit carries the text twice, with its HTML; so a message holds at most ``MAX_TEXT``
characters and a longer reply continues in a new one. Synapse limits events per user
(``rc_message``): an ``M_LIMIT_EXCEEDED`` blocks the bot's budget for ``retry_after_ms`` and is
counted (``api.limited``).

Approvals: no buttons on Matrix. The prompt is a message the bot reacts to with ✅ (allow once),
🔁 (allow in this chat) and ❌ (deny); a person's reaction with one of these keys on that very
event is the press (the runner checks who may answer), and the prompt is edited to say what
was decided and by whom. Matrix has no reply only the presser sees: a press is answered in the
log only.

Encrypted rooms are not read (no keys): the bot says so once in such a room and answers
nothing there.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

from iris.config import MatrixConfig
from iris.private import private_dir
from iris.surfaces.chat.budget import Limit, SharedBudget, rate_budget, whole_chat
from iris.surfaces.chat.platforms import matrix_events as events
from iris.surfaces.chat.platforms.base import (
    Attachment,
    Capabilities,
    IncomingMessage,
    OnMessage,
    PlatformError,
    PlatformRateLimited,
)
from iris.surfaces.chat.platforms.matrix_api import JSON, MatrixApi, MatrixRefused, quoted
from iris.surfaces.chat.prompts import PREFIX, Press, Prompt
from iris.tasks import OpenGroup, logged

log = logging.getLogger(__name__)

MAX_TEXT = 4000  # characters of one message (see the module docstring)
ENCRYPTED = (
    "🔒 This room is end-to-end encrypted, and I cannot read encrypted messages yet: "
    "I will not answer here. Talk to me in a room without encryption."
)
_BACKOFF_MAX = 30.0
_SENT_KEPT = 10_000  # event ids of the bot's messages remembered (replies to it)
_PROMPTS_KEPT = 1_000
_SYNC_FILTER = json.dumps(
    {
        "presence": {"not_types": ["*"]},
        "account_data": {"not_types": ["*"]},
        "room": {
            "timeline": {"limit": 50},
            "state": {"lazy_load_members": True},
            "ephemeral": {"not_types": ["*"]},
            "account_data": {"not_types": ["*"]},
        },
    }
)


class _Kept:
    """What the adapter keeps across restarts, in one owner-only JSON file: the sync token,
    the rooms told that encryption is not read, a token got by logging in."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict[str, Any] = {}
        if path is not None and path.exists():
            with contextlib.suppress(ValueError, OSError):
                loaded: object = json.loads(path.read_text())
                self.data = cast(dict[str, Any], loaded) if isinstance(loaded, dict) else {}

    def get(self, key: str) -> Any:
        return self.data.get(key)

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        if self.path is None:
            return
        private_dir(self.path.parent)
        temporary = self.path.with_suffix(".tmp")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(json.dumps(self.data))
        os.replace(temporary, self.path)


def kept_path(folder: Path, settings: MatrixConfig) -> Path:
    """The bot's file in ``folder``: named by its homeserver and user id."""
    name = hashlib.sha256(f"{settings.homeserver}\n{settings.user_id}".encode()).hexdigest()
    return folder / f"{name[:16]}.json"


class MatrixPlatform:
    name = "matrix"
    asks_by_reply = (
        True  # three reactions only: an MCP server's question, field by field (``questions``)
    )
    approval_limit = MAX_TEXT - 100  # the reactions' legend goes below the prompt
    capabilities: Capabilities
    budget: SharedBudget

    def __init__(self, settings: MatrixConfig, folder: Path | None = None) -> None:
        if not settings.user_id.startswith("@") or ":" not in settings.user_id:
            raise PlatformError("platforms.matrix.user_id must be a Matrix id, @name:server")
        self.settings = settings
        self.kept = _Kept(None if folder is None else kept_path(folder, settings))
        token = settings.resolved_access_token() or str(self.kept.get("access_token") or "")
        if not token and not settings.resolved_password():
            raise PlatformError("platforms.matrix: no access token (access_token_env) or password")
        self.api = MatrixApi(settings.homeserver, token)
        budgets = settings.budgets
        self.capabilities = Capabilities(
            can_edit=True, max_length=MAX_TEXT, length_unit="chars", rate=rate_budget(budgets.room)
        )
        # Synapse's rc_message counts every event the bot sends, in any room; it is a bucket
        # that takes bursts (burst_count), so a first text or a final goes at once where the
        # window has room, and previews are paced.
        self.budget = SharedBudget(
            [Limit("bot", rate_budget(budgets.bot), burst=True)],
            {"send": ["bot"], "edit": ["bot"], "delete": ["bot"]},
            scope=whole_chat,  # a room's threads are one room to the homeserver
        )
        self.me = settings.user_id
        self._sizes: dict[str, int] = {}  # room id -> members (joined and invited)
        self._sent: OrderedDict[str, None] = OrderedDict()  # the bot's own message ids
        self._prompts: OrderedDict[str, str] = OrderedDict()  # prompt event id -> token
        self._syncer: asyncio.Task[None] | None = None
        self._syncing = OpenGroup()
        self.synced = asyncio.Event()  # the first sync is done (tests, the bench)
        self.pause: Callable[[float], Awaitable[None]] = asyncio.sleep  # between failed syncs

    # -- connecting ---------------------------------------------------------------------------
    async def connect(self, on_message: OnMessage) -> None:
        if not self.api.token:
            await self._login()
        try:
            whoami = await self.api.call("GET", "/account/whoami")
        except MatrixRefused as exc:
            raise PlatformError(f"matrix: the homeserver refused the login: {exc}") from None
        if whoami.get("user_id") != self.me:
            raise PlatformError(
                f"matrix: the access token is {whoami.get('user_id')}'s, not {self.me}'s"
            )
        for room in self.settings.rooms:
            await self._join(room)
        await self._syncing.open()
        work = logged(self._sync_forever(on_message), "matrix sync")
        self._syncer = self._syncing.create_task(work, name="matrix-sync")

    async def _login(self) -> None:
        """Log in with the password once; the token is kept (owner-only) for later starts."""
        body = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": self.me},
            "password": self.settings.resolved_password(),
            "initial_device_display_name": "Iris",
        }
        try:
            answer = await self.api.call("POST", "/login", body)
        except MatrixRefused as exc:
            raise PlatformError(f"matrix: the homeserver refused the login: {exc}") from None
        self.api.token = str(answer.get("access_token", ""))
        self.kept.put("access_token", self.api.token)

    async def disconnect(self) -> None:
        syncer, self._syncer = self._syncer, None
        if syncer is not None:
            syncer.cancel()  # it syncs until told to stop
            await self._syncing.close()
        await self.api.aclose()

    async def _join(self, room: str) -> None:
        try:
            await self.api.call("POST", f"/join/{quoted(room)}", {})
        except PlatformError as exc:
            log.warning("matrix: could not join %s: %s", room, exc)

    # -- receiving ----------------------------------------------------------------------------
    async def _sync_forever(self, on_message: OnMessage) -> None:
        since: str | None = self.kept.get("since")
        first = since is None  # nothing said before the bot's first start is answered
        backoff = 1.0
        while True:
            params = {"filter": _SYNC_FILTER}
            if since is not None:
                params["since"] = since
                params["timeout"] = str(int(self.settings.sync_timeout * 1000))
            try:
                body = await self.api.call("GET", "/sync", params=params, read_for=self._poll())
            except PlatformRateLimited as exc:
                await self.pause(exc.retry_after)
                continue
            except PlatformError as exc:
                log.warning("matrix: sync failed: %s (retrying in %.0fs)", exc, backoff)
                await self.pause(backoff)
                backoff = min(backoff * 2, _BACKOFF_MAX)
                continue
            backoff = 1.0
            since = str(body.get("next_batch", since or ""))
            self.kept.put("since", since)  # before the events go on: never answered twice
            await self._take(body, on_message, history=first)
            first = False
            self.synced.set()

    def _poll(self) -> float:
        return self.settings.sync_timeout + 15.0

    async def _take(self, body: JSON, on_message: OnMessage, *, history: bool) -> None:
        rooms = _mapping(body.get("rooms"))
        for room_id, invited in _mapping(rooms.get("invite")).items():
            await self._invited(room_id, _mapping(invited))
        for room_id, joined in _mapping(rooms.get("join")).items():
            room = _mapping(joined)
            self._sized(room_id, _mapping(room.get("summary")))
            timeline = _events(room, "timeline")
            # Encrypted since before the bot came in: its state says so, not the events it reads.
            if any(e.get("type") == "m.room.encryption" for e in _events(room, "state") + timeline):
                await self._encrypted(room_id)
            for event in self._since_joined(timeline):
                await self._event(room_id, event, on_message, history=history)

    def _since_joined(self, timeline: list[JSON]) -> list[JSON]:
        """The events from the bot's own join on, where it joined in this batch: what was said
        in a room before the bot came in is its history, not questions to it."""
        for index in range(len(timeline) - 1, -1, -1):
            event = timeline[index]
            content = _mapping(event.get("content"))
            before = _mapping(_mapping(event.get("unsigned")).get("prev_content"))
            if (
                event.get("type") == "m.room.member"
                and event.get("state_key") == self.me
                and content.get("membership") == "join"
                and before.get("membership") != "join"  # not a change of its profile
            ):
                return timeline[index:]
        return timeline

    def _sized(self, room_id: str, summary: JSON) -> None:
        joined, invited = (
            summary.get("m.joined_member_count"),
            summary.get("m.invited_member_count"),
        )
        if isinstance(joined, int):
            self._sizes[room_id] = joined + (invited if isinstance(invited, int) else 0)

    async def _invited(self, room_id: str, room: JSON) -> None:
        """Join a room an allowed user invited the bot to (``auto_join``)."""
        state = _mapping(room.get("invite_state")).get("events")
        inviter = ""
        for event in cast(list[Any], state) if isinstance(state, list) else []:
            if isinstance(event, dict):
                found = cast(JSON, event)
                if found.get("type") == "m.room.member" and found.get("state_key") == self.me:
                    inviter = str(found.get("sender", ""))
        if self.settings.auto_join and inviter in self.settings.allowed_users:
            await self._join(room_id)
        else:
            log.info("matrix: invite to %s by %s not taken", room_id, inviter or "someone")

    async def _event(
        self, room_id: str, event: JSON, on_message: OnMessage, *, history: bool
    ) -> None:
        read = events.seen(event, self.me)
        if read.sender == self.me:
            return  # the bot's own events, its replies and reactions
        if read.kind == "membership":
            self._sizes.pop(room_id, None)  # counted again when next needed
        elif read.kind == "encrypted":
            await self._encrypted(room_id)
        elif history or room_id in self._told():
            return  # said before the bot started, or in a room it cannot read
        elif read.kind == "reaction":
            await self._reacted(room_id, read, on_message)
        elif read.kind == "message":
            incoming = await self._incoming(room_id, read)
            try:
                await on_message(incoming)
            except Exception:  # one bad message must not stop receiving
                log.exception("matrix message handler failed")

    async def _encrypted(self, room_id: str) -> None:
        """Say once in an encrypted room that the bot cannot read it."""
        told = self._told()
        if room_id in told:
            return
        self.kept.put("encrypted_told", [*told, room_id])
        log.warning("matrix: %s is encrypted: not answered there", room_id)
        try:
            await self.api.send_event(room_id, "m.room.message", events.message(ENCRYPTED))
        except PlatformError as exc:
            log.info("matrix: the note in encrypted room %s was not sent: %s", room_id, exc)

    def _told(self) -> list[str]:
        """The encrypted rooms, told so."""
        return [str(room) for room in self.kept.get("encrypted_told") or []]

    async def _incoming(self, room_id: str, read: events.Seen) -> IncomingMessage:
        group = await self._members(room_id) > 2
        to_bot = bool(read.reply_to) and await self._is_bots(room_id, read.reply_to)
        addressed = self.me in read.mentions or to_bot
        text = read.text
        if addressed and self.me in read.mentions:
            text = events.without_mention(text, self.me, read.pill_labels)
        bot_thread = bool(read.thread_root) and read.thread_root in self._sent
        return IncomingMessage(
            platform=self.name,
            chat_id=room_id,
            user_id=read.sender,
            text=text,
            is_group=group,
            message_id=read.event_id,
            thread={events.THREAD_KEY: read.thread_root} if read.thread_root else {},
            addressed=addressed,
            bot_thread=bot_thread,
            attachments=read.attachments,
        )

    async def _members(self, room_id: str) -> int:
        size = self._sizes.get(room_id)
        if size is None:
            try:
                answer = await self.api.call("GET", f"/rooms/{quoted(room_id)}/joined_members")
                size = len(_mapping(answer.get("joined")))
            except PlatformError as exc:
                log.info("matrix: members of %s unknown: %s", room_id, exc)
                return 3  # unknown: a group, where only what addresses the bot is answered
            self._sizes[room_id] = size
        return size

    async def _is_bots(self, room_id: str, event_id: str) -> bool:
        """Is ``event_id`` a message of the bot? (Its own, or asked of the homeserver.)"""
        if event_id in self._sent:
            return True
        try:
            event = await self.api.call("GET", f"/rooms/{quoted(room_id)}/event/{quoted(event_id)}")
        except PlatformError:
            return False
        return event.get("sender") == self.me

    async def _reacted(self, room_id: str, read: events.Seen, on_message: OnMessage) -> None:
        """A reaction on an approval prompt of the bot: a press of its button."""
        token = self._prompts.get(read.reacted_to)
        code = events.REACTIONS.get(read.key)
        if token is None or code is None:
            return

        async def answer(text: str, refused: bool) -> None:
            log.info("matrix: approval reaction by %s in %s: %s", read.sender, room_id, text)

        press = IncomingMessage(
            platform=self.name,
            chat_id=room_id,
            user_id=read.sender,
            text="",
            is_group=await self._members(room_id) > 2,
            message_id=read.reacted_to,
            press=Press(f"{PREFIX}:{code}:{token}", answer),
        )
        try:
            await on_message(press)
        except Exception:
            log.exception("matrix reaction handler failed")

    # -- sending ------------------------------------------------------------------------------
    async def _send(self, room_id: str, content: JSON) -> str:
        try:
            event_id = await self.api.send_event(room_id, "m.room.message", content)
        except PlatformRateLimited as exc:
            self.budget.block(asyncio.get_running_loop().time() + exc.retry_after)
            raise
        self._sent[event_id] = None
        if len(self._sent) > _SENT_KEPT:
            self._sent.popitem(last=False)
        return event_id

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        return await self._send(chat_id, events.message(text, thread))

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        # An edit's relation is m.replace: the message it edits is in the thread already.
        await self._send(chat_id, events.edit(message_id, text))

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        """Redact a message of the bot (a preview replaced by a fresh final)."""
        try:
            await self.api.redact(chat_id, message_id)
        except PlatformRateLimited as exc:
            self.budget.block(asyncio.get_running_loop().time() + exc.retry_after)
            raise

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        path = f"/rooms/{quoted(chat_id)}/typing/{quoted(self.me)}"
        await self.api.call("PUT", path, {"typing": True, "timeout": 6000})

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        if attachment.size > max_bytes:
            raise PlatformError(f"larger than {max_bytes} bytes")
        return await self.api.download(attachment.ref, max_bytes)

    # -- approvals ----------------------------------------------------------------------------
    async def send_prompt(
        self, chat_id: str, prompt: Prompt, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """The prompt, then the bot's reactions offering the choices. A reaction that does not
        go out is only logged: the prompt landed (re-sending it would show it twice), and a
        person's own reaction with that key answers all the same."""
        choices = "   ".join(
            f"{key} {b.label}" for key, b in zip(events.REACTIONS, prompt.buttons, strict=True)
        )
        event_id = await self._send(
            chat_id, events.message(f"{prompt.text}\n\n{choices}", thread, formatted=False)
        )
        token = prompt.buttons[0].data.rsplit(":", 1)[-1]
        self._prompts[event_id] = token
        if len(self._prompts) > _PROMPTS_KEPT:
            self._prompts.popitem(last=False)
        for key in events.REACTIONS:
            try:
                await self.api.send_event(chat_id, "m.reaction", events.reaction(event_id, key))
            except PlatformError as exc:
                log.info("matrix: reaction %s on the prompt in %s not added: %s", key, chat_id, exc)
        return event_id

    async def send_as_written(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        return await self._send(chat_id, events.message(text, thread, formatted=False))

    async def close_prompt(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        self._prompts.pop(message_id, None)
        await self._send(chat_id, events.edit(message_id, text, formatted=False))


def _mapping(value: object) -> JSON:
    return cast(JSON, value) if isinstance(value, dict) else {}


def _events(room: JSON, section: str) -> list[JSON]:
    """The events of a joined room's ``state`` or ``timeline`` in a sync answer."""
    found = _mapping(room.get(section)).get("events")
    listed = cast(list[Any], found) if isinstance(found, list) else []
    return [cast(JSON, event) for event in listed if isinstance(event, dict)]
