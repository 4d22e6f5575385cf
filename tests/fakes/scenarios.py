"""Scripted upstream answers: what the fake OpenAI-compatible server says, as pure data.

A ``Scenario`` turns one received request into a ``Reply`` (status, headers, a whole body or a
list of SSE events). Nothing here does I/O; ``upstream.py`` writes replies to a real socket.

Every model-output builder (``text``, ``reasoning``, ``tool_call``, ``tool_calls``, ``drop``,
``hold``, ``gated``, ``responses_text``...) answers both ``/v1/chat/completions`` and
``/v1/responses``, streamed or not, in the wire format the official APIs use (OpenAI's API
reference: chunk and event shapes, ``[DONE]``, error events). The delivery knobs compose with every one of them:

- ``delay``: seconds to wait before each delta after the first;
- ``gate_after``: after that many deltas, wait for ``up.release()`` (or a client disconnect);
- ``end``: ``"done"`` (normal), ``"drop"`` (cut the connection right after the last delta,
  mid-body, no ``[DONE]``) or ``"error"`` (an error event after the 200, then ``[DONE]``).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Api = Literal["chat", "responses"]
End = Literal["done", "drop", "error"]
EventKind = Literal["head", "delta", "tail"]

_ids = itertools.count(1)


@dataclass(frozen=True)
class Received:
    """One request as the fake upstream saw it."""

    method: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]  # lower-cased names
    at: float  # time.monotonic() when the body was read

    @property
    def api(self) -> Api:
        return "responses" if self.path.rstrip("/").endswith("/responses") else "chat"

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def include_usage(self) -> bool:
        options = self.body.get("stream_options") or {}
        return bool(isinstance(options, dict) and options.get("include_usage"))


@dataclass(frozen=True)
class Event:
    """One SSE event, written to the socket in one piece."""

    data: bytes
    kind: EventKind  # "delta" events carry model output; gates and drops count them


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
    body: bytes = b""  # the whole body when not streaming
    events: tuple[Event, ...] | None = None  # SSE events when streaming
    delay: float = 0.0
    gate_after: int | None = None
    end: End = "done"

    def gate_index(self) -> int | None:
        """Index of the event before which the stream waits for ``up.release()``."""
        if self.gate_after is None or self.events is None:
            return None
        deltas = [i for i, event in enumerate(self.events) if event.kind == "delta"]
        return deltas[self.gate_after] if self.gate_after < len(deltas) else self.cut_index()

    def cut_index(self) -> int:
        """Index of the first event after the last delta (where ``end="drop"`` cuts)."""
        events = self.events or ()
        deltas = [i for i, event in enumerate(events) if event.kind == "delta"]
        if deltas:
            return deltas[-1] + 1
        return next((i for i, event in enumerate(events) if event.kind == "tail"), len(events))


@dataclass(frozen=True)
class Scenario:
    label: str
    reply: Callable[[Received], Reply]

    def __repr__(self) -> str:
        return f"<scenario {self.label}>"


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: tuple[str, ...]  # fragments, streamed one per delta
    call_id: str = "call_1"


@dataclass(frozen=True)
class Output:
    """What the model "says"; rendered by the chat or the responses encoder."""

    text: tuple[str, ...] = ()
    reasoning: tuple[str, ...] = ()
    reasoning_field: str = "reasoning_content"
    tool_calls: tuple[ToolCall, ...] = ()
    usage: tuple[int, int] = (10, 5)
    model: str | None = None
    error: dict[str, Any] = field(default_factory=dict[str, Any])  # for end="error"


# ---------------------------------------------------------------- builders


def text(
    *chunks: str,
    delay: float = 0.0,
    usage: tuple[int, int] = (10, 5),
    model: str | None = None,
    gate_after: int | None = None,
    end: End = "done",
) -> Scenario:
    """Content deltas, one per chunk (use it for raw ``<think>`` tags split anywhere)."""
    output = Output(text=chunks, usage=usage, model=model)
    return _model_output(f"text{chunks!r}", output, delay, gate_after, end)


def reasoning(
    reasoning_chunks: Sequence[str],
    text_chunks: Sequence[str],
    field: str = "reasoning_content",
    *,
    delay: float = 0.0,
    usage: tuple[int, int] = (10, 5),
    model: str | None = None,
    gate_after: int | None = None,
    end: End = "done",
) -> Scenario:
    """``delta.<field>`` deltas (``reasoning_content`` or ``reasoning``), then content deltas.
    On /v1/responses the reasoning becomes a reasoning item's summary text."""
    output = Output(
        text=tuple(text_chunks),
        reasoning=tuple(reasoning_chunks),
        reasoning_field=field,
        usage=usage,
        model=model,
    )
    return _model_output(f"reasoning({field})", output, delay, gate_after, end)


