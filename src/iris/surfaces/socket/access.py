"""Who may use the iris surface: a token from ``platforms.iris.tokens`` or a paired device's.

``TokenGate.check`` answers for the socket and for ``GET /iris/chats`` alike: config tokens are
compared in constant time against every one (no early exit tells which matched); any other
token is looked up by digest in the store (``iris.state.devices``), on the store's thread.

A device revoked while connected is closed by ``Revocations``: every ``REVOCATION_POLL`` seconds
it asks the store which connected devices' tokens were revoked (``iris devices revoke`` runs in
another process, so the store is where the news arrives) and closes their sockets with 4401
``revoked``. Nothing is read while no paired device is connected.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable

from iris.protocol import inbound
from iris.state.devices import Check, Devices
from iris.tasks import stop_if_cancelled

log = logging.getLogger(__name__)

REVOCATION_POLL = 5.0  # seconds a revoked device may stay connected, at most

Close = Callable[[], Awaitable[None]]


class TokenGate:
    def __init__(self, tokens: Iterable[str], devices: Devices) -> None:
        self._tokens = [t.encode() for t in tokens if t]
        self.devices = devices

    @property
    def configured(self) -> bool:
        return bool(self._tokens)

    async def check(self, token: str) -> Check:
        """``ok`` (``digest`` None for a config token), ``revoked`` or ``unknown``; raises
        ``StoreUnavailable`` when a device token cannot be looked up."""
        if not token or not inbound.valid_text(token):
            return Check("unknown", None)
        presented = token.encode()
        found = False
        for known in self._tokens:
            found |= hmac.compare_digest(presented, known)
        if found:
            return Check("ok", None)
        return await self.devices.check(token)


def bearer(header: str) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None for another scheme."""
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


class Revocations:
    """The connections of paired devices, by token digest, closed once their token is revoked."""

    def __init__(self, devices: Devices) -> None:
        self._devices = devices
        self._open: dict[str, dict[int, Close]] = {}
        self._next = 0

    def watch(self, device: str, close: Close) -> Callable[[], None]:
        """Close with ``close`` once ``device``'s token is revoked; call the result when the
        connection ends."""
        key = self._next
        self._next += 1
        self._open.setdefault(device, {})[key] = close

        def forget() -> None:
            closes = self._open.get(device, {})
            closes.pop(key, None)
            if not closes:
                self._open.pop(device, None)

        return forget

    async def sweep(self) -> int:
        """Close every connection whose device was revoked; how many were closed."""
        if not self._open:
            return 0
        revoked = await self._devices.revoked(list(self._open))
        closes = [close for d in revoked for close in self._open.pop(d, {}).values()]
        await asyncio.gather(*(close() for close in closes))
        return len(closes)

    async def run(self, every: float = REVOCATION_POLL) -> None:
        """Sweep every ``every`` seconds until cancelled; a failed sweep is retried (and logged
        once until one succeeds)."""
        failing = False
        while True:
            await asyncio.sleep(every)
            try:
                await self.sweep()
            except Exception as exc:  # the store is down: try again next time
                if not failing:
                    log.warning("checking for revoked devices failed: %s", exc)
                failing = True
            else:
                failing = False
            stop_if_cancelled()  # a stopping server must not wait on a cancellation lost there
