"""A2A push callbacks: where they may go, how they are signed, how they are retried.

**Where** (``callback_refusal``): an ``https://`` URL whose host resolves only to public
addresses, or any ``http(s)://`` URL on a loopback address; an address in a private, shared,
link-local or reserved range only when the operator listed a network holding it
(``platforms.a2a.push_allow``). Every address the host resolves to must pass (a name that
resolves to a public and a private address is refused), and the check runs when the config is
set and again before each delivery.

**Signed**: each callback is a POST of the protocol's JSON with
``X-Iris-Timestamp: <unix seconds>`` and
``X-Iris-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">``, keyed by the config's
``token`` (which the client chose and knows; ``X-A2A-Notification-Token`` carries it too, as the
protocol says). A config without a token is delivered unsigned.

**Retried**: a failed delivery (a network error, a 5xx or 429) is tried again after ``BACKOFF``
seconds, each wait twice the last; the events of one task are delivered in order, one at a
time, by a worker of that task's own, so a slow callback never holds the task back.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import socket
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence

import httpx
from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import (
    PushNotificationEvent,
    PushNotificationSender,
)
from a2a.types.a2a_pb2 import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from iris.tasks import OpenGroup

log = logging.getLogger(__name__)

BACKOFF = (0.5, 1.0, 2.0, 4.0)  # seconds before each retry
TIMEOUT = 10.0  # seconds one delivery may take
SIGNATURE = "x-iris-signature"
TIMESTAMP = "x-iris-timestamp"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolve = Callable[[str], Awaitable[list[str]]]


def signature(token: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>`` of ``<timestamp>.<body>`` keyed by ``token``."""
    mac = hmac.new(token.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def address_refusal(url: str, addresses: Sequence[str], allow: Sequence[Network]) -> str | None:
    """Why a callback to ``url`` (its host resolved to ``addresses``) may not go; None: it may."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme not in ("http", "https") or not addresses:
        return "the callback must be an http(s) URL whose host resolves"
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        address = mapped or address
        if address.is_loopback:
            continue  # this machine: http is fine
        if any(address in network for network in allow):
            continue  # the operator's own network
        if not address.is_global or address.is_multicast:
            return f"{address} is not an address the operator allowed (platforms.a2a.push_allow)"
        if scheme != "https":
            return "a callback beyond this machine must be https"
    return None


async def resolve(host: str) -> list[str]:
    """The addresses ``host`` resolves to (none when it does not)."""
    try:
        found = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return sorted({str(info[4][0]) for info in found})


async def callback_refusal(
    url: str, allow: Sequence[Network], lookup: Resolve = resolve
) -> str | None:
    try:
        host = urllib.parse.urlsplit(url).hostname
    except ValueError:
        host = None
    if not host:
        return "the callback URL has no host"
    return address_refusal(url, await lookup(host), allow)


class SignedPushSender(PushNotificationSender):
    """Delivers each task's events to its push configs, in order, signed, with retries."""

    def __init__(
        self, configs: PushNotificationConfigStore, allow: Sequence[Network], tasks: OpenGroup
    ) -> None:
        self._configs = configs
        self._allow = list(allow)
        self._tasks = tasks
        self._queues: dict[str, asyncio.Queue[PushNotificationEvent]] = {}
        self.http = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False)

    async def allowed(self, url: str) -> bool:
        refusal = await callback_refusal(url, self._allow)
        if refusal is not None:
            log.warning("A2A push callback %s refused: %s", url, refusal)
        return refusal is None

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        queue = self._queues.get(task_id)
        if queue is None:
            queue = self._queues[task_id] = asyncio.Queue()
            self._tasks.create_task(self._drain(task_id, queue), name=f"a2a-push-{task_id}")
        queue.put_nowait(event)

    async def _drain(self, task_id: str, queue: asyncio.Queue[PushNotificationEvent]) -> None:
        try:
            while not queue.empty():
                event = queue.get_nowait()
                for config in await self._configs.get_info_for_dispatch(task_id):
                    await self._deliver(config, event)
        except Exception:
            log.exception("A2A push callbacks of task %s failed", task_id)
        finally:
            self._queues.pop(task_id, None)

    async def _deliver(
        self, config: TaskPushNotificationConfig, event: PushNotificationEvent
    ) -> None:
        if not await self.allowed(config.url):
            return
        body = json.dumps(MessageToDict(to_stream_response(event))).encode()
        for wait in (0.0, *BACKOFF):
            await asyncio.sleep(wait)
            try:
                answer = await self.http.post(
                    config.url, content=body, headers=_headers(config, body)
                )
            except httpx.HTTPError as exc:
                log.warning("A2A push to %s failed: %s", config.url, exc)
                continue
            if answer.status_code < 500 and answer.status_code != 429:
                return  # delivered (a 4xx other than 429 will not get better either)
        log.warning("A2A push to %s given up after %d tries", config.url, len(BACKOFF) + 1)

    async def aclose(self) -> None:
        await self.http.aclose()


def _headers(config: TaskPushNotificationConfig, body: bytes) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if config.token:
        stamp = str(int(time.time()))
        headers["x-a2a-notification-token"] = config.token
        headers[TIMESTAMP] = stamp
        headers[SIGNATURE] = signature(config.token, stamp, body)
    auth = config.authentication
    if config.HasField("authentication") and auth.scheme and auth.credentials:
        headers["authorization"] = f"{auth.scheme} {auth.credentials}"
    return headers
