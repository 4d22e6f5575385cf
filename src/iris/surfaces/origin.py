"""The cross-site guard: which ``Host`` and ``Origin`` a request to Iris may carry.

A browser lets any web page send requests to ``127.0.0.1``; two headers tell such a request
from one a user's own client sends, and both are checked before any work is done:

- ``Host`` must name the address the connection arrived on (the bound address; ``localhost``,
  ``127.0.0.1`` and ``[::1]`` too when that is loopback), with its port, or a
  ``server.allowed_hosts`` entry. DNS rebinding points an attacker's name at 127.0.0.1, so the
  browser sends the attacker's name: refused. An IP literal cannot be rebound.
- ``Origin``, when present, must be the request's own origin (the web app served by Iris) or
  listed in ``server.cors_origins``. Non-browser clients send no ``Origin`` and pass.

The API and the iris socket share this check (``SiteGuard.refusal``); ``/health`` does not use
it (it shows only the version and the model name).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from iris.config import ServerConfig

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused (always answered with 403)."""

    code: str
    message: str


class SiteGuard:
    def __init__(self, settings: ServerConfig) -> None:
        self.any_host = "*" in settings.allowed_hosts
        self.hosts = {h.lower() for h in settings.allowed_hosts if h != "*"}
        self.origins = {o.rstrip("/").lower() for o in settings.cors_origins}

    def refusal(
        self, headers: Mapping[str, str], server: tuple[str, int | None] | None, scheme: str
    ) -> Refusal | None:
        """None if a request with these headers, arriving at local address ``server``
        (the ASGI scope's ``server``), may be served."""
        host = headers.get("host")
        if host is not None and not self.host_ok(host, server, scheme):
            return Refusal(
                "host_not_allowed",
                f"Host {host!r} is not this server's address; add it to server.allowed_hosts "
                "to serve it under that name.",
            )
        origin = headers.get("origin")
        if origin is not None and not self.origin_ok(origin, host):
            return Refusal(
                "origin_not_allowed",
                f"Origin {origin!r} may not call this server; list it in server.cors_origins "
                "to allow it.",
            )
        return None

    def host_ok(self, host: str, server: tuple[str, int | None] | None, scheme: str) -> bool:
        if self.any_host:
            return True
        value = host.strip().lower()
        parsed = _split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        if name in self.hosts or value in self.hosts:
            return True
        if server is None:
            return False
        local_ip, local_port = _ip(server[0]), server[1]
        wanted_port = port if port is not None else _default_port(scheme)
        if local_ip is None or (local_port is not None and wanted_port != local_port):
            return False
        if _ip(name) == local_ip:
            return True
        return local_ip.is_loopback and name in _LOOPBACK_NAMES

    def origin_ok(self, origin: str, host: str | None) -> bool:
        value = origin.strip().rstrip("/").lower()
        if value in self.origins:
            return True
        # Same origin: the page was served by Iris under the Host this request carries (and
        # that Host passed the check above).
        parts = urlsplit(value)
        return (
            host is not None
            and parts.scheme in ("http", "https")
            and parts.netloc == host.strip().lower()
        )

    def cors_origin(self, headers: Mapping[str, str]) -> str | None:
        """The ``Origin`` to echo in CORS headers: only a listed one."""
        origin = headers.get("origin")
        if origin is None or origin.strip().rstrip("/").lower() not in self.origins:
            return None
        return origin.strip()


def is_loopback(host: str) -> bool:
    """Does ``host`` (a bind address or name) mean this machine only?"""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` / ``[v6][:port]`` → (name, port); None when malformed."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1 :]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        name, sep, port_text = value.partition(":")
        if not sep:
            port_text = None
    if not name:
        return None
    if port_text is None:
        return name, None
    # ASCII digits only: "²".isdigit() is True, and int() refuses it.
    if not (port_text.isascii() and port_text.isdigit()) or len(port_text) > 5:
        return None
    return name, int(port_text)


def _default_port(scheme: str) -> int:
    return 443 if scheme in ("https", "wss") else 80


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address ``text`` names (an IPv4-mapped IPv6 one as IPv4: a dual-stack bind)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