def tool_call(
    name: str,
    arg_fragments: Sequence[str],
    call_id: str = "call_1",
    content: str | Sequence[str] | None = None,
    **delivery: Any,
) -> Scenario:
    """Optional content first, then one function call whose arguments arrive in fragments."""
    return tool_calls([ToolCall(name, tuple(arg_fragments), call_id)], content=content, **delivery)


def tool_calls(
    calls: Iterable[ToolCall | tuple[str, Sequence[str]] | tuple[str, Sequence[str], str]],
    content: str | Sequence[str] | None = None,
    *,
    reasoning: Sequence[str] = (),
    delay: float = 0.0,
    usage: tuple[int, int] = (10, 5),
    model: str | None = None,
    gate_after: int | None = None,
    end: End = "done",
) -> Scenario:
    """Several function calls in one answer, after optional ``reasoning_content`` deltas;
    tuples are ``(name, fragments[, call_id])`` and default to ids ``call_1``, ``call_2``..."""
    built: list[ToolCall] = []
    for number, call in enumerate(calls, start=1):
        if isinstance(call, ToolCall):
            built.append(call)
        else:
            call_id = call[2] if len(call) == 3 else f"call_{number}"
            built.append(ToolCall(call[0], tuple(call[1]), call_id))
    chunks = (content,) if isinstance(content, str) else tuple(content or ())
    output = Output(
        text=chunks, reasoning=tuple(reasoning), tool_calls=tuple(built), usage=usage, model=model
    )
    names = ",".join(c.name for c in built)
    return _model_output(f"tool_calls({names})", output, delay, gate_after, end)


def request_chars(body: dict[str, Any]) -> int:
    """Characters of what a request asks the model to read (messages, input, instructions)."""
    parts = [body.get("messages"), body.get("input"), body.get("instructions")]
    total = 0
    for part in parts:
        if isinstance(part, str):
            total += len(part)
        elif isinstance(part, list):
            for item in part:
                content = item.get("content") if isinstance(item, dict) else item
                total += len(content) if isinstance(content, str) else len(json.dumps(content))
    return total


def responder(choose: Callable[[Received], Scenario], label: str = "responder") -> Scenario:
    """A scenario chosen per request (say, by what the request asks), e.g. as ``up.default``."""
    return Scenario(label, lambda request: choose(request).reply(request))


def drop(*chunks: str, delay: float = 0.0) -> Scenario:
    """Send the chunks, then cut the connection mid-body (no finish chunk, no ``[DONE]``)."""
    return text(*chunks, delay=delay, end="drop")


def hold(*chunks: str) -> Scenario:
    """Send the chunks, then keep the stream open until ``up.release()`` or a disconnect."""
    return text(*chunks, gate_after=len(chunks))


def gated(*chunks: str, after: int = 1) -> Scenario:
    """Send ``after`` chunks, wait for ``up.release()``, then send the rest and finish."""
    return text(*chunks, gate_after=after)


def stream_error(
    *chunks: str, message: str = "upstream failed mid-stream", code: str = "server_error"
) -> Scenario:
    """Chunks, then an error after the 200: chat ``data: {"error": ...}``; responses ``error``
    then ``response.failed``; both end with ``[DONE]``."""
    output = Output(text=chunks, error={"message": message, "code": code})
    return _model_output(f"stream_error({message!r})", output, 0.0, None, "error")


def responses_text(
    *chunks: str, reasoning: Sequence[str] | None = None, **delivery: Any
) -> Scenario:
    """Text (after an optional reasoning summary); the same script answers chat requests."""
    output = Output(
        text=chunks,
        reasoning=tuple(reasoning or ()),
        usage=delivery.pop("usage", (10, 5)),
        model=delivery.pop("model", None),
    )
    return _model_output(f"responses_text{chunks!r}", output, **delivery)


