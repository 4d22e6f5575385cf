"""Agent events → Chat Completions chunks (streamed) and the completion object (not streamed).

Pure: events in, plain dicts out, no I/O; for the hot path of a proxied stream (a text delta
that only grows the open segment, a call's argument fragment) the SSE bytes themselves
(``text_frame``, ``call_frame``: the same bytes, from a chunk encoded once). What the official
clients parse, in order:

- the first chunk carries ``role`` (once: the SDK concatenates repeated strings);
- ``content`` deltas as the model produces them; segments of one turn (commentary before a
  tool, the answer after it) are joined with a blank line, as the agent's user would read them;
- reasoning as ``reasoning_content`` deltas (what Open WebUI and vLLM clients read);
- client-defined tool calls as ``tool_calls`` deltas as they form (``ToolCallDelta``), each
  with an integer ``index`` and its ``id``/``name`` only in its first delta, then each argument
  fragment as the provider sent it; a call the provider gave whole goes out at the end;
- with ``legacy`` (the request used ``functions``), the one call as ``function_call`` deltas
  (``name`` once, then ``arguments``) and ``finish_reason: "function_call"``, as the legacy API
  answered;
- a final chunk with ``finish_reason``; a usage chunk with empty ``choices`` when asked;
- a failure after the first byte as an in-band ``{"error": {...}}`` chunk.

The agent's own tools run inside Iris and are not shown here: the client sees what the agent
says, not what it does.
"""

from __future__ import annotations

from typing import Any, assert_never

from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    ElicitationRequested,
    ElicitationResolved,
    Event,
    ReasoningDelta,
    StreamReset,
    ToolCallDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.segments import (
    Item,
    SegmentClosed,
    SegmentGrown,
    SegmentOpened,
    SegmentReset,
    Segments,
    Track,
    appended,
)
from iris.surfaces.api.problems import error_body
from iris.surfaces.api.sse import Shape

Chunk = dict[str, Any]

# TurnEnded.reason → finish_reason. "length" is the closest OpenAI word for "the agent ran
# out of rounds", and the real one for "the output cap cut the answer"; an interrupted turn
# stopped normally with the text so far.
_FINISH = {
    "stop": "stop",
    "interrupted": "stop",
    "max_iterations": "length",
    "length": "length",
    "tool_calls": "tool_calls",
}


