"""Real multi-node Redis set-ups for the cluster and Sentinel tests: Debian's ``redis-server``
processes on free loopback ports in a temp dir, never the system service.

- ``Cluster``: 3 primaries and 3 replicas (``redis-cli --cluster create … --cluster-replicas 1``).
  The cluster bus listens on port + 10000; both ports are free when picked, and below the
  ephemeral range (``low_ports``).
- ``SentinelSetup``: a primary, a replica and three Sentinels (quorum 2) watching it.

Both persist with AOF and ``appendfsync always`` (what a node acknowledged survives it) and
fail over fast (a node is down after 1 s), so a failover test waits seconds, not minutes.
Start one per test module: a cluster takes a few seconds to form.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

REDIS_SERVER = shutil.which("redis-server")
REDIS_CLI = shutil.which("redis-cli")
NODE_TIMEOUT_MS = 1000


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives outgoing connections (and ``bind`` to port 0)."""
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    return 32_768, 60_999


def low_ports(count: int, *, bus: bool) -> list[int]:
    """``count`` free loopback ports below the ephemeral range (with ``bus``: port + 10000
    free too, and below it as well). A Redis stopped and started again on its port (a restart,
    a failover test) finds it free: no outgoing connection made meanwhile can have taken it,
    as one can take a port from the ephemeral range."""
    top = ephemeral_range()[0] - 1 - (10_000 if bus else 0)
    if top < 12_000:  # an ephemeral range that starts low: below 55 536 is all there is
        top = 45_535 if bus else 55_535
    found: list[int] = []
    while len(found) < count:
        port = random.randint(10_000, top)
        if port in found or (bus and port + 10_000 in found):
            continue
        if _bindable(port) and (not bus or _bindable(port + 10_000)):
            found.append(port)
    return found


def _wait(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(redis.RedisError, OSError):
            if check():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Node:
    """One redis-server (or Sentinel) process."""

    def __init__(self, directory: Path, port: int, extra: list[str]) -> None:
        assert REDIS_SERVER is not None
        self.directory = directory
        self.port = port
        self.extra = extra
        directory.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert REDIS_SERVER is not None
        self.process = subprocess.Popen(
            [
                REDIS_SERVER,
                *self.extra,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--daemonize",
                "no",
                "--logfile",
                str(self.directory / "redis.log"),
            ],  # fmt: skip
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait(lambda: bool(self.client().ping()), f"redis on {self.port}")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=2)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


_DURABLE = ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]