def responses_tool_call(
    name: str, arg_fragments: Sequence[str], call_id: str = "call_1", **delivery: Any
) -> Scenario:
    return tool_call(name, arg_fragments, call_id=call_id, **delivery)


def garbage(body: bytes, content_type: str = "text/html; charset=utf-8") -> Scenario:
    """A 200 whose body is not what the API promises, streamed or not: an HTML error page
    from a proxy, an empty body, plain text where SSE was asked for."""
    reply = Reply(headers=(("content-type", content_type),), body=body)
    return Scenario(f"garbage({body[:20]!r})", lambda _request: reply)


def html_200() -> Scenario:
    """A captive portal / proxy answering 200 with an HTML page."""
    return garbage(b"<html><body><h1>502 Bad Gateway</h1></body></html>")


def empty_200() -> Scenario:
    """A 200 with an empty body (also when SSE was asked for)."""
    return garbage(b"", "application/json")


def not_sse_200() -> Scenario:
    """A 200 whose content type says SSE but whose body is plain text, no ``data:`` lines."""
    return garbage(b"upstream overloaded, try later\n", "text/event-stream")


def hang_after_first() -> Scenario:
    """One content delta, then silence until ``up.release()`` or a disconnect (a hung upstream
    that still holds the connection open)."""
    return hold("Hel")


def ends_early(*chunks: str) -> Scenario:
    """The chunks, then a clean end of the body (no cut socket) with no finish: no
    ``finish_reason``, no ``response.completed``, no ``[DONE]``. A proxy that gave up."""
    whole = text(*chunks)

    def reply(request: Received) -> Reply:
        full = whole.reply(request)
        if full.events is None:
            return full
        kept = tuple(event for event in full.events if event.kind != "tail")
        return Reply(headers=full.headers, events=kept)

    return Scenario(f"ends_early{chunks!r}", reply)


def lone_surrogate() -> Scenario:
    """A content delta whose JSON holds a lone surrogate escape (``"\\ud800"``): valid JSON,
    not valid Unicode text."""
    return text("Hi ", "\ud800", " there")


def structured(
    value: Any, *, prose: str = "Sure! Here is what you asked for.", **delivery: Any
) -> Scenario:
    """A model that honours a JSON response format: asked for one (chat ``response_format``,
    responses ``text.format``: ``json_schema`` or ``json_object``) it answers ``value`` as JSON
    in 8-character chunks; asked for none it answers ``prose``, which no JSON parser accepts."""
    answer = json.dumps(value)
    chunks = tuple(answer[i : i + 8] for i in range(0, len(answer), 8))

    def reply(request: Received) -> Reply:
        if request.api == "chat":
            fmt = request.body.get("response_format")
        else:
            fmt = (request.body.get("text") or {}).get("format")
        wants_json = isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object")
        return text(*(chunks if wants_json else (prose,)), **delivery).reply(request)

    return Scenario(f"structured({answer[:20]})", reply)


def error(
    status: int,
    message: str = "upstream error",
    retry_after: float | int | None = None,
    code: str | None = None,
    type: str | None = None,
    param: str | None = None,
) -> Scenario:
    """An HTTP error before the first byte, with an OpenAI-style JSON error body."""
    reply = error_reply(status, message, retry_after=retry_after, code=code, type=type, param=param)
    return Scenario(f"error({status})", lambda _request: reply)


def reject_stream(*chunks: str) -> Scenario:
    """400 "stream is not supported" for ``stream: true``; otherwise a plain text answer."""
    answer = text(*chunks)
    rejection = error_reply(
        400,
        "stream is not supported for this model",
        code="unsupported_value",
        param="stream",
    )

    def reply(request: Received) -> Reply:
        return rejection if request.stream else answer.reply(request)

    return Scenario("reject_stream", reply)


