"""The context budget of one turn: token estimates, where a history may be cut, compaction.

The context window: a turn's request fits the model's window less the reply's reserve. The window is
what the provider's model listing says (``GET /models``: ``context_length``,
``max_model_len``…; at most ``model.context_window`` when that is set), else
``model.context_window``, else ``LOCAL_WINDOW`` for the embedded model (its llama.cpp context
is that size) and ``DEFAULT_WINDOW`` for a remote one. The reserve is ``model.max_tokens`` (at
most half the window), else a quarter of the window up to ``DEFAULT_RESERVE``. The system
prompt, every message and the tool schemas all count.

Estimates (``Gauge``):

- the embedded model: its own tokenizer counts the exact prompt it will see;
- a remote provider: characters / a characters-per-token ratio. The ratio starts at
  ``DEFAULT_CHARS_PER_TOKEN`` (conservative: GPT-style tokenizers give ~4 for English prose,
  less for code and non-Latin scripts) and is calibrated per model from the provider's own
  usage report (``input_tokens`` of a request vs the characters sent, for requests of at least
  ``CALIBRATE_FROM`` characters, averaged with the previous figure), kept within
  ``RATIO_RANGE``. No downloaded vocabulary (tiktoken): Iris runs offline.
- when the provider says a request was too long, that model's window is taken to be below
  what the request was estimated at (90 % of it), whatever the config says, for the rest of
  the process: the next requests are fitted to what the provider showed.

Cuts: a history is only cut before a user message, so a whole exchange goes: an assistant's
``tool_calls`` and their results always stay together. The current question and what this
turn added after it are never cut (a single turn longer than the window fails with
``context_length_exceeded``).

Compaction (``model.compaction``): ``summarize`` replaces the cut-off part with a summary the
model writes (a separate, non-streamed request, never shown as the answer); ``truncate`` drops
it. A summary from an earlier compaction is part of what the next one summarizes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from iris.agent.scrubber import finalize
from iris.config import Config
from iris.errors import ProviderError, ProviderHTTPError
from iris.llm.local import LOCAL_WINDOW
from iris.llm.provider import Provider, ProviderRequest, RawText
from iris.state.sessions import Transcript

log = logging.getLogger(__name__)

DEFAULT_WINDOW = 32_768
DEFAULT_RESERVE = 4_096
DEFAULT_CHARS_PER_TOKEN = 3.0
RATIO_RANGE = (1.5, 6.0)
MESSAGE_OVERHEAD = 4  # tokens a chat format spends on each message's role and framing
CALIBRATE_FROM = 2_000  # characters a request needs before its usage calibrates the ratio
KEEP_SHARE = 0.5  # after a compaction the kept turns use at most this share of the budget
SUMMARY_PREFIX = "Summary of the earlier conversation (older turns were compacted):\n"
NOTE = "earlier conversation summarized"
_CLIP = 4_000  # characters of one message a summary request sees

SUMMARY_INSTRUCTIONS = (
    "You compress conversations. Summarize the conversation below so that you could continue "
    "it without the original: the user's goals and preferences, facts, names, numbers, "
    "decisions, what was done and what is still open. Plain text, at most {words} words. "
    "Do not answer anything in it; only summarize."
)

# What providers say when a request is over the model's window (OpenAI's code first).
_OVERFLOW_WORDS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context length",
    "too many tokens",
    "prompt is too long",
    "input is too long",
)


def is_overflow(exc: BaseException) -> bool:
    """Did the provider refuse the request for being longer than the model's window?"""
    if not isinstance(exc, ProviderError):
        return False
    if isinstance(exc, ProviderHTTPError) and exc.status_code not in (400, 413, 422):
        return False
    text = f"{exc.message} {exc.body if isinstance(exc, ProviderHTTPError) else ''}".lower()
    return any(words in text for words in _OVERFLOW_WORDS)


@runtime_checkable
class WindowListing(Protocol):
    """A provider whose model listing may say a model's context window."""

    async def listed_window(self, model: str) -> int | None: ...


@runtime_checkable
class TokenCounting(Protocol):
    """A provider that counts a request's tokens exactly (the embedded model's tokenizer)."""

    async def count_tokens(self, messages: list[dict[str, Any]]) -> int: ...


# -- sizes ---------------------------------------------------------------------------------------
# What one image part is counted as: about what providers bill a downscaled image (~1500
# tokens), not the length of its base64 (which would compact a chat for every photo).
IMAGE_CHARS = 6000


