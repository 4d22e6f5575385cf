"""How each API spells a turn (the ``exchange.Wire`` of each): the encoder, its SSE framing,
the answer of a turn that was not streamed or failed before its first byte, and what the
finished turn stores.

A text or reasoning delta that only grows what the client is reading, and a fragment of a
client tool call's arguments after its head, are the hot path of a proxied stream (``fast_lane``): each
encoder gives their bytes straight from an event shape encoded once (``sse.Shape``); every
other event goes through the encoder's objects.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from iris.agent.history import kept
from iris.events import (
    Event,
    ReasoningDelta,
    TerminalEvent,
    TextDelta,
    ToolCallDelta,
    TurnEnded,
    TurnFailed,
)
from iris.state.item_lists import ItemLists
from iris.state.responses import Responses
from iris.surfaces.api.bodies import ChatCall, ResponsesCall
from iris.surfaces.api.chat_encoder import ChatEncoder
from iris.surfaces.api.problems import error_body, failure_status
from iris.surfaces.api.responses_encoder import ResponsesEncoder
from iris.surfaces.api.sse import data_frames, named_frames
from iris.surfaces.api.tool_runs import ToolView

Json = dict[str, Any]


class ChatWire:
    def __init__(self, call: ChatCall) -> None:
        self.encoder = ChatEncoder(
            f"chatcmpl-{uuid.uuid4().hex}",
            call.model,
            int(time.time()),
            include_usage=call.include_usage,
            legacy=call.legacy_functions,
        )

    def frames(self, event: Event) -> bytes:
        fast = fast_lane(self.encoder, event)
        if fast is not None:
            return fast
        return data_frames(self.encoder.feed(event))

    def answer(self) -> tuple[int, Json]:
        failure = self.encoder.failure
        if failure is not None:
            return failed_answer(failure.code, failure.message)
        return 200, self.encoder.completion()

    async def finished(self) -> None:
        pass


class ResponsesWire:
    def __init__(
        self,
        call: ResponsesCall,
        store: Responses,
        inputs: list[Json] | None = None,
        conversations: ItemLists | None = None,
        tools: ToolView | None = None,
    ) -> None:
        self.call = call
        self.store = store
        self.inputs = inputs  # the request's input items, as listed by input_items
        self.conversations = conversations  # where ``call.conversation_id`` lives
        self.encoder = ResponsesEncoder(
            f"resp_{uuid.uuid4().hex}",
            call.model,
            int(time.time()),
            call.echo,
            clock=time.time,
            tools=tools,
        )
        self._end: TerminalEvent | None = None  # the turn's last event, once it came

    def frames(self, event: Event) -> bytes:
        fast = fast_lane(self.encoder, event)
        if fast is not None:
            return fast
        return named_frames(self.feed(event))

    def feed(self, event: Event) -> list[Json]:
        if isinstance(event, TurnEnded | TurnFailed):
            self._end = event
        return self.encoder.feed(event)

    def stop(self, status: str, reason: str) -> list[Json]:
        return self.encoder.stop(status, reason)

    def snapshot(self) -> Json:
        return self.encoder.snapshot()

    def answer(self) -> tuple[int, Json]:
        failure = self.encoder.failure
        if failure is not None:
            return failed_answer(failure.code, failure.message)
        assert self.encoder.response is not None, "answer() before the turn ended"
        return 200, self.encoder.response

    async def finished(self) -> None:
        response = self.encoder.response
        if response is not None and self.call.store:
            conversation = [*self.call.history, *self._turn_messages()]
            await self.store.save(response, conversation, self.inputs)
        conversation_id = self.call.conversation_id
        # The turn's input and output join the conversation, as OpenAI's do; a failed turn
        # adds nothing (its client retries the same input).
        if (
            response is not None
            and conversation_id
            and self.conversations is not None
            and response["status"] != "failed"
        ):
            added = [*(self.inputs or []), *response["output"]]
            await self.conversations.append(conversation_id, added)

    def _turn_messages(self) -> list[Json]:
        """What this turn added to the conversation, for ``previous_response_id``."""
        return kept(self._end, shown_text(self.encoder.output))


def fast_lane(encoder: ChatEncoder | ResponsesEncoder, event: Event) -> bytes | None:
    """The bytes of ``event`` when it takes the fast lane (text or reasoning that only grows
    what the client reads, arguments of a call whose head was sent), else None."""
    if type(event) is TextDelta:
        return encoder.text_frame(event.text)
    if type(event) is ToolCallDelta:
        return encoder.call_frame(event)
    if type(event) is ReasoningDelta:
        return encoder.reasoning_frame(event)
    return None


def shown_text(output: list[Json]) -> str:
    """The text a response's message items show."""
    return "\n\n".join(
        part.get("text", "")
        for item in output
        if item["type"] == "message"
        for part in item["content"]
    )


def failed_answer(code: str, message: str) -> tuple[int, Json]:
    """The status and body of a turn that failed before its first byte."""
    status = failure_status(code)
    kind = "rate_limit_error" if status == 429 else "server_error"
    return status, error_body(message, type=kind, code=code)
