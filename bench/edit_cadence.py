"""Edit cadence: a long streamed reply through the real consumer and a fake platform, per budget.

    python bench/edit_cadence.py [--seconds 30] [--rate 40] [--latency 0.05]
                                 [--chats 40] [--crowd-seconds 8] [--transports edit,native]
                                 [--split-chats 20] [--split-rounds 4] [--split-length 6000]
                                 [--matrix-rooms 3] [--matrix-seconds 10] [--only-matrix]

Matrix (``--matrix-rooms``, 0: none; ``bench/edit_cadence_matrix.py``): that many direct rooms
on a real Synapse (the tests' side venv), the bot on Synapse's default limit and then with it
lifted: edits per reply, ``M_LIMIT_EXCEEDED`` answers met, first visible text.

For each platform budget (Telegram private and group, Discord, Slack) a reply of ``--seconds``
at ``--rate`` deltas per second goes through ``StreamConsumer`` into a recording platform whose
calls take ``--latency`` seconds; all four run at once, in real time. Prints per chat: calls,
the most calls in any 60 s window against the budget, and the delay from a delta's arrival to
the end of the first call that shows it (p50/p95) against the target edit_interval + 0.3 s.

Before both, the split reply (``--split-chats`` at once, ``--split-rounds`` times): a
Telegram private-chat reply too long for one message, whose two ``sendMessage`` go back to back
at the edge of the chat's budget, through the real adapter into the Bot API fake, which counts
each chat's calls on arrival (one a second); prints per-chat 429s and the smallest gap between
two calls of one chat as the platform saw them, beside the budget.

Then the crowd: ``--chats`` chats of one bot reply at once (``--crowd-seconds`` each), per
platform, through the real adapters on the wire into the platform fakes, which enforce the
bot-wide limits (Telegram 30 messages/s, Discord 50 requests/s, Slack ``chat.update`` 50/min
per workspace) and count 429s; each chat's throttle sits at the adapter's shared budget with
the default ``platforms.<p>.budgets``. Prints per platform: 429s (target 0), replies whole and
once, first visible text after the first token (p50/p95, the ``min_tokens`` wait included;
target p95 within 2 x edit_interval), calls per minute against the shared budget, and the delay
from token to visible (p50/p95).

The crowd runs per transport (``--transports``): ``edit`` on every platform, and ``native``
where the adapter has one for a private chat (``native_for``): Telegram drafts
(``sendMessageDraft``) and Slack streams (``chat.startStream`` / ``appendStream`` /
``stopStream``, in the thread under the person's DM). "Visible" is what the person sees: a
draft's text until the message replacing it, a stream's accumulated text after each call (the
Slack fake's ``views``). Drafts draw on no shared budget; each stream method draws on its own
(``platforms.slack.budgets.stream``, Slack's Tier 4), not on ``chat.update``'s. On a Slack row
``calls/min`` is the busiest method's (``chat.update`` for edits, a stream method for streams)
against its budget and Slack's limit per method (Tier 3: 50, Tier 4: 100 a minute), and
``most/60s`` the most of them in any 60 s (a run shorter than a minute that opens forty streams
at once has a high rate per minute of the run, yet stays within a per-minute limit);
``native/min`` counts the drafts, or all stream calls.

Then the line (``--line-users``, 0: none): that many Telegram users write to one bot at once,
through the whole gateway (``ChatSurface``: the runner, the agent, the real adapter on the Bot
API fake, which counts the bot's 429s and each chat's at one a second) on the default config
(``server.max_turns`` 32, ``platforms.telegram.queue_size`` 100; streaming switched on, so
that a turn lasts as long as its reply), each answered by a ``--line-seconds`` stream from the
scripted upstream (drafts, then the message, in a private chat). Those past ``max_turns`` wait in line.
Prints: replies whole and once, busy notes (target 0), queued notes, 429s the bot caused
(target 0), the longest wait for a turn and the time until every reply was in.

Then blocks (``--blocks-chats``, 0: none): that many WhatsApp users of one business number get
a reply of ``--blocks-seconds`` at once, in paragraphs of ``--paragraph`` words, through the
real ``WhatsAppPlatform`` on the Cloud API stand-in (tests/fakes/whatsapp_api.py), which
answers error 131056 to a message that reaches the same user sooner than the pair limit allows
(Meta documents one message every 6 seconds; the stand-in counts arrivals and allows 0.1 s of
network jitter). Each chat streams in blocks (``min_block_chars``, ``block_idle`` at their
defaults) under the default ``platforms.whatsapp.budgets``. Prints: messages per reply
(p50/max), time from the first token to the first block (p50/p95), pair-limit 429s (target
0), and replies whole and once (the blocks read back as the reply).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import itertools
import statistics
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.discord_api import DiscordAPI  # noqa: E402
from tests.fakes.recording_platform import RecordingPlatform  # noqa: E402
from tests.fakes.slack_api import SlackAPI  # noqa: E402
from tests.fakes.telegram_api import FakeBotApi  # noqa: E402
from tests.fakes.whatsapp_api import WhatsAppAPI  # noqa: E402

from iris.config import (
    DiscordConfig,  # noqa: E402
    ResolvedDisplay,  # noqa: E402
    SlackConfig,  # noqa: E402
    TelegramConfig,  # noqa: E402
    WhatsAppConfig,  # noqa: E402
)
from iris.events import Event, SegmentEnded, TextDelta, TurnEnded  # noqa: E402
from iris.surfaces.chat.budget import RateBudget
from iris.surfaces.chat.consumer import StreamConsumer  # noqa: E402
from iris.surfaces.chat.platforms.base import (  # noqa: E402
    Capabilities,
    ChatPlatform,
    IncomingMessage,
)
from iris.surfaces.chat.platforms.discord import DiscordPlatform  # noqa: E402
from iris.surfaces.chat.platforms.slack import SlackPlatform  # noqa: E402
from iris.surfaces.chat.platforms.telegram import TelegramPlatform  # noqa: E402
from iris.surfaces.chat.platforms.whatsapp import WhatsAppPlatform  # noqa: E402
from iris.surfaces.chat.reply import CURSOR  # noqa: E402
from iris.surfaces.chat.throttle import Throttle  # noqa: E402
from iris.surfaces.chat.transport import choose  # noqa: E402


@dataclass(frozen=True)
class Case:
    name: str
    caps: Capabilities
    budget: RateBudget


CASES = [
    Case(
        "telegram private",
        Capabilities(True, 4096, "utf16", RateBudget(1, 1.0), RateBudget(20, 60.0)),
        RateBudget(1, 1.0),
    ),
    Case(
        "telegram group",
        Capabilities(True, 4096, "utf16", RateBudget(1, 1.0), RateBudget(20, 60.0)),
        RateBudget(20, 60.0),
    ),
    Case("discord", Capabilities(True, 2000, "chars", RateBudget(5, 5.0)), RateBudget(5, 5.0)),
    Case("slack", Capabilities(True, 40_000, "chars", RateBudget(50, 60.0)), RateBudget(50, 60.0)),
]


@dataclass
class Figures:
    case: Case
    calls: int
    max_per_minute: int
    budget_per_minute: float
    p50: float
    p95: float
    worst: float
    chat_ok: bool


async def run_case(
    case: Case, seconds: float, rate: float, latency: float, interval: float
) -> Figures:
    loop = asyncio.get_running_loop()
    platform = RecordingPlatform(name=case.name, capabilities=case.caps, latency=latency)
    display = ResolvedDisplay(
        show_reasoning=False,
        reasoning_style="code",
        tool_progress="off",
        edit_interval=interval,
        buffer_threshold=24,
        min_tokens=20,
    )
    consumer = StreamConsumer(
        platform, "chat", display=display, streaming=True, throttle=Throttle(case.budget, interval)
    )
    arrivals: list[tuple[float, int]] = []  # (time, characters of the reply so far)
    count = int(seconds * rate)
    words = [f"w{i} " for i in range(count)]
    text = "".join(words)

    async def stream() -> AsyncIterator[Event]:
        start = loop.time()
        size = 0
        for i, word in enumerate(words):
            # Paced against the start, so the rate holds however long each step takes.
            await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
            size += len(word)
            arrivals.append((loop.time(), size))
            yield TextDelta(word)
        yield SegmentEnded(text)
        yield TurnEnded(text)

    await consumer.consume(stream())

    # What the user could read after each call: every message's text without the cursor.
    shown: dict[str, str] = {}
    seen: list[tuple[float, int]] = []
    order: list[str] = []
    for call in platform.edits_and_sends():
        message_id = call.message_id
        if message_id not in shown:
            order.append(message_id)
        shown[message_id] = call.text.removesuffix(CURSOR)
        seen.append((call.t + latency, sum(len(shown[m]) for m in order)))
    delays: list[float] = []
    j = 0
    for t, size in arrivals:
        while j < len(seen) and (seen[j][1] < size or seen[j][0] < t):
            j += 1
        if j < len(seen):
            delays.append(seen[j][0] - t)
    times = [c.t for c in platform.edits_and_sends()]
    most = max(sum(1 for u in times if s <= u < s + 60.0) for s in times)
    ordered = sorted(delays)
    return Figures(
        case=case,
        calls=len(times),
        max_per_minute=most,
        budget_per_minute=case.budget.capacity * 60.0 / case.budget.per_seconds,
        p50=statistics.median(ordered),
        p95=ordered[int(0.95 * (len(ordered) - 1))],
        worst=ordered[-1],
        chat_ok="".join(platform.chat()) == text,
    )


# Platforms with a native transport for a private chat (``native_for``).
NATIVE = ("telegram", "slack")


@dataclass
class Crowd:
    name: str
    transport: str  # "edit", or the native kind: "draft" (Telegram), "stream" (Slack)
    limited: int  # 429s the fake answered for its own limits
    whole: int  # chats whose reply shows whole, exactly once
    chats: int
    first: list[float]  # per chat: first token -> first visible text
    delays: list[float]  # every delta: arrival -> visible
    shared_calls: int  # calls drawn on the shared budget
    most_in_minute: int  # the most of them in any 60 s (Slack: of the busiest method)
    native_calls: int  # drafts, or stream starts/appends/stops
    elapsed: float
    budget_per_minute: float
    platform_per_minute: float
    min_gap: float  # the smallest gap between two calls of one chat, as the platform saw them
    budget_gap: float  # the chat's budget: calls at least this far apart


@dataclass
class _Shown:
    t: float
    chat: str
    text: str


@dataclass
class _Fake:
    """The adapter on its fake, and how to read it."""

    platform: ChatPlatform
    shown: Callable[[], list[_Shown]]  # what each chat showed, in time order
    final: Callable[[str], list[str] | None]  # a chat's messages at the end (None: unknown)
    limited: Callable[[], int]
    shared: Callable[[], int]
    shared_times: Callable[[], list[list[float]]]  # when they went out, per limit
    native: Callable[[], int]
    limits: tuple[float, float]  # shared budget, platform limit: calls per minute
    # When each chat's calls on its own budget reached the platform, per chat.
    arrivals: Callable[[], dict[str, list[float]]]
    native_limit: float = 0.0  # the platform's limit on the native calls per minute (0: none)
    native_budget: float = 0.0  # Iris's budget for them per minute (Slack: per stream method)


# A question per chat, for the adapter's own choice of transport (``native_for``): a Telegram
# private chat (drafts), a Slack DM (a stream in the thread under the question).
def _question(name: str, chat: str) -> IncomingMessage:
    return IncomingMessage(
        platform=name, chat_id=chat, user_id=chat, text="q", message_id="1764400000.000100"
    )


async def run_crowd(
    name: str,
    chats: int,
    seconds: float,
    rate: float,
    interval: float,
    min_tokens: int,
    transport: str = "edit",
) -> Crowd:
    """``chats`` replies at once through the real ``name`` adapter into its platform fake,
    by edits or (``transport="native"``) the adapter's native transport for a private chat."""
    loop = asyncio.get_running_loop()
    display = ResolvedDisplay(
        show_reasoning=False,
        reasoning_style="code",
        tool_progress="off",
        edit_interval=interval,
        buffer_threshold=24,
        min_tokens=min_tokens,
    )
    count = int(seconds * rate)
    words = [f"w{i} " for i in range(count)]
    text = "".join(words)
    ids = [str(7000 + n) for n in range(chats)]
    arrivals: dict[str, list[tuple[float, int]]] = {chat: [] for chat in ids}

    async def stream(chat: str) -> AsyncIterator[Event]:
        start = loop.time()
        size = 0
        for i, word in enumerate(words):
            await asyncio.sleep(max(0.0, start + i / rate - loop.time()))
            size += len(word)
            arrivals[chat].append((loop.time(), size))
            yield TextDelta(word)
        yield SegmentEnded(text)
        yield TurnEnded(text)

    kind = "edit"
    async with contextlib.AsyncExitStack() as stack:
        fake = await _crowd_platform(name, stack)
        platform = fake.platform
        budget = platform.capabilities.rate
        natives = {
            chat: choose(
                platform, _question(name, chat), "native" if transport == "native" else "edit"
            )
            for chat in ids
        }
        if transport == "native":
            kinds = {n.kind for n in natives.values() if n is not None}
            if not kinds:
                raise SystemExit(f"{name}: no native transport")
            kind = kinds.pop()

        async def reply(chat: str) -> None:
            native = natives[chat]
            seat = platform.budget.seat(chat, native.thread if native else None)
            throttle = Throttle(budget, interval, seat=seat)
            consumer = StreamConsumer(
                platform, chat, display=display, streaming=True, throttle=throttle, native=native
            )
            await consumer.consume(stream(chat))

        started = loop.time()
        await asyncio.gather(*(reply(chat) for chat in ids))
        elapsed = loop.time() - started
        calls = fake.shown()
        finals = {chat: fake.final(chat) for chat in ids}
        figures = Crowd(
            name=name,
            transport=kind,
            limited=fake.limited(),
            whole=0,
            chats=chats,
            first=[],
            delays=[],
            shared_calls=fake.shared(),
            most_in_minute=max((_most_in(times, 60.0) for times in fake.shared_times()), default=0),
            native_calls=fake.native(),
            elapsed=elapsed,
            # Slack budgets and limits each stream method on its own (Tier 4).
            budget_per_minute=fake.native_budget if kind == "stream" else fake.limits[0],
            platform_per_minute=fake.native_limit if kind == "stream" else fake.limits[1],
            min_gap=min_gap(fake.arrivals()),
            budget_gap=budget.per_seconds / budget.capacity,
        )
        await _close_crowd(platform)
    for chat in ids:
        # What the person could read: the reply's text so far (not "Thinking…", no cursor).
        mine = [
            c
            for c in calls
            if c.chat == chat and (t := c.text.removesuffix(CURSOR)) and text.startswith(t)
        ]
        final = finals[chat]
        if final is None:
            final = [mine[-1].text] if mine else []
        figures.whole += final in ([text.strip()], [text])
        seen = [(c.t, len(c.text.removesuffix(CURSOR))) for c in mine]
        if seen and arrivals[chat]:
            figures.first.append(seen[0][0] - arrivals[chat][0][0])
        j = 0
        for t, size in arrivals[chat]:
            while j < len(seen) and (seen[j][1] < min(size, len(text.strip())) or seen[j][0] < t):
                j += 1
            if j < len(seen):
                figures.delays.append(seen[j][0] - t)
    return figures


