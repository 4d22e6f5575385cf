"""The event vocabulary of one agent turn: what every surface consumes.

A turn is one ordered stream of these frozen, plain-data events. Every surface (CLI, chat
platforms, API server, iris WebSocket) turns the stream into what its user sees; none of them
sees a provider SDK object.

Shape of a turn::

    TurnStarted
    ( ReasoningDelta*                       reasoning, when the model exposes it
      TextDelta*                            visible text of the current segment
      StreamReset?                          a retry/fallback restarted: drop the segment's text
      (Commentary | SegmentEnded)?          closes the segment: Commentary when the text
                                            accompanied tool calls, SegmentEnded otherwise
      (ToolStarted (ApprovalRequested ApprovalResolved)? ToolProgress* ToolEnded)*
      ToolCallDelta*                        a client-defined tool call as it forms
    )*
    TurnEnded | TurnFailed                  exactly one, always last

Segments: each model round that produced text is one segment. Its text streams as
``TextDelta``; when the round ends, exactly one closer says what the text was. A consumer that
does not care about the difference treats ``Commentary`` like ``SegmentEnded``.

Serialisation: ``to_json`` / ``from_json`` (and ``to_dict`` / ``from_dict``) round-trip every
event through one pydantic ``TypeAdapter`` keyed on ``kind``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter


@dataclass(frozen=True, slots=True)
class TurnStarted:
    turn_id: str
    model: str
    kind: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Visible text, already scrubbed of think/reasoning tags."""

    text: str
    kind: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """Reasoning text. ``summary``: the provider's summary of its reasoning (Responses API
    ``reasoning_summary_text``), not the raw reasoning itself."""

    text: str
    summary: bool = False
    kind: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(frozen=True, slots=True)
class Commentary:
    """Closes a segment whose text accompanied tool calls ("I'll look at the repo first.").

    ``text`` is the post-processed segment text; it was streamed as TextDelta before."""

    text: str
    kind: Literal["commentary"] = "commentary"


@dataclass(frozen=True, slots=True)
class SegmentEnded:
    """Closes a text segment that was not commentary; ``text`` is post-processed."""

    text: str
    kind: Literal["segment_ended"] = "segment_ended"


@dataclass(frozen=True, slots=True)
class ToolStarted:
    index: int  # monotonic per turn, from 1
    name: str
    args: dict[str, Any]
    call_id: str = ""
    kind: Literal["tool_started"] = "tool_started"


@dataclass(frozen=True, slots=True)
class ToolProgress:
    index: int
    name: str
    note: str
    kind: Literal["tool_progress"] = "tool_progress"


@dataclass(frozen=True, slots=True)
class ToolEnded:
    index: int
    name: str
    ok: bool
    duration: float  # seconds
    output_preview: str  # a short tail of the output, at most 500 characters
    kind: Literal["tool_ended"] = "tool_ended"


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a client-defined tool call as the provider streams it (only in a round
    that offers the caller's own tools; the agent's own tools are ToolStarted/ToolEnded).

    ``index`` numbers the round's calls from 0 in the order they began. The first fragment of
    a call carries its ``call_id`` and ``name`` (never repeated: both empty after it); every
    fragment may carry ``arguments``, to be concatenated. ``TurnEnded.tool_calls`` is the
    whole of each call. A round whose call began streaming is not replayed: a failure after
    it fails the turn (no StreamReset takes a half-streamed call back)."""

    index: int
    arguments: str = ""
    call_id: str = ""
    name: str = ""
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True)
class ApprovalRequested:
    """Tool call ``index`` waits for a person's yes (the broker: ``iris.state.approvals``).

    ``args``: the call's full JSON arguments; ``preview``: a human rendering of them (for
    ``terminal`` the whole command, never cut); ``expires_at``: Unix seconds when the request
    counts as refused. Always followed by ``ApprovalResolved`` with the same ``approval_id``
    before the call's ``ToolEnded``."""

    index: int
    name: str
    args: str
    preview: str
    approval_id: str
    expires_at: float
    kind: Literal["approval_requested"] = "approval_requested"