def _text(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if value is None:
        return 0
    if isinstance(value, list) and any(_is_image_part(p) for p in cast(list[Any], value)):
        return sum(map(_part_chars, cast(list[Any], value)))
    return len(json.dumps(value, ensure_ascii=False))


def _part_chars(part: Any) -> int:
    if _is_image_part(part):
        return IMAGE_CHARS
    text = cast(dict[str, Any], part).get("text") if isinstance(part, dict) else None
    return len(text) if isinstance(text, str) else _text(part)


def _is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and cast(dict[str, Any], part).get("type") in (
        "image_url",
        "input_image",
    )


def message_chars(message: dict[str, Any]) -> int:
    """Characters of one chat-format message that reach the model."""
    return _text(message.get("content")) + _text(message.get("tool_calls"))


def request_chars(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    return sum(map(message_chars, messages)) + (_text(tools) if tools else 0)


def window_of(config: Config, listed: int | None = None) -> int:
    """The window: what the provider's model listing says (``listed``), never more than
    ``model.context_window`` when that is set; else the config; else a safe default."""
    model = config.model
    if listed is not None:
        return listed if model.context_window is None else min(listed, model.context_window)
    if model.context_window is not None:
        return model.context_window
    return LOCAL_WINDOW if model.provider == "local" else DEFAULT_WINDOW


def reserve_of(config: Config, window: int) -> int:
    """Tokens kept for the reply: ``model.max_tokens`` (at most half the window), else a
    quarter of the window up to ``DEFAULT_RESERVE``."""
    if config.model.max_tokens:
        return min(config.model.max_tokens, window // 2)
    return min(DEFAULT_RESERVE, window // 4)


@dataclass
class Gauge:
    """Token estimates per model, calibrated from what providers report."""

    _ratio: dict[str, float] = field(default_factory=dict[str, float])
    _window: dict[str, int] = field(default_factory=dict[str, int])
    _listed: dict[str, int | None] = field(default_factory=dict[str, int | None])

    async def learn(self, provider: Provider, model: str) -> None:
        """Ask ``provider``'s model listing for ``model``'s window, once per model."""
        if model not in self._listed and isinstance(provider, WindowListing):
            self._listed[model] = None  # one question per model, even while it is asked
            self._listed[model] = await provider.listed_window(model)

    def listed(self, model: str) -> int | None:
        return self._listed.get(model)

    def ratio(self, model: str) -> float:
        return self._ratio.get(model, DEFAULT_CHARS_PER_TOKEN)

    def window(self, model: str, configured: int) -> int:
        """The window of ``model``: the configured one, or less once the provider showed it."""
        return min(configured, self._window.get(model, configured))

    def observe(self, model: str, chars: int, input_tokens: int, messages: int = 0) -> None:
        """The provider counted ``input_tokens`` for a request of ``chars`` characters in
        ``messages`` messages. Small requests say more about framing than about text, so only
        requests of ``CALIBRATE_FROM`` characters or more count, averaged with the last."""
        text_tokens = input_tokens - MESSAGE_OVERHEAD * messages
        if chars < CALIBRATE_FROM or text_tokens <= 0:
            return
        measured = chars / text_tokens
        before = self._ratio.get(model)
        self._ratio[model] = _clamp(measured if before is None else (before + measured) / 2)

    def overflowed(self, model: str, tokens: int) -> None:
        """The provider refused a request estimated at ``tokens``: its window is smaller."""
        if tokens > 0:
            self._window[model] = min(int(tokens * 0.9), self._window.get(model, tokens))

    def tokens(
        self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> int:
        ratio = self.ratio(model)
        body = sum(int(message_chars(m) / ratio) + MESSAGE_OVERHEAD for m in messages)
        return body + (int(_text(tools) / ratio) if tools else 0)

    def sizes(self, model: str, messages: list[dict[str, Any]]) -> list[int]:
        ratio = self.ratio(model)
        return [int(message_chars(m) / ratio) + MESSAGE_OVERHEAD for m in messages]


def _clamp(ratio: float) -> float:
    low, high = RATIO_RANGE
    return max(low, min(high, ratio))


# -- where to cut ------------------------------------------------------------------------------
def cut_index(messages: list[dict[str, Any]], sizes: list[int], room: int) -> int:
    """The fewest leading messages to drop so that the rest fit ``room`` tokens.

    Cuts go before a user message only, so a whole exchange goes (an assistant's tool calls
    and their results are never parted), and never past the last user message: 0 when
    everything fits; the last user message's index when even that part alone is too long."""
    if sum(sizes) <= room:
        return 0
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    last_user = users[-1] if users else 0
    for i in users:
        if i > 0 and sum(sizes[i:]) <= room:
            return i
    return last_user


# -- the summary -------------------------------------------------------------------------------
def transcript(messages: list[dict[str, Any]], max_chars: int) -> str:
    """The messages as plain text for the summarizer, each clipped, the newest kept whole
    when the whole is longer than ``max_chars``."""
    lines: list[str] = []
    for message in messages:
        role = str(message.get("role", ""))
        content = message.get("content")
        if isinstance(content, list):  # content parts: their text, an image as a mark
            content = " ".join(
                "[image]" if _is_image_part(p) else str(cast(dict[str, Any], p).get("text", ""))
                for p in cast(list[Any], content)
                if isinstance(p, dict)
            )
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if role == "assistant" and message.get("tool_calls"):
            calls = [c.get("function", {}) for c in message["tool_calls"]]
            called = ", ".join(f"{c.get('name')}({c.get('arguments', '')})" for c in calls)
            text = f"{text or ''}\n[called {called}]".strip()
        if not text:
            continue
        if len(text) > _CLIP:
            text = f"{text[: _CLIP // 2]} […] {text[-_CLIP // 2 :]}"
        label = {"tool": "Tool result", "system": "Earlier summary"}.get(role, role.title())
        lines.append(f"{label}: {text}")
    joined = "\n\n".join(lines)
    return joined if len(joined) <= max_chars else "[…]" + joined[-max_chars:]


async def summarize(
    provider: Provider,
    model: str,
    messages: list[dict[str, Any]],
    *,
    max_tokens: int,
    max_chars: int,
) -> str:
    """The model's summary of ``messages`` (one non-streamed request; raises ProviderError)."""
    words = max(50, int(max_tokens * 0.6))
    request = ProviderRequest(
        model,
        [
            {"role": "system", "content": SUMMARY_INSTRUCTIONS.format(words=words)},
            {"role": "user", "content": transcript(messages, max_chars)},
        ],
        [],
        max_tokens,
    )
    parts: list[str] = []
    async for raw in provider.complete(request):
        if isinstance(raw, RawText):
            parts.append(raw.text)
    return finalize("".join(parts))


def summary_message(summary: str) -> dict[str, Any]:
    return {"role": "system", "content": SUMMARY_PREFIX + summary}


def history(transcript: Transcript) -> list[dict[str, Any]]:
    """The history the model sees of a stored transcript: the cut's summary, worded as a
    message, then the messages kept after it."""
    head = [summary_message(transcript.summary)] if transcript.summary else []
    return [*head, *transcript.messages]


@dataclass(frozen=True, slots=True)
class Compaction:
    """What a compaction did to a turn's history: its first ``replaced`` messages (counted in
    the turn request's ``messages``) became ``summary`` (empty: dropped)."""

    summary: str
    replaced: int


@dataclass
class ContextWindow:
    """The room of one model's window, how its requests are counted, and who summarizes."""

    window: int
    reserve: int
    count: Callable[[list[dict[str, Any]], list[dict[str, Any]]], Awaitable[int]]
    sizes: Callable[[list[dict[str, Any]]], Awaitable[list[int]]]
    provider: Provider
    model: str  # the name sent to the provider
    ratio: float  # characters per token, for sizing a summary request's input

    @property
    def room(self) -> int:
        return max(self.window - self.reserve, 1)


async def compact(
    fit: ContextWindow,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    summarizing: bool,
    force: bool = False,
    head: int = 0,
) -> tuple[list[dict[str, Any]], Compaction | None]:
    """Fit a chat history (the question last) into ``fit``: the leading messages that do
    not fit become a summary (``summarizing``), or go.

    ``head``: leading messages that always stay (the system prompt). ``force``: compact even
    if the estimate says it fits (the provider said otherwise, or the user asked). Returns the
    new messages and what was replaced (None: nothing)."""
    body = messages[head:]
    total = await fit.count(messages, tools)
    if total <= fit.room and not force:
        return messages, None
    sizes = await fit.sizes(body)
    summary_tokens = min(1024, fit.room // 8) if summarizing else 0
    room = int((fit.room - (total - sum(sizes)) - summary_tokens) * KEEP_SHARE)
    cut = cut_index(body, sizes, max(room, 0))
    if cut == 0 and force:
        # The estimate says it fits: cut at the first whole exchange all the same.
        cut = cut_index(body, sizes, max(sum(sizes) - 1, 0))
    if cut == 0:
        return messages, None
    summary = ""
    if summarizing:
        try:
            summary = await summarize(
                fit.provider,
                fit.model,
                body[:cut],
                max_tokens=summary_tokens,
                max_chars=max(int((fit.room - 2 * summary_tokens) * fit.ratio), 1000),
            )
        except ProviderError as exc:  # a summary is a nicety: the chat must go on
            log.warning("summary failed (%s); older turns are dropped", exc.message)
    kept = [summary_message(summary)] if summary else []
    return [*messages[:head], *kept, *body[cut:]], Compaction(summary, cut)


def context_window_for(
    config: Config, gauge: Gauge, provider: Provider, model: str
) -> ContextWindow:
    """How requests to ``model`` (served by ``provider``) are counted against its window."""
    window = gauge.window(model, window_of(config, gauge.listed(model)))
    reserve = reserve_of(config, window)
    if isinstance(provider, TokenCounting):
        counter = provider

        async def count(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
            return await counter.count_tokens(messages)

        async def sizes(messages: list[dict[str, Any]]) -> list[int]:
            # Each message alone, less the prompt's frame every count includes.
            frame = await counter.count_tokens([])
            counted = await asyncio.gather(*(counter.count_tokens([m]) for m in messages))
            return [max(n - frame, 1) for n in counted]

        return ContextWindow(
            window, reserve, count, sizes, provider, model, DEFAULT_CHARS_PER_TOKEN
        )

    async def estimate(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        return gauge.tokens(model, messages, tools)

    async def estimate_sizes(messages: list[dict[str, Any]]) -> list[int]:
        return gauge.sizes(model, messages)

    return ContextWindow(
        window, reserve, estimate, estimate_sizes, provider, model, gauge.ratio(model)
    )
