"""Agent events → Responses API stream events and the response object.

Pure: events in, plain dicts out, no I/O; for the hot path of a proxied stream (a text delta
of the open message, a call's argument fragment) the SSE bytes themselves (``text_frame``,
``call_frame``: the same bytes, from an event encoded once). The order the official SDK's
``responses.stream()`` helper enforces::

    response.created, response.in_progress
    per output item:  response.output_item.added
        reasoning:    raw reasoning (``content``): content_part.added, reasoning_text.delta*,
                      reasoning_text.done, content_part.done; a summary, only when the
                      provider gave one (``summary``): reasoning_summary_part.added,
                      reasoning_summary_text.delta*, reasoning_summary_text.done,
                      reasoning_summary_part.done
        message:      content_part.added, output_text.delta* (logprobs: []),
                      output_text.done, content_part.done
        function_call: function_call_arguments.delta*, function_call_arguments.done
        mcp_call:     mcp_call.in_progress, mcp_call_arguments.delta, mcp_call_arguments.done,
                      mcp_call.in_progress* (one per progress note, in its ``note``),
                      mcp_call.completed | mcp_call.failed (none when the turn stopped)
        mcp_list_tools: mcp_list_tools.in_progress, mcp_list_tools.completed
                      response.output_item.done
    response.completed (the whole response)  |  error, response.failed
                                              |  response.incomplete (cancelled, interrupted,
                                                 or ``max_output_tokens`` when the output cap,
                                                 ``model.max_output_chars``, cut the answer)

Every event carries a monotonic ``sequence_number``. Each text segment of the turn is its own
message item; one that accompanied tool calls has ``phase: "commentary"``. Every output item
has an id (``msg_…``, ``rs_…``, ``fc_…``) that a later request can name in an
``item_reference``. Each tool the agent runs itself is an ``mcp_call`` item
(``iris.surfaces.api.tool_runs``), added when the call starts — or, for a call that waits for an
approval, in the response that carries the approved call on — and done when it ends;
``mcp_list_tools`` items open the response that first offers a server's tools. Client-defined
tool calls become ``function_call`` items, streamed as they form (``ToolCallDelta``): the item
is added with the call's id and name, each argument fragment is a delta, and the item is done
when the turn ends (or earlier, when other output follows it). A message open when a call
begins closes first, as commentary.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, assert_never

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
from iris.surfaces.api.sse import Shape
from iris.surfaces.api.tool_runs import Run, ToolView, call_arguments, list_item

Payload = dict[str, Any]

# The ``server_label`` of an approval request: Iris itself hosts the tools (built-in and MCP).
APPROVAL_SERVER_LABEL = "iris"

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


def error_fields(error: dict[str, str]) -> Payload:
    """The fields of an ``error`` event for ``error`` (its code and message)."""
    # The openai SDKs read the error's fields at the top level, the Open Responses
    # specification under "error": both are there.
    return {**error, "param": None, "error": {"type": "server_error", **error, "param": None}}


def failed_elsewhere(response: Payload, sequence: int, code: str, message: str) -> list[Payload]:
    """The end of a run whose process is gone, from its last shared ``response``: the events
    numbered from ``sequence`` a failed turn ends with (``error``, ``response.failed``); the
    items it left open close as incomplete."""
    error = {"code": code, "message": message}
    output = [
        {**item, "status": "incomplete"} if item.get("status") == "in_progress" else item
        for item in response.get("output") or []
    ]
    final = {**response, "status": "failed", "output": output, "usage": None, "error": error}
    return [
        {"type": "error", "sequence_number": sequence, **error_fields(error)},
        {"type": "response.failed", "sequence_number": sequence + 1, "response": final},
    ]


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
    """The output item being streamed: a reasoning item or a message."""

    def __init__(self, kind: str, item_id: str, index: int, segment: int = -1) -> None:
        self.kind = kind
        self.id = item_id
        self.index = index
        self.raw = Track()  # reasoning: the raw reasoning, across replays
        self.sent: list[str] = []  # the deltas sent: the message text, or the raw reasoning
        self.text_open = False  # its content part was announced
        self.summary: Track | None = None  # reasoning: the provider's summary, if any
        self.summary_sent: list[str] = []
        self.segment = segment  # a message: the text segment it shows
        self.whole = False  # a message: it shows its segment from the start
        self.delta_shape: Shape | None = None  # its text (or raw reasoning) delta, encoded once


class _Call:
    """A function_call item being streamed."""

    def __init__(self, item_id: str, index: int, call_id: str, name: str) -> None:
        self.id = item_id
        self.index = index
        self.call_id = call_id
        self.name = name
        self.sent = ""  # the arguments sent as deltas
        self.delta_shape: Shape | None = None  # its arguments delta event, encoded once

    def payload(self, status: str, arguments: str) -> Payload:
        return {
            "id": self.id,
            "type": "function_call",
            "status": status,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": arguments,
        }


_Grows = TypeVar("_Grows", _Item, _Call)  # what a delta event adds to


class ResponsesEncoder:
    def __init__(
        self,
        response_id: str,
        model: str,
        created_at: int,
        echo: dict[str, Any] | None = None,
        *,
        clock: Callable[[], float] | None = None,
        tools: ToolView | None = None,
    ) -> None:
        self._clock = clock
        self._tools = tools or ToolView()
        self._run: Run | None = None  # the mcp_call item open (the agent runs one at a time)
        self._run_index = 0  # the call (``ToolStarted.index``) the open mcp_call shows
        self._waiting: dict[int, ToolStarted] = {}  # calls that may wait for an approval
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
        self._calls: list[_Call] = []  # function_call items open, in output order
        self._streamed: dict[int, _Call | None] = {}  # streamed calls by position; None: done
        self._segments = Segments()
        self._shown_segments: set[int] = set()  # segments a message item has shown

    def _next_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}_{self.response_id.removeprefix('resp_')}_{self._ids}"

    def _event(self, out: list[Payload], type: str, **fields: Any) -> None:
        out.append({"type": type, "sequence_number": self._seq, **fields})
        self._seq += 1

    def _part_event(self, out: list[Payload], type: str, item: _Item, **fields: Any) -> None:
        """An event about ``item``'s content part (an item has one: ``content_index`` 0)."""
        self._event(out, type, item_id=item.id, output_index=item.index, content_index=0, **fields)

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

    def snapshot(self) -> Payload:
        """The response as it stands: the final one once the turn ended, else ``queued``
        (nothing fed yet) or ``in_progress`` with the output so far, the open item included."""
        if self.response is not None:
            return self.response
        status = "in_progress" if self._started else "queued"
        current = self._snapshot(status, usage=None)
        if self._open is not None:
            current["output"].append(_item_payload(self._open, "in_progress", ""))
        current["output"].extend(call.payload("in_progress", call.sent) for call in self._calls)
        if self._run is not None:
            current["output"].append(self._run.payload("in_progress"))
        return current

    def stop(self, status: str, reason: str) -> list[Payload]:
        """End the turn without its terminal event (``cancelled`` by the client, or
        ``incomplete`` when the server stopped it): the open item closes as incomplete and
        ``response.incomplete`` carries the response with ``status``."""
        out: list[Payload] = []
        if self.response is not None:
            return out
        self._start(out)
        self._close(out, "incomplete")
        self._close_calls(out, "incomplete")
        self._run_done(out, "incomplete")
        completed_at = int(self._clock()) if self._clock else self.created_at
        self.response = self._snapshot(status, usage=None, completed_at=completed_at)
        self.response["incomplete_details"] = {"reason": reason}
        self._event(out, "response.incomplete", response=self.response)
        return out

    # -- streaming ------------------------------------------------------------------------
    def feed(self, event: Event) -> list[Payload]:
        out: list[Payload] = []
        self._start(out)
        for item in self._segments.feed(event):
            self._item(out, item)
        return out

    def text_frame(self, text: str) -> bytes | None:
        """The SSE bytes of a ``TextDelta`` of ``text`` that only grows the segment of the
        message item open now (a proxied stream's common case), as ``feed`` would make them,
        without the event objects; None when it is not that: ``feed`` the event."""
        item = self._open
        if (
            item is None
            or item.kind != "message"
            or item.segment != self._segments.open_segment
            or not self._segments.grew(text)
        ):
            return None
        item.sent.append(text)
        return self._grown(item, _delta_event, text)

    def reasoning_frame(self, delta: ReasoningDelta) -> bytes | None:
        """The SSE bytes of a ``ReasoningDelta`` (raw reasoning, not a summary) that only grows
        the reasoning item open now, as ``feed`` would make them, without the event objects;
        None when it is not that: ``feed`` the event."""
        item = self._open
        text = delta.text
        if (
            item is None
            or item.kind != "reasoning"
            or not item.text_open
            or delta.summary
            or not text
            or not self._segments.settled
            or not item.raw.extend(text)
        ):
            return None
        item.sent.append(text)
        return self._grown(item, _reasoning_event, text)

    def call_frame(self, delta: ToolCallDelta) -> bytes | None:
        """The SSE bytes of a ``ToolCallDelta`` that adds arguments to a call whose item is
        open, as ``feed`` would make them, without the event objects; None when it is not
        that: ``feed`` the event."""
        call = self._streamed.get(delta.index)
        if call is None or delta.call_id or not delta.arguments or not self._segments.settled:
            return None
        call.sent += delta.arguments
        return self._grown(call, _arguments_event, delta.arguments)

    def _grown(
        self, grows: _Grows, event: Callable[[_Grows], Callable[[Any, str], Payload]], text: str
    ) -> bytes:
        """The next event's bytes, adding ``text`` to what ``grows`` (an item or a call) sent:
        from its delta event's shape, encoded the first time."""
        shape = grows.delta_shape
        if shape is None:
            shape = grows.delta_shape = Shape(event(grows), 2, named=True)
        self._seq += 1
        return shape.numbered(self._seq - 1, text)

    def _item(self, out: list[Payload], item: Item) -> None:
        match item:
            case TurnStarted() | SegmentOpened() | ElicitationRequested() | ElicitationResolved():
                pass  # an elicitation: the API cannot ask, so it is declined before it is one
            case ReasoningDelta(text=text, summary=summary):
                self._reasoning(out, text, summary=summary)
            case SegmentGrown() | SegmentReset():
                self._text(out, item.segment, appended(item))
            case StreamReset():
                # The segment model settles the text; a reasoning item replays by itself.
                if self._open is not None and self._open.kind == "reasoning":
                    self._open.raw.restart()
                    if self._open.summary is not None:
                        self._open.summary.restart()
            case SegmentClosed():
                self._close_message(out, item)
            case ToolStarted() | ToolProgress() | ToolEnded():
                self._close(out, "completed")
                self._tool_event(out, item)
            case ToolCallDelta():
                self._call_delta(out, item)
            case ApprovalRequested():
                self._approval_request(out, item)
            case ApprovalResolved():
                self._approved(out, item)
            case TurnEnded():
                # The output cap cut the answer: OpenAI's word is an incomplete response.
                status = "incomplete" if item.reason == "length" else "completed"
                self._close(out, status)
                self._run_done(out, "incomplete")
                if item.reason == "tool_calls":
                    for position, call in enumerate(item.tool_calls):
                        self._function_call(out, position, call)
                self._close_calls(out, "incomplete")  # streamed, but not among the turn's calls
                completed_at = int(self._clock()) if self._clock else self.created_at
                self.response = self._snapshot(status, usage=item.usage, completed_at=completed_at)
                if status == "incomplete":
                    self.response["incomplete_details"] = {"reason": "max_output_tokens"}
                self._event(out, f"response.{status}", response=self.response)
            case TurnFailed():
                self._close(out, "incomplete")
                self._close_calls(out, "incomplete")
                self._run_done(out, "incomplete")
                self.failure = item
                error = {"code": item.code, "message": item.message}
                self._event(out, "error", **error_fields(error))
                self.response = self._snapshot("failed", usage=None, error=error)
                self._event(out, "response.failed", response=self.response)
            case _:
                assert_never(item)

    def _approval_request(self, out: list[Payload], event: ApprovalRequested) -> None:
        """A tool call waits for a yes: as OpenAI's API does, an ``mcp_approval_request``
        item ends the response, ``completed``; the answer comes in the client's next request
        (``iris.surfaces.api.held``)."""
        self._close(out, "completed")
        self._close_calls(out, "incomplete")
        self._waiting.pop(event.index, None)  # its mcp_call comes once it is approved
        self._run_done(out, "incomplete")
        item: Payload = {
            "id": event.approval_id,
            "type": "mcp_approval_request",
            "server_label": APPROVAL_SERVER_LABEL,
            "name": event.name,
            "arguments": event.args,
        }
        index = len(self.output)
        self._event(out, "response.output_item.added", output_index=index, item=item)
        self.output.append(item)
        self._event(out, "response.output_item.done", output_index=index, item=item)
        completed_at = int(self._clock()) if self._clock else self.created_at
        self.response = self._snapshot("completed", usage=None, completed_at=completed_at)
        self._event(out, "response.completed", response=self.response)

    # -- the agent's own tool runs (``mcp_call``) --------------------------------------------
    def _tool_event(
        self, out: list[Payload], event: ToolStarted | ToolProgress | ToolEnded
    ) -> None:
        if isinstance(event, ToolStarted):
            self._tool_started(out, event)
        elif isinstance(event, ToolProgress):
            self._tool_note(out, event)
        else:
            self._tool_ended(out, event)

    def _tool_started(self, out: list[Payload], started: ToolStarted) -> None:
        if self._tools.asks(started.name):
            self._waiting[started.index] = started  # its next event says whether it waits
            return
        self._open_run(out, started.index, started.name, call_arguments(started.args))

    def _approved(self, out: list[Payload], resolved: ApprovalResolved) -> None:
        """The answer to an approval: the response that carries the call on (the client's
        answer) shows it, from here."""
        asked = self._tools.answered
        if asked is None or asked.approval_id != resolved.approval_id:
            return
        if resolved.decision in ("once", "chat"):  # a refused call never ran: no item
            self._open_run(out, asked.index, asked.name, asked.args, asked.approval_id)

    def _running(self, out: list[Payload], index: int) -> Run | None:
        """The open ``mcp_call`` of call ``index``: a call that did not wait opens now."""
        started = self._waiting.pop(index, None)
        if started is not None:
            self._open_run(out, index, started.name, call_arguments(started.args))
        run = self._run
        return run if run is not None and self._run_index == index else None

    def _open_run(
        self, out: list[Payload], index: int, name: str, arguments: str, approval: str = ""
    ) -> None:
        self._run_done(out, "incomplete")
        server_label, tool = self._tools.label(name)
        position = len(self.output) + len(self._calls)
        run = Run(self._next_id("mcp"), position, server_label, tool, "", approval or None)
        self._run, self._run_index = run, index
        at = {"item_id": run.id, "output_index": position}
        self._event(
            out,
            "response.output_item.added",
            output_index=position,
            item=run.payload("in_progress"),
        )
        self._event(out, "response.mcp_call.in_progress", **at)
        run.arguments = arguments
        self._event(out, "response.mcp_call_arguments.delta", **at, delta=arguments)
        self._event(out, "response.mcp_call_arguments.done", **at, arguments=arguments)

    def _tool_note(self, out: list[Payload], progress: ToolProgress) -> None:
        run = self._running(out, progress.index)
        if run is not None:
            run.notes.append(progress.note)
            at = {"item_id": run.id, "output_index": run.index}
            self._event(out, "response.mcp_call.in_progress", **at, note=progress.note)

    def _tool_ended(self, out: list[Payload], ended: ToolEnded) -> None:
        run = self._running(out, ended.index)
        if run is None:
            return
        if ended.ok:
            self._run_done(out, "completed", output=ended.output_preview)
        else:
            self._run_done(out, "failed", error=ended.output_preview)

    def _run_done(
        self, out: list[Payload], status: str, output: str | None = None, error: str | None = None
    ) -> None:
        """Close the open ``mcp_call``: ``completed`` / ``failed`` with their events, or
        ``incomplete`` (the turn stopped in the middle of it) with none."""
        self._waiting.clear()
        run, self._run = self._run, None
        if run is None:
            return
        at = {"item_id": run.id, "output_index": run.index}
        if status != "incomplete":
            self._event(out, f"response.mcp_call.{status}", **at)
        done = run.payload(status, output, error)
        self.output.append(done)
        self._event(out, "response.output_item.done", output_index=run.index, item=done)

    def _listing(self, out: list[Payload], server_label: str, tools: list[Payload]) -> None:
        index = len(self.output)
        item = list_item(self._next_id("mcpl"), server_label, tools)
        at = {"item_id": item["id"], "output_index": index}
        self._event(
            out, "response.output_item.added", output_index=index, item={**item, "tools": []}
        )
        self._event(out, "response.mcp_list_tools.in_progress", **at)
        self._event(out, "response.mcp_list_tools.completed", **at)
        self.output.append(item)
        self._event(out, "response.output_item.done", output_index=index, item=item)

    def _start(self, out: list[Payload]) -> None:
        if self._started:
            return
        self._started = True
        created = self._snapshot("in_progress", usage=None)
        self._event(out, "response.created", response=created)
        self._event(out, "response.in_progress", response=created)
        for server_label, tools in self._tools.listings:
            self._listing(out, server_label, tools)

    def _open_item(self, out: list[Payload], kind: str, segment: int = -1) -> _Item:
        if self._open is not None and self._open.kind == kind and self._open.segment == segment:
            return self._open
        self._close(out, "completed")
        self._close_calls(out, "completed")  # the model moved on from its calls
        index = len(self.output)
        prefix = "rs" if kind == "reasoning" else "msg"
        item = _Item(kind, self._next_id(prefix), index, segment)
        added = _item_payload(item, "in_progress", "")
        self._event(out, "response.output_item.added", output_index=index, item=added)
        if kind == "message":
            item.whole = segment not in self._shown_segments
            self._shown_segments.add(segment)
            self._open_part(out, item)
        self._open = item
        return item

    def _open_part(self, out: list[Payload], item: _Item) -> None:
        item.text_open = True
        part = _reasoning_part("") if item.kind == "reasoning" else _text_part("")
        self._part_event(out, "response.content_part.added", item, part=part)

    def _reasoning(self, out: list[Payload], text: str, *, summary: bool) -> None:
        item = self._open_item(out, "reasoning")
        common: dict[str, Any] = {"item_id": item.id, "output_index": item.index}
        if summary:
            if item.summary is None:
                item.summary = Track()
                part = {"type": "summary_text", "text": ""}
                self._event(
                    out,
                    "response.reasoning_summary_part.added",
                    **common,
                    summary_index=0,
                    part=part,
                )
            delta = "".join(appended(fact) for fact in item.summary.grow(text))
            item.summary_sent.append(delta)
            if delta:
                self._event(
                    out,
                    "response.reasoning_summary_text.delta",
                    **common,
                    summary_index=0,
                    delta=delta,
                )
            return
        if not item.text_open:
            self._open_part(out, item)
        delta = "".join(appended(fact) for fact in item.raw.grow(text))
        item.sent.append(delta)
        if delta:
            self._part_event(out, "response.reasoning_text.delta", item, delta=delta)

    def _text(self, out: list[Payload], segment: int, delta: str) -> None:
        """Send ``delta`` of ``segment``, what the segment model says an append-only client
        gets; a segment interrupted by reasoning continues in a new message item."""
        if not delta:
            return
        item = self._open_item(out, "message", segment)
        item.sent.append(delta)
        self._part_event(out, "response.output_text.delta", item, delta=delta, logprobs=[])

    def _close_message(self, out: list[Payload], closed: SegmentClosed) -> None:
        item = self._open
        if item is None or item.kind != "message" or item.segment != closed.segment:
            return  # its text went out in items already closed
        status = "incomplete" if closed.ending in ("interrupted", "failed") else "completed"
        phase = "commentary" if closed.ending == "commentary" else None
        # A message that shows its segment whole ends with the segment's final text.
        final = closed.text if item.whole else ""
        self._close(out, status, final=final, phase=phase)

    def _close(
        self, out: list[Payload], status: str, *, final: str = "", phase: str | None = None
    ) -> None:
        item = self._open
        if item is None:
            return
        self._open = None
        if item.kind == "reasoning":
            if item.text_open:
                text = "".join(item.sent)
                self._part_event(out, "response.reasoning_text.done", item, text=text)
                self._part_event(
                    out, "response.content_part.done", item, part=_reasoning_part(text)
                )
            if item.summary is not None:
                text = "".join(item.summary_sent)
                part = {"type": "summary_text", "text": text}
                at = {"item_id": item.id, "output_index": item.index, "summary_index": 0}
                self._event(out, "response.reasoning_summary_text.done", **at, text=text)
                self._event(out, "response.reasoning_summary_part.done", **at, part=part)
            done = _item_payload(item, status, "")
        else:
            text = final or "".join(item.sent)
            self._part_event(out, "response.output_text.done", item, text=text, logprobs=[])
            self._part_event(out, "response.content_part.done", item, part=_text_part(text))
            done = _item_payload(item, status, text)
            if phase is not None:
                done["phase"] = phase
        self.output.append(done)
        self._event(out, "response.output_item.done", output_index=item.index, item=done)

    def _call_delta(self, out: list[Payload], delta: ToolCallDelta) -> None:
        if delta.call_id:  # a new call: its item opens after what was open before
            if self._open is not None:
                phase = "commentary" if self._open.kind == "message" else None
                self._close(out, "completed", phase=phase)
            index = len(self.output) + len(self._calls)
            call = _Call(self._next_id("fc"), index, delta.call_id, delta.name)
            self._calls.append(call)
            self._streamed[delta.index] = call
            added = call.payload("in_progress", "")
            self._event(out, "response.output_item.added", output_index=index, item=added)
        else:
            call = self._streamed.get(delta.index)
            if call is None:
                return  # its item is done already (other output followed it)
        self._call_arguments(out, call, delta.arguments)

    def _call_arguments(self, out: list[Payload], call: _Call, arguments: str) -> None:
        if arguments:
            call.sent += arguments
            self._event(
                out,
                "response.function_call_arguments.delta",
                item_id=call.id,
                output_index=call.index,
                delta=arguments,
            )

    def _close_calls(self, out: list[Payload], status: str) -> None:
        calls, self._calls = self._calls, []
        for call in calls:
            self._call_done(out, call, status, call.sent)

    def _call_done(self, out: list[Payload], call: _Call, status: str, arguments: str) -> None:
        for position, streamed in self._streamed.items():
            if streamed is call:
                self._streamed[position] = None
        common = {"item_id": call.id, "output_index": call.index}
        self._event(
            out,
            "response.function_call_arguments.done",
            **common,
            name=call.name,
            arguments=arguments,
        )
        done = call.payload(status, arguments)
        self.output.append(done)
        self._event(out, "response.output_item.done", output_index=call.index, item=done)

    def _function_call(self, out: list[Payload], position: int, call: dict[str, str]) -> None:
        arguments = call.get("arguments", "")
        if position in self._streamed:
            streamed = self._streamed[position]
            if streamed is not None:  # streamed and still open: the rest, then done
                if arguments.startswith(streamed.sent):
                    self._call_arguments(out, streamed, arguments[len(streamed.sent) :])
                self._calls.remove(streamed)
                self._call_done(out, streamed, "completed", arguments)
            return
        index = len(self.output)
        item: Payload = {
            "id": self._next_id("fc"),
            "type": "function_call",
            "status": "in_progress",
            "call_id": call["id"],
            "name": call["name"],
            "arguments": "",
        }
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


