"""Behind a reverse proxy every caller has the proxy's address: ten wrong guesses a minute from
one attacker locked out every user (issue 46). ``server.trusted_proxies`` names the proxies
whose ``X-Forwarded-For`` / ``Forwarded`` say who the client is; from any other peer those
headers are ignored (uvicorn by itself believed them from 127.0.0.1, so any local process could
name any address). Replayed against a real ``iris serve``, where the proxy and the attacker are
both this test on 127.0.0.1."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.types import Message, Scope

from iris.auth_throttle import LIMIT
from iris.proxies import ForwardedClient, TrustedProxies, parse_forwarded
from tests.adversarial.conftest import StartServed
from tests.adversarial.guessing import start_failure

KEY = "sk-adversarial-proxies-0123456789"
RIGHT = {"authorization": f"Bearer {KEY}"}
API = {"api_server": {"api_key": KEY}, "iris": {"enabled": False}}


def guess(client: httpx.Client, n: int, **headers: str) -> int:
    wrong = {"authorization": f"Bearer sk-guess-{n}", **headers}
    return client.get("/v1/models", headers=wrong).status_code


def test_through_a_trusted_proxy_the_attacker_alone_is_locked_out(served: StartServed) -> None:
    server, url = served(server={"trusted_proxies": ["127.0.0.1"]}, platforms=API)
    attacker = {"x-forwarded-for": "198.51.100.200, 203.0.113.7"}  # the proxy appended .7
    with httpx.Client(base_url=url, timeout=10) as client:
        for n in range(LIMIT):
            assert guess(client, n, **attacker) == 401
        refused = client.get("/v1/models", headers={**RIGHT, **attacker})
        assert refused.status_code == 429
        # Another user behind the same proxy, and one a proxy names with RFC 7239 Forwarded.
        other = client.get("/v1/models", headers={**RIGHT, "x-forwarded-for": "198.51.100.2"})
        assert other.status_code == 200
        forwarded = {"forwarded": 'for="[2001:db8::17]:4711";proto=https'}
        assert client.get("/v1/models", headers={**RIGHT, **forwarded}).status_code == 200
        # The proxy itself (no forwarding header) was never counted.
        assert client.get("/v1/models", headers=RIGHT).status_code == 200
    # The line comes through the process's stderr pipe: wait for it, then read what is there.
    server.wait_for("failed authentications")
    log = "".join(server.drain())
    lines = [line for line in log.splitlines() if "failed authentications" in line]
    assert len(lines) == 1 and "203.0.113.7" in lines[0], lines


@pytest.mark.parametrize("trusted", [[], ["10.0.0.0/8", "192.0.2.1"]])
def test_a_spoofed_forwarded_for_from_an_untrusted_peer_is_ignored(
    served: StartServed, trusted: list[str]
) -> None:
    server, url = served(server={"trusted_proxies": trusted}, platforms=API)
    with httpx.Client(base_url=url, timeout=10) as client:
        for n in range(LIMIT):  # a new made-up address on every guess
            spoof = {"x-forwarded-for": f"203.0.113.{n}", "forwarded": f"for=198.51.100.{n}"}
            assert guess(client, n, **spoof) == 401
        # All ten were this peer's: it is refused, whatever address it claims now.
        claimed = {"x-forwarded-for": "192.0.2.99"}
        assert client.get("/v1/models", headers={**RIGHT, **claimed}).status_code == 429
    # The line comes through the process's stderr pipe: wait for it, then read what is there.
    server.wait_for("failed authentications")
    log = "".join(server.drain())
    lines = [line for line in log.splitlines() if "failed authentications" in line]
    assert len(lines) == 1 and "127.0.0.1" in lines[0], lines
    assert "203.0.113." not in log and "192.0.2.99" not in log


def test_a_malformed_trusted_proxy_is_refused_at_start(tmp_path: Path) -> None:
    out = start_failure(tmp_path, server={"trusted_proxies": ["10.0.0.0/33"]})
    assert "server.trusted_proxies" in out and "10.0.0.0/33" in out


async def client_seen(peer: str, headers: list[tuple[bytes, bytes]], trusted: list[str]) -> str:
    seen: list[str] = []

    async def app(scope: Scope, receive: object, send: object) -> None:
        seen.append(scope["client"][0])

    async def receive() -> Message:
        return {"type": "http.request"}

    async def send(message: Message) -> None:
        pass

    scope: Scope = {"type": "http", "client": (peer, 5000), "headers": headers}
    await ForwardedClient(app, trusted)(scope, receive, send)
    return seen[0]


hops = st.lists(st.one_of(st.ip_addresses().map(str), st.text(max_size=80)), min_size=0, max_size=6)


@given(hops=hops, forwarded=st.text(max_size=200))
async def test_an_untrusted_peer_never_names_the_client(hops: list[str], forwarded: str) -> None:
    headers = [
        (b"x-forwarded-for", ", ".join(hops).encode("utf-8", "replace")),
        (b"forwarded", forwarded.encode("utf-8", "replace")),
    ]
    assert await client_seen("192.0.2.50", headers, ["10.0.0.0/8"]) == "192.0.2.50"


@given(hops=hops)
async def test_a_trusted_proxy_names_the_last_hop_it_does_not_trust(hops: list[str]) -> None:
    """The client is the rightmost hop that is no trusted proxy (each proxy appends what it
    saw), always an IP address or a short token, never whatever text a client sent."""
    trusted = ["10.0.0.0/8"]
    header = [(b"x-forwarded-for", ", ".join(hops).encode("utf-8", "replace"))]
    seen = await client_seen("10.1.2.3", header, trusted)
    proxies = TrustedProxies(trusted)
    written = [h.strip() for h in ", ".join(hops).split(",") if h.strip()]
    if not written:
        assert seen == "10.1.2.3"
        return
    assert len(seen) <= 64 and "\n" not in seen and " " not in seen
    untrusted = [h for h in written if not proxies.trusts(h.strip("[]").rsplit("]", 1)[0])]
    if untrusted and _is_ip(untrusted[-1]):
        assert seen == str(ipaddress.ip_address(untrusted[-1]))


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def test_forwarded_elements_are_read_with_quotes_and_ports() -> None:
    header = 'for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711"'
    assert parse_forwarded(header) == [
        {"for": "192.0.2.60", "proto": "http", "by": "203.0.113.43"},
        {"for": "[2001:db8:cafe::17]:4711"},
    ]
