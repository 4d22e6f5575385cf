"""What one turn tells an operator: its series, its trace, and one log line when it ends.

A ``TurnWatch`` belongs to one ``Turn`` and sees every event the turn emits (``saw``), and each
provider answer (``call``), retry and fallback of its rounds. From those alone it records the
turn's series (``iris.observability.metrics``), its spans (``iris.observability.tracing``) and,
at the end, one structured log line on the ``iris.turns`` logger::

    {"event": "turn.end", "turn_id": "turn_…", "surface": "chat", "platform": "telegram",
     "model": "m", "outcome": "complete", "reason": "stop", "ttft_s": 0.41, "duration_s": 2.3,
     "input_tokens": 812, "output_tokens": 96, "tool_calls": 1, "chat": "3f…", "user": "a9…",
     "trace_id": "…"}

Chat and user ids appear only as keyed hashes (HMAC-SHA256 under a key kept beside the store,
so the same chat hashes alike across workers and restarts, and a short numeric id cannot be
found by hashing every number). ``client_gone`` logs the line of a turn that a client's
disconnect cancelled.

The per-event cost is one attribute read and a string compare for each text delta: the first
one is the time to first token, the rest are not looked at.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from iris.errors import ProviderHTTPError, ProviderTimeout, StreamingRejected
from iris.events import Event, ToolEnded, ToolStarted, TurnEnded, TurnFailed
from iris.observability import metrics, tracing
from iris.private import private_key

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger("iris.turns")

_key = {"value": secrets.token_bytes(32)}  # until ``use_hash_key``: this process alone
KEY_FILE = "log-hash.key"


def use_hash_key(directory: Path) -> None:
    """Hash ids under the key in ``directory`` (made once, private), shared by every process
    that keeps its store there."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        key = private_key(directory / KEY_FILE)
    except OSError as exc:
        log.warning("log ids hash under a key of this process only: %s", exc)
        return
    if len(key) >= 16:
        _key["value"] = key


def hashed(value: object) -> str | None:
    """A chat or user id as it may appear in a log: 16 hex digits of its keyed hash."""
    if value is None or value == "":
        return None
    digest = hmac.new(_key["value"], str(value).encode(), hashlib.sha256)
    return digest.hexdigest()[:16]


def _status(exc: BaseException | None) -> str:
    if exc is None or getattr(exc, "answered", False):
        return "ok"
    if isinstance(exc, StreamingRejected):
        return "stream_rejected"
    if isinstance(exc, ProviderHTTPError):
        return str(exc.status_code)
    if isinstance(exc, ProviderTimeout):
        return "timeout"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "error"  # a ProviderError of another kind, or a bug


class ProviderCall:
    """One provider answer of a round: its request status, its tokens, its ``chat`` span."""

    def __init__(self, watch: TurnWatch, provider: str, model: str, streaming: bool) -> None:
        self.watch = watch
        self.provider = provider
        self.model = model
        self.span: Span | None = None
        self.input_tokens = self.output_tokens = 0
        tracer = tracing.tracer()
        if tracer is not None and watch.span is not None:
            from opentelemetry import trace

            self.span = tracer.start_span(
                f"chat {model}",
                context=trace.set_span_in_context(watch.span),
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "local" if provider == "local" else "openai",
                    "gen_ai.request.model": model,
                    "iris.provider.api": provider,
                    "iris.stream": streaming,
                },
            )

    def __enter__(self) -> ProviderCall:
        return self

    def done(self, builder: Any) -> Any:
        """The answer arrived whole (``builder``: the round's ``RoundBuilder``); returns it."""
        self.input_tokens, self.output_tokens = builder.input_tokens, builder.output_tokens
        self.watch.tokens[0] += self.input_tokens
        self.watch.tokens[1] += self.output_tokens
        return builder

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        status = _status(exc)
        model = metrics.bounded(self.model, self.watch.models)
        if metrics.enabled():
            metrics.PROVIDER_REQUESTS.labels(self.provider, model, status).inc()
        span = self.span
        if span is not None:
            span.set_attribute("gen_ai.response.model", self.model)
            span.set_attribute("gen_ai.usage.input_tokens", self.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", self.output_tokens)
            if status != "ok":
                span.set_attribute("error.type", status)
                _failed(span, str(exc) or status)
            span.end()


def _failed(span: Span, description: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, description[:200]))