async def _crowd_platform(name: str, stack: contextlib.AsyncExitStack) -> _Fake:
    """The adapter, on its fake: what each chat showed, 429s, shared calls, budget per minute."""
    if name == "telegram":
        bot_api = await stack.enter_async_context(FakeBotApi())
        settings = TelegramConfig(token=bot_api.token, base_url=bot_api.base_url)
        telegram = TelegramPlatform(settings)
        await telegram.bot.initialize()

        def telegram_shown() -> list[_Shown]:
            # A draft shows its text until the message that replaces it arrives.
            return [
                _Shown(c.t, str(c.params["chat_id"]), str(c.params.get("text") or ""))
                for c in bot_api.calls
                if c.method in ("sendMessage", "editMessageText", "sendMessageDraft")
                and c.status == 200
            ]

        bot = settings.budgets.bot
        return _Fake(
            telegram,
            telegram_shown,
            lambda chat: bot_api.chat(int(chat)),
            lambda: bot_api.limited,
            lambda: telegram.budget.calls,
            lambda: [
                [
                    c.t
                    for c in bot_api.calls
                    if c.method in ("sendMessage", "editMessageText", "sendChatAction")
                ]
            ],
            lambda: len([c for c in bot_api.calls if c.method == "sendMessageDraft"]),
            (bot.calls * 60 / bot.per, 30 * 60.0),
            lambda: telegram_arrivals(bot_api),
        )
    if name == "discord":
        rest = await stack.enter_async_context(DiscordAPI())
        config = DiscordConfig(token=rest.token, base_url=rest.base_url)
        discord = DiscordPlatform(config)
        await discord.login()

        def discord_shown() -> list[_Shown]:
            return [
                _Shown(c.at, c.channel_id, str(c.json.get("content", "")))
                for c in rest.calls
                if c.channel_id and c.method in ("POST", "PATCH") and c.status == 200
            ]

        bot = config.budgets.bot
        return _Fake(
            discord,
            discord_shown,
            lambda chat: None,
            lambda: rest.limited,
            lambda: len(rest.calls),  # Discord's global limit counts every request
            lambda: [[c.at for c in rest.calls]],
            lambda: 0,
            (bot.calls * 60 / bot.per, 50 * 60.0),
            lambda: _per_chat(
                (c.channel_id, c.at)
                for c in rest.calls
                if c.channel_id and not c.path.endswith("/typing")
            ),
        )
    web = await stack.enter_async_context(SlackAPI())
    slack_config = SlackConfig(bot_token=web.bot_token, app_token="", base_url=web.base_url)
    slack = SlackPlatform(slack_config)

    def slack_shown() -> list[_Shown]:
        # Posts and updates, and each stream's accumulated text after every call.
        return [_Shown(v.at, v.channel, html.unescape(v.text)) for v in web.views]

    def slack_final(chat: str) -> list[str]:
        return [html.unescape(m.text) for m in web.messages.values() if m.channel == chat]

    update, stream = slack_config.budgets.update, slack_config.budgets.stream
    streams = ("chat.startStream", "chat.appendStream", "chat.stopStream")
    return _Fake(
        slack,
        slack_shown,
        slack_final,
        lambda: web.limited,
        # Slack limits each method per workspace: the busiest one against its budget.
        lambda: max(len(web.calls_to(method)) for method in ("chat.update", *streams)),
        lambda: [[c.at for c in web.calls_to(m)] for m in ("chat.update", *streams)],
        lambda: len(web.calls_to(*streams)),
        (update.calls * 60 / update.per, 50.0),
        lambda: _per_chat(
            (str(c.args.get("channel")), c.at) for c in web.calls if c.method in _SLACK_MESSAGES
        ),
        web.limits["chat.appendStream"].calls * 60 / web.limits["chat.appendStream"].per,
        stream.calls * 60 / stream.per,
    )


