"""Where an A2A push callback may go and how it is signed (the pure policy, fed addresses); when
the A2A server may start at all."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.config import ConfigError, config_from_dict
from iris.server.asgi import check_bind_safety
from iris.surfaces.a2a.callbacks import address_refusal, callback_refusal, signature

PRIVATE = ipaddress.ip_network("10.0.0.0/8")


@given(st.ip_addresses(v=4))
def test_http_beyond_loopback_never_goes_and_https_only_to_public_or_allowed(
    address: object,
) -> None:
    ip = ipaddress.ip_address(str(address))
    http = address_refusal("http://x/hook", [str(ip)], [])
    https = address_refusal("https://x/hook", [str(ip)], [])
    if ip.is_loopback:
        assert http is None and https is None
    else:
        assert http is not None  # plain http leaves this machine for nobody
        assert (https is None) == (ip.is_global and not ip.is_multicast)
        if ip in PRIVATE:
            assert address_refusal("https://x/hook", [str(ip)], [PRIVATE]) is None


@given(st.lists(st.ip_addresses(v=4).map(str), min_size=1, max_size=4))
def test_one_private_address_among_public_ones_refuses_the_callback(addresses: list[str]) -> None:
    mixed = [*addresses, "192.168.1.7"]
    assert address_refusal("https://x/hook", mixed, []) is not None


async def test_a_name_that_does_not_resolve_or_a_url_without_host_is_refused() -> None:
    async def nowhere(host: str) -> list[str]:
        return []

    assert await callback_refusal("https://nowhere.invalid/h", [], nowhere) is not None
    assert await callback_refusal("file:///etc/passwd", [], nowhere) is not None
    assert await callback_refusal("https:///nohost", [], nowhere) is not None


@given(st.text(min_size=1), st.binary())
def test_the_signature_is_the_hmac_of_timestamp_dot_body(token: str, body: bytes) -> None:
    expected = hmac.new(token.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature(token, "1700000000", body) == f"sha256={expected}"


def test_an_a2a_server_beyond_loopback_needs_a_key() -> None:
    open_a2a = {
        "server": {"host": "0.0.0.0"},
        "platforms": {
            "a2a": {"enabled": True},
            "api_server": {"enabled": False},
            "iris": {"enabled": False},
        },
    }
    with pytest.raises(ConfigError, match="A2A server has no key"):
        check_bind_safety(config_from_dict(open_a2a, env={}))
    open_a2a["platforms"]["a2a"]["api_key"] = "k" * 32
    check_bind_safety(config_from_dict(open_a2a, env={}))


def test_the_a2a_server_without_the_iris_chats_is_a_config_error() -> None:
    from iris.server.asgi import build_app

    config = config_from_dict(
        {"platforms": {"a2a": {"enabled": True}, "iris": {"enabled": False}}}, env={}
    )
    with pytest.raises(ConfigError, match="needs platforms.iris"):
        build_app(config)
