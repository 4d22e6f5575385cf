"""Who the client is behind a reverse proxy: ``server.trusted_proxies``.

Behind nginx, Caddy or a load balancer every connection's peer is the proxy, so the
auth-failure throttle (``iris.auth_throttle``) would count every user as one address and ten wrong
guesses from one attacker would lock out all of them. ``ForwardedClient`` rewrites the ASGI
scope's ``client`` (and ``scheme``) from the proxy's headers, with uvicorn's
``forwarded_allow_ips`` semantics:

- only when the connection's peer is one of the trusted addresses or networks (``"*"``: any);
  a header from any other peer is ignored, so nobody names their own address;
- ``X-Forwarded-For`` is read right to left (each proxy appends the address it saw) and the
  first entry that is not itself a trusted proxy is the client; with no ``X-Forwarded-For``,
  the ``for=`` parameters of RFC 7239 ``Forwarded`` are read the same way;
- ``X-Forwarded-Proto`` (or ``proto=``) sets the scheme, for the Host check's default port.

The rewrite happens in place, before any route runs, so the throttle, uvicorn's access log
and every log line that names an address see the forwarded client. A forwarded value that is
not an IP address is kept only when it is a short token (``unknown``, an RFC 7239 obfuscated
``_id``), else it reads ``unknown``: it ends up in log lines and as a throttle key.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable, Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_TOKEN = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PROTOS = {"http", "https", "ws", "wss"}


def parse_networks(entries: Iterable[str]) -> tuple[bool, tuple[Network, ...]]:
    """``(trust_all, networks)`` of a ``trusted_proxies`` list: an address is a one-host
    network; ``"*"`` trusts every peer. A malformed entry raises ``ValueError``."""
    networks: list[Network] = []
    trust_all = False
    for entry in entries:
        text = entry.strip()
        if text == "*":
            trust_all = True
            continue
        networks.append(ipaddress.ip_network(text, strict=False))
    return trust_all, tuple(networks)


class TrustedProxies:
    """The peers whose forwarding headers are believed (see the module doc)."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.trust_all, self.networks = parse_networks(entries)
        self.trusts = functools.lru_cache(maxsize=4096)(self._trusts)

    def __bool__(self) -> bool:
        return self.trust_all or bool(self.networks)

    def _trusts(self, host: str) -> bool:
        if self.trust_all:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def client(self, hops: Sequence[str]) -> str | None:
        """The client among the forwarded ``hops`` (first to last), or None when there is none."""
        hosts = [host for host in (_host(hop) for hop in hops) if host]
        if not hosts:
            return None
        if not self.trust_all:
            for host in reversed(hosts):
                if not self.trusts(host):
                    return _clean(host)
        # Every hop is a trusted proxy: the client was one too (uvicorn #1068).
        return _clean(hosts[0])


class ForwardedClient:
    """ASGI middleware: the scope's ``client`` and ``scheme`` from a trusted proxy's headers."""

    def __init__(self, app: ASGIApp, trusted: Sequence[str]) -> None:
        self.app = app
        self.proxies = TrustedProxies(trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.proxies:
            peer = scope.get("client")
            if peer and self.proxies.trusts(str(peer[0])):
                self.rewrite(scope)
        await self.app(scope, receive, send)

    def rewrite(self, scope: Scope) -> None:
        forwarded_for: list[str] = []
        forwarded: list[str] = []
        proto: str | None = None
        for name, value in scope["headers"]:
            if name == b"x-forwarded-for":
                forwarded_for.extend(value.decode("latin-1").split(","))
            elif name == b"forwarded":
                forwarded.append(value.decode("latin-1"))
            elif name == b"x-forwarded-proto":
                proto = value.decode("latin-1").strip().lower()
        if forwarded_for:
            hops = forwarded_for
        else:
            elements = parse_forwarded(",".join(forwarded))
            hops = [element["for"] for element in elements if "for" in element]
            protos = [element["proto"] for element in elements if "proto" in element]
            if proto is None and protos:
                proto = protos[0].lower()
        client = self.proxies.client(hops)
        if client is not None:
            scope["client"] = (client, 0)
        if proto in _PROTOS:
            secure = proto in ("https", "wss")
            if scope["type"] == "websocket":
                scope["scheme"] = "wss" if secure else "ws"
            else:
                scope["scheme"] = "https" if secure else "http"


def parse_forwarded(header: str) -> list[dict[str, str]]:
    """RFC 7239 ``Forwarded``: one dict per element (``for``, ``proto``, … lower-cased
    names, quotes removed). Malformed pairs are skipped, never an error."""
    elements: list[dict[str, str]] = []
    for element in _split_quoted(header, ","):
        pairs: dict[str, str] = {}
        for pair in _split_quoted(element, ";"):
            name, sep, value = pair.partition("=")
            if not sep:
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('\\"', '"')
            pairs[name.strip().lower()] = value
        if pairs:
            elements.append(pairs)
    return elements


def _split_quoted(text: str, separator: str) -> list[str]:
    """``text`` split at ``separator`` outside double quotes (an IPv6 ``for`` is quoted)."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char == separator and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def _host(hop: str) -> str:
    """The host of a forwarded hop: ``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``."""
    hop = hop.strip()
    if hop.startswith("["):
        end = hop.find("]")
        return hop[1:end] if end > 0 else ""
    if hop.count(":") == 1:
        return hop.partition(":")[0]
    return hop


def _clean(host: str) -> str:
    """An IP address in its canonical form, a short token as given, anything else ``unknown``."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host if _TOKEN.fullmatch(host) else "unknown"
