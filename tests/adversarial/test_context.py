"""Issue 17 against the real ``iris serve``: a model whose window is 30 000 characters, and a
conversation of long replies. Five went through, then every message failed with
``provider_bad_request … maximum context length`` for good, and ``/new`` went to the model."""

from __future__ import annotations

import json
from typing import Any

from tests.adversarial.conftest import StartServed
from tests.adversarial.iris_socket import IRIS, assert_no_traceback, device, recv
from tests.fakes.long_chat import LongChat, is_summary_request
from tests.fakes.upstream import FakeUpstream


async def turn(ws: Any, text: str) -> list[dict[str, Any]]:
    await ws.send(json.dumps({"type": "message.send", "text": text}))
    frames: list[dict[str, Any]] = []
    while True:
        frames.append(await recv(ws))
        if frames[-1]["type"] == "typing" and not frames[-1]["on"]:
            return frames


async def test_a_chat_past_the_models_window_keeps_answering_and_new_is_a_command(
    served: StartServed, upstream: FakeUpstream
) -> None:
    upstream.context_limit = 30_000
    model = LongChat(reply_chars=5_000)
    upstream.default = model.scenario
    server, base = served(**IRIS)  # no context_window: only the provider knows it
    ws = await device(base)
    for n in range(1, 13):
        frames = await turn(ws, f"question {n}")
        assert not [f for f in frames if f["type"] == "error"], frames
        replies = [f["text"] for f in frames if f["type"] == "message"]  # streaming is off
        assert replies and replies[-1].startswith(f"reply {n}:")
    assert len(upstream.refused) == 1  # one refusal taught Iris the window; one retry
    await ws.send(json.dumps({"type": "message.send", "text": "/new"}))
    answer = await recv(ws)
    assert answer["type"] == "command" and "new conversation" in answer["text"]
    frames = await turn(ws, "question 13")
    asked = [r.body["messages"] for r in upstream.requests if not is_summary_request(r)]
    assert asked[-1] == [{"role": "user", "content": "question 13"}]
    assert all("/new" not in json.dumps(messages) for messages in asked)
    await ws.close()
    assert_no_traceback(server)
