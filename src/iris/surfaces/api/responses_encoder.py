"""Agent events → Responses API stream events and the response object.

Pure: events in, plain dicts out, no I/O. The order the official SDK's ``responses.stream()``
helper enforces::

    response.created, response.in_progress
    per output item:  response.output_item.added
        reasoning:    reasoning_summary_part.added, reasoning_summary_text.delta*,
                      reasoning_summary_text.done, reasoning_summary_part.done
        message:      content_part.added, output_text.delta* (logprobs: []),
                      output_text.done, content_part.done
        function_call: function_call_arguments.delta, function_call_arguments.done
                      response.output_item.done
    response.completed (the whole response)  |  error, response.failed
    (response.incomplete with incomplete_details.reason "max_output_tokens" when the output
    cap, ``model.max_output_chars``, cut the answer)

Every event carries a monotonic ``sequence_number``. Each text segment of the turn is its own
message item; one that accompanied tool calls has ``phase: "commentary"``. The agent's own tools
run inside Iris and produce no items; client-defined tool calls become ``function_call`` items.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_never

from iris.events import (
    Commentary,
    Event,
    ReasoningDelta,
    SegmentEnded,
    StreamReset,
    TextDelta,
    ToolEnded,
    ToolProgress,
    ToolStarted,
    TurnEnded,
    TurnFailed,
    TurnStarted,
)
from iris.surfaces.api.segment import SegmentText

Payload = dict[str, Any]

# What a response echoes of its request when the request did not say (Open Responses).
ECHO_DEFAULTS: dict[str, Any] = {
    "previous_response_id": None,
    "instructions": None,
    "tools": [],
    "tool_choice": "auto",
    "truncation": "disabled",
    "parallel_tool_calls": True,
    "text": {"format": {"type": "text"}},
    "top_p": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "top_logprobs": 0,
    "temperature": 1.0,
    "reasoning": {"effort": None, "summary": None},
    "user": None,
    "max_output_tokens": None,
    "max_tool_calls": None,
    "store": True,
    "background": False,
    "service_tier": "default",
    "metadata": {},
    "safety_identifier": None,
    "prompt_cache_key": None,
}


def response_object(
    response_id: str,
    model: str,
    created_at: int,
    echo: dict[str, Any],
    *,
    status: str,
    output: list[Payload],
    usage: dict[str, int] | None,
    error: dict[str, Any] | None = None,
    completed_at: int | None = None,
) -> Payload:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "completed_at": completed_at,
        "status": status,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "error": error,
        **ECHO_DEFAULTS,
        **echo,
        "usage": None if usage is None else responses_usage(usage),
    }


def responses_usage(usage: dict[str, int]) -> dict[str, Any]:
    inp = usage.get("input_tokens", 0)
    out = usage.get("output_tokens", 0)
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.get("total_tokens", inp + out),
    }


class _Item:
    """The output item being streamed: a reasoning summary or a message."""

    def __init__(self, kind: str, item_id: str, index: int) -> None:
        self.kind = kind
        self.id = item_id
        self.index = index
        self.text = SegmentText()


class ResponsesEncoder:
    def __init__(
        self,
        response_id: str,
        model: str,
        created_at: int,
        echo: dict[str, Any] | None = None,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock
        self.response_id = response_id
        self.model = model
        self.created_at = created_at
        self.echo = dict(echo or {})
        self.output: list[Payload] = []  # finished output items
        self.response: Payload | None = None  # the final response, once the turn ended
        self.failure: TurnFailed | None = None
        self._seq = 0
        self._ids = 0
        self._started = False
        self._open: _Item | None = None

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}_{self.response_id.removeprefix('resp_')}_{self._ids}"

    def _event(self, out: list[Payload], type: str, **fields: Any) -> None:
        out.append({"type": type, "sequence_number": self._seq, **fields})
        self._seq += 1

    def _snapshot(self, status: str, **extra: Any) -> Payload:
        return response_object(
            self.response_id,
            self.model,
            self.created_at,
            self.echo,
            status=status,
            output=list(self.output),
            **extra,
        )

    # -- streaming ------------------------------------------------------------------------
    def feed(self, event: Event) -> list[Payload]:
        out: list[Payload] = []
        self._start(out)
        match event:
            case TurnStarted():
                pass
            case ReasoningDelta(text=text):
                item = self._open_item(out, "reasoning")
                delta = item.text.feed(text)
                if delta:
                    self._event(
                        out,
                        "response.reasoning_summary_text.delta",
                        item_id=item.id,
                        output_index=item.index,
                        summary_index=0,
                        delta=delta,
                    )
            case TextDelta(text=text):
                self._text(out, text)
            case StreamReset():
                if self._open is not None:
                    self._open.text.reset()
            case Commentary(text=text):
                self._close_message(out, text, phase="commentary")
            case SegmentEnded(text=text):
                self._close_message(out, text, phase=None)
            case ToolStarted() | ToolProgress() | ToolEnded():
                self._close(out, "completed")
            case TurnEnded():
                # The output cap cut the answer: OpenAI's word is an incomplete response.
                status = "incomplete" if event.reason == "length" else "completed"
                self._close(out, status)
                if event.reason == "tool_calls":
                    for call in event.tool_calls:
                        self._function_call(out, call)
                completed_at = int(self._clock()) if self._clock else self.created_at
                self.response = self._snapshot(status, usage=event.usage, completed_at=completed_at)
                if status == "incomplete":
                    self.response["incomplete_details"] = {"reason": "max_output_tokens"}
                self._event(out, f"response.{status}", response=self.response)
            case TurnFailed():
                self._close(out, "incomplete")
                self.failure = event
                error = {"code": event.code, "message": event.message}
                self._event(out, "error", code=event.code, message=event.message, param=None)
                self.response = self._snapshot("failed", usage=None, error=error)
                self._event(out, "response.failed", response=self.response)
            case _:
                assert_never(event)
        return out

    def _start(self, out: list[Payload]) -> None:
        if self._started:
            return
        self._started = True
        created = self._snapshot("in_progress", usage=None)
        self._event(out, "response.created", response=created)
        self._event(out, "response.in_progress", response=created)

    def _open_item(self, out: list[Payload], kind: str) -> _Item:
        if self._open is not None and self._open.kind == kind:
            return self._open
        self._close(out, "completed")
        index = len(self.output)
        if kind == "reasoning":
            item = _Item(kind, self._next_id("rs"), index)
            added: Payload = {"id": item.id, "type": "reasoning", "summary": []}
            self._event(out, "response.output_item.added", output_index=index, item=added)
            self._event(
                out,
                "response.reasoning_summary_part.added",
                item_id=item.id,
                output_index=index,
                summary_index=0,
                part={"type": "summary_text", "text": ""},
            )
        else:
            item = _Item(kind, self._next_id("msg"), index)
            added = {
                "id": item.id,
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            self._event(out, "response.output_item.added", output_index=index, item=added)
            self._event(
                out,
                "response.content_part.added",
                item_id=item.id,
                output_index=index,
                content_index=0,
                part=_text_part(""),
            )
        self._open = item
        return item

    def _text(self, out: list[Payload], text: str) -> None:
        if not text and (self._open is None or self._open.kind != "message"):
            return
        item = self._open_item(out, "message")
        delta = item.text.feed(text)
        if delta:
            self._event(
                out,
                "response.output_text.delta",
                item_id=item.id,
                output_index=item.index,
                content_index=0,
                delta=delta,
                logprobs=[],
            )

    def _close_message(self, out: list[Payload], final: str, phase: str | None) -> None:
        item = self._open if self._open is not None and self._open.kind == "message" else None
        tail = item.text.tail(final) if item is not None else final
        if tail:
            self._text(out, tail)
        self._close(out, "completed", final=final, phase=phase)

    def _close(
        self, out: list[Payload], status: str, *, final: str = "", phase: str | None = None
    ) -> None:
        item = self._open
        if item is None:
            return
        self._open = None
        text = item.text.close(final)
        if item.kind == "reasoning":
            part = {"type": "summary_text", "text": text}
            common: dict[str, Any] = {"item_id": item.id, "output_index": item.index}
            self._event(
                out, "response.reasoning_summary_text.done", **common, summary_index=0, text=text
            )
            self._event(
                out, "response.reasoning_summary_part.done", **common, summary_index=0, part=part
            )
            done: Payload = {"id": item.id, "type": "reasoning", "summary": [part]}
        else:
            common = {"item_id": item.id, "output_index": item.index, "content_index": 0}
            self._event(out, "response.output_text.done", **common, text=text, logprobs=[])
            self._event(out, "response.content_part.done", **common, part=_text_part(text))
            done = {
                "id": item.id,
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": [_text_part(text)],
            }
            if phase is not None:
                done["phase"] = phase
        self.output.append(done)
        self._event(out, "response.output_item.done", output_index=item.index, item=done)

    def _function_call(self, out: list[Payload], call: dict[str, str]) -> None:
        index = len(self.output)
        item: Payload = {
            "id": self._next_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "call_id": call["id"],
            "name": call["name"],
            "arguments": "",
        }
        arguments = call.get("arguments", "")
        self._event(out, "response.output_item.added", output_index=index, item=item)
        common = {"item_id": item["id"], "output_index": index}
        if arguments:
            self._event(out, "response.function_call_arguments.delta", **common, delta=arguments)
        self._event(
            out,
            "response.function_call_arguments.done",
            **common,
            name=call["name"],
            arguments=arguments,
        )
        done = {**item, "status": "completed", "arguments": arguments}
        self.output.append(done)
        self._event(out, "response.output_item.done", output_index=index, item=done)


def _text_part(text: str) -> Payload:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