def openai_rules(
    *chunks: str, reasoning_model: bool, knows_completion_tokens: bool = True
) -> Scenario:
    """A Chat Completions model that checks a request as OpenAI does, in OpenAI's words, then
    answers ``chunks``. ``reasoning_model``: an o-series / gpt-5 model (refuses ``max_tokens``,
    takes ``reasoning_effort`` and ``verbosity``); else a gpt-4o-like one (refuses those two).
    ``knows_completion_tokens=False``: an older compatible server that refuses
    ``max_completion_tokens`` (Azure's message of the time). ``metadata`` needs ``store``."""
    answer = text(*chunks)

    def unsupported(name: str, instead: str = "") -> Reply:
        hint = f" Use '{instead}' instead." if instead else ""
        message = f"Unsupported parameter: '{name}' is not supported with this model.{hint}"
        return error_reply(400, message, code="unsupported_parameter", param=name)

    def reply(request: Received) -> Reply:
        body = request.body
        if "metadata" in body and not body.get("store"):
            return error_reply(
                400,
                "The 'metadata' parameter is only allowed when 'store' is enabled.",
                param="metadata",
            )
        if not knows_completion_tokens and "max_completion_tokens" in body:
            return error_reply(400, "Unrecognized request argument supplied: max_completion_tokens")
        if reasoning_model and "max_tokens" in body:
            return unsupported("max_tokens", "max_completion_tokens")
        if not reasoning_model:
            for name in ("reasoning_effort", "verbosity"):
                if name in body:
                    return unsupported(name)
        return answer.reply(request)

    return Scenario(f"openai_rules(reasoning={reasoning_model})", reply)


def error_reply(
    status: int,
    message: str,
    *,
    retry_after: float | int | None = None,
    code: str | None = None,
    type: str | None = None,
    param: str | None = None,
) -> Reply:
    body = {
        "error": {
            "message": message,
            "type": type or _error_type(status),
            "code": code,
            "param": param,
        }
    }
    headers = [("content-type", "application/json")]
    if retry_after is not None:
        headers.append(("retry-after", f"{retry_after:g}"))
    return Reply(status=status, headers=tuple(headers), body=_json(body))


def _error_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def _model_output(
    label: str,
    output: Output,
    delay: float = 0.0,
    gate_after: int | None = None,
    end: End = "done",
) -> Scenario:
    def reply(request: Received) -> Reply:
        if output.error and not request.stream:
            return error_reply(500, output.error["message"], code=output.error["code"])
        encode = _encode_responses if request.api == "responses" else _encode_chat
        body, events = encode(output, request)
        return Reply(
            headers=(("content-type", "text/event-stream" if events else "application/json"),),
            body=body,
            events=events,
            delay=delay,
            gate_after=gate_after,
            end=end,
        )

    return Scenario(label, reply)


# ---------------------------------------------------------------- encoders

_DONE = Event(b"data: [DONE]\n\n", "tail")


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _usage_chat(output: Output) -> dict[str, Any]:
    prompt, completion = output.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _encode_chat(output: Output, request: Received) -> tuple[bytes, tuple[Event, ...] | None]:
    number = next(_ids)
    base = {
        "id": f"chatcmpl-fake{number}",
        "created": int(time.time()),
        "model": output.model or request.body.get("model") or "fake-model",
        "system_fingerprint": "fp_fake",
    }
    finish = "tool_calls" if output.tool_calls else "stop"
    if not request.stream:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(output.text) if output.text or not output.tool_calls else None,
            "refusal": None,
        }
        if output.reasoning:
            message[output.reasoning_field] = "".join(output.reasoning)
        if output.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": "".join(call.arguments)},
                }
                for call in output.tool_calls
            ]
        whole = {
            **base,
            "object": "chat.completion",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": _usage_chat(output),
        }
        return _json(whole), None

    usage_field = {"usage": None} if request.include_usage else {}

    def chunk(delta: dict[str, Any], kind: EventKind, finish_reason: str | None = None) -> Event:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        body = {**base, "object": "chat.completion.chunk", "choices": [choice], **usage_field}
        return Event(b"data: " + _json(body) + b"\n\n", kind)

    # Role only in the first delta: the SDK concatenates repeated strings.
    events = [chunk({"role": "assistant", "content": "", "refusal": None}, "head")]
    events += [chunk({output.reasoning_field: part}, "delta") for part in output.reasoning]
    events += [chunk({"content": part}, "delta") for part in output.text]
    for index, call in enumerate(output.tool_calls):
        # id, type and name only in the first delta of a call; later ones: index + arguments.
        function = {"name": call.name, "arguments": ""}
        opening = {"index": index, "id": call.call_id, "type": "function", "function": function}
        events.append(chunk({"tool_calls": [opening]}, "head"))
        for fragment in call.arguments:
            piece = {"index": index, "function": {"arguments": fragment}}
            events.append(chunk({"tool_calls": [piece]}, "delta"))
    if output.error:
        failure = {"error": {**output.error, "type": "server_error", "param": None}}
        events.append(Event(b"data: " + _json(failure) + b"\n\n", "tail"))
    else:
        events.append(chunk({}, "tail", finish))
        if request.include_usage:
            last = {**base, "object": "chat.completion.chunk", "choices": []}
            last["usage"] = _usage_chat(output)
            events.append(Event(b"data: " + _json(last) + b"\n\n", "tail"))
    events.append(_DONE)
    return b"", tuple(events)


