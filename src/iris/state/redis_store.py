"""The Redis clients every part of a process shares, key names, and what a failure means.

Two clients on one URL: ``aio`` (``redis.asyncio``) for everything the event loop awaits, and
``sync`` (blocking, short timeouts) for the few reads that must finish in one step of the loop,
as the SQLite store's reads do (a loopback round trip is ~0.1 ms; a lost server fails within
``timeout`` seconds). Both reconnect on their own: a Redis that comes back is used again
without a restart.

Every ``redis.RedisError`` reaching Iris becomes ``StoreUnavailable`` (``translated``), with
the URL's password removed from the message. The loops that read Redis for as long as the
server runs (the frame tailer, the turn inbox) retry through ``Retry`` while it is away and
check ``iris.tasks.stop_if_cancelled`` each round.

Three topologies (``store.mode``), one interface: ``single`` (one primary at ``store.url``),
``cluster`` (redis-py's cluster clients: each command goes to its key's slot owner, and a
``MOVED`` after a failover or a resharding refreshes the slot map), ``sentinel`` (redis-py's
Sentinel clients: the primary is asked of the Sentinels, and again on a connection that fails
or finds a demoted primary). In a cluster every command and script names keys of one hash slot:
each chat's keys share the tag ``{chat:<id>}`` (``chat_key``), and what spans chats is touched
one key at a time (docs/deploy.md lists the layout). ``check`` turns a store Iris cannot use as
configured into one line naming the setting to change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
import redis.cluster
import redis.exceptions
import redis.sentinel
from redis.backoff import NoBackoff

from iris.errors import StoreUnavailable
from iris.observability import metrics

if TYPE_CHECKING:
    from iris.config import StoreConfig

log = logging.getLogger(__name__)

MIN_VERSION = (6, 2)  # XADD with explicit ids and exclusive XRANGE, XTRIM MINID, GETDEL
DEFAULT_TIMEOUT = 2.0

# Every failure a Redis client raises: the cluster client's own errors (no slot owner known, a
# node list that answers nothing) are not ``RedisError``s.
ERRORS: tuple[type[Exception], ...] = (
    redis.RedisError,
    redis.exceptions.RedisClusterException,
    OSError,
)

Mode = str  # "single" | "cluster" | "sentinel" (``store.mode``)

# Delete KEYS[1] only while it still holds ARGV[1] (a lease's token, a chat's open question):
# whoever set it since keeps it. 1 when deleted, else 0.
DELETE_IF_HELD = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def chat_key(prefix: str, chat_id: str, suffix: str) -> str:
    """A key of one chat: ``<prefix>{chat:<id>}:<suffix>``. Every key a chat's frame log, turn
    lease and transcript touch together is built here, so they share the hash tag
    ``{chat:<id>}`` and one Redis Cluster slot (one script may name them all)."""
    return f"{prefix}{{chat:{chat_id}}}:{suffix}"


def tagged_key(prefix: str, tag: str, *parts: str) -> str:
    """A key in the hash slot of ``tag``: ``<prefix>{<tag>}:<parts…>``."""
    return ":".join((f"{prefix}{{{tag}}}", *parts))


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


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
    """The Redis every Iris process shares (one primary, a cluster or a Sentinel-managed
    primary): its clients and its key names."""

    def __init__(
        self,
        url: str | None,
        *,
        prefix: str = "iris",
        timeout: float = DEFAULT_TIMEOUT,
        mode: Mode = "single",
        nodes: list[str] | None = None,
        sentinels: list[str] | None = None,
        sentinel_master: str | None = None,
    ) -> None:
        self.mode = mode
        self.prefix = prefix
        self.timeout = timeout
        self.sentinels = [_address(a) for a in sentinels or []]
        self.sentinel_master = sentinel_master
        self.nodes = [_address(a) for a in nodes or []]
        # What messages name: the URL, or the nodes / Sentinels asked (no password).
        self.url = url or ""
        if mode == "cluster" and url is None:
            self.url = "redis://" + ",".join(nodes or [])
        elif mode == "sentinel":
            self.url = f"redis+sentinel://{','.join(sentinels or [])}/{sentinel_master}"
        # Who this process is, in leases and in the owner field of a running turn.
        self.process_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        options: dict[str, Any] = {
            "decode_responses": True,
            "socket_connect_timeout": timeout,
            **_credentials(url),
        }
        self._options = options
        self._readers: dict[str, redis.asyncio.Redis] = {}  # cluster: node -> blocking reads
        # A pooled connection to a server that restarted fails on its first use: one
        # immediate retry on a fresh connection, so the first request after Redis comes back
        # is served (a server still down is refused again at once). Not on timeouts.
        once = redis.asyncio.retry.Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))
        if mode == "cluster":
            clients = self._cluster_clients(url, options)
        elif mode == "sentinel":
            assert sentinel_master is not None
            clients = self._sentinel_clients(sentinel_master, options, once)
        else:
            assert url is not None
            clients = _single_clients(url, timeout, once)
        # ``following``: the followers of background responses, so many of them never delay
        # the tailer or the turn inbox on ``blocking``.
        self.sync, self.aio, self.blocking, self.following = clients

    def _cluster_clients(self, url: str | None, options: dict[str, Any]) -> _Clients:
        # The cluster clients offer the same commands as ``redis.Redis``: typed as them.
        sync = cast("redis.Redis", self._cluster_sync(url, options))
        aio = self._cluster_aio(url, {**options, "socket_timeout": self.timeout})
        # Blocking reads (XREAD BLOCK) wait longer than any socket timeout; they go to the slot
        # owners' readers (``slot_reader``), followers' too.
        blocking = self._cluster_aio(url, {**options, "socket_timeout": None})
        aio_, blocking_ = cast("redis.asyncio.Redis", aio), cast("redis.asyncio.Redis", blocking)
        return sync, aio_, blocking_, blocking_

    def _sentinel_clients(
        self, master: str, options: dict[str, Any], once: redis.asyncio.retry.Retry
    ) -> _Clients:
        timeout = self.timeout
        ask = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
        sync = redis.sentinel.Sentinel(self.sentinels, sentinel_kwargs=ask)
        aio = redis.asyncio.sentinel.Sentinel(self.sentinels, sentinel_kwargs=ask)
        self._sentinel = sync
        primary: dict[str, Any] = {"health_check_interval": 30, **options}
        return (
            sync.master_for(master, socket_timeout=timeout, **primary),
            aio.master_for(master, socket_timeout=timeout, retry=once, **primary),
            # Blocking reads (XREAD BLOCK) wait longer than any socket timeout: clients of
            # their own, as with one primary.
            aio.master_for(master, socket_timeout=None, **primary),
            aio.master_for(master, socket_timeout=None, **primary),
        )

    def slot_reader(self, key: str) -> redis.asyncio.Redis:
        """Cluster: a blocking client to the primary that serves ``key``'s slot now (one per
        node, shared by the reads of every slot it serves), as the slot map last said."""
        cluster = cast("redis.cluster.RedisCluster", self.sync)
        node = cluster.get_node_from_key(key)
        if node is None:
            raise StoreUnavailable(f"the cluster at {redacted(self.url)} names no owner of {key}")
        client = self._readers.get(node.name)
        if client is None:
            client = self._readers[node.name] = redis.asyncio.Redis(
                host=node.host,
                port=node.port,
                socket_timeout=None,
                **self._options,
            )
        return client

    def blocking_for(self, key: str) -> redis.asyncio.Redis:
        """The client for a blocking read of ``key`` (``XREAD BLOCK``): ``blocking``, or in a
        cluster the slot owner's (``slot_reader``: many reads blocked at once on redis-py's
        asyncio cluster client were slow and dropped connections)."""
        return self.slot_reader(key) if self.mode == "cluster" else self.blocking

    def following_for(self, key: str) -> redis.asyncio.Redis:
        """The client for a background follower's blocking read of ``key``: ``following``
        (its own bounded pool, so many followers never delay the tailer), or in a cluster the
        slot owner's reader (``blocking_for``)."""
        return self.slot_reader(key) if self.mode == "cluster" else self.following

    async def slot_map_stale(self) -> None:
        """Cluster: a read failed (``MOVED``, a primary gone): ask the cluster for its slot map
        again, so the next read goes to the slot's owner now."""
        cluster = cast("redis.cluster.RedisCluster", self.sync)
        with contextlib.suppress(*ERRORS):
            await asyncio.to_thread(cluster.nodes_manager.initialize)

    @classmethod
    def configured(cls, store: StoreConfig) -> RedisStore:
        """The shared store ``store.*`` describes (not checked yet: ``check``)."""
        return cls(
            store.url,
            prefix=store.prefix,
            mode=store.mode,
            nodes=store.nodes,
            sentinels=store.sentinels,
            sentinel_master=store.sentinel_master,
        )

    def _startup_nodes(self, url: str | None) -> list[tuple[str, int]]:
        if self.nodes:
            return self.nodes
        assert url is not None
        parts = urlsplit(url)
        return [(parts.hostname or "127.0.0.1", parts.port or 6379)]

    def _cluster_sync(self, url: str | None, options: dict[str, Any]) -> redis.cluster.RedisCluster:
        # This constructor already asks a node for the slot map: a node that is not in a
        # cluster (or none that answers) fails here, in the one line ``check`` would say.
        try:
            return redis.cluster.RedisCluster(
                startup_nodes=[
                    redis.cluster.ClusterNode(h, p) for h, p in self._startup_nodes(url)
                ],
                socket_timeout=self.timeout,
                **options,
            )
        except ERRORS as exc:
            raise self._cluster_refused(exc) from None

    def _cluster_refused(self, exc: BaseException) -> StoreUnavailable:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "not enabled" in text.lower():
            return StoreUnavailable(
                f"the store {redacted(self.url)} is not a Redis Cluster node ({text}): "
                "set store.mode: single"
            )
        return StoreUnavailable(
            f"cannot reach the store: {redacted(self.url)}: {text} (store.url / store.nodes)"
        )

    def _cluster_aio(
        self, url: str | None, options: dict[str, Any]
    ) -> redis.asyncio.cluster.RedisCluster:
        return redis.asyncio.cluster.RedisCluster(
            startup_nodes=[
                redis.asyncio.cluster.ClusterNode(h, p) for h, p in self._startup_nodes(url)
            ],
            **options,
        )

    def key(self, *parts: str) -> str:
        """A key under this deployment's prefix: ``key("proc", id, "inbox")`` →
        ``iris:proc:id:inbox`` (one key alone in its slot; see ``chat_key`` for a chat's)."""
        return ":".join((self.prefix, *parts))

    def chat_key(self, chat_id: str, suffix: str) -> str:
        """``chat_key(prefix, chat_id, suffix)`` under this deployment's prefix."""
        return chat_key(self.prefix, chat_id, suffix)

    def tagged_key(self, tag: str, *parts: str) -> str:
        return tagged_key(self.prefix, tag, *parts)

    def check(self) -> None:
        """Prove the store answers, is new enough and is what ``store.mode`` says; raise
        ``StoreUnavailable`` in one line naming the setting to change."""
        with translated(self.url, "cannot reach the store"):
            if self.mode == "sentinel":
                self._check_sentinel()
            if self.mode == "cluster":
                self._check_cluster()
            info: dict[str, Any] = self.sync.info("server")
            if self.mode == "cluster" and _nested(info):  # one answer per node: the first
                info = next(iter(info.values()))
        kind = str(info.get("redis_mode", "standalone"))
        where = redacted(self.url)
        if self.mode == "single" and kind == "cluster":
            raise StoreUnavailable(
                f"the store {where} is a Redis Cluster node: set store.mode: cluster"
            )
        if self.mode == "single" and kind == "sentinel":
            raise StoreUnavailable(
                f"the store {where} is a Redis Sentinel, not a primary: set store.mode: "
                "sentinel with store.sentinels (this address) and store.sentinel_master"
            )
        version = str(info.get("redis_version", "0"))
        numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
        if numbers < MIN_VERSION:
            raise StoreUnavailable(
                f"the store {where} runs Redis {version}; Iris needs 6.2 or newer"
            )
        if self.mode == "single":
            with translated(self.url, "cannot reach the store"):
                role: dict[str, Any] = self.sync.info("replication")
            if role.get("role") == "slave":
                primary = f"{role.get('master_host')}:{role.get('master_port')}"
                raise StoreUnavailable(
                    f"the store {where} is a read-only replica of {primary}: point store.url at "
                    "the primary (or set store.mode: sentinel to follow failovers)"
                )

    def _check_cluster(self) -> None:
        try:
            state = cast("dict[str, Any]", self.sync.cluster_info())  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        except ERRORS as exc:
            raise self._cluster_refused(exc) from None
        if str(state.get("cluster_state")) != "ok":
            raise StoreUnavailable(
                f"the cluster at {redacted(self.url)} is not serving all slots "
                f"(cluster_state: {state.get('cluster_state')})"
            )

    def _check_sentinel(self) -> None:
        try:
            self._sentinel.discover_master(cast(str, self.sentinel_master))
        except redis.sentinel.MasterNotFoundError:
            raise StoreUnavailable(
                f"no Sentinel at {', '.join(f'{h}:{p}' for h, p in self.sentinels)} knows a "
                f"primary called {self.sentinel_master!r} (or none answers): check "
                "store.sentinels and store.sentinel_master"
            ) from None

    async def aclose(self) -> None:
        clients = {id(c): c for c in (self.aio, self.blocking, self.following)}
        for client in (*clients.values(), *self._readers.values()):
            with contextlib.suppress(*ERRORS):
                await client.aclose()
        self.close()

    def close(self) -> None:
        with contextlib.suppress(*ERRORS):
            self.sync.close()


