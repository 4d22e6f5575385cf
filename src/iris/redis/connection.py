"""The Redis clients every part of a process shares, key names, and what a failure means.

Two clients on one URL: ``aio`` (``redis.asyncio``) for everything the event loop awaits, and
``sync`` (blocking, short timeouts) for the few reads that must finish in one step of the loop,
as the SQLite store's reads do (a loopback round trip is ~0.1 ms; a lost server fails within
``timeout`` seconds). Both reconnect on their own: a Redis that comes back is used again
without a restart.

Every ``redis.RedisError`` reaching Iris becomes ``StoreUnavailable`` (``translated``), with
the URL's password removed from the message. The loops that read Redis for as long as the
server runs (the frame tailer, the turn inbox) retry through ``Retry`` while it is away and
check ``stop_if_cancelled`` each round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Generator
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.retry
from redis.backoff import NoBackoff

from iris.errors import StoreUnavailable

if TYPE_CHECKING:
    from iris.config import Config

log = logging.getLogger(__name__)

MIN_VERSION = (6, 2)  # XADD with explicit ids and exclusive XRANGE, XTRIM MINID, GETDEL
DEFAULT_TIMEOUT = 2.0


def redacted(url: str) -> str:
    """``url`` without its password (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


# Connections one process opens to Redis at most, per client (see ``RedisStore``).
SYNC_CONNECTIONS = 16
AIO_CONNECTIONS = 64
BLOCKING_CONNECTIONS = 4  # the tailer and the turn inbox
FOLLOWING_CONNECTIONS = 32  # background-response followers blocked at once; more wait
MAX_CONNECTIONS = SYNC_CONNECTIONS + AIO_CONNECTIONS + BLOCKING_CONNECTIONS + FOLLOWING_CONNECTIONS


class RedisStore:
    """One Redis database shared by every Iris process: its clients and its key names."""

    def __init__(self, url: str, *, prefix: str = "iris", timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        # Who this process is, in leases and in the owner field of a running turn.
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        # Every pool is bounded (finding 7 of the second hardening pass: 300 background
        # followers opened 195 connections, 138 left open): past its bound a caller waits for
        # a connection (up to ``timeout``; a blocking read's pool without a limit on the
        # wait), so one process holds at most ``MAX_CONNECTIONS`` connections to Redis.
        self.sync: redis.Redis = redis.Redis.from_pool(
            redis.BlockingConnectionPool.from_url(
                url,
                decode_responses=True,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                health_check_interval=30,
                max_connections=SYNC_CONNECTIONS,
                timeout=timeout,
            )
        )
        self.aio: redis.asyncio.Redis = redis.asyncio.Redis.from_pool(
            redis.asyncio.BlockingConnectionPool.from_url(
                url,
                decode_responses=True,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                health_check_interval=30,
                # A pooled connection to a server that restarted fails on its first use: one
                # immediate retry on a fresh connection, so the first request after Redis
                # comes back is served (a server still down is refused again at once). Not on
                # timeouts.
                retry=redis.asyncio.retry.Retry(
                    NoBackoff(), 1, supported_errors=(redis.ConnectionError,)
                ),
                max_connections=AIO_CONNECTIONS,
                timeout=timeout,
            )
        )
        # Blocking reads (XREAD BLOCK) wait longer than any socket timeout: their own clients,
        # one for this process's own readers (the tailer, the turn inbox) and one for the
        # followers of background responses, so many followers never delay the tailer.
        self.blocking: redis.asyncio.Redis = _blocking_client(url, timeout, BLOCKING_CONNECTIONS)
        self.following: redis.asyncio.Redis = _blocking_client(url, timeout, FOLLOWING_CONNECTIONS)

    def key(self, *parts: str) -> str:
        """A key under this deployment's prefix: ``key("chat", id, "log")`` → ``iris:chat:id:log``."""
        return ":".join((self.prefix, *parts))

    def check(self) -> None:
        """Prove the server answers and is new enough; raise ``StoreUnavailable`` in one line."""
        with translated(self.url, "cannot reach the store"):
            info = self.sync.info("server")
        version = str(info.get("redis_version", "0"))
        numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
        if numbers < MIN_VERSION:
            raise StoreUnavailable(
                f"the store {redacted(self.url)} runs Redis {version}; Iris needs 6.2 or newer"
            )

    async def aclose(self) -> None:
        for client in (self.aio, self.blocking, self.following):
            with contextlib.suppress(redis.RedisError, OSError):
                await client.aclose()
        self.close()

    def close(self) -> None:
        with contextlib.suppress(redis.RedisError, OSError):
            self.sync.close()


def _blocking_client(url: str, timeout: float, most: int) -> redis.asyncio.Redis:
    return redis.asyncio.Redis.from_pool(
        redis.asyncio.BlockingConnectionPool.from_url(
            url,
            decode_responses=True,
            socket_timeout=None,
            socket_connect_timeout=timeout,
            health_check_interval=30,
            max_connections=most,
            timeout=None,  # a reader waits for a connection as it waits for entries
        )
    )


def shared_store(config: Config) -> RedisStore | None:
    """The Redis every process shares (``store.url``), checked; None without one."""
    if config.store.url is None:
        return None
    shared = RedisStore(config.store.url, prefix=config.store.prefix)
    shared.check()  # unreachable: one line and a non-zero exit, before serving anything
    from iris.redis.fingerprint import check_fingerprint  # it imports this module

    check_fingerprint(shared, config)  # one deployment per prefix
    return shared


@contextlib.contextmanager
def translated(url: str, doing: str = "the store failed") -> Generator[None]:
    """``with translated(store.url):`` turns a Redis failure into ``StoreUnavailable``."""
    try:
        yield
    except redis.RedisError as exc:
        raise StoreUnavailable(f"{doing}: {redacted(url)}: {_reason(exc)}") from None
    except OSError as exc:  # a socket error the client did not wrap
        raise StoreUnavailable(f"{doing}: {redacted(url)}: {exc}") from None


def _reason(exc: redis.RedisError) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


class Retry:
    """A long-running loop's retries while Redis is away: waits doubling from ``first`` to
    ``most`` seconds, the loss and the return logged once each, not once per try."""

    def __init__(self, what: str, *, first: float = 0.1, most: float = 2.0) -> None:
        self.what = what
        self.first, self.most = first, most
        self.delay = first
        self.lost = False

    async def failed(self, reason: object) -> None:
        """A try failed: say so (the first time) and wait before the next."""
        if not self.lost:
            log.warning("%s lost the store, retrying: %s", self.what, reason)
            self.lost = True
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, self.most)

    def succeeded(self) -> None:
        if self.lost:
            log.warning("%s reaches the store again", self.what)
        self.lost, self.delay = False, self.first


def stop_if_cancelled() -> None:
    """Raise the cancellation redis-py's asyncio client can swallow (a command cancelled at
    the wrong moment returns normally, redis/redis-py#2028): a loop that goes on around it
    would keep a stopping server waiting."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
