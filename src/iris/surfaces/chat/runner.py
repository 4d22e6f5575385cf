"""The chat gateway: runs each enabled platform inside ``iris serve`` and one turn per chat.

``ChatSurface`` connects every enabled platform and handles its messages:

- admission (``admission``): in a group, channel or thread only a message addressed to the
  bot counts (``platforms.<name>.groups``): one that mentions it, replies to one of its
  messages or is a command with its name, or any follow-up in a thread the bot answered in
  (unless ``strict_mention``); ``respond: all`` and ``free_channels`` answer everything.
  Anything else is ignored, strangers included. Private chats always answer.
- only ``platforms.<name>.allowed_users`` reach the agent (by user id, or by user name with or
  without ``@``); anyone else gets a short refusal, at most once per ``REFUSAL_EVERY`` seconds,
  and nothing else happens. An empty list allows nobody. A message over ``max_text`` is
  refused whole, with a note.
- one session per conversation: a chat, or a thread within it (Telegram forum topic, Slack
  thread, Discord thread: ``session_key``); a new thread starts empty, ``/new`` in a
  thread resets that thread only, and every call of its reply carries its thread.
- one active turn per conversation: a new message interrupts
  the turn that is streaming (its text is finalized without the cursor), then runs. A message
  that was overtaken by a newer one before its turn began only joins the history.
- history per conversation lives in ``runtime.sessions`` (SQLite), keyed
  ``<platform>:<chat>[:<thread>]``; a turn goes through ``iris.agent.conversation`` (its
  question saved as it begins, then what ``iris.agent.history.kept`` says it leaves).
- over ``server.max_turns`` or ``max_turns_per_user`` a message waits in its platform's line
  (``iris.surfaces.chat.line``, ``platforms.<name>.queue_size``) with typing shown, and once,
  after ``QUEUED_AFTER`` seconds of waiting, a short "queued (n ahead)" note; only a message
  that finds the line full gets the busy note.
- the chat's throttle outlives single turns, so back-to-back replies share its budget, and so
  do the conversations of one chat where the platform limits the chat (its seat): it
  holds the chat's seat at the platform's shared budget (bot-wide, per workspace), where all
  chats of the bot take turns. A chat with no conversation yet (strangers' refusals in a
  channel) has its throttle too, by the seat it takes (a Discord channel), and the chat's
  first conversation takes it over.
- a chat command (``/new``, ``/stop``, ``/model``, ``/reasoning``, ``/compact``, ``/status``,
  ``/help``: ``iris.surfaces.commands``) from an allowed user is answered with a bot message;
  it never reaches the model, never joins the history and never interrupts the reply being
  written (except ``/stop``). Any other ``/word`` is ordinary text.
- the gateway's own messages (a refusal, the busy note, a command's answer) wait for the chat's
  throttle and the bot's shared budget like a reply's first text (``oneoff.send_once``).
- the stop button of a Telegram draft interrupts the turn whose draft it was, and nothing else
  (draft ids go on across the chat's replies, so a late press on an older draft is stale).
- with a shared store (``store.url``), a platform receives only in the process that holds its
  bot's poller lease; the others stand by (``iris.surfaces.chat.poller``). A platform whose
  messages come to a webhook (WhatsApp: its ``routes``, served by ``iris serve``) receives in
  whichever process the request reaches; a reply to an MCP server's question another process
  asks in that chat goes to that process (``questions.hand_over``), not to a turn here.
- a tool call that waits for approval shows a prompt with buttons in the chat (``prompts``;
  on a platform without buttons such a call is refused: nobody can be asked there);
  a press counts only from a user ``allowed_users`` lets in, on a prompt of that chat; anyone
  else is told so where only they see it, and nothing changes. The first answer wins
  (``runtime.approvals``); a later press is told what was decided, and by whom.
- a scheduled run (``/remind``, ``/every``) comes as the message of the user who scheduled
  it: its first message (``⏰`` and the prompt, ``scheduled``), then its turn, in line like
  any message's.
- the history sent to the model fits its window; what a compaction replaced is recorded as a
  cut in the session (``iris.agent.context``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from starlette.routing import BaseRoute

from iris.agent.conversation import Conversation, TurnOptions, UserMessage
from iris.agent.core import Turn
from iris.agent.tools import Tool
from iris.config import Surface
from iris.errors import StoreUnavailable, user_message
from iris.events import Event, TurnFailed
from iris.observability import metrics
from iris.runtime import House, Runtime
from iris.state.controls import Controls
from iris.state.prompts import SharedPrompts
from iris.state.threads import threads_for
from iris.surfaces.actions import CommandTarget, execute
from iris.surfaces.chat.admission import Refusals, addressed, allowed, too_long
from iris.surfaces.chat.consumer import StreamConsumer
from iris.surfaces.chat.downloads import gather
from iris.surfaces.chat.line import Line, Place
from iris.surfaces.chat.oneoff import send_once
from iris.surfaces.chat.platforms import build_platforms
from iris.surfaces.chat.platforms.base import (
    ChatPlatform,
    IncomingMessage,
    PlatformError,
    WebhookPlatform,
    approval_platform,
)
from iris.surfaces.chat.poller import BotPoller, bot_token
from iris.surfaces.chat.prompts import Prompts
from iris.surfaces.chat.questions import PREFIX as QUESTION
from iris.surfaces.chat.questions import ChatQuestions, asks
from iris.surfaces.chat.scheduled import RETRY_DELAYS, desk, first_message, run_message, untold
from iris.surfaces.chat.throttle import Throttle
from iris.surfaces.chat.transport import choose, whole
from iris.surfaces.chat.typing_lease import TypingLease
from iris.surfaces.commands import Command, parse
from iris.surfaces.scheduler import Delivery, Run
from iris.tasks import OpenGroup, logged
from iris.turn_slots import TurnSlot

log = logging.getLogger(__name__)

BUSY = "Busy right now, please try again in a moment."
QUEUED = "⏳ Queued ({ahead} ahead of you): I'll answer as soon as it's your turn."
# Seconds a message waits in line (typing shown) before the queued note.
QUEUED_AFTER = 3.0
# Throttles of chats kept at most, by seat (the least recently used go first: by then their
# budget has long refilled; a session keeps its own).
_THROTTLES_KEPT = 10_000
# Commands that change the history: they wait for the turn that is saving its reply.
HISTORY_COMMANDS = frozenset({"new", "compact"})
# How long a turn gets to end after an interrupt before its task is cancelled.
_STOP_GRACE = 5.0


def session_key(message: IncomingMessage) -> str:
    thread = ":".join(message.thread[k] for k in sorted(message.thread))
    base = f"{message.platform}:{message.chat_id}"
    return f"{base}:{thread}" if thread else base


@dataclass
class _Session:
    chat: Conversation  # its history and controls: every turn and command goes through it
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    turn: Turn | None = None
    latest: int = 0  # sequence number of the newest message received
    throttle: Throttle | None = None
    native_refused: bool = False  # the platform refused native streaming here: edits only
    consumer: StreamConsumer | None = None  # the reply being written, while ``turn`` runs
    next_draft: int = 1  # the first draft id of the next reply (ids never repeat in a chat)
    arrived: float = float("-inf")  # when its newest message came (monotonic)
    answered: bool = False  # the bot answered here: follow-ups in its thread need no mention
    # A turn slot won in line by a message a newer one overtook: the newest one runs on it.
    handed: TurnSlot | None = None
    waiting: Place | None = None  # its message's place in the platform's line, while it waits


class ChatSurface:
    def __init__(self, runtime: Runtime, platforms: list[ChatPlatform] | None = None) -> None:
        self.runtime = runtime
        self.platforms = platforms if platforms is not None else build_platforms(runtime.config)
        for platform in self.platforms:
            if isinstance(platform, WebhookPlatform):  # a redelivery is answered once, anywhere
                platform.deliveries = runtime.deliveries
        self._sessions: dict[str, _Session] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # messages being handled, in _group
        self._group = OpenGroup()  # from start to stop
        self._refusals = Refusals()
        # (platform, seat) -> the throttle of a chat that has no session (yet).
        self._throttles: OrderedDict[tuple[str, str], Throttle] = OrderedDict()
        self._connected: list[ChatPlatform] = []
        # With a shared store: one poller per platform, receiving while it holds the bot's lease.
        self._pollers: list[BotPoller] = []
        self._poller_tasks: set[asyncio.Task[None]] = set()
        # The approval prompts open in every chat (with a shared store: in every process).
        shared = runtime.shared
        self.prompts = Prompts(None if shared is None else SharedPrompts(shared))
        # MCP servers' requests for input, asked in the chat (buttons or a reply).
        self.questions = ChatQuestions(runtime.elicitations)
        # Which threads the bot answered in, kept across restarts and processes.
        self.threads = runtime.threads or threads_for(runtime.store, runtime.shared)
        # Per platform: the messages waiting for a turn slot (platforms.<name>.queue_size).
        self._lines = {
            p.name: Line(runtime.turns, getattr(runtime.config.platforms, p.name).queue_size)
            for p in self.platforms
        }
        self.queued_after = QUEUED_AFTER
        # Seconds between tries of a scheduled run's first message before it counts as
        # undelivered (the platform is down, the chat is gone, the bot was removed).
        self.retry_delays: tuple[float, ...] = RETRY_DELAYS

    # -- ServerSurface ------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        """The webhooks of the platforms that receive by webhook (WhatsApp)."""
        routes: list[BaseRoute] = []
        for platform in self.platforms:
            if isinstance(platform, WebhookPlatform):
                routes.extend(platform.routes())
        return routes

    async def start(self) -> None:
        await self._group.open()
        for platform in self.platforms:
            if self.runtime.shared is None or isinstance(platform, WebhookPlatform):
                await self._connect(platform)
            else:
                await self._poll(platform)

    async def _connect(self, platform: ChatPlatform) -> bool:
        try:
            await platform.connect(self._receiver(platform))
        except PlatformError as exc:
            # A wrong token or an unreachable API: say so, keep the rest of the server up.
            log.error("chat platform %s not started: %s", platform.name, exc)
            return False
        self._connected.append(platform)
        if callable(getattr(platform, "handle_intent", None)):
            # Home Assistant: where a voice turn that outlived its spoken reply goes on
            self.runtime.house = cast(House, platform)
        tools = getattr(platform, "tools", None)
        if callable(tools):  # Home Assistant: the house tools, over its connection
            for tool in cast(Callable[[], list[Tool]], tools)():
                self.runtime.agent.tools.add(tool)
        log.info("chat platform %s connected", platform.name)
        return True

    async def _poll(self, platform: ChatPlatform) -> None:
        """With a shared store: receive for the bot only while this process holds its poller
        lease (``iris.surfaces.chat.poller``); returns once it receives or stands by."""
        shared, config = self.runtime.shared, self.runtime.config
        assert shared is not None
        poller = BotPoller(
            shared,
            platform.name,
            bot_token(config, platform.name),
            config.store.lease,
            connect=lambda: self._connect(platform),
            disconnect=lambda lost: self._let_go(platform, lost),
        )
        self._pollers.append(poller)
        work = logged(poller.run(), f"{platform.name} poller")
        self._poller_tasks.add(self._group.create_task(work, name=f"poller:{platform.name}"))
        await poller.settled.wait()

    async def _let_go(self, platform: ChatPlatform, lost: bool) -> None:
        """Stop receiving on ``platform``; when its lease was ``lost``, another process may
        receive already: the replies being written here end now (their text so far stays)."""
        if lost:
            for key, session in self._sessions.items():
                if key.startswith(f"{platform.name}:") and session.turn is not None:
                    session.turn.interrupt()
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=_STOP_GRACE)
        if platform in self._connected:
            self._connected.remove(platform)
        with contextlib.suppress(Exception):
            await platform.disconnect()

    async def stop(self) -> None:
        for session in self._sessions.values():
            if session.turn is not None:
                session.turn.interrupt()
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=_STOP_GRACE)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        for poller in self._pollers:
            poller.stop()  # it disconnects its platform, then gives the lease up
        if self._poller_tasks:
            await asyncio.wait(self._poller_tasks)
        for platform in reversed(self._connected):
            with contextlib.suppress(Exception):
                await platform.disconnect()
        self._connected.clear()
        for line in self._lines.values():
            line.close()
        for session in self._sessions.values():
            slot, session.handed = session.handed, None
            if slot is not None:
                slot.release()
        await self._group.close()

    async def idle(self) -> None:
        """Wait until no message is being handled (for tests and shutdown)."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    # -- messages -----------------------------------------------------------------------------
    def _receiver(self, platform: ChatPlatform) -> Callable[[IncomingMessage], Any]:
        # A webhook may bring the answer to a question another process asks (shared store).
        relays = isinstance(platform, WebhookPlatform) and self.runtime.shared is not None

        async def on_message(message: IncomingMessage) -> None:
            if relays and await self._handed_over(platform, message):
                return
            self.receive(platform, message)

        return on_message

    async def _handed_over(self, platform: ChatPlatform, message: IncomingMessage) -> bool:
        """The message answers an MCP server's question another process asks by reply in
        its chat: handed to that process (``questions.hand_over``), it starts no turn here.
        Only what would answer a question asked here does (``_may_answer``)."""
        settings = getattr(self.runtime.config.platforms, platform.name)
        if message.press is not None or message.stop or not message.text.strip():
            return False
        if not self._may_answer(settings, message):
            return False
        return await self.questions.hand_over(session_key(message), message)

    def receive(self, platform: ChatPlatform, message: IncomingMessage) -> None:
        """Take one message; returns at once (the platform's receive loop must not block)."""
        settings = getattr(self.runtime.config.platforms, platform.name)
        if message.press is not None and message.press.data.startswith(f"{QUESTION}:"):
            self._spawn(self.questions.press(message, allowed(settings, message)))
            return
        if message.press is not None:
            self._spawn(self._press(platform, message, allowed(settings, message)))
            return
        if message.stop:
            self._stop_button(message)
            return
        if not message.text.strip() and not message.attachments:
            return
        if self._answers_question(settings, message):
            self._spawn(self.questions.reply(message, session_key(message)))
            return
        known = self._sessions.get(session_key(message))
        if not addressed(settings, message, known is not None and known.answered):
            if self._follow_up(platform.name, message):
                # A thread this process has not seen the bot answer in: the store may know
                # (answered before a restart, or through another process).
                self._spawn(self._recall_thread(platform, message))
                return
            log.debug("%s: not addressed to the bot in %s: ignored", platform.name, message.chat_id)
            return
        if not allowed(settings, message):
            self._spawn(self._refuse(platform, message))
            return
        session = self._session(message)
        command = parse(message.text)
        if command is not None:
            self._spawn(self._command(platform, message, session, command))
            return
        note = too_long(settings, message)
        if note is not None:  # refused whole, as the iris socket does: no model call
            self._spawn(self._send_once(platform, message, session, note))
            return
        session.latest += 1
        # A burst (this message within ``debounce`` of the last, or one that interrupts a
        # turn) is one turn: it waits for that long a quiet, and the newest message runs with
        # the others in its history (finding 3 of the second hardening pass: a flood made one
        # model request per message). A message in a quiet chat runs at once.
        now = time.monotonic()
        debounce = settings.debounce
        settle = debounce > 0 and (now - session.arrived < debounce or session.turn is not None)
        session.arrived = now
        if session.turn is not None:
            session.turn.interrupt()  # finalized without the cursor, then this one runs
        self._spawn(self._handle(platform, message, session, session.latest, debounce * settle))

    def _answers_question(self, settings: Any, message: IncomingMessage) -> bool:
        """The message answers an MCP server's question waiting in its chat (rather than
        starting a turn): from an allowed user, addressed to the bot as the chat's settings
        say (the bot asked in this conversation: a follow-up in its thread is)."""
        return self.questions.waiting(session_key(message)) and self._may_answer(settings, message)

    def _may_answer(self, settings: Any, message: IncomingMessage) -> bool:
        """Not a command, from an allowed user, addressed to the bot (the bot asked in this
        conversation: a follow-up in its thread is)."""
        if parse(message.text) is not None:
            return False
        return allowed(settings, message) and addressed(settings, message, True)

    def _press(
        self, platform: ChatPlatform, message: IncomingMessage, admitted: bool
    ) -> Coroutine[Any, Any, None]:
        """A press of an approval prompt's button, for the prompts to answer: ``admitted``
        says whether the presser may answer in that chat at all."""
        # In a group, "allow in this chat" holds for the presser's own turns
        # (``tools.approval.group_allow``), not every member's.
        per_person = self.runtime.config.tools.approval.group_allow == "person"
        approvals = self.runtime.approvals
        return self.prompts.press(
            platform.name, message, approvals, admitted, per_person=per_person
        )

    def _stop_button(self, message: IncomingMessage) -> None:
        """The stop button of a draft (Telegram ``can_stop``): like /stop, for the turn whose
        draft it was. The button is on a reply an allowed user asked for, in their private
        chat; a press that reaches us after that turn moved on (an older reply's draft, a turn
        that ended) stops nothing."""
        session = self._sessions.get(session_key(message))
        turn = session.turn if session is not None else None
        consumer = session.consumer if session is not None else None
        draft = message.draft_id
        if turn is None or consumer is None or draft is None or not consumer.shows_draft(draft):
            log.debug("stop button in %s (draft %s) is stale: ignored", message.chat_id, draft)
            return
        turn.interrupt()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = self._group.create_task(logged(work, "handling a chat message"))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _follow_up(self, name: str, message: IncomingMessage) -> bool:
        """Could an unaddressed message be a follow-up in a thread the bot answered in, which
        only the store remembers (``threads``)?"""
        groups = getattr(getattr(self.runtime.config.platforms, name), "groups", None)
        if groups is None or groups.strict_mention or not message.thread:
            return False
        session = self._sessions.get(session_key(message))
        return session is None or not session.answered

    async def _recall_thread(self, platform: ChatPlatform, message: IncomingMessage) -> None:
        key = session_key(message)
        try:
            answered = await self.threads.answered(key)
        except StoreUnavailable as exc:
            log.warning("%s: whether the bot answered in a thread is unknown: %s", key, exc.message)
            return
        if not answered:
            log.debug("%s: not addressed to the bot in %s: ignored", platform.name, message.chat_id)
            return
        self._session(message).answered = True
        self.receive(platform, message)

    async def _answered(self, session: _Session, message: IncomingMessage) -> None:
        """The bot answered in this session: a thread's is kept, so that a follow-up there
        needs no mention after a restart or on another process either."""
        session.answered = True
        if not message.thread:
            return
        try:
            await self.threads.mark(session.chat.session)
        except StoreUnavailable as exc:
            log.warning("%s: not kept as answered: %s", session.chat.session, exc.message)

    async def _refuse(self, platform: ChatPlatform, message: IncomingMessage) -> None:
        refusal = self._refusals.due(platform.name, message.user_id, time.monotonic())
        if refusal is None:
            return
        log.warning("refused %s user %s (%s)", platform.name, message.user_id, message.user_name)
        # In a group the chat may have a session of allowed users: share its budget.
        session = self._sessions.get(session_key(message))
        await self._say(platform, message, session, refusal, "refusal")

    async def _handle(
        self,
        platform: ChatPlatform,
        message: IncomingMessage,
        session: _Session,
        sequence: int,
        debounce: float = 0.0,
    ) -> None:
        chat = session.chat
        # Its files are fetched while the burst settles; what the model will not get is said now.
        user = await gather(platform, message, self.runtime.config)
        await self._tell_notes(platform, message, session)
        if user.notes:
            notes = "\n".join(user.notes)
            await self._say(platform, message, session, notes, "attachment note")
        while debounce and sequence == session.latest:
            quiet = session.arrived + debounce - time.monotonic()
            if quiet <= 0:
                break
            await asyncio.sleep(quiet)  # until the chat was quiet that long, or a newer one came
        async with session.lock:
            slot, session.handed = session.handed, None
            if slot is None and sequence == session.latest:
                got = await self._turn_slot(platform, message, session)
                if got == "full":  # the line is full too: say so now
                    await self._say(platform, message, session, BUSY, "busy note")
                    return
                if got == "stopped":  # /stop while it waited: kept, not answered
                    await chat.remember(user)
                    return
                slot = got
            if sequence != session.latest:
                # A newer message arrived while this one waited: keep it as context only
                # (whole: its images go with the newer message's turn, then no further); the
                # slot it won in line is the newest one's (it waits on this lock).
                session.handed = slot
                metrics.chat_overtaken(platform.name)
                await chat.remember(user)
                return
            assert slot is not None
            try:
                await self._run_turn(platform, message, session, chat, user, sequence)
            except Exception:  # its question was kept when it began: only the reply is lost
                log.exception("chat turn crashed in %s", chat.session)
            finally:
                slot.release()
            await self._answered(session, message)

    async def _tell_notes(
        self, platform: ChatPlatform, message: IncomingMessage, session: _Session
    ) -> None:
        """What the chat was not told before (a scheduled run that was not delivered)."""
        notes = await untold(self.runtime.schedules, session.chat.session)
        if notes:
            await self._say(platform, message, session, "\n".join(notes), "schedule note")

    async def _turn_slot(
        self, platform: ChatPlatform, message: IncomingMessage, session: _Session
    ) -> TurnSlot | Literal["full", "stopped"]:
        """A turn slot for ``message``: at once, or after waiting in the platform's line
        (typing shown; after ``queued_after`` seconds one "queued" note); ``full`` when the
        line is, ``stopped`` when ``/stop`` took it out of the line."""
        settings = getattr(self.runtime.config.platforms, platform.name)
        got = self._lines[platform.name].join(
            f"{platform.name}:{message.user_id}", settings.max_turns_per_user
        )
        if got is None:
            return "full"
        if not isinstance(got, Place):
            return got
        metrics.chat_queued(platform.name)
        session.waiting = got
        try:
            async with TypingLease(platform, message.chat_id, thread=message.thread):
                done, _ = await asyncio.wait({got.granted}, timeout=self.queued_after)
                if not done:
                    note = QUEUED.format(ahead=got.ahead())
                    await self._say(platform, message, session, note, "queued note")
                return await got.wait()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if got.granted.cancelled() and task is not None and not task.cancelling():
                return "stopped"  # /stop took it out of the line
            raise
        finally:
            session.waiting = None
            got.leave()  # a slot granted but not taken (cancelled at shutdown) goes back

    async def _command(
        self,
        platform: ChatPlatform,
        message: IncomingMessage,
        session: _Session,
        command: Command,
    ) -> None:
        def stop() -> bool:
            if session.waiting is not None:  # still in line: it leaves, unanswered
                session.waiting.leave()
                return True
            if session.turn is None:
                return False
            session.turn.interrupt()
            return True

        display = self.runtime.config.display_for(cast(Surface, platform.name))
        target = CommandTarget(
            session.chat,
            busy=session.turn is not None,
            stop=stop,
            show_reasoning=display.show_reasoning,
            desk=desk(self.runtime, message, session.chat.session),
        )
        try:
            if command.name in HISTORY_COMMANDS and not target.busy:
                # A reply just delivered may not be in the history yet: wait until it is.
                async with session.lock:
                    answer = await execute(command, target)
            else:
                answer = await execute(command, target)
        except StoreUnavailable as exc:
            answer = f"/{command.name} failed: {exc.message}"
        except Exception:
            log.exception("/%s failed in %s", command.name, target.session)
            answer = f"/{command.name} failed: internal error"
        try:
            await self._send_once(platform, message, session, answer)
        except PlatformError as exc:
            log.info("answer to /%s not delivered: %s", command.name, exc)
        await self._answered(session, message)

    # -- scheduled runs (iris.surfaces.scheduler) ---------------------------------------------
    @property
    def run_targets(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.platforms)

    def ready(self, target: Mapping[str, Any]) -> bool:
        """A run for ``target`` can be delivered here: its platform is connected."""
        return any(p.name == target.get("surface") for p in self._connected)

    async def run(self, run: Run) -> Delivery:
        """A scheduled run: its first message (``⏰`` and the prompt, tried with backoff), then
        a turn of the chat's conversation streamed as a reply."""
        target = run.schedule.target
        platform = next((p for p in self._connected if p.name == target["surface"]), None)
        if platform is None:
            return Delivery("undelivered", f"{target['surface']} is not connected")
        message = run_message(run, platform.name)
        if not allowed(getattr(self.runtime.config.platforms, platform.name), message):
            return Delivery("refused", f"user {message.user_id} is no longer allowed")
        session = self._session(message)
        send = functools.partial(self._send_once, platform, message, session)
        schedules, retry = self.runtime.schedules, self.retry_delays
        failed = await first_message(run, send, schedules, session.chat.session, retry)
        if failed is not None:
            return failed
        session.latest += 1
        sequence = session.latest
        async with session.lock:
            # Under server.max_turns like any message: it waits in the platform's line.
            slot = await self._turn_slot(platform, message, session)
            if slot == "full":
                return Delivery("undelivered", "every turn slot was taken and the line was full")
            if slot == "stopped":
                return Delivery("undelivered", "stopped with /stop while it waited")
            try:
                chat, user = session.chat, UserMessage(run.schedule.text)
                await self._run_turn(platform, message, session, chat, user, sequence)
            finally:
                slot.release()
        await self._answered(session, message)
        return Delivery("delivered")

    def _session(self, message: IncomingMessage) -> _Session:
        """The session ``message`` belongs to, made on its first message."""
        key = session_key(message)
        session = self._sessions.get(key)
        if session is None:
            runtime = self.runtime
            # Asked in the chat, with buttons (``prompts``); where the platform has none
            # (WhatsApp) nobody can be asked, so a tool that asks is refused, never run unasked.
            buttons = any(
                p.name == message.platform and approval_platform(p) for p in self.platforms
            )
            approvals = runtime.approvals if buttons else None
            # An MCP server's question is asked with buttons of its own, or by reply where the
            # platform has none (WhatsApp) or too few (Matrix's three reactions); a platform
            # that asks neither way declines it at once.
            platform = next((p for p in self.platforms if p.name == message.platform), None)
            asking = platform is not None and asks(platform) is not None
            elicitations = runtime.elicitations if asking else None
            chat = Conversation(
                runtime.agent,
                runtime.sessions,
                runtime.controls,
                key,
                approvals=approvals,
                elicitations=elicitations,
            )
            session = self._sessions[key] = _Session(chat)
        return session

    async def _say(
        self,
        platform: ChatPlatform,
        message: IncomingMessage,
        session: _Session | None,
        text: str,
        what: str,
    ) -> None:
        """``_send_once``, a failure only logged (``what``: the message, as the log names it)."""
        try:
            await self._send_once(platform, message, session, text)
        except PlatformError as exc:
            log.info("%s to %s not delivered: %s", what, message.user_id, exc)

    async def _send_once(
        self,
        platform: ChatPlatform,
        message: IncomingMessage,
        session: _Session | None,
        text: str,
    ) -> None:
        """A one-off message in the chat of ``message``, within the chat's and the bot's
        budgets (``conversation``: whose throttle it shares; None: a chat without one)."""
        throttle = self._throttle(platform, message, session)
        await send_once(platform, message.chat_id, text, throttle=throttle, thread=message.thread)

    def _throttle(
        self, platform: ChatPlatform, message: IncomingMessage, session: _Session | None
    ) -> Throttle:
        """The chat's throttle, by its seat: made on first use, it outlives turns, and every
        session of the seat shares it (two Telegram forum topics of one group draw on the
        group's budget; a Discord thread is a channel, a seat, of its own)."""
        if session is not None and session.throttle is not None:
            return session.throttle
        # Its seat at the bot's shared budget: all chats of the bot take turns there.
        seat = platform.budget.seat(message.chat_id, message.thread)
        key = (platform.name, seat.key)
        throttle = self._throttles.get(key)
        if throttle is None:
            display = self.runtime.config.display_for(cast(Surface, platform.name))
            caps = platform.capabilities
            budget = caps.group_rate if message.is_group and caps.group_rate else caps.rate
            throttle = self._throttles[key] = Throttle(budget, display.edit_interval, seat=seat)
            if len(self._throttles) > _THROTTLES_KEPT:
                self._throttles.popitem(last=False)
        self._throttles.move_to_end(key)
        if session is not None:
            session.throttle = throttle  # the conversation's from now on
        return throttle

    async def _run_turn(
        self,
        platform: ChatPlatform,
        message: IncomingMessage,
        session: _Session,
        chat: Conversation,
        user: UserMessage,
        sequence: int,
    ) -> None:
        """Run the turn for ``user`` and deliver it; keep what it leaves in the history."""
        name = cast(Surface, platform.name)
        refused: StoreUnavailable | None = None
        try:  # the chat's /model and /reasoning, wherever they were sent (a shared store)
            controls = await chat.controls()
        except StoreUnavailable as exc:  # the turn cannot start: said below, like any failure
            controls, refused = Controls(), exc
        consumer = self._consumer(platform, message, session, chat, controls, sequence)
        options = TurnOptions(
            stream=self.runtime.config.streams(name),
            metadata={
                "surface": "chat",
                "platform": name,
                "chat_id": message.chat_id,
                "user_id": message.user_id,
            },
        )
        try:
            if refused is not None:
                raise refused
            exchange = await chat.begin(user, options, controls)
        except Exception as exc:
            # The turn could not even start: tell the user in one line, like a failed turn.
            code, text, retryable = user_message(exc)
            log.warning("turn failed to start in %s: %s", message.chat_id, text)
            await consumer.consume(_only(TurnFailed(code, text, retryable)))
            return
        try:
            async with exchange.turn as turn:
                session.turn, session.consumer = turn, consumer
                if sequence != session.latest:
                    turn.interrupt()  # overtaken while it was being set up
                events = whole(turn) if platform.capabilities.whole else turn
                outcome = await consumer.consume(self._asking(events, platform, message, chat))
        finally:
            session.turn = session.consumer = None
            session.next_draft = consumer.next_draft
            session.native_refused |= consumer.native_refused
        # A turn whose stream broke has no record of its own: the reply as the user saw it.
        # One not kept is logged by the conversation; the user has it in the chat already.
        await exchange.keep(outcome, consumer.reply.cut_text)

    def _asking(
        self,
        events: AsyncIterable[Event],
        platform: ChatPlatform,
        message: IncomingMessage,
        chat: Conversation,
    ) -> AsyncIterable[Event]:
        """The turn's events, MCP servers' questions asked in the chat on the way (on a
        platform that asks, ``questions.asks``: elsewhere the turn asks nobody)."""
        if asks(platform) is None or chat.elicitations is None:
            return events
        return self.questions.watch(events, platform, message, chat.session)

    def _consumer(
        self,
        platform: ChatPlatform,
        message: IncomingMessage,
        session: _Session,
        chat: Conversation,
        controls: Controls,
        sequence: int,
    ) -> StreamConsumer:
        """What writes the turn's reply in the chat, as the platform's display settings and
        the chat's controls say."""
        config = self.runtime.config
        name = cast(Surface, platform.name)
        display = config.display_for(name)
        display = display.model_copy(
            update={"show_reasoning": controls.reasoning(display.show_reasoning)}
        )
        streaming = config.streams(name)
        native = None
        if streaming and not session.native_refused:
            native = choose(platform, message, display.transport)
        return StreamConsumer(
            platform,
            message.chat_id,
            display=display,
            streaming=streaming,
            throttle=self._throttle(platform, message, session),
            thread=message.thread,
            native=native,
            first_draft=session.next_draft,
            # Once a newer message overtook this one, the reply's messages say what they answer.
            quote=lambda: message.message_id if sequence != session.latest else "",
            prompts=self.prompts,
            session=chat.session,
        )


async def _only(event: TurnFailed) -> AsyncIterator[Event]:
    yield event
