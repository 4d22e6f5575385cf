"""The turn loop: model rounds, tools, fallback, interruption — one turn, one event stream.

A ``Turn`` runs as one task that buffers its events for one consumer, so the provider is read
as fast as it produces and a consumer that is busy never slows it down; ``async for`` takes
every event buffered at each wake-up. A consumer that reads with ``Turn.deliver(sink)``
instead (the API server's streams) costs one task wake-up less per streamed delta: while it
waits, the turn's own task hands a round's events to ``sink`` itself, and a sink that waits
(a slow client's full socket) holds the reading of the upstream meanwhile — the provider's
silence deadline does not count that time. ``Turn.interrupt`` cancels the turn's task:
cancellation closes the upstream HTTP response (the SDK stream is an ``async with``), and the
turn ends with ``TurnEnded(reason="interrupted")`` and the text so far.

Failure policy for one round (``_round``):

- streaming rejected by the provider → remembered per model for ``model.stream_reject_ttl``
  seconds; asked again without streaming.
- the stream breaks before any text was shown → the same model is asked without streaming,
  so the answer arrives once. Not after a timeout: that retry would double the wait.
- one deadline per round and endpoint: ``timeout`` seconds (``model.timeout``, or the fallback
  entry's own) for the first delta and again between deltas; past it the round fails with
  ``ProviderTimeout`` (retryable: the next endpoint of the chain gets its own deadline). The
  embedded local model has none: it cannot hang on a network, and its first load is slow.
- 429 / 5xx / connection failure → the next model of ``model.fallback``; consumers get a
  ``StreamReset`` when something of the round was already shown.
- anything else, or the chain is exhausted → the turn fails; text already shown is kept
  (``SegmentEnded`` + ``TurnFailed.partial_text``), never repeated.
- a client tool call streamed already (``ToolCallDelta``: a round offering the caller's own
  tools streams each call as it forms) → no retry, no fallback: the client has the call's
  head and cannot be told to forget it, so the turn fails.

Context budget (``iris.agent.context``): a turn whose caller keeps the history
(``TurnRequest.fit_context``: chat platforms, the iris socket, the REPL) fits the model's window
before every round; older turns that do not fit are compacted (summarized by the model, or
dropped) and ``Turn.compaction`` says what was replaced, for the caller's store. A provider that
still answers "context length exceeded" gets one compaction and one retry, never more.

Output cap: once the turn's visible text would pass ``model.max_output_chars`` (or its reasoning
or one round's tool arguments would), the turn stops reading the upstream — leaving the stream's
``async with`` closes it — and ends with ``TurnEnded(reason="length")`` and the text up to the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from iris.agent.calls import ToolCalls, Unanswered
from iris.agent.context import (
    NOTE,
    Compaction,
    ContextWindow,
    Gauge,
    compact,
    context_window_for,
    is_overflow,
    request_chars,
)
from iris.agent.history import MARK
from iris.agent.request import TurnRequest
from iris.agent.round import CallStream, RoundBuilder, ToolCall
from iris.agent.scrubber import finalize
from iris.agent.tools import (
    ToolRegistry,
    builtin_tools,
)
from iris.config import Config, ModelEndpoint
from iris.errors import (
    LocalModelCrashed,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeout,
    StreamingRejected,
    user_message,
)
from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TerminalEvent,
    TextDelta,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.formats.surrogates import clean_value
from iris.llm.provider import Provider, ProviderRequest, RawDelta, RawToolCall, timed_out
from iris.observability import TurnWatch
from iris.tasks import OpenGroup, Silence

if TYPE_CHECKING:
    from iris.agent.mcp.servers import McpServers
    from iris.agent.peers import Peers

log = logging.getLogger(__name__)


class Agent:
    """Owns the provider clients (one per endpoint of the fallback chain) and the tools."""

    def __init__(self, config: Config, *, tools: ToolRegistry | None = None) -> None:
        self.config = config
        self.tools = (
            tools
            if tools is not None
            else builtin_tools(
                config.tools,
                private=_private(config),
                data_dir=config.store.resolved_path().parent,
            )
        )
        self.endpoints: list[ModelEndpoint] = [config.model, *config.model.fallback]
        self._providers: dict[int, Provider] = {}
        self._stream_rejected_until: dict[str, float] = {}
        self.gauge = Gauge()  # token estimates per model, calibrated by providers' usage
        # MCP tool servers (``mcp_servers:``); their tools join ``self.tools`` once listed.
        self.mcp: McpServers | None = None
        if config.mcp_servers:
            from iris.agent.mcp.servers import McpServers

            self.mcp = McpServers(
                config, self.tools, _private(config), lambda: (self.provider(0), self.model_name)
            )
        # Remote A2A agents (``a2a_agents:``), each the tool ``a2a_<name>``.
        self.peers: Peers | None = None
        if config.a2a_agents:
            from iris.agent.peers import Peers

            self.peers = Peers(config, self.tools)

    @property
    def model_name(self) -> str:
        return (
            self.provider(0).name
            if self.config.model.provider == "local"
            else self.endpoints[0].name
        )

    def provider(self, index: int) -> Provider:
        if index not in self._providers:
            self._providers[index] = _make_provider(self.config, self.endpoints[index])
        return self._providers[index]

    def prepare(self) -> None:
        """Build every endpoint's provider (an SDK client each: ~0.1 s of CPU) ahead of use."""
        for index in range(len(self.endpoints)):
            self.provider(index)

    async def start_tools(self) -> None:
        """Start the MCP servers; returns once each connected or failed once (bounded)."""
        if self.mcp is not None:
            await self.mcp.start()

    def tool_lines(self) -> list[str]:
        """What tools there are, for ``/status`` and the REPL's ``/tools``."""
        names = self.tools.names()
        lines = [f"tools: {', '.join(names) if names else 'none'}", *self.tools.notes]
        return lines + (self.mcp.lines() if self.mcp is not None else [])

    def run(self, request: TurnRequest) -> Turn:
        return Turn(self, request)

    @property
    def model_names(self) -> list[str]:
        """The configured models a chat may switch to: the main one, then the fallbacks."""
        return [self.model_name, *(e.name for e in self.endpoints[1:])]

    def chain(self, model: str | None) -> list[int]:
        """Endpoint indexes to try, in order: a fallback's name starts the chain there."""
        order = list(range(len(self.endpoints)))
        for i in order[1:]:
            if model and self.endpoints[i].name == model:
                return [i, *(j for j in order if j != i)]
        return order

    def _serving(self, model: str | None) -> tuple[Provider, str]:
        """The provider that serves ``model`` first, and the name it is asked under."""
        index = self.chain(model)[0]
        provider = self.provider(index)
        return provider, model if index == 0 and model else provider.name

    async def learn_window(self, model: str | None = None) -> None:
        """Read ``model``'s window from its provider's model listing (once per model)."""
        await self.gauge.learn(*self._serving(model))

    def context_window(self, model: str | None = None) -> ContextWindow:
        """The window of ``model`` (a name from ``model_names``; None: the main model), how
        its requests are counted, and the provider that serves it."""
        return context_window_for(self.config, self.gauge, *self._serving(model))

    async def compact(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        model: str | None = None,
        force: bool = False,
        head: int = 0,
    ) -> tuple[list[dict[str, Any]], Compaction | None]:
        """``iris.agent.context.compact`` for ``model``'s window, as ``model.compaction`` says."""
        summarizing = self.config.model.compaction == "summarize"
        fit = self.context_window(model)
        return await compact(fit, messages, tools, summarizing=summarizing, force=force, head=head)

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.aclose()
        if self.peers is not None:
            await self.peers.aclose()
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            with contextlib.suppress(Exception):
                await provider.aclose()

    # -- streaming rejections, remembered per model for a bounded time -------------------------
    def _key(self, endpoint: ModelEndpoint, model: str) -> str:
        return f"{endpoint.provider}|{endpoint.base_url}|{model}"

    def streams_allowed(self, endpoint: ModelEndpoint, model: str) -> bool:
        until = self._stream_rejected_until.get(self._key(endpoint, model))
        return until is None or time.monotonic() >= until

    def remember_stream_rejected(self, endpoint: ModelEndpoint, model: str) -> None:
        ttl = self.config.model.stream_reject_ttl
        self._stream_rejected_until[self._key(endpoint, model)] = time.monotonic() + ttl


