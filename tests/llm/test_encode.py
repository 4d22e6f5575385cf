"""``iris.llm.wire.encode``: a small request's JSON is made on the event loop (a worker
thread's hop cost more than the JSON); a large one's in a worker thread, however it is large
(many messages, one long message, many tools, long tool-call arguments, attached parts)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from iris.llm.provider import ProviderRequest
from iris.llm.wire import encode

USER = {"role": "user", "content": "hi"}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


async def encoded_where(request: ProviderRequest) -> str:
    where: list[str] = []

    def build() -> dict[str, Any]:
        where.append(threading.current_thread().name)
        return {"model": request.model, "messages": request.messages, "tools": request.tools}

    body = await encode(build, request)
    assert body.startswith(b'{"model": "m"')
    return "loop" if where == [threading.main_thread().name] else "thread"


async def test_a_short_conversation_is_encoded_on_the_loop() -> None:
    messages = [USER, {"role": "assistant", "content": None, "tool_calls": [CALL]}] * 8
    assert await encoded_where(ProviderRequest("m", messages, [TOOL] * 4)) == "loop"


@pytest.mark.parametrize(
    "request_",
    [
        ProviderRequest("m", [USER] * 33),
        ProviderRequest("m", [{"role": "user", "content": "x" * 40_000}]),
        ProviderRequest("m", [USER], [TOOL] * 33),
        ProviderRequest(
            "m",
            [
                {
                    "role": "assistant",
                    "tool_calls": [{**CALL, "function": {"arguments": "y" * 40_000}}],
                }
            ],
        ),
        ProviderRequest("m", [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]),
    ],
    ids=["many messages", "a long message", "many tools", "long arguments", "parts"],
)
async def test_a_large_request_is_encoded_in_a_worker_thread(request_: ProviderRequest) -> None:
    assert await encoded_where(request_) == "thread"