# The Slack calls each channel's throttle paces (by ``budgets.post``).
_SLACK_MESSAGES = (
    "chat.postMessage",
    "chat.update",
    "chat.delete",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
)


def telegram_arrivals(bot_api: FakeBotApi) -> dict[str, list[float]]:
    """When each chat's messages (sends and edits: its own budget) reached the Bot API."""
    return _per_chat(
        (str(c.params.get("chat_id")), c.arrived)
        for c in bot_api.calls
        if c.method in ("sendMessage", "editMessageText")
    )


def _per_chat(calls: Iterable[tuple[str, float]]) -> dict[str, list[float]]:
    chats: dict[str, list[float]] = {}
    for chat, at in calls:
        chats.setdefault(chat, []).append(at)
    return chats


def min_gap(chats: dict[str, list[float]]) -> float:
    """The smallest gap between two calls of one chat (inf: no chat made two)."""
    gaps = [b - a for times in chats.values() for a, b in itertools.pairwise(sorted(times))]
    return min(gaps, default=float("inf"))


async def _close_crowd(platform: ChatPlatform) -> None:
    if isinstance(platform, TelegramPlatform):
        await platform.bot.shutdown()
    else:
        await platform.disconnect()


def _most_in(times: list[float], window: float) -> int:
    """The most of ``times`` in any ``window`` seconds."""
    ordered = sorted(times)
    return max((sum(1 for u in ordered if t <= u < t + window) for t in ordered), default=0)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))] if ordered else float("nan")