class TurnWatch:
    """The observer of one turn (see the module docstring)."""

    def __init__(
        self,
        turn_id: str,
        metadata: Mapping[str, Any],
        models: Collection[str] | Callable[[], Collection[str]],
        tools: Collection[str],
    ) -> None:
        self.turn_id = turn_id
        self.surface = metrics.surface_label(metadata.get("surface"))
        self.platform = metrics.platform_label(metadata.get("platform"))
        self.chat_id = metadata.get("chat_id")
        self.user_id = metadata.get("user_id")
        # The configured model names, or how to get them (asked once, when first needed: an
        # embedded model's name is known only once its provider is built).
        self._models = models
        self.tools = tools
        self.model = ""
        self.created = time.monotonic()
        self.started: float | None = None
        self.first: float | None = None
        self.tokens = [0, 0]  # input, output: summed over the provider answers
        self.tool_calls = 0
        self.outcome: str | None = None  # set at the end
        self.span: Span | None = None
        self._tool_spans: dict[int, tuple[Span | None, str]] = {}
        self._running = False  # counted in iris_turns_running

    # -- the turn's events ---------------------------------------------------------------------
    def saw(self, event: Event) -> None:
        kind = event.kind
        if kind == "text_delta" or kind == "reasoning_delta":
            if self.first is None:
                self.first = time.monotonic()
            return
        if kind == "turn_started":
            self._begin(event.model)  # type: ignore[union-attr]
        elif isinstance(event, ToolStarted):
            self._tool_started(event)
        elif isinstance(event, ToolEnded):
            self._tool_ended(event)
        elif isinstance(event, TurnEnded | TurnFailed):
            self._end(event)

    @property
    def models(self) -> Collection[str]:
        if callable(self._models):
            self._models = self._models()
        return self._models

    def call(self, provider: str, model: str, streaming: bool) -> ProviderCall:
        """``with watch.call(...) as call:`` around one provider answer; ``call.done(builder)``."""
        self.model = model
        return ProviderCall(self, provider, model, streaming)

    def retried(self, model: str, reason: str) -> None:
        if metrics.enabled():
            metrics.PROVIDER_RETRIES.labels(metrics.bounded(model, self.models), reason).inc()

    def fell_back(self, model: str) -> None:
        if metrics.enabled():
            metrics.PROVIDER_FALLBACKS.labels(metrics.bounded(model, self.models)).inc()

    # -- internals -----------------------------------------------------------------------------
    def _begin(self, model: str) -> None:
        self.started = time.monotonic()
        self.model = self.model or model
        label = metrics.bounded(model, self.models)
        if metrics.enabled():
            metrics.TURNS_STARTED.labels(self.surface, self.platform, label).inc()
            metrics.TURNS_RUNNING.labels(self.surface, self.platform).inc()
            self._running = True
        tracer = tracing.tracer()
        if tracer is not None:
            self.span = tracer.start_span(
                "invoke_agent iris",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "iris",
                    "gen_ai.request.model": model,
                    "iris.turn_id": self.turn_id,
                    "iris.surface": self.surface,
                    "iris.platform": self.platform,
                },
            )

    def _tool_started(self, event: ToolStarted) -> None:
        name = metrics.bounded(event.name, self.tools)
        span = None
        tracer = tracing.tracer()
        if tracer is not None and self.span is not None:
            from opentelemetry import trace

            span = tracer.start_span(
                f"execute_tool {name}",
                context=trace.set_span_in_context(self.span),
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": event.call_id,
                },
            )
        self._tool_spans[event.index] = (span, name)

    def _tool_ended(self, event: ToolEnded) -> None:
        self.tool_calls += 1
        span, name = self._tool_spans.pop(event.index, (None, ""))
        name = name or metrics.bounded(event.name, self.tools)
        if metrics.enabled():
            metrics.TOOL_CALLS.labels(name, "ok" if event.ok else "error").inc()
            metrics.TOOL_DURATION.labels(name).observe(event.duration)
        if span is not None:
            if not event.ok:
                span.set_attribute("error.type", "tool_error")
                _failed(span, event.output_preview[-200:])
            span.end()

    def _end(self, event: TurnEnded | TurnFailed) -> None:
        now = time.monotonic()
        started = self.started if self.started is not None else self.created
        ended = isinstance(event, TurnEnded)
        if isinstance(event, TurnEnded):
            reason = event.reason
            model = event.model or self.model
            input_tokens = event.usage.get("input_tokens", 0) or self.tokens[0]
            output_tokens = event.usage.get("output_tokens", 0) or self.tokens[1]
        else:
            reason = event.code
            model = self.model
            input_tokens, output_tokens = self.tokens
        self.outcome = metrics.outcome_label(ended, reason)
        duration = now - started
        ttft = None if self.first is None else self.first - started
        if metrics.enabled():
            self._record(model, duration, ttft, input_tokens, output_tokens, now)
        trace_id = self._end_span(event, reason, model, input_tokens, output_tokens)
        for span, _ in self._tool_spans.values():  # tools cut short by the turn's end
            if span is not None:
                span.end()
        self._tool_spans.clear()
        line: dict[str, Any] = {
            "event": "turn.end",
            "turn_id": self.turn_id,
            "surface": self.surface,
            "platform": self.platform or None,
            "model": model,
            "outcome": self.outcome,
            "reason": reason,
            "ttft_s": None if ttft is None else round(ttft, 3),
            "duration_s": round(duration, 3),
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "tool_calls": self.tool_calls,
            "chat": hashed(self.chat_id),
            "user": hashed(self.user_id),
            "trace_id": trace_id,
        }
        log.info(json.dumps(line, separators=(", ", ": ")))

    def _record(
        self,
        model: str,
        duration: float,
        ttft: float | None,
        input_tokens: int,
        output_tokens: int,
        now: float,
    ) -> None:
        label = metrics.bounded(model, self.models)
        surface = self.surface
        metrics.TURNS_ENDED.labels(surface, self.platform, label, self.outcome).inc()
        if self._running:
            self._running = False
            metrics.TURNS_RUNNING.labels(surface, self.platform).dec()
        metrics.TURN_DURATION.labels(surface, label).observe(duration)
        if ttft is not None:
            metrics.FIRST_TOKEN.labels(surface, label).observe(ttft)
        if input_tokens:
            metrics.TOKENS.labels(surface, label, "input").inc(input_tokens)
        if output_tokens:
            metrics.TOKENS.labels(surface, label, "output").inc(output_tokens)
            if self.first is not None and now > self.first:
                metrics.TOKENS_PER_SECOND.labels(label).observe(output_tokens / (now - self.first))

    def _end_span(
        self,
        event: TurnEnded | TurnFailed,
        reason: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
    ) -> str | None:
        span = self.span
        if span is None:
            return None
        span.set_attribute("gen_ai.response.model", model)
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        span.set_attribute("gen_ai.response.finish_reasons", [reason])
        span.set_attribute("iris.outcome", self.outcome or "")
        span.set_attribute("iris.tool_calls", self.tool_calls)
        if isinstance(event, TurnFailed):
            span.set_attribute("error.type", event.code)
            _failed(span, event.message)
        span.end()
        return format(span.get_span_context().trace_id, "032x")

    @property
    def trace_id(self) -> str | None:
        return None if self.span is None else format(self.span.get_span_context().trace_id, "032x")


def client_gone(watch: TurnWatch, surface: str) -> None:
    """A client's disconnect cancelled ``watch``'s turn: count it and log one line."""
    if surface == "api" and metrics.enabled():
        metrics.API_DISCONNECTS.inc()
    line = {
        "event": "turn.cancelled",
        "cause": "client_disconnected",
        "turn_id": watch.turn_id,
        "surface": surface,
        "model": watch.model,
        "outcome": watch.outcome,
        "duration_s": round(time.monotonic() - watch.created, 3),
        "trace_id": watch.trace_id,
    }
    log.info(json.dumps(line, separators=(", ", ": ")))
