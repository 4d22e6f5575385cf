"""The cross-site guard's rules as a table: which ``Host`` and ``Origin`` pass."""

from __future__ import annotations

import pytest

from iris.config import ServerConfig
from iris.surfaces.origin import SiteGuard

LOOPBACK = ("127.0.0.1", 8642)
LAN = ("192.168.1.5", 8642)
V6 = ("::1", 8642)


@pytest.mark.parametrize(
    ("host", "server", "allowed", "ok"),
    [
        ("127.0.0.1:8642", LOOPBACK, [], True),
        ("localhost:8642", LOOPBACK, [], True),
        ("LOCALHOST:8642", LOOPBACK, [], True),
        ("[::1]:8642", LOOPBACK, [], True),
        ("[::1]:8642", V6, [], True),
        ("[0:0::1]:8642", V6, [], True),
        ("127.0.0.1:8642", ("::ffff:127.0.0.1", 8642), [], True),  # a dual-stack bind
        ("localhost:8643", LOOPBACK, [], False),  # another port
        ("localhost", LOOPBACK, [], False),  # port 80 implied
        ("evil.example:8642", LOOPBACK, [], False),  # DNS rebinding
        ("192.168.1.5:8642", LAN, [], True),  # bound to 0.0.0.0, reached over the LAN
        ("localhost:8642", LAN, [], False),  # loopback names only on loopback
        ("iris.example", LOOPBACK, ["iris.example"], True),  # behind a proxy
        ("iris.example:9000", LOOPBACK, ["iris.example"], True),
        ("iris.example:9000", LOOPBACK, ["iris.example:443"], False),
        ("iris.example:443", LOOPBACK, ["iris.example:443"], True),
        ("anything:1", LOOPBACK, ["*"], True),
        ("[::1", LOOPBACK, [], False),
        ("127.0.0.1:notaport", LOOPBACK, [], False),
        ("127.0.0.1:\u00b2", LOOPBACK, [], False),  # a digit to str.isdigit(), not to int()
        (":8642", LOOPBACK, [], False),
    ],
)
def test_host(host: str, server: tuple[str, int], allowed: list[str], ok: bool) -> None:
    guard = SiteGuard(ServerConfig(allowed_hosts=allowed))
    assert guard.host_ok(host, server, "http") is ok


@pytest.mark.parametrize(
    ("origin", "host", "listed", "ok"),
    [
        ("http://127.0.0.1:8642", "127.0.0.1:8642", [], True),  # the page Iris serves
        ("https://iris.example", "iris.example", [], True),  # the same, behind TLS
        ("http://localhost:3000", "127.0.0.1:8642", [], False),  # another local app
        ("null", "127.0.0.1:8642", [], False),  # sandboxed frames, file:// pages
        ("https://app.example", "127.0.0.1:8642", ["https://app.example"], True),
        ("https://APP.example/", "127.0.0.1:8642", ["https://app.example"], True),
        ("https://app.example.evil", "127.0.0.1:8642", ["https://app.example"], False),
    ],
)
def test_origin(origin: str, host: str, listed: list[str], ok: bool) -> None:
    guard = SiteGuard(ServerConfig(cors_origins=listed))
    assert guard.origin_ok(origin, host) is ok


def test_no_origin_and_no_host_pass() -> None:
    # Non-browser clients (the SDKs, curl) send no Origin; HTTP/1.0 may send no Host.
    assert SiteGuard(ServerConfig()).refusal({}, LOOPBACK, "http") is None
