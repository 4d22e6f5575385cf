"""Finding 4 of the second pass: guessing was free (1 000 wrong tokens on ``/iris/ws`` in 1.6 s,
nothing logged; a 4-digit device token and ``api_key: "42"`` found in seconds). Now failed
authentications are counted per client address on the API, the iris socket and
``/iris/chats``: after 10 in a minute the address is refused (429 / close 4429) — the right key
too — for a delay that grows, logged once per burst without the secret; and a short key does
not start at all."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from iris.auth_throttle import FIRST_DELAY, LIMIT, AuthThrottle
from tests.adversarial.conftest import StartServed
from tests.adversarial.guessing import start_failure

KEY = "sk-adversarial-guessing-0123456789"
TOKEN = "device-token-guessing-0123456789"


async def close_code(base: str, token: str) -> int | None:
    """The close code of a device that sends hello with ``token`` (None: it was let in)."""
    async with connect(base.replace("http://", "ws://") + "/iris/ws", open_timeout=10) as ws:
        try:
            await ws.send(json.dumps({"type": "hello", "token": token}))
            frame = json.loads(await ws.recv())
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None
        assert frame["type"] == "ready"
        return None


async def test_wrong_tokens_on_the_iris_socket_are_throttled_and_logged_once(
    served: StartServed,
) -> None:
    server, url = served(platforms={"iris": {"enabled": True, "tokens": [TOKEN]}})
    assert await close_code(url, TOKEN) is None
    for guess in range(LIMIT):
        assert await close_code(url, f"guess-{guess:04d}-xxxxxxxxxxxxxxxxxxxx") == 4401
    # Refused now, the right token too, and the next guess; logged once for the burst.
    assert await close_code(url, TOKEN) == 4429
    assert await close_code(url, "another-guess-xxxxxxxxxxxxxxxxxx") == 4429
    lines = [line for line in server.drain() if "failed authentications" in line]
    assert len(lines) == 1, lines
    assert "127.0.0.1" in lines[0] and "guess-" not in lines[0] and TOKEN not in lines[0]


def test_wrong_api_keys_get_429_with_a_retry_after(served: StartServed) -> None:
    _, url = served(platforms={"api_server": {"api_key": KEY}, "iris": {"enabled": False}})
    with httpx.Client(base_url=url, timeout=10) as client:
        right = {"authorization": f"Bearer {KEY}"}
        assert client.get("/v1/models", headers=right).status_code == 200
        for guess in range(LIMIT):
            wrong = {"authorization": f"Bearer sk-guess-{guess}"}
            assert client.get("/v1/models", headers=wrong).status_code == 401
        refused = client.get("/v1/models", headers=right)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_failed_authentications"
        assert int(refused.headers["retry-after"]) >= 1


def test_wrong_tokens_on_iris_chats_get_429(served: StartServed) -> None:
    _, url = served(platforms={"iris": {"enabled": True, "tokens": [TOKEN]}})
    with httpx.Client(base_url=url, timeout=10) as client:
        for guess in range(LIMIT):
            wrong = {"authorization": f"Bearer guess-{guess}"}
            assert client.get("/iris/chats", headers=wrong).status_code == 401
        refused = client.get("/iris/chats", headers={"authorization": f"Bearer {TOKEN}"})
        assert refused.status_code == 429
        assert "retry-after" in refused.headers


def test_the_delay_grows_while_the_guessing_goes_on() -> None:
    now = [0.0]
    guard = AuthThrottle(clock=lambda: now[0])
    counted: list[tuple[str, str]] = []
    guard.hooks.append(lambda surface, outcome: counted.append((surface, outcome)))
    for _ in range(LIMIT):
        guard.failed("10.0.0.9", "api")
    first = guard.refused("10.0.0.9", "api")
    assert first == FIRST_DELAY
    assert guard.refused("10.0.0.8", "api") is None  # another address is not refused
    now[0] += FIRST_DELAY + 0.1
    assert guard.refused("10.0.0.9", "api") is None
    guard.failed("10.0.0.9", "api")  # still guessing: refused again, twice as long
    assert guard.refused("10.0.0.9", "api") == pytest.approx(2 * FIRST_DELAY)
    assert counted.count(("api", "failed")) == LIMIT + 1
    assert ("api", "throttled") in counted


@pytest.mark.parametrize(
    ("sections", "named"),
    [
        ({"platforms": {"api_server": {"api_key": "42"}}}, "platforms.api_server.api_key"),
        ({"platforms": {"iris": {"tokens": ["7391"]}}}, "platforms.iris.tokens[0]"),
        (
            {"server": {"host": "0.0.0.0"}, "platforms": {"api_server": {"api_key": "k" * 20}}},
            "at least 32",
        ),
    ],
)
def test_a_short_key_or_token_is_refused_at_start(
    tmp_path: Path, sections: dict[str, object], named: str
) -> None:
    assert named in start_failure(tmp_path, **sections)