def _delta_event(item: _Item) -> Callable[[Any, str], Payload]:
    """``response.output_text.delta`` of ``item``, as ``_part_event`` spells it."""

    def build(sequence: Any, delta: str) -> Payload:
        return {
            "type": "response.output_text.delta",
            "sequence_number": sequence,
            "item_id": item.id,
            "output_index": item.index,
            "content_index": 0,
            "delta": delta,
            "logprobs": [],
        }

    return build


def _reasoning_event(item: _Item) -> Callable[[Any, str], Payload]:
    """``response.reasoning_text.delta`` of ``item``, as ``_part_event`` spells it."""

    def build(sequence: Any, delta: str) -> Payload:
        return {
            "type": "response.reasoning_text.delta",
            "sequence_number": sequence,
            "item_id": item.id,
            "output_index": item.index,
            "content_index": 0,
            "delta": delta,
        }

    return build


def _arguments_event(call: _Call) -> Callable[[Any, str], Payload]:
    """``response.function_call_arguments.delta`` of ``call``, as ``_call_arguments`` spells
    it."""

    def build(sequence: Any, delta: str) -> Payload:
        return {
            "type": "response.function_call_arguments.delta",
            "sequence_number": sequence,
            "item_id": call.id,
            "output_index": call.index,
            "delta": delta,
        }

    return build


def _item_payload(item: _Item, status: str, final: str) -> Payload:
    """The output item as it stands; ``final``: a message's closing text, when known."""
    if item.kind == "reasoning":
        content = [_reasoning_part("".join(item.sent))] if item.text_open else []
        summary = "".join(item.summary_sent)
        parts = [] if item.summary is None else [{"type": "summary_text", "text": summary}]
        return {"id": item.id, "type": "reasoning", "content": content, "summary": parts}
    text = final or "".join(item.sent)
    return {
        "id": item.id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [_text_part(text)] if item.text_open else [],
    }


def _reasoning_part(text: str) -> Payload:
    return {"type": "reasoning_text", "text": text}


def _text_part(text: str) -> Payload:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