def _nested(info: Any) -> bool:
    """A cluster client's INFO answers per node: ``{node: {field: value}}``."""
    return (
        isinstance(info, dict)
        and bool(info)
        and all(isinstance(v, dict) for v in cast("dict[str, Any]", info).values())
    )


def _credentials(url: str | None) -> dict[str, Any]:
    """The password, user and TLS of ``url`` for the cluster and Sentinel clients (which take
    host and port from ``store.nodes`` / the Sentinels)."""
    if url is None:
        return {}
    parts = urlsplit(url)
    found: dict[str, Any] = {}
    if parts.password is not None:
        found["password"] = parts.password
    if parts.username:
        found["username"] = parts.username
    if parts.scheme == "rediss":
        found["ssl"] = True
    return found


def _bounded(timeout: float, *, read: float | None, most: int) -> dict[str, Any]:
    """A bounded pool's options on ``store.url``: at most ``most`` connections; past them a
    caller waits for one as long as a read may take (``read``; None: a blocking read's pool
    waits for a connection as its reader waits for entries)."""
    return {
        "decode_responses": True,
        "socket_timeout": read,
        "socket_connect_timeout": timeout,
        "health_check_interval": 30,
        "max_connections": most,
        "timeout": read,
    }


_Clients = tuple["redis.Redis", "redis.asyncio.Redis", "redis.asyncio.Redis", "redis.asyncio.Redis"]


