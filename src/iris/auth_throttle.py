"""Guessing throttled: failed authentications counted per client address, for every surface.

A wrong API key, device token or bearer on ``/iris/chats`` costs the caller's address one
failure (``failed``). Ten failures within a minute refuse the address (``refused`` says for how
long): 429 on HTTP, close 4429 on the iris socket, whatever it sends then (the right key too),
for a delay that starts at ``FIRST_DELAY`` and doubles each time the address is refused again in
the same burst, up to ``MAX_DELAY``. A burst ends when the address has had no failure for
``QUIET`` seconds. One log line per burst names the address and the surface, never what was
sent. Before this (finding 4 of the second hardening pass) 1 000 wrong tokens took 1.6 s and
nothing was logged.

``hooks`` are called with ``(surface, outcome)`` — outcome ``"failed"`` or ``"throttled"`` —
for a metrics counter to wire (``/metrics``); the address is not passed (unbounded labels).

Addresses are the connection's client (``scope["client"]``): the socket's peer, or behind a
proxy listed in ``server.trusted_proxies`` the address it forwards (``iris.proxies``). At most ``MAX_ADDRESSES`` are tracked (the least
recently seen is forgotten first), so a flood of addresses costs bounded memory.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

log = logging.getLogger(__name__)

LIMIT = 10  # failures within WINDOW that refuse an address
WINDOW = 60.0
FIRST_DELAY = 10.0  # seconds an address is first refused; doubles per refusal in a burst
MAX_DELAY = 900.0
QUIET = 600.0  # seconds without a failure that end a burst
MAX_ADDRESSES = 10_000
MIN_SECRET = 16  # characters of an API key or fixed device token, to start at all
MIN_EXPOSED_SECRET = 32  # ... when the server binds beyond loopback

Outcome = Literal["failed", "throttled"]


@dataclass
class _Address:
    failures: deque[float] = field(default_factory=deque[float])
    until: float = 0.0  # refused until then
    delay: float = 0.0  # the last refusal's length (0: none yet in this burst)
    logged: bool = False


class AuthThrottle:
    """Failed authentications per client address (see the module doc)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self.hooks: list[Callable[[str, Outcome], None]] = []

    def refused(self, address: str, surface: str) -> float | None:
        """Seconds the address stays refused (a 429's ``Retry-After``), or None: go on."""
        state = self._addresses.get(address)
        if state is None:
            return None
        left = state.until - self._clock()
        if left <= 0:
            return None
        self._notify(surface, "throttled")
        return left

    def failed(self, address: str, surface: str) -> None:
        """The address presented a wrong secret on ``surface``."""
        now = self._clock()
        state = self._addresses.pop(address, None)
        if state is None or (state.failures and now - state.failures[-1] > QUIET):
            state = _Address()  # a new burst
        self._addresses[address] = state  # the most recently seen last
        while len(self._addresses) > MAX_ADDRESSES:
            self._addresses.popitem(last=False)
        failures = state.failures
        failures.append(now)
        while failures and now - failures[0] > WINDOW:
            failures.popleft()
        self._notify(surface, "failed")
        if len(failures) < LIMIT:
            return
        state.delay = min(state.delay * 2, MAX_DELAY) if state.delay else FIRST_DELAY
        state.until = now + state.delay
        if not state.logged:
            state.logged = True
            log.warning(
                "%d failed authentications from %s within %.0f s (%s): refused for %.0f s, "
                "longer each time it goes on",
                len(failures),
                address,
                WINDOW,
                surface,
                state.delay,
            )

    def _notify(self, surface: str, outcome: Outcome) -> None:
        for hook in self.hooks:
            hook(surface, outcome)


def client_address(scope: Mapping[str, Any]) -> str:
    """The peer's address of an ASGI connection ("unknown" when the server gives none)."""
    client = scope.get("client")
    return str(client[0]) if client else "unknown"
