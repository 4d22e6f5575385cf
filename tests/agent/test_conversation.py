"""A chat's turn lifecycle alone (``iris.agent.conversation``): the real agent against the
scripted upstream, over the SQLite history and the REPL's memory one side by side.

What a user notices: the question is there while the reply is written and after a failure;
the next request to the model carries the history the last turn left; the chat's controls
choose the model and get the usage; a store that fails is logged once, at its level."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from iris.agent import Agent
from iris.agent.context import SUMMARY_PREFIX, history
from iris.agent.conversation import Conversation, TurnOptions, UserMessage
from iris.errors import StoreUnavailable
from iris.events import TerminalEvent, TurnEnded, TurnFailed
from iris.state.controls import MemoryControls
from iris.state.sessions import MemorySessions, Sessions, SqliteSessions
from iris.state.sqlite import Store
from tests.conftest import MakeConfig
from tests.fakes.long_chat import LongChat, is_summary_request
from tests.fakes.store_faults import exclusive_lock
from tests.fakes.upstream import FakeUpstream, error, stream_error, text

pytestmark = pytest.mark.timeout(30)

LOCK_WAIT = 0.2  # seconds the SQLite history waits for a lock before it is unavailable
BACKUP = "backup-model"
# Only what the conversation itself logs: a turn's own log line (iris.observability) may land late.
CONVERSATION_LOG = "iris.agent.conversation"

Chat = Callable[..., Conversation]


@pytest.fixture(params=["sqlite", "memory"])
async def chat(
    request: pytest.FixtureRequest, make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> AsyncIterator[Chat]:
    """``chat(**config_sections)``: a conversation with its own agent on the fake upstream
    (and a fallback model named ``backup-model``), its history in SQLite or in memory."""
    agents: list[Agent] = []
    store = Store(tmp_path / "history.db", busy_timeout=LOCK_WAIT)
    backup = {"name": BACKUP, "base_url": upstream.base_url, "api_key": "sk-test"}

    def build(**sections: Any) -> Conversation:
        model = {"fallback": [backup], **sections.pop("model", {})}
        config = make_config(upstream.base_url, tools={"enabled": []}, model=model, **sections)
        agent = Agent(config)
        agents.append(agent)
        sessions: Sessions = (
            SqliteSessions(store) if request.param == "sqlite" else MemorySessions()
        )
        return Conversation(agent, sessions, MemoryControls(), "test:chat")

    yield build
    for agent in agents:
        await agent.aclose()
    store.close()


@pytest.fixture
async def sqlite_chat(
    make_config: MakeConfig, upstream: FakeUpstream, tmp_path: Path
) -> AsyncIterator[tuple[Conversation, Path]]:
    """A conversation over a SQLite history, and that file (to lock it)."""
    path = tmp_path / "history.db"
    store = Store(path, busy_timeout=LOCK_WAIT)
    agent = Agent(make_config(upstream.base_url, tools={"enabled": []}))
    yield Conversation(agent, SqliteSessions(store), MemoryControls(), "test:chat"), path
    await agent.aclose()
    store.close()


async def say(chat: Conversation, question: str, **options: Any) -> TerminalEvent:
    """One whole turn: begin, run to its end, keep."""
    exchange = await chat.begin(UserMessage(question), TurnOptions(**options))
    async with exchange.turn as turn:
        end = await last_event(turn)
    await exchange.keep(end)
    return end


async def last_event(events: AsyncIterator[Any]) -> TerminalEvent:
    end: TerminalEvent | None = None
    async for event in events:
        if isinstance(event, TurnEnded | TurnFailed):
            end = event
    assert end is not None
    return end


def said(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in messages]


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    return said(upstream.requests[-1].body["messages"])


async def test_the_question_is_kept_before_the_model_is_asked(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.script(text("Blue."))
    conversation = chat()
    exchange = await conversation.begin(UserMessage("sky?"), TurnOptions())
    # Another device reloading now sees the question the reply will answer.
    assert said(await conversation.sessions.history("test:chat")) == [("user", "sky?")]
    assert upstream.requests == []
    async with exchange.turn as turn:
        end = await last_event(turn)
    await exchange.keep(end)
    history = await conversation.sessions.history("test:chat")
    assert said(history) == [("user", "sky?"), ("assistant", "Blue.")]


async def test_the_next_request_carries_the_history_the_turns_left(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.script(text("Blue."), stream_error("It is ", "bl"), text("Yes."))
    conversation = chat()
    await say(conversation, "sky?")
    await say(conversation, "why?")
    await say(conversation, "go on")
    assert sent(upstream) == [
        ("user", "sky?"),
        ("assistant", "Blue."),
        ("user", "why?"),
        ("assistant", "It is bl\n\n[interrupted]"),
        ("user", "go on"),
    ]


async def test_a_turn_that_failed_before_any_text_keeps_its_question_alone(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.script(error(400, "model not found"), text("recovered"))
    conversation = chat()
    end = await say(conversation, "one")
    assert isinstance(end, TurnFailed)
    assert (await conversation.controls()).last_usage == {}  # no usage of a failed reply
    await say(conversation, "two")
    assert sent(upstream) == [("user", "one"), ("user", "two")]


async def test_the_chats_model_is_asked_and_its_usage_kept(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hi.", usage=(12, 3)))
    conversation = chat()
    controls = await conversation.controls()
    controls.model = BACKUP
    await conversation.save(controls, "model")
    await say(conversation, "hello")
    assert upstream.requests[-1].body["model"] == BACKUP
    kept = await conversation.controls()
    assert kept.model == BACKUP
    assert kept.last_usage == {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15}
    assert (await conversation.context_use()).last_usage == kept.last_usage


async def test_the_surfaces_options_reach_the_turn(chat: Chat, upstream: FakeUpstream) -> None:
    upstream.script(text("Hi."))
    conversation = chat()
    options = TurnOptions(stream=False, metadata={"surface": "test"}, show_compaction=True)
    exchange = await conversation.begin(UserMessage("hello"), options)
    request = exchange.turn.request
    assert request.fit_context and request.show_compaction and not request.stream
    assert request.metadata == {"surface": "test"}
    async with exchange.turn as turn:
        await exchange.keep(await last_event(turn))
    assert upstream.requests[-1].body.get("stream") is not True


async def test_a_remembered_message_is_seen_by_the_next_turn(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.script(text("Both."))
    conversation = chat()
    await conversation.remember(UserMessage("first"))
    await say(conversation, "second")
    assert sent(upstream) == [("user", "first"), ("user", "second")]


async def test_a_turns_compaction_is_kept_and_the_next_turn_starts_from_its_summary(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.context_limit = 30_000
    model = LongChat(reply_chars=2_000)
    upstream.default = model.scenario
    conversation = chat(model={"context_window": 6_000})
    n = 0
    while not model.summaries and n < 30:
        n += 1
        await say(conversation, f"question {n}")
    assert model.summaries and upstream.refused == []
    transcript = await conversation.sessions.transcript("test:chat")
    assert transcript.summary == model.summaries[-1]
    head = history(transcript)[0]
    assert head["role"] == "system" and head["content"].startswith(SUMMARY_PREFIX)
    assert head["content"].endswith(model.summaries[-1])
    await say(conversation, "one more")
    asked = [r.body["messages"] for r in upstream.requests if not is_summary_request(r)][-1]
    assert asked[0] == head  # the cut the last compaction made, as the store keeps it
    assert asked[-1] == {"role": "user", "content": "one more"}


async def test_compact_now_leaves_the_summary_in_place_of_the_turns(
    chat: Chat, upstream: FakeUpstream
) -> None:
    upstream.script(text("Blue."), text("Yes."), text("they asked about the sky"), text("Ok."))
    conversation = chat()
    await say(conversation, "sky?")
    await say(conversation, "sure?")
    compaction = await conversation.compact()
    assert compaction is not None and compaction.summary.endswith("they asked about the sky")
    await say(conversation, "and now?")
    roles = [role for role, _ in sent(upstream)]
    assert roles[0] == "system" and sent(upstream)[0][1].startswith(SUMMARY_PREFIX)
    assert sent(upstream)[-1] == ("user", "and now?")
    await conversation.new()
    assert await conversation.sessions.history("test:chat") == []


async def test_a_crashed_turn_is_repaired_with_what_was_shown_once(
    chat: Chat, upstream: FakeUpstream
) -> None:
    conversation = chat()
    await conversation.begin(UserMessage("tell me"), TurnOptions())  # then the server died
    for _ in range(2):  # a second survivor's repair adds nothing
        await conversation.repair("tell me", "Once upon")
    history = await conversation.sessions.history("test:chat")
    assert said(history) == [("user", "tell me"), ("assistant", "Once upon\n\n[interrupted]")]
    assert upstream.requests == []


async def test_a_question_the_history_cannot_take_starts_no_turn(
    sqlite_chat: tuple[Conversation, Path], upstream: FakeUpstream
) -> None:
    conversation, path = sqlite_chat
    await conversation.sessions.history("test:chat")  # the file exists
    upstream.script(text("never asked"))
    with exclusive_lock(path), pytest.raises(StoreUnavailable):
        await conversation.begin(UserMessage("hello?"), TurnOptions())
    assert upstream.requests == []


async def test_a_reply_the_history_cannot_take_is_logged_once_as_an_error_and_not_kept(
    sqlite_chat: tuple[Conversation, Path], upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    conversation, path = sqlite_chat
    upstream.script(text("Blue."))
    exchange = await conversation.begin(UserMessage("sky?"), TurnOptions())
    async with exchange.turn as turn:
        end = await last_event(turn)
    caplog.set_level(logging.WARNING, CONVERSATION_LOG)
    with exclusive_lock(path):
        assert await exchange.keep(end) is False
    assert isinstance(exchange.unkept, StoreUnavailable)
    records = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == CONVERSATION_LOG]
    assert len(records) == 1 and records[0][0] == logging.ERROR
    assert records[0][1].startswith("reply of test:chat not kept")
    # The usage was not recorded for a reply the history misses.
    assert (await conversation.controls()).last_usage == {}


async def test_a_message_the_history_cannot_take_is_logged_once_as_an_error(
    sqlite_chat: tuple[Conversation, Path], caplog: pytest.LogCaptureFixture
) -> None:
    conversation, path = sqlite_chat
    await conversation.sessions.history("test:chat")
    caplog.set_level(logging.WARNING, CONVERSATION_LOG)
    with exclusive_lock(path):
        await conversation.remember(UserMessage("lost"))
        await conversation.repair("lost", "shown")
    levels = [r.levelno for r in caplog.records if r.name == CONVERSATION_LOG]
    assert levels == [logging.ERROR, logging.ERROR]


def test_a_user_message_is_the_chat_format_message() -> None:
    assert UserMessage("hi").message() == {"role": "user", "content": "hi"}