def _single_clients(url: str, timeout: float, once: redis.asyncio.retry.Retry) -> _Clients:
    """One primary's clients. Every pool is bounded (finding 7 of the second hardening pass:
    300 background followers opened 195 connections, 138 left open): past its bound a caller
    waits for a connection (up to ``timeout``; a blocking read's pool without a limit on the
    wait), so one process holds at most ``MAX_CONNECTIONS`` connections to Redis."""
    sync = redis.Redis.from_pool(
        redis.BlockingConnectionPool.from_url(
            url, **_bounded(timeout, read=timeout, most=SYNC_CONNECTIONS)
        )
    )
    aio = redis.asyncio.Redis.from_pool(
        redis.asyncio.BlockingConnectionPool.from_url(
            url, retry=once, **_bounded(timeout, read=timeout, most=AIO_CONNECTIONS)
        )
    )
    # Blocking reads (XREAD BLOCK) wait longer than any socket timeout: their own clients.
    blocking = _blocking_client(url, timeout, BLOCKING_CONNECTIONS)
    return sync, aio, blocking, _blocking_client(url, timeout, FOLLOWING_CONNECTIONS)


def _blocking_client(url: str, timeout: float, most: int) -> redis.asyncio.Redis:
    return redis.asyncio.Redis.from_pool(
        redis.asyncio.BlockingConnectionPool.from_url(
            url, **_bounded(timeout, read=None, most=most)
        )
    )


@contextlib.contextmanager
def translated(url: str, doing: str = "the store failed") -> Generator[None]:
    """``with translated(store.url):`` turns a Redis failure into ``StoreUnavailable``."""
    try:
        yield
    except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
        metrics.store_failed()
        raise StoreUnavailable(f"{doing}: {redacted(url)}: {_reason(exc)}") from None
    except OSError as exc:  # a socket error the client did not wrap
        metrics.store_failed()
        raise StoreUnavailable(f"{doing}: {redacted(url)}: {exc}") from None


def _reason(exc: Exception) -> str:
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
        metrics.store_failed()
        if not self.lost:
            log.warning("%s lost the store, retrying: %s", self.what, reason)
            self.lost = True
        await asyncio.sleep(self.delay)
        self.delay = min(self.delay * 2, self.most)

    def succeeded(self) -> None:
        if self.lost:
            log.warning("%s reaches the store again", self.what)
        self.lost, self.delay = False, self.first