class Cluster:
    """3 primaries, 3 replicas; ``url`` names one node (any will do)."""

    def __init__(self, directory: Path) -> None:
        self.nodes = [
            Node(
                directory / f"n{port}",
                port,
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    str(NODE_TIMEOUT_MS),
                    *_DURABLE,
                ],  # fmt: skip
            )
            for port in low_ports(6, bus=True)
        ]
        self.url = f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def start(self) -> None:
        assert REDIS_CLI is not None
        for node in self.nodes:
            node.start()
        subprocess.run(
            [
                REDIS_CLI,
                "--cluster",
                "create",
                *(n.address for n in self.nodes),
                "--cluster-replicas",
                "1",
                "--cluster-yes",
            ],  # fmt: skip
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.wait_healthy()

    def wait_healthy(self) -> None:
        """Every live node sees the cluster ok, three primaries, and each replica in sync."""

        def healthy() -> bool:
            for node in self.live():
                client = node.client()
                try:
                    info = client.cluster("info")
                    if "cluster_state:ok" not in str(info) and info.get("cluster_state") != "ok":
                        return False
                    role = client.info("replication")
                    if role["role"] == "slave" and role.get("master_link_status") != "up":
                        return False
                finally:
                    client.close()
            return len(self.primaries()) == 3

        _wait(healthy, "the cluster to be ok")

    def live(self) -> list[Node]:
        return [n for n in self.nodes if n.process is not None and n.process.poll() is None]

    def primaries(self) -> list[Node]:
        found: list[Node] = []
        for node in self.live():
            client = node.client()
            try:
                if client.info("replication")["role"] == "master":
                    found.append(node)
            finally:
                client.close()
        return found

    def node_for(self, key: str) -> Node:
        """The primary serving ``key``'s slot now."""
        client = self.live()[0].client()
        try:
            slot = int(client.cluster("keyslot", key))
            for low, high, primary, *_ in client.cluster("slots"):
                if int(low) <= slot <= int(high):
                    port = int(primary[1])
                    return next(n for n in self.nodes if n.port == port)
        finally:
            client.close()
        raise AssertionError(f"no node serves {key}")

    def replica_of(self, primary: Node) -> Node:
        for node in self.live():
            client = node.client()
            try:
                role = client.info("replication")
                if role["role"] == "slave" and int(role["master_port"]) == primary.port:
                    return node
            finally:
                client.close()
        raise AssertionError(f"no replica of {primary.port}")

    def failover(self, primary: Node) -> Node:
        """``CLUSTER FAILOVER`` on ``primary``'s replica (a planned failover: nothing
        acknowledged is lost); returns the new primary once the cluster is ok again."""
        replica = self.replica_of(primary)
        client = replica.client()
        try:
            client.execute_command("CLUSTER", "FAILOVER")
        finally:
            client.close()

        def promoted() -> bool:
            c = replica.client()
            try:
                return c.info("replication")["role"] == "master"
            finally:
                c.close()

        _wait(promoted, f"{replica.port} to become a primary")
        self.wait_healthy()
        return replica

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()


class SentinelSetup:
    """A primary, its replica and three Sentinels (quorum 2) that call it ``iris-primary``."""

    MASTER = "iris-primary"

    def __init__(self, directory: Path) -> None:
        ports = low_ports(5, bus=False)
        self.primary = Node(directory / "primary", ports[0], list(_DURABLE))
        self.replica = Node(
            directory / "replica",
            ports[1],
            [*_DURABLE, "--replicaof", "127.0.0.1", str(ports[0])],
        )
        self.sentinels: list[Node] = []
        for port in ports[2:]:
            folder = directory / f"s{port}"
            folder.mkdir(parents=True)
            config = folder / "sentinel.conf"
            config.write_text(
                f"sentinel monitor {self.MASTER} 127.0.0.1 {ports[0]} 2\n"
                f"sentinel down-after-milliseconds {self.MASTER} {NODE_TIMEOUT_MS}\n"
                f"sentinel failover-timeout {self.MASTER} 5000\n"
                f"sentinel parallel-syncs {self.MASTER} 1\n"
            )
            self.sentinels.append(Node(folder, port, [str(config), "--sentinel"]))

    @property
    def addresses(self) -> list[str]:
        return [s.address for s in self.sentinels]

    @property
    def url(self) -> str:
        """The primary as it was started (the Sentinels may have promoted the replica since)."""
        return f"redis://127.0.0.1:{self.primary.port}/0"

    def store(self) -> dict[str, object]:
        """``store`` keys for ``iris serve`` through these Sentinels."""
        return {
            "url": None,
            "mode": "sentinel",
            "sentinels": self.addresses,
            "sentinel_master": self.MASTER,
        }

    def start(self) -> None:
        self.primary.start()
        self.replica.start()
        for sentinel in self.sentinels:
            sentinel.start()

        def watched() -> bool:
            for sentinel in self.sentinels:
                client = sentinel.client()
                try:
                    fields: Any = client.sentinel_master(self.MASTER)  # pyright: ignore[reportUnknownMemberType]
                    if int(fields["num-other-sentinels"]) < 2 or int(fields["num-slaves"]) < 1:
                        return False
                finally:
                    client.close()
            return True

        _wait(watched, "the sentinels to see each other and the replica")

    def current_primary_port(self) -> int:
        client = self.sentinels[0].client()
        try:
            found: Any = client.sentinel_get_master_addr_by_name(self.MASTER)  # pyright: ignore[reportUnknownMemberType]
            _, port = found
            return int(port)
        finally:
            client.close()

    def stop(self) -> None:
        for node in (*self.sentinels, self.replica, self.primary):
            node.kill()