@dataclass
class Split:
    replies: int
    whole: int  # replies whose two messages show the text whole, once
    chat_limited: int  # per-chat 429s
    limited: int  # all 429s the fake answered for its limits
    min_gap: float
    budget_gap: float


async def run_split(chats: int, rounds: int, length: int) -> Split:
    """The issue's case: a private-chat reply too long for one Telegram message, so its two
    messages go out back to back at the edge of the chat's budget; ``chats`` at once, ``rounds``
    times, through the real adapter (drafts while it streams) into the Bot API fake, which
    counts each chat's calls on arrival (one a second, as Telegram's private chats)."""
    display = ResolvedDisplay(
        show_reasoning=False,
        reasoning_style="code",
        tool_progress="off",
        edit_interval=1.5,
        buffer_threshold=24,
        min_tokens=20,
    )
    words = [f"word{i:05d} " for i in range(length // 10)]
    text = "".join(words).strip()
    async with FakeBotApi(chat_rate=(1, 1.0)) as bot_api:
        settings = TelegramConfig(token=bot_api.token, base_url=bot_api.base_url)
        telegram = TelegramPlatform(settings)
        await telegram.bot.initialize()
        budget = telegram.capabilities.rate
        whole = 0

        async def reply(chat: str) -> None:
            nonlocal whole
            native = choose(telegram, _question("telegram", chat), "native")
            throttle = Throttle(budget, 1.5, seat=telegram.budget.seat(chat))
            consumer = StreamConsumer(
                telegram, chat, display=display, streaming=True, throttle=throttle, native=native
            )

            async def stream() -> AsyncIterator[Event]:
                for word in words:
                    await asyncio.sleep(0.002)
                    yield TextDelta(word)
                yield SegmentEnded(text)
                yield TurnEnded(text)

            await consumer.consume(stream())
            whole += "".join(bot_api.chat(int(chat))).replace(" ", "") == text.replace(" ", "")

        for round_ in range(rounds):
            ids = [str(9000 + round_ * chats + n) for n in range(chats)]
            await asyncio.gather(*(reply(chat) for chat in ids))
        figures = Split(
            replies=chats * rounds,
            whole=whole,
            chat_limited=bot_api.chat_limited,
            limited=bot_api.limited,
            min_gap=min_gap(telegram_arrivals(bot_api)),
            budget_gap=budget.per_seconds / budget.capacity,
        )
        await telegram.bot.shutdown()
    return figures


async def split(args: argparse.Namespace) -> None:
    figures = await run_split(args.split_chats, args.split_rounds, args.split_length)
    print(
        f"\nsplit reply (Telegram private chat, {args.split_length} characters: two messages),"
        f" {args.split_chats} chats at once x {args.split_rounds} rounds, the Bot API fake"
        " counting each chat on arrival (1 call a second)"
    )
    print(f"{'replies':>8}{'whole':>7}{'chat 429s':>11}{'all 429s':>10}{'min gap':>9}{'budget':>8}")
    print(
        f"{figures.replies:>8}{figures.whole:>7}{figures.chat_limited:>11}{figures.limited:>10}"
        f"{figures.min_gap:>9.3f}{figures.budget_gap:>8.3f}"
    )
    print("target: 0 429s; min gap (as the platform saw them) >= budget")


async def crowd(args: argparse.Namespace) -> None:
    print(
        f"\ncrowd: {args.chats} chats of one bot at once, {args.crowd_seconds:.0f} s each at"
        f" {args.rate:.0f} deltas/s, edit_interval {args.interval}s, min_tokens {args.min_tokens}"
        f" (first text waits min_tokens/rate = {args.min_tokens / args.rate:.2f}s by design)"
    )
    # One platform after the other: forty streams of one platform already keep this process's
    # loop busy, and a late loop would be counted against the budget.
    transports = args.transports.split(",")
    results = [
        await run_crowd(
            name,
            args.chats,
            args.crowd_seconds,
            args.rate,
            args.interval,
            args.min_tokens,
            transport,
        )
        for name in args.platforms.split(",")
        for transport in transports
        if transport == "edit" or name in NATIVE
    ]
    target = 2 * args.interval  # the target, min_tokens wait included
    print(
        f"{'platform':<10}{'transport':<10}{'429s':>6}{'whole+once':>12}{'first p50':>11}"
        f"{'first p95':>11}{'calls/min':>11}{'most/60s':>10}{'budget':>8}{'limit':>7}"
        f"{'native/min':>12}{'delay p50':>11}{'delay p95':>11}{'min gap':>9}{'budget':>8}"
    )
    for c in results:
        per_minute = c.shared_calls * 60 / c.elapsed if c.elapsed else 0.0
        native = f"{c.native_calls * 60 / c.elapsed:.0f}" if c.transport != "edit" else "-"
        print(
            f"{c.name:<10}{c.transport:<10}{c.limited:>6}{f'{c.whole}/{c.chats}':>12}"
            f"{_p(c.first, 0.5):>11.2f}{_p(c.first, 0.95):>11.2f}"
            f"{per_minute:>11.0f}{c.most_in_minute:>10}"
            f"{c.budget_per_minute:>8.0f}{c.platform_per_minute:>7.0f}"
            f"{native:>12}{_p(c.delays, 0.5):>11.2f}{_p(c.delays, 0.95):>11.2f}"
            f"{c.min_gap:>9.3f}{c.budget_gap:>8.3f}"
        )
    print(
        f"target: 0 429s, every reply whole and once, first p95 <= {target:.2f}s;"
        " calls/min: what draws on the bot's shared budget, per minute of the run (Telegram"
        " drafts do not; on Slack the busiest method, each method has its own); most/60s: the"
        " most of those in any 60 s, what a per-minute limit counts; native/min: drafts, or"
        " stream starts/appends/stops; min gap: the smallest gap between two calls of one chat"
        " as the platform saw them (on arrival), beside the chat's budget (seconds per call)"
    )


async def line(args: argparse.Namespace) -> None:
    """``--line-users`` Telegram users at once through the whole gateway, default config."""
    import tempfile

    from tests.fakes.upstream import FakeUpstream, responder, text

    from iris.config import config_from_dict
    from iris.runtime import Runtime
    from iris.surfaces.chat.runner import BUSY, QUEUED, ChatSurface

    loop = asyncio.get_running_loop()
    count = int(args.line_seconds * args.rate)
    chunks = [f"w{i} " for i in range(count)]
    reply = "".join(chunks).strip()
    users = [7000 + n for n in range(args.line_users)]
    queued_prefix = QUEUED.split("{", 1)[0]
    with FakeUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        upstream.default = responder(lambda _: text(*chunks, delay=1 / args.rate))
        async with FakeBotApi(chat_rate=(1, 1.0)) as api:
            config = config_from_dict(
                {
                    "store": {"path": f"{tmp}/iris.db"},
                    "model": {
                        "provider": "chat_completions",
                        "base_url": upstream.base_url,
                        "name": "fake-model",
                        "api_key": "sk-bench-0123456789",
                    },
                    "tools": {"enabled": []},
                    # Streamed, so that each turn lasts its reply (the stand-in answers a
                    # non-streamed request at once); all else as shipped.
                    "streaming": {"enabled": True},
                    "platforms": {
                        "api_server": {"enabled": False},
                        "iris": {"enabled": False},
                        "telegram": {
                            "enabled": True,
                            "token": api.token,
                            "base_url": api.base_url,
                            "allowed_users": users,
                            "poll_timeout": 1,
                            **(
                                {"queue_size": args.line_queue_size}
                                if args.line_queue_size is not None
                                else {}
                            ),
                        },
                    },
                },
                env={},
            )
            runtime = Runtime.create(config)
            surface = ChatSurface(runtime)
            await surface.start()
            started = loop.time()
            for user in users:
                api.user_says(user, user, "a question")

            def done() -> bool:
                return all(reply in api.chat(u) or BUSY in api.chat(u) for u in users)

            await api.wait_until(done, within=600)
            elapsed = loop.time() - started
            await surface.idle()
            await surface.stop()
            await runtime.agent.aclose()
            runtime.store.close()
    waits = [r.at for r in upstream.requests]
    first_ask = min(waits, default=0.0)
    chats = {u: api.chat(u) for u in users}
    whole = sum(
        1 for c in chats.values() if [t for t in c if not t.startswith(queued_prefix)] == [reply]
    )
    busy = sum(1 for c in chats.values() if BUSY in c)
    queued = sum(1 for c in chats.values() if any(t.startswith(queued_prefix) for t in c))
    print(
        f"\nline: {args.line_users} Telegram users at once through the gateway, default config"
        f" with streaming on (server.max_turns {config.server.max_turns}, queue_size"
        f" {config.platforms.telegram.queue_size}), replies of {args.line_seconds:.0f} s"
    )
    print(
        f"{'whole+once':>12}{'busy':>6}{'queued':>8}{'bot 429s':>10}{'chat 429s':>11}"
        f"{'last asked':>12}{'all in':>8}"
    )
    print(
        f"{f'{whole}/{len(users)}':>12}{busy:>6}{queued:>8}{api.limited - api.chat_limited:>10}"
        f"{api.chat_limited:>11}{max(waits, default=0.0) - first_ask:>11.1f}s{elapsed:>7.1f}s"
    )
    print(
        "target: every reply whole and once, 0 busy, 0 429s; queued: users shown the 'queued'"
        " note (after waiting 3 s); last asked: when the last turn reached the model, after"
        " the first"
    )


async def blocks(args: argparse.Namespace) -> None:
    """Replies in blocks to ``--blocks-chats`` WhatsApp users at once, on the Cloud API fake."""
    loop = asyncio.get_running_loop()
    count = int(args.blocks_seconds * args.rate)
    words = [f"w{i}" + ("\n\n" if (i + 1) % args.paragraph == 0 else " ") for i in range(count)]
    text = "".join(words).strip()
    ids = [str(15550100000 + n) for n in range(args.blocks_chats)]
    firsts: dict[str, float] = {}
    display = ResolvedDisplay(
        show_reasoning=False,
        reasoning_style="code",
        tool_progress="off",
        edit_interval=args.interval,
        buffer_threshold=24,
        min_tokens=args.min_tokens,
    )

    async def stream(chat: str) -> AsyncIterator[Event]:
        start = loop.time()
        firsts[chat] = start
        for i, word in enumerate(words):
            await asyncio.sleep(max(0.0, start + i / args.rate - loop.time()))
            yield TextDelta(word)
        yield SegmentEnded(text)
        yield TurnEnded(text)

    async with WhatsAppAPI(pair_every=5.9) as api:
        settings = WhatsAppConfig(
            base_url=api.base_url,
            phone_number_id=api.phone_number_id,
            access_token=api.token,
            app_secret=api.app_secret,
        )
        platform = WhatsAppPlatform(settings)

        async def nothing(message: IncomingMessage) -> None:
            return None

        await platform.connect(nothing)

        async def reply(chat: str) -> None:
            throttle = Throttle(
                platform.capabilities.rate, args.interval, seat=platform.budget.seat(chat)
            )
            consumer = StreamConsumer(
                platform, chat, display=display, streaming=True, throttle=throttle
            )
            await consumer.consume(stream(chat))

        await asyncio.gather(*(reply(chat) for chat in ids))
        await platform.disconnect()
    per_reply = [len(api.texts_to(chat)) for chat in ids]
    first = [
        min(s.t for s in api.sent if s.to == chat) - firsts[chat]
        for chat in ids
        if api.texts_to(chat)
    ]
    whole = sum(1 for chat in ids if "".join(api.texts_to(chat)).strip() == text)
    pair = settings.budgets.pair
    print(
        f"\nblocks: {args.blocks_chats} WhatsApp users at once, {args.blocks_seconds:.0f} s each"
        f" at {args.rate:.0f} deltas/s, paragraphs of {args.paragraph} words"
        f" ({len(text)} characters), pair budget {pair.calls}/{pair.per:.0f}s,"
        f" min_block_chars {display.min_block_chars}, block_idle {display.block_idle}s"
    )
    print(
        f"{'messages/reply p50':>20}{'max':>6}{'first block p50':>17}{'p95':>7}"
        f"{'pair 429s':>11}{'whole+once':>12}"
    )
    print(
        f"{statistics.median(per_reply):>20.0f}{max(per_reply):>6}"
        f"{_p(first, 0.5):>17.2f}{_p(first, 0.95):>7.2f}"
        f"{len(api.errors(131056)):>11}{f'{whole}/{len(ids)}':>12}"
    )
    print(
        "target: 0 pair 429s, every reply whole and once, a few messages per reply (not one per"
        " delta); the first block waits for min_block_chars of complete paragraphs"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=40.0, help="deltas per second")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per platform call")
    parser.add_argument("--interval", type=float, default=1.5, help="streaming.edit_interval")
    parser.add_argument("--chats", type=int, default=40, help="chats in the crowd (0: none)")
    parser.add_argument("--crowd-seconds", type=float, default=8.0, help="each crowd reply")
    parser.add_argument("--min-tokens", type=int, default=20, help="streaming.min_tokens")
    parser.add_argument("--platforms", default="telegram,discord,slack", help="for the crowd")
    parser.add_argument(
        "--transports",
        default="edit,native",
        help="for the crowd: edit, native (Telegram private-chat drafts, Slack streams in DMs)",
    )
    parser.add_argument("--skip-single", action="store_true", help="only the crowd")
    parser.add_argument("--blocks-chats", type=int, default=40, help="WhatsApp users (0: none)")
    parser.add_argument("--blocks-seconds", type=float, default=20.0, help="each blocks reply")
    parser.add_argument("--paragraph", type=int, default=40, help="words per paragraph")
    parser.add_argument("--only-blocks", action="store_true", help="only the blocks run")
    parser.add_argument("--line-users", type=int, default=40, help="users at once (0: none)")
    parser.add_argument("--line-seconds", type=float, default=4.0, help="each line reply")
    parser.add_argument("--only-line", action="store_true", help="only the line run")
    parser.add_argument(
        "--line-queue-size", type=int, default=None, help="queue_size (0: busy at once, as before)"
    )
    parser.add_argument(
        "--split-chats", type=int, default=20, help="split replies at once (0: none)"
    )
    parser.add_argument("--split-rounds", type=int, default=4)
    parser.add_argument("--split-length", type=int, default=6000, help="characters per reply")
    parser.add_argument(
        "--matrix-rooms", type=int, default=3, help="Matrix rooms on a real Synapse (0: none)"
    )
    parser.add_argument("--matrix-seconds", type=float, default=10.0, help="each Matrix reply")
    parser.add_argument("--only-matrix", action="store_true", help="only the Matrix run")
    args = parser.parse_args()
    if args.only_matrix or args.matrix_rooms:
        from edit_cadence_matrix import matrix  # beside this script (bench/)

        await matrix(args)
        if args.only_matrix:
            return
    if args.only_blocks:
        await blocks(args)
        return
    if args.only_line:
        await line(args)
        return
    if args.split_chats:
        await split(args)
    if args.skip_single:
        await crowd(args)
        if args.line_users:
            await line(args)
        if args.blocks_chats:
            await blocks(args)
        return
    print(
        f"reply: {args.seconds:.0f} s at {args.rate:.0f} deltas/s, edit_interval {args.interval}s,"
        f" platform latency {args.latency * 1000:.0f} ms"
    )
    results = await asyncio.gather(
        *(run_case(c, args.seconds, args.rate, args.latency, args.interval) for c in CASES)
    )
    target = args.interval + 0.3
    header = f"{'chat':<18}{'calls':>6}{'max/min':>9}{'budget':>8}{'p50 s':>8}{'p95 s':>8}{'max s':>8}  verdict"
    print(header)
    for f in results:
        within = f.max_per_minute <= f.budget_per_minute
        fast = f.p95 <= target
        verdict = ", ".join(
            [
                "within budget" if within else "OVER BUDGET",
                f"p95 <= {target:.1f}s" if fast else f"p95 > {target:.1f}s",
                "text intact" if f.chat_ok else "TEXT DIFFERS",
            ]
        )
        print(
            f"{f.case.name:<18}{f.calls:>6}{f.max_per_minute:>9}{f.budget_per_minute:>8.0f}"
            f"{f.p50:>8.2f}{f.p95:>8.2f}{f.worst:>8.2f}  {verdict}"
        )
    if args.chats:
        await crowd(args)
    if args.line_users:
        await line(args)
    if args.blocks_chats:
        await blocks(args)


if __name__ == "__main__":
    asyncio.run(main())