@dataclass(frozen=True, slots=True)
class ApprovalResolved:
    """How an approval request ended. ``decision``: ``once``, ``chat`` (this tool runs
    unasked for the rest of the chat's session), ``deny``, ``timeout``, ``cancelled`` (the
    turn was interrupted). ``by``: who answered (a user or device name), ``timeout`` or
    ``interrupt``."""

    approval_id: str
    decision: Literal["once", "chat", "deny", "timeout", "cancelled"]
    by: str
    kind: Literal["approval_resolved"] = "approval_resolved"


@dataclass(frozen=True, slots=True)
class ElicitationRequested:
    """An MCP server asks the person for input in the middle of a tool call
    (``elicitation/create``, ``iris.agent.elicitation``): ``message``, and either ``schema``
    (a form: a flat JSON object schema of primitive fields) or ``url`` (a link to open).
    ``expires_at``: Unix seconds when it counts as declined. Always followed by
    ``ElicitationResolved`` with the same ``elicitation_id``."""

    elicitation_id: str
    server: str
    message: str
    schema: dict[str, Any]
    expires_at: float
    url: str = ""
    kind: Literal["elicitation_requested"] = "elicitation_requested"


@dataclass(frozen=True, slots=True)
class ElicitationResolved:
    """How an elicitation ended: ``accept``, ``decline``, ``cancel`` (the person's answer),
    or ``timeout`` (declined). ``by``: who answered, ``timeout`` or ``interrupt``."""

    elicitation_id: str
    action: Literal["accept", "decline", "cancel", "timeout"]
    by: str
    kind: Literal["elicitation_resolved"] = "elicitation_resolved"


@dataclass(frozen=True, slots=True)
class StreamReset:
    """A retry or fallback restarted the current segment: forget its streamed text."""

    reason: str
    model: str = ""
    kind: Literal["stream_reset"] = "stream_reset"


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """The turn finished. ``text`` is the final post-processed answer (last segment).

    ``reason``: ``stop``; ``interrupted`` (text so far); ``max_iterations``; ``length`` (the
    output cap ``model.max_output_chars`` cut the answer: ``text`` is the text up to it);
    ``tool_calls`` (the model called client-defined tools, listed in ``tool_calls`` as
    ``{"id", "name", "arguments"}`` with arguments as the raw JSON string).
    ``messages`` are the chat-format messages this turn added to the conversation
    (assistant messages with tool calls, tool results, the final assistant message);
    ``iris.agent.history.kept`` says what of them a history keeps.
    ``usage``: ``{"input_tokens", "output_tokens", "total_tokens"}`` summed over rounds."""

    text: str
    reasoning: str = ""
    model: str = ""
    usage: dict[str, int] = field(default_factory=dict[str, int])
    reason: str = "stop"
    tool_calls: list[dict[str, str]] = field(default_factory=list[dict[str, str]])
    messages: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    kind: Literal["turn_ended"] = "turn_ended"


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The turn failed. ``partial_text`` is what was already shown and is kept;
    ``retry_after`` is the provider's Retry-After in seconds, when it sent one.
    ``messages``: what the turn added before it failed, as ``TurnEnded.messages`` (its last
    assistant message is ``partial_text``)."""

    code: str
    message: str
    retryable: bool = False
    partial_text: str = ""
    retry_after: float | None = None
    messages: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    kind: Literal["turn_failed"] = "turn_failed"


Event = (
    TurnStarted
    | TextDelta
    | ReasoningDelta
    | Commentary
    | SegmentEnded
    | ToolStarted
    | ToolProgress
    | ToolEnded
    | ToolCallDelta
    | ApprovalRequested
    | ApprovalResolved
    | ElicitationRequested
    | ElicitationResolved
    | StreamReset
    | TurnEnded
    | TurnFailed
)

TerminalEvent = TurnEnded | TurnFailed

_ADAPTER: TypeAdapter[Event] = TypeAdapter(Annotated[Event, Field(discriminator="kind")])


def to_dict(event: Event) -> dict[str, Any]:
    return asdict(event)


def from_dict(data: dict[str, Any]) -> Event:
    return _ADAPTER.validate_python(data)


def to_json(event: Event) -> str:
    return _ADAPTER.dump_json(event).decode()


def from_json(raw: str | bytes) -> Event:
    return _ADAPTER.validate_json(raw)