def _private(config: Config) -> list[Path]:
    """Iris's own files, which read_file refuses even inside a root: they hold keys and
    transcripts."""
    database = config.store.resolved_path()
    paths = [Path.home() / ".iris", *(Path(f"{database}{end}") for end in ("", "-wal", "-shm"))]
    return paths + ([Path(config.source)] if config.source else [])


def _make_provider(config: Config, endpoint: ModelEndpoint) -> Provider:
    match endpoint.provider:
        case "chat_completions":
            from iris.llm.chat_completions import ChatCompletionsProvider

            return ChatCompletionsProvider(endpoint)
        case "responses":
            from iris.llm.responses_api import ResponsesProvider

            return ResponsesProvider(endpoint)
        case "local":
            from iris.llm.local import LocalProvider

            return LocalProvider(config.model)


_TERMINAL = (TurnEnded, TurnFailed)


class _OutputCapped(Exception):
    """The turn reached ``model.max_output_chars``: stop reading the upstream."""

    answered = True  # the provider's request succeeded; Iris stopped reading (metrics)


class Turn:
    def __init__(self, agent: Agent, request: TurnRequest) -> None:
        self.agent = agent
        self.request = request
        self.turn_id = f"turn_{uuid.uuid4().hex[:16]}"
        # The events not yet read, and the consumer's wait for more (``_events``): cheaper than
        # an ``asyncio.Queue``, whose every get and put also asks for the running loop.
        self._out: deque[Event] = deque()
        self._reader: asyncio.Future[None] | None = None
        # ``deliver``'s consumer; while it waits, the turn's task hands a round's events to it
        # (``_handing``), and an exception it raised there waits for the consumer.
        self._sink: Callable[[Event], Awaitable[None]] | None = None
        self._handing = False
        self._sink_failed: Exception | None = None
        self._task: asyncio.Task[None] | None = None
        self._tasks = OpenGroup()  # the turn's own, for its ``async with``
        self._interrupted = False
        self._finished = False
        # State the interrupt and failure paths need.
        self._builder = RoundBuilder()
        self._calls: CallStream | None = None  # a round offering client tools streams them
        self._segment_open = False
        self._reasoning: list[str] = []
        self._added: list[dict[str, Any]] = []
        self._unanswered: list[ToolCall] = []
        self._usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        self._tool_calls = ToolCalls(agent.tools, agent.config, request, self._emit, self._spend)
        self._model = agent.model_name
        self._shown_chars = 0  # visible text of the finished rounds, for the output cap
        # What compaction replaced of ``request.messages`` (for the caller's store).
        self.compaction: Compaction | None = None
        self._head = 0  # system messages before the history in the round's messages
        self._own_summary = False  # the history starts with this turn's own summary
        self._left = len(request.messages)  # request messages still in the history
        self._overflow_retried = False
        # Series, spans and the log line of this turn (iris.observability).
        self.watch = TurnWatch(
            self.turn_id, request.metadata, lambda: agent.model_names, agent.tools.names()
        )

    # -- lifetime ----------------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = self._tasks.create_task(self._main(), name=self.turn_id)

    async def __aenter__(self) -> Turn:
        await self._tasks.open()
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        task = self._task
        if task is not None and not task.done():
            # Left early (the caller stopped reading, or was cancelled): the turn ends as
            # interrupted, which closes the upstream request; one that will not end is cut.
            self.interrupt()
            _, late = await asyncio.wait([task], timeout=2.0)
            for stuck in late:
                stuck.cancel()
        await self._tasks.close(exc_type, exc, tb)

    def interrupt(self) -> None:
        """Stop the turn: the upstream is closed and the turn ends with the text so far, as
        ``TurnEnded(reason="interrupted")``."""
        if self._finished or self._interrupted:
            return
        self._interrupted = True
        # An event in the middle of being handed over goes out whole first (``_hand_over``).
        if self._task is not None and not self._task.done() and not self._handing:
            self._task.cancel()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def deliver(self, sink: Callable[[Event], Awaitable[None]]) -> None:
        """Every event of the turn to ``sink``, in order, up to the terminal one: ``async for``
        with ``await sink(event)`` in its body, one task wake-up cheaper per streamed delta.
        While this waits for events, the turn's own task hands a model round's events to
        ``sink`` itself; an exception ``sink`` raised there is raised here."""
        self._sink = sink
        try:
            async for event in self._events():
                await sink(event)
        finally:
            self._sink = None

    async def _events(self) -> AsyncIterator[Event]:
        self.start()
        out = self._out
        loop = asyncio.get_running_loop()
        while True:
            while out and not self._handing and self._sink_failed is None:
                event = out.popleft()
                yield event
                if isinstance(event, _TERMINAL):
                    return
            if self._sink_failed is not None:
                raise self._sink_failed
            self._reader = loop.create_future()
            try:
                await self._reader
            finally:
                self._reader = None

    def _emit(self, event: Event) -> None:
        if isinstance(event, _TERMINAL):
            if self._finished:
                return
            self._finished = True
        self.watch.saw(event)
        self._out.append(event)
        if not self._handing:
            self._wake()

    def _wake(self) -> None:
        reader = self._reader
        if reader is not None and not reader.done():
            reader.set_result(None)

    async def _hand_over(self, silence: Silence) -> None:
        """Give the events of the delta just read to ``deliver``'s sink from the turn's own
        task, the consumer waiting. Neither the provider's silence deadline nor an interrupt
        cuts an event in the middle of going out."""
        if not self._handing:
            return  # no sink, or the consumer is busy: ``_emit`` woke it
        sink, out = self._sink, self._out
        try:
            if sink is not None and out:
                silence.hold()
                try:
                    while out:
                        event = out.popleft()
                        try:
                            await sink(event)
                        except Exception as exc:
                            self._sink, self._sink_failed = None, exc  # the consumer raises it
                            break
                finally:
                    silence.release()
        finally:
            self._stop_handing()
        if self._interrupted and self._task is not None:
            self._task.cancel()  # ``interrupt`` waited for the event in hand

    def _stop_handing(self) -> None:
        self._handing = False
        if self._out or self._sink_failed is not None:
            self._wake()

    # -- the turn ----------------------------------------------------------------------------
    async def _main(self) -> None:
        if self._interrupted:  # interrupted before it began
            self._end("interrupted", "")
            return
        try:
            await self._loop()
        except asyncio.CancelledError:
            if not self._interrupted:
                self._fail("cancelled", "the turn was cancelled", False)
                raise
            self._end_interrupted()
        except _OutputCapped:
            self._end_capped()
        except Unanswered:
            self._end_interrupted()
        except ProviderError as exc:
            code, message, retryable = user_message(exc)
            if is_overflow(exc):
                code = "context_length_exceeded"
            retry_after = exc.retry_after if isinstance(exc, ProviderHTTPError) else None
            self._fail(code, message, retryable, retry_after)
        except Exception as exc:  # a bug must not hang every consumer of the turn
            log.exception("turn %s crashed", self.turn_id)
            code, message, retryable = user_message(exc)
            self._fail(code, message, retryable)

    async def _loop(self) -> None:
        request = self.request
        self._emit(TurnStarted(self.turn_id, self.agent.model_name))
        messages = self._initial_messages()
        client_tools = request.client_tools or []
        if client_tools:
            tools = client_tools
        elif request.agent_tools:
            exclude = frozenset() if request.allow_terminal else frozenset({"terminal"})
            tools = self.agent.tools.schemas(exclude=exclude)
        else:
            tools = []
        limit = self.agent.config.tools.max_iterations
        most_calls = request.max_tool_calls
        index = 0
        text = ""
        for iteration in range(limit):
            last = iteration == limit - 1 or (most_calls is not None and index >= most_calls)
            # The last round gets no agent tools, so the model has to answer.
            round_tools = tools if client_tools or not last else []
            if client_tools and round_tools:
                self._calls = CallStream(self._call_id, most_calls)
            builder = await self._fitted_round(messages, round_tools)
            self._segment_open = False
            text = finalize("".join(builder.raw_text))
            calls = builder.tool_calls()
            if client_tools and most_calls is not None:
                calls = calls[:most_calls]
            if not calls:
                if text:
                    self._emit(SegmentEnded(text))
                self._added.append({"role": "assistant", "content": text})
                self._end("length" if builder.limited else "stop", text)
                return
            for n, call in enumerate(calls):
                call.id = call.id or f"call_{self.turn_id[5:13]}_{index + n + 1}"
            if text:
                self._emit(Commentary(text))
            assistant = {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in calls
                ],
            }
            self._added.append(assistant)
            messages.append(assistant)
            if client_tools:
                self._end(
                    "tool_calls",
                    text,
                    [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls],
                )
                return
            self._unanswered = list(calls)
            offered = _names(round_tools)
            for call in calls:
                if most_calls is not None and index >= most_calls:
                    output = (
                        f"error: max_tool_calls ({most_calls}) reached; '{call.name}' was not run"
                    )
                else:
                    index += 1
                    output = (await self._tool_calls.run(index, call, offered)).output
                message = {"role": "tool", "tool_call_id": call.id, "content": output}
                self._unanswered.remove(call)
                self._added.append(message)
                messages.append(message)
        self._end("max_iterations", text)

    def _call_id(self, position: int) -> str:
        """The id of a client tool call the provider gave none (the turn ends at its calls)."""
        return f"call_{self.turn_id[5:13]}_{position + 1}"

    def _initial_messages(self) -> list[dict[str, Any]]:
        system = [
            s for s in (self.agent.config.model.system_prompt, self.request.instructions or "") if s
        ]
        head = [{"role": "system", "content": "\n\n".join(system)}] if system else []
        self._head = len(head)
        # A lone surrogate in the caller's text would make the upstream request unsendable.
        return [clean_value(dict(m)) for m in [*head, *self.request.messages]]

    # -- the context budget --------------------------------------------------------------------
    async def _fitted_round(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> RoundBuilder:
        """One round within the window; after the provider's "too long", compact and retry once."""
        if self.request.fit_context:
            await self.agent.learn_window(self.request.model)
            await self._fit(messages, tools, force=False)
        try:
            builder = await self._round(messages, tools)
        except ProviderError as exc:
            if not (self.request.fit_context and is_overflow(exc)) or self._overflow_retried:
                raise
            self._overflow_retried = True
            fit = self.agent.context_window(self.request.model)
            self.agent.gauge.overflowed(fit.model, await fit.count(messages, tools))
            log.warning("the provider found the request too long (%s); compacting", exc.message)
            await self._fit(messages, tools, force=True)
            builder = await self._round(messages, tools)
        chars = request_chars(messages, tools)
        self.agent.gauge.observe(self._model, chars, builder.input_tokens, len(messages))
        return builder

    async def _fit(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, force: bool
    ) -> None:
        """Compact ``messages`` in place when they do not fit the window (or ``force``)."""
        fitted, compaction = await self.agent.compact(
            messages, tools, model=self.request.model, force=force, head=self._head
        )
        if compaction is None:
            return
        # Count what left of the caller's own messages; this turn's summary is not one.
        gone = max(0, min(compaction.replaced - int(self._own_summary), self._left))
        self._left -= gone
        replaced = len(self.request.messages) - self._left
        self._own_summary = bool(compaction.summary)
        self.compaction = Compaction(compaction.summary, replaced)
        messages[:] = fitted
        if self.request.show_compaction:
            self._emit(Commentary(NOTE if compaction.summary else "earlier conversation dropped"))

    # -- one model round, with the failure policy ---------------------------------------------
    async def _round(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> RoundBuilder:
        request = self.request
        endpoints = self.agent.endpoints
        order = self.agent.chain(request.model)
        for n, i in enumerate(order):
            endpoint = endpoints[i]
            provider = self.agent.provider(i)
            # The request's name replaces the main model's, unless it named a fallback.
            named = request.model if order[0] == 0 else None
            model = (named if i == 0 else None) or provider.name
            self._model = model
            ask = ProviderRequest(
                model,
                messages,
                tools,
                request.max_tokens or self.agent.config.model.max_tokens,
                request.params,
                request.max_tokens_field,
            )
            # The embedded model cannot hang on a network, and its first load may take long.
            deadline = None if endpoint.provider == "local" else endpoint.timeout
            try:
                if request.stream and self.agent.streams_allowed(endpoint, model):
                    try:
                        with self.watch.call(endpoint.provider, model, True) as call:
                            return call.done(await self._consume(provider.stream(ask), deadline))
                    except StreamingRejected:
                        self.agent.remember_stream_rejected(endpoint, model)
                        self.watch.retried(model, "stream_rejected")
                        self._restart("the provider rejected streaming", model)
                    except (ProviderHTTPError, ProviderTimeout, LocalModelCrashed):
                        raise
                    except ProviderError:
                        if self._builder.shown_text or self._builder.announced:
                            raise
                        # Nothing visible yet: ask again without streaming, answer arrives once.
                        self.watch.retried(model, "no_stream")
                        self._restart("streaming failed; retrying without streaming", model)
                with self.watch.call(endpoint.provider, model, False) as call:
                    return call.done(await self._consume(provider.complete(ask), deadline))
            except ProviderError as exc:
                # A client tool call that began streaming cannot be taken back from the
                # client, so its round is never replayed (see ``ToolCallDelta``).
                if exc.retryable and n + 1 < len(order) and not self._builder.announced:
                    log.warning("model %s failed (%s); falling back", model, exc.message)
                    self.watch.fell_back(model)
                    self._restart(f"falling back to {endpoints[order[n + 1]].name}", model)
                    continue
                raise
        raise AssertionError("unreachable: the loop returns or raises")

    def _restart(self, reason: str, model: str) -> None:
        if self._builder.emitted:
            self._emit(StreamReset(reason, model))
        self._builder = RoundBuilder()

    async def _consume(
        self, deltas: AsyncGenerator[RawDelta], deadline: float | None
    ) -> RoundBuilder:
        """Feed one provider answer to a fresh builder; ``deadline`` seconds of silence (before
        the first delta or between two) end it with ``ProviderTimeout``."""
        builder = self._builder = RoundBuilder(stream_calls=self._calls)
        self._segment_open = True
        cap = self.agent.config.model.max_output_chars
        # What this round may still add before the cap: visible text and reasoning count over
        # the whole turn, tool arguments per round (all of them are held in memory).
        text_room = cap - self._shown_chars
        thought_room = cap - sum(map(len, self._reasoning))
        arguments_room = cap
        silence = Silence(deadline)
        async with contextlib.aclosing(deltas):
            try:
                async with silence:
                    async for raw in deltas:
                        silence.seen()
                        # The consumer waits: the turn's task hands it this delta's events.
                        self._handing = self._sink is not None and self._reader is not None
                        if isinstance(raw, RawToolCall):
                            arguments_room -= len(raw.arguments)
                            if arguments_room < 0:
                                raise _OutputCapped
                        for event in builder.feed(raw):
                            if isinstance(event, TextDelta):
                                text_room -= len(event.text)
                                if text_room < 0:
                                    self._emit_head(builder.visible, TextDelta, text_room)
                            elif isinstance(event, ReasoningDelta):
                                thought_room -= len(event.text)
                                if thought_room < 0:
                                    self._emit_head(builder.reasoning, ReasoningDelta, thought_room)
                            self._emit(event)
                        await self._hand_over(silence)
            except TimeoutError:
                if not silence.expired():
                    raise
                raise timed_out(deadline) from None
            finally:
                if self._handing:  # a delta's events that failed before their hand-over
                    self._stop_handing()
        for event in builder.finish():
            self._emit(event)
        self._shown_chars += len(builder.shown_text)
        self._reasoning.extend(builder.reasoning)
        self._usage["input_tokens"] += builder.input_tokens
        self._usage["output_tokens"] += builder.output_tokens
        self._usage["total_tokens"] = self._usage["input_tokens"] + self._usage["output_tokens"]
        return builder

    def _emit_head(
        self, parts: list[str], kind: type[TextDelta | ReasoningDelta], overflow: int
    ) -> NoReturn:
        """The delta that passed the cap (the last of ``parts``): keep and show only its head
        up to the cap, then end the turn."""
        head = parts[-1][: len(parts[-1]) + overflow]
        parts[-1] = head
        if head:
            self._emit(kind(head))
        raise _OutputCapped

    def _spend(self, input_tokens: int, output_tokens: int) -> None:
        """An MCP server's request for the model ran during a call: its tokens are the turn's."""
        self._usage["input_tokens"] += input_tokens
        self._usage["output_tokens"] += output_tokens
        self._usage["total_tokens"] = self._usage["input_tokens"] + self._usage["output_tokens"]

    # -- endings -----------------------------------------------------------------------------
    def _end(self, reason: str, text: str, tool_calls: list[dict[str, str]] | None = None) -> None:
        self._emit(
            TurnEnded(
                text=text,
                reasoning="".join(self._reasoning),
                model=self._model,
                usage=dict(self._usage),
                reason=reason,
                tool_calls=tool_calls or [],
                messages=self._added,
            )
        )

    def _partial(self) -> str:
        """Close the open segment with the text shown so far; return it post-processed."""
        if not self._segment_open:
            return ""
        self._segment_open = False
        builder = self._builder
        shown = builder.shown_text  # before finish(): what it flushes now is not shown
        for event in builder.finish():
            if not isinstance(event, TextDelta):  # text after the cut is not shown now
                self._emit(event)
        self._reasoning.extend(builder.reasoning)
        text = finalize(shown)
        if text:
            self._emit(SegmentEnded(text))
        return text

    def _end_interrupted(self) -> None:
        text = self._partial()
        self._added = self._so_far(text)
        self._end("interrupted", text)

    def _so_far(self, text: str) -> list[dict[str, Any]]:
        """The messages of a turn that stops now: every call answered, ``text`` (shown of
        the open segment) last."""
        unanswered = [
            {"role": "tool", "tool_call_id": call.id, "content": MARK} for call in self._unanswered
        ]
        reply = [{"role": "assistant", "content": text}] if text else []
        return [*self._added, *unanswered, *reply]

    def _end_capped(self) -> None:
        text = self._partial()
        if text:
            self._added.append({"role": "assistant", "content": text})
        self._end("length", text)

    def _fail(
        self, code: str, message: str, retryable: bool, retry_after: float | None = None
    ) -> None:
        partial = self._partial()
        messages = self._so_far(partial)
        self._emit(TurnFailed(code, message, retryable, partial, retry_after, messages))


def _names(tools: list[dict[str, Any]]) -> frozenset[str]:
    """The function names of chat-format tools."""
    return frozenset(str(tool.get("function", {}).get("name", "")) for tool in tools)


async def run_with_callback(
    agent: Agent, request: TurnRequest, stream_callback: Callable[[str | None], object]
) -> TerminalEvent:
    """The design's callback API: ``stream_callback(delta)`` per visible text delta, then
    ``stream_callback(None)`` once at the end of the turn. A callback that raises is logged and
    never breaks the turn."""

    def call(value: str | None) -> None:
        try:
            stream_callback(value)
        except Exception:
            log.exception("stream_callback raised; the turn goes on")

    async with agent.run(request) as turn:
        async for event in turn:
            if isinstance(event, TextDelta):
                call(event.text)
            elif isinstance(event, TurnEnded | TurnFailed):
                call(None)
                return event
    raise AssertionError("a turn always ends with TurnEnded or TurnFailed")