class ChatEncoder:
    def __init__(
        self,
        completion_id: str,
        model: str,
        created: int,
        *,
        include_usage: bool = False,
        legacy: bool = False,
    ) -> None:
        self.legacy = legacy
        self.completion_id = completion_id
        self.model = model
        self.created = created
        self.include_usage = include_usage
        self.segments: list[str] = []  # closed segments' text, as the client reads it
        self.reasoning = ""
        self.tool_calls: list[dict[str, str]] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.failure: TurnFailed | None = None
        self._segments = Segments()
        self._thinking = Track()  # this round's reasoning as the client was sent it
        self._role_sent = False
        self._calls_sent: dict[int, list[str]] = {}  # streamed calls: index → arguments sent
        self._argument_shapes: dict[int, Shape] = {}  # a call's arguments chunk, encoded once
        self._segment_fresh = True  # no text of the current segment was sent yet
        self._text_sent = False  # some segment's text was sent
        self._text_shape: Shape | None = None  # a text chunk, all but its text encoded once
        self._reasoning_shape: Shape | None = None  # the same for reasoning

    @property
    def done(self) -> bool:
        return self.finish_reason is not None or self.failure is not None

    # -- streaming ------------------------------------------------------------------------
    def feed(self, event: Event) -> list[Chunk]:
        """The chunks ``event`` produces, in order (often none or one)."""
        out: list[Chunk] = []
        for item in self._segments.feed(event):
            self._item(out, item)
        return out

    def text_frame(self, text: str) -> bytes | None:
        """The SSE bytes of a ``TextDelta`` of ``text`` that only grows a segment whose text
        has begun (a proxied stream's common case), as ``feed`` would make them, without the
        chunk objects; None when it is not that: ``feed`` the event."""
        shape = self._text_shape
        if shape is None or self._segment_fresh or not self._segments.grew(text):
            return None
        return shape.text(text)

    def reasoning_frame(self, delta: ReasoningDelta) -> bytes | None:
        """The SSE bytes of a ``ReasoningDelta`` that only grows this round's reasoning after
        the role chunk, as ``feed`` would make them, without the chunk objects; None when it
        is not that: ``feed`` the event."""
        text = delta.text
        if not self._role_sent or not text or not self._segments.settled:
            return None
        if not self._thinking.extend(text):
            return None
        self.reasoning += text
        shape = self._reasoning_shape
        if shape is None:
            shape = self._reasoning_shape = Shape(
                lambda reasoning: self._chunk({"reasoning_content": reasoning})
            )
        return shape.text(text)

    def call_frame(self, delta: ToolCallDelta) -> bytes | None:
        """The SSE bytes of a ``ToolCallDelta`` that adds arguments to a call whose head was
        sent, as ``feed`` would make them, without the chunk objects; None when it is not
        that: ``feed`` the event."""
        sent = self._calls_sent.get(delta.index)
        if sent is None or delta.call_id or not delta.arguments or not self._segments.settled:
            return None
        sent.append(delta.arguments)
        shape = self._argument_shapes.get(delta.index)
        if shape is None:
            shape = self._argument_shapes[delta.index] = Shape(
                lambda arguments, index=delta.index: self._arguments_chunk(index, arguments)
            )
        return shape.text(delta.arguments)

    def _item(self, out: list[Chunk], item: Item) -> None:
        match item:
            case TurnStarted():
                self._role(out)
            case SegmentOpened():
                self._segment_fresh = True
            case SegmentGrown() | SegmentReset():
                self._text(out, appended(item))
            case SegmentClosed(text=text):
                self._thinking = Track()
                if text:
                    self.segments.append(text)
            case ReasoningDelta(text=text):
                sent = "".join(appended(fact) for fact in self._thinking.grow(text))
                if sent:
                    self._role(out)
                    self.reasoning += sent
                    out.append(self._chunk({"reasoning_content": sent}))
            case StreamReset():
                self._thinking.restart()
            case ToolStarted() | ToolProgress() | ToolEnded():
                self._thinking = Track()
            case ApprovalRequested() | ApprovalResolved():
                pass  # chat completions cannot ask: such a call is refused in its tool result
            case ElicitationRequested() | ElicitationResolved():
                pass  # nor is a server's request for input: it is declined
            case ToolCallDelta():
                self._role(out)
                out.extend(self._call_delta(item))
            case TurnEnded():
                self._role(out)
                out.extend(self._ended(item))
            case TurnFailed():
                self.failure = item
                out.append(failure_chunk(item))
            case _:
                assert_never(item)

    def _call_delta(self, delta: ToolCallDelta) -> list[Chunk]:
        """A client tool call as it streams: its head (id, type, name) once, then arguments."""
        index, arguments = delta.index, delta.arguments
        if delta.call_id:
            self._calls_sent[index] = [arguments]
            function = {"name": delta.name, "arguments": arguments}
            head = {"index": index, "id": delta.call_id, "type": "function", "function": function}
            return [self._chunk(self._calls_delta(head))]
        if index in self._calls_sent and arguments:
            self._calls_sent[index].append(arguments)
            return [self._arguments_chunk(index, arguments)]
        return []

    def _ended(self, item: TurnEnded) -> list[Chunk]:
        """The rest of every client call, the finish reason, and the usage when asked for."""
        out: list[Chunk] = []
        self.usage = dict(item.usage)
        if item.reason == "tool_calls":
            self.tool_calls = [dict(call) for call in item.tool_calls]
            for index, call in enumerate(self.tool_calls):
                out.extend(self._rest_of_call(index, call))
        self.finish_reason = _FINISH.get(item.reason, "stop")
        if item.reason == "tool_calls" and not self.tool_calls:
            self.finish_reason = "stop"
        elif self.finish_reason == "tool_calls" and self.legacy:
            self.finish_reason = "function_call"
        out.append(self._chunk({}, self.finish_reason))
        if self.include_usage:
            out.append(self._usage_chunk())
        return out

    def _role(self, out: list[Chunk]) -> None:
        if not self._role_sent:
            self._role_sent = True
            out.append(self._chunk({"role": "assistant", "content": ""}))

    def _text(self, out: list[Chunk], text: str) -> None:
        """Send ``text``, what the segment model says an append-only client gets."""
        if not text:
            return
        self._role(out)
        # The first text of a later segment opens with the blank line that separates it from
        # the text before; it is part of the stream, so a client's concatenation reads right.
        if self._segment_fresh and self._text_sent:
            text = "\n\n" + text
        self._segment_fresh = False
        self._text_sent = True
        if self._text_shape is None:
            self._text_shape = Shape(lambda content: self._chunk({"content": content}))
        out.append(self._text_shape.fill(text))

    def _rest_of_call(self, index: int, call: dict[str, str]) -> list[Chunk]:
        """What the client lacks of a finished call: all of it when it was not streamed (as
        OpenAI streams one: id, type and name once, then the arguments), else the arguments
        past those sent."""
        arguments = call.get("arguments", "")
        parts = self._calls_sent.get(index)
        if parts is not None:
            sent = "".join(parts)
            rest = arguments[len(sent) :] if arguments.startswith(sent) else ""
            return [self._arguments_chunk(index, rest)] if rest else []
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        return [self._chunk(self._calls_delta(head)), self._arguments_chunk(index, arguments)]

    def _arguments_chunk(self, index: int, arguments: str) -> Chunk:
        return self._chunk(
            self._calls_delta({"index": index, "function": {"arguments": arguments}})
        )

    def _calls_delta(self, call: dict[str, Any]) -> dict[str, Any]:
        """The delta that carries ``call``: a ``tool_calls`` entry, or the legacy
        ``function_call`` (no index, no id: the legacy API had one call and no ids)."""
        if self.legacy:
            return {"function_call": call["function"]}
        return {"tool_calls": [call]}

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> Chunk:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._head(), "choices": [choice]}

    def _usage_chunk(self) -> Chunk:
        return {**self._head(), "choices": [], "usage": chat_usage(self.usage)}

    def _head(self) -> Chunk:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }

    # -- not streamed ---------------------------------------------------------------------
    def completion(self) -> dict[str, Any]:
        """The ``chat.completion`` object of a finished (not failed) turn."""
        assert self.finish_reason is not None, "completion() before TurnEnded"
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "\n\n".join(self.segments) or (None if self.tool_calls else ""),
            "refusal": None,
        }
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls and self.legacy:
            first = self.tool_calls[0]
            message["function_call"] = {
                "name": first["name"],
                "arguments": first.get("arguments", ""),
            }
        elif self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call.get("arguments", "")},
                }
                for call in self.tool_calls
            ]
        return {
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": chat_usage(self.usage),
        }


def chat_usage(usage: dict[str, int]) -> dict[str, int]:
    prompt = usage.get("input_tokens", 0)
    completion = usage.get("output_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": usage.get("total_tokens", prompt + completion),
    }


def failure_chunk(event: TurnFailed) -> Chunk:
    kind = "rate_limit_error" if event.code == "rate_limited" else "server_error"
    return error_body(event.message, type=kind, code=event.code)
