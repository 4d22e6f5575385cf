"""Finding 5 of the second pass: a huge ``starting_after`` with a Redis store made an invalid
stream id (a traceback in the log and a 200 with a cut body), and ``int()`` accepted ``" 5"``,
``"٥"`` and ``"1_0"``. Now every number given as text is ASCII digits, bounded, else a 400
naming it; one past the run's last event gets the rest: nothing."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import RedisServer, redis_server, serve_on_redis  # noqa: F401

pytestmark = pytest.mark.timeout(90)


def completed_background(client: httpx.Client) -> str:
    created = client.post(
        "/v1/responses", json={"model": "fake-model", "input": "hi", "background": True}
    )
    assert created.status_code == 200, created.text
    response_id = created.json()["id"]
    for _ in range(200):
        if client.get(f"/v1/responses/{response_id}").json()["status"] == "completed":
            return response_id
        client.get("/health")  # a round trip between polls, not a sleep
    raise AssertionError("the background response never completed")


def test_numbers_as_text_are_ascii_digits_and_a_huge_one_gets_nothing(
    tmp_path: Path,
    upstream: FakeUpstream,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    upstream.script(text("Hello there"))
    with serve_on_redis(tmp_path, upstream.base_url, redis_server, ("a",)) as running:
        served, url = running[0]
        with httpx.Client(base_url=url, timeout=20) as client:
            response_id = completed_background(client)
            stream = f"/v1/responses/{response_id}?stream=true&starting_after="
            everything = client.get(stream + "0")
            assert everything.status_code == 200 and "response.completed" in everything.text
            for huge in ("18446744073709551615", "18446744073709551616", "9" * 40):
                rest = client.get(stream + huge)
                assert rest.status_code == 200
                assert "event:" not in rest.text and "sequence_number" not in rest.text
            for bad in ("%205", "%D9%A5", "1_0", "+5", "-1", "0x10", "1e3", "9" * 41, ""):
                refused = client.get(stream + bad)
                assert refused.status_code == 400, bad
                assert refused.json()["error"]["param"] == "starting_after"
        log = "".join(served.drain())
        assert "Traceback" not in log


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_output_tokens", 2**64),
        ("max_output_tokens", True),
        ("top_logprobs", 1000),
    ],
)
def test_body_numbers_are_bounded(
    served: object, field: str, value: object, upstream: FakeUpstream
) -> None:
    _, url = served(platforms={"iris": {"enabled": False}})  # type: ignore[operator]
    body = {"model": "fake-model", "input": "hi", field: value}
    refused = httpx.post(f"{url}/v1/responses", json=body, timeout=20)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == field
    assert not upstream.requests  # nothing reached the model


@pytest.mark.parametrize(("field", "value"), [("seed", 2**70), ("max_tokens", 2**63)])
def test_chat_body_numbers_are_bounded(
    served: object, field: str, value: object, upstream: FakeUpstream
) -> None:
    _, url = served(platforms={"iris": {"enabled": False}})  # type: ignore[operator]
    body = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], field: value}
    refused = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=20)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == field