def _encode_responses(output: Output, request: Received) -> tuple[bytes, tuple[Event, ...] | None]:
    number = next(_ids)
    response_id = f"resp_fake{number}"
    prompt, completion = output.usage
    shell: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": output.model or request.body.get("model") or "fake-model",
        "output": [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": request.body.get("tools") or [],
        "error": None,
        "incomplete_details": None,
        "instructions": request.body.get("instructions"),
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "usage": None,
    }
    usage = {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }
    events: list[Event] = []

    def emit(kind: EventKind, type_: str, **fields: Any) -> None:
        payload = {"type": type_, "sequence_number": len(events), **fields}
        events.append(Event(f"event: {type_}\ndata: ".encode() + _json(payload) + b"\n\n", kind))

    emit("head", "response.created", response=shell)
    emit("head", "response.in_progress", response=shell)
    items: list[dict[str, Any]] = []
    if output.reasoning:
        index, item_id = len(items), f"rs_fake{number}"
        added = {"type": "reasoning", "id": item_id, "summary": []}
        emit("head", "response.output_item.added", output_index=index, item=added)
        at = {"item_id": item_id, "output_index": index, "summary_index": 0}
        emit("head", "response.reasoning_summary_part.added", **at, part=_summary(""))
        for part in output.reasoning:
            emit("delta", "response.reasoning_summary_text.delta", **at, delta=part)
        whole = "".join(output.reasoning)
        emit("tail", "response.reasoning_summary_text.done", **at, text=whole)
        emit("tail", "response.reasoning_summary_part.done", **at, part=_summary(whole))
        items.append({**added, "summary": [_summary(whole)]})
        emit("tail", "response.output_item.done", output_index=index, item=items[-1])
    if output.text or not output.tool_calls:
        index, item_id = len(items), f"msg_fake{number}"
        added = {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        emit("head", "response.output_item.added", output_index=index, item=added)
        at = {"item_id": item_id, "output_index": index, "content_index": 0}
        emit("head", "response.content_part.added", **at, part=_output_text(""))
        for part in output.text:
            emit("delta", "response.output_text.delta", **at, delta=part, logprobs=[])
        whole = "".join(output.text)
        emit("tail", "response.output_text.done", **at, text=whole, logprobs=[])
        emit("tail", "response.content_part.done", **at, part=_output_text(whole))
        items.append({**added, "status": "completed", "content": [_output_text(whole)]})
        emit("tail", "response.output_item.done", output_index=index, item=items[-1])
    for call_number, call in enumerate(output.tool_calls):
        index, item_id = len(items), f"fc_fake{number}_{call_number}"
        added = {
            "type": "function_call",
            "id": item_id,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": "",
            "status": "in_progress",
        }
        emit("head", "response.output_item.added", output_index=index, item=added)
        at = {"item_id": item_id, "output_index": index}
        for fragment in call.arguments:
            emit("delta", "response.function_call_arguments.delta", **at, delta=fragment)
        arguments = "".join(call.arguments)
        emit("tail", "response.function_call_arguments.done", **at, arguments=arguments)
        items.append({**added, "arguments": arguments, "status": "completed"})
        emit("tail", "response.output_item.done", output_index=index, item=items[-1])

    if output.error:
        failed = {**shell, "status": "failed", "output": items, "error": dict(output.error)}
        emit("tail", "error", **output.error, param=None)
        emit("tail", "response.failed", response=failed)
    else:
        completed = {**shell, "status": "completed", "output": items, "usage": usage}
        if not request.stream:
            return _json(completed), None
        emit("tail", "response.completed", response=completed)
    events.append(_DONE)
    return b"", tuple(events)


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _summary(text: str) -> dict[str, Any]:
    return {"type": "summary_text", "text": text}
