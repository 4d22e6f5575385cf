"""The Responses API's stored items and background turns against the real ``iris serve``:
hostile references and resume parameters get a 4xx with a code, and a SIGTERM while a
background turn runs (and a client follows it) ends both cleanly and keeps the turn."""

from __future__ import annotations

import json
import signal
import threading
from typing import Any

import httpx
import pytest
from openai import OpenAI

from tests.adversarial.conftest import StartServed
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"input": [{"type": "item_reference", "id": 123}]}, 400, "invalid_request"),
        ({"input": [{"type": "item_reference", "id": ""}]}, 400, "invalid_request"),
        ({"input": [{"type": "item_reference"}]}, 400, "invalid_request"),
        ({"input": [{"type": "item_reference", "id": "msg_' OR 1=1 --"}]}, 404, "item_not_found"),
        ({"input": "hi", "background": "yes"}, 400, "invalid_type"),
        ({"input": "hi", "background": True, "store": False}, 400, "invalid_value"),
    ],
)
def test_hostile_create_bodies_are_4xx_with_a_code(
    served: StartServed, body: dict[str, Any], status: int, code: str
) -> None:
    _, url = served()
    reply = httpx.post(f"{url}/v1/responses", json={"model": "fake-model", **body}, timeout=10)
    assert reply.status_code == status
    assert reply.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("path", "method", "status"),
    [
        ("/v1/responses/resp_nope?stream=true&starting_after=-5", "GET", 400),
        ("/v1/responses/resp_nope?stream=true&starting_after=1e9", "GET", 400),
        ("/v1/responses/resp_nope?stream=true", "GET", 404),
        ("/v1/responses/resp_nope/cancel", "POST", 404),
        ("/v1/responses/resp_nope/cancel", "GET", 405),
    ],
)
def test_hostile_retrieve_and_cancel_are_4xx(
    served: StartServed, path: str, method: str, status: int
) -> None:
    _, url = served()
    reply = httpx.request(method, f"{url}{path}", timeout=10)
    assert reply.status_code == status
    assert reply.json()["error"]["code"]


def test_sigterm_ends_a_followed_background_turn_and_keeps_it(
    served: StartServed, upstream: FakeUpstream
) -> None:
    upstream.script(hold("Hel"), text("unused"))
    server, url = served()
    lines: list[str] = []
    started = threading.Event()

    def follow() -> None:
        body = {"model": "fake-model", "input": "hi", "background": True, "stream": True}
        with (
            httpx.Client(timeout=30) as http,
            http.stream("POST", f"{url}/v1/responses", json=body) as reply,
        ):
            for line in reply.iter_lines():
                lines.append(line)
                if "response.output_text.delta" in line:
                    started.set()

    follower = threading.Thread(target=follow)
    follower.start()
    assert started.wait(10), "no text streamed"
    server.process.send_signal(signal.SIGTERM)
    follower.join(20)
    assert not follower.is_alive(), "the following stream never ended"
    assert server.process.wait(20) is not None
    assert upstream.disconnected.wait(5), "the upstream request stayed open"

    events = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert lines[-1] == "data: [DONE]" or lines[-2:] == ["data: [DONE]", ""]
    assert events[-1]["type"] == "response.incomplete"
    response_id = events[0]["response"]["id"]

    _, url = served()
    with OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=10) as client:
        stored = client.responses.retrieve(response_id)
    assert stored.status == "incomplete"
    assert stored.output_text == "Hel"
