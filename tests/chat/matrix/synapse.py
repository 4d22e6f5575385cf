"""A real Synapse homeserver for the Matrix tests: started once per test session.

Synapse (``matrix-synapse`` from PyPI) lives in a venv of its own (its pins would clash with
Iris's): ``$IRIS_SYNAPSE_VENV``, else ``~/.cache/iris/synapse``, which ``.ci/run`` creates.
It runs on SQLite with its data in a temp dir, on a free loopback port, with a generated
config: a registration shared secret (users are made through the shared-secret admin API,
``/_synapse/admin/v1/register``), no federation, loose rate limits (the rate-limit test makes
one user's tight through the admin API's ``override_ratelimit``).

``Person`` is a user of it driven by Iris's own Matrix client (``MatrixApi``): rooms, messages,
reactions, media, and a ``/sync`` of their own to see what the bot shows, and when.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import itertools
import os
import subprocess
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from iris.surfaces.chat.platforms.matrix_api import JSON, MatrixApi, quoted
from tests.fakes import loopback

SECRET = "iris-test-shared-secret"
SERVER = "localhost"
_STARTUP = 90.0  # seconds Synapse may take to answer (a loaded 2-core machine)


def venv() -> Path:
    found = os.environ.get("IRIS_SYNAPSE_VENV")
    return Path(found) if found else Path.home() / ".cache" / "iris" / "synapse"


def python() -> Path | None:
    """The side venv's python, if Synapse is installed there."""
    candidate = venv() / "bin" / "python"
    if not candidate.exists():
        return None
    probe = subprocess.run(
        [str(candidate), "-c", "import synapse.app.homeserver"],
        capture_output=True,
        check=False,
    )
    return candidate if probe.returncode == 0 else None


_CONFIG = """\
server_name: "{server}"
pid_file: {dir}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args: {{database: {dir}/homeserver.db}}
log_config: {dir}/log.yaml
media_store_path: {dir}/media
registration_shared_secret: "{secret}"
report_stats: false
signing_key_path: {dir}/signing.key
trusted_key_servers: []
suppress_key_server_warning: true
bcrypt_rounds: 4
enable_authenticated_media: true
rc_message: {loose}
rc_registration: {loose}
rc_login: {{address: {loose}, account: {loose}, failed_attempts: {loose}}}
rc_joins: {{local: {loose}, remote: {loose}}}
rc_invites: {{per_room: {loose}, per_user: {loose}, per_issuer: {loose}}}
rc_media_create: {loose}
"""
_LOG = """\
version: 1
formatters: {precise: {format: '%(asctime)s %(levelname)s %(name)s %(message)s'}}
handlers: {file: {class: logging.FileHandler, formatter: precise, filename: LOG}}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


class Synapse:
    """One Synapse process; ``url`` once started."""

    def __init__(self, python: Path, folder: Path, *, default_rc_message: bool = False) -> None:
        """``default_rc_message``: Synapse's own message limit (0.2 a second, bursts of 10),
        as a homeserver ships; else loose."""
        self.python, self.folder = python, folder
        self.default_rc_message = default_rc_message
        with loopback.bind() as sock:  # a free port (Synapse binds it itself a moment later)
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: BinaryIO | None = None
        self._names = itertools.count()

    def start(self) -> None:
        config = self.folder / "homeserver.yaml"
        loose = "{per_second: 1000, burst_count: 1000}"
        text = _CONFIG
        if self.default_rc_message:
            text = text.replace("rc_message: {loose}\n", "")
        config.write_text(
            text.format(server=SERVER, dir=self.folder, port=self.port, secret=SECRET, loose=loose)
        )
        (self.folder / "log.yaml").write_text(_LOG.replace("LOG", str(self.folder / "synapse.log")))
        command = [str(self.python), "-m", "synapse.app.homeserver", "-c", str(config)]
        subprocess.run([*command, "--generate-keys"], check=True, capture_output=True)
        self._stderr = (self.folder / "stderr.log").open("wb")
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=self._stderr)
        deadline = time.monotonic() + _STARTUP
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                stderr = (self.folder / "stderr.log").read_text(errors="replace")
                raise RuntimeError(f"synapse exited at start: {stderr[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("synapse did not answer in time")

    def stop(self) -> None:
        if self._stderr is not None:
            self._stderr.close()
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def register(self, name: str = "", *, admin: bool = False) -> tuple[str, str]:
        """A new user (a unique name from ``name``): ``(user_id, access_token)``."""
        localpart = f"{name or 'user'}{next(self._names)}_{os.getpid()}"
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        nonce = httpx.get(endpoint, timeout=10).json()["nonce"]
        password = "pw-" + localpart
        mac = hmac.new(SECRET.encode(), digestmod=hashlib.sha1)
        role = b"admin" if admin else b"notadmin"
        mac.update(b"\x00".join([nonce.encode(), localpart.encode(), password.encode(), role]))
        body = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        answer = httpx.post(endpoint, json=body, timeout=30).json()
        return answer["user_id"], answer["access_token"]

    def limit(self, admin_token: str, user_id: str, per_second: int, burst: int) -> None:
        """Tight ``rc_message`` for one user (``override_ratelimit``)."""
        path = f"/_synapse/admin/v1/users/{quoted(user_id)}/override_ratelimit"
        body = {"messages_per_second": per_second, "burst_count": burst}
        headers = {"Authorization": f"Bearer {admin_token}"}
        answer = httpx.post(self.url + path, json=body, headers=headers, timeout=10)
        answer.raise_for_status()


@dataclass
class Seen:
    """An event a person's ``/sync`` delivered, and when (monotonic)."""

    room_id: str
    event: JSON
    at: float


@dataclass
class Person:
    """A user of the test Synapse, on Iris's own Matrix client."""

    api: MatrixApi
    user_id: str
    timeline: list[Seen] = field(default_factory=list[Seen])
    _since: str | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _syncer: asyncio.Task[None] | None = None

    async def room(
        self, *invite: str, direct: bool = False, encrypted: bool = False, public: bool = False
    ) -> str:
        body: dict[str, Any] = {
            "invite": list(invite),
            "is_direct": direct,
            "preset": "public_chat" if public else "private_chat",
        }
        if encrypted:
            state = {
                "type": "m.room.encryption",
                "state_key": "",
                "content": {"algorithm": "m.megolm.v1.aes-sha2"},
            }
            body["initial_state"] = [state]
        answer = await self.api.call("POST", "/createRoom", body)
        return str(answer["room_id"])

    async def join(self, room_id: str) -> None:
        await self.api.call("POST", f"/join/{quoted(room_id)}", {})

    async def say(self, room_id: str, text: str, **content: Any) -> str:
        return await self.api.send_event(
            room_id, "m.room.message", {"msgtype": "m.text", "body": text, **content}
        )

    async def react(self, room_id: str, event_id: str, key: str) -> str:
        relates = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        return await self.api.send_event(room_id, "m.reaction", {"m.relates_to": relates})

    async def upload(self, data: bytes, mime: str, name: str) -> str:
        url = f"{self.api.base_url}/_matrix/media/v3/upload"
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                url,
                content=data,
                params={"filename": name},
                headers={"Authorization": f"Bearer {self.api.token}", "Content-Type": mime},
            )
        return str(answer.json()["content_uri"])

    def start_sync(self) -> None:
        self._syncer = asyncio.create_task(self._sync())

    async def stop_sync(self) -> None:
        if self._syncer is not None:
            self._syncer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._syncer
        await self.api.aclose()

    async def _sync(self) -> None:
        while True:
            params = {"timeout": "10000"} if self._since else {"timeout": "0"}
            if self._since:
                params["since"] = self._since
            body = await self.api.call("GET", "/sync", params=params, read_for=30)
            self._since = str(body["next_batch"])
            now = time.monotonic()
            for room_id, room in body.get("rooms", {}).get("join", {}).items():
                for event in room.get("timeline", {}).get("events", []):
                    self.timeline.append(Seen(room_id, event, now))
            self._arrived.set()

    async def wait_until(self, check: Callable[[], object], within: float = 30.0) -> None:
        """Until ``check()`` holds of what this person's sync saw."""
        async with asyncio.timeout(within):
            while not check():
                self._arrived.clear()
                await self._arrived.wait()

    def from_user(self, user_id: str, room_id: str) -> list[JSON]:
        return [
            s.event
            for s in self.timeline
            if s.room_id == room_id and s.event.get("sender") == user_id
        ]


def shown(events: list[JSON]) -> list[str]:
    """The messages as a client shows them after every edit: one text per message, in order."""
    texts: dict[str, str] = {}
    for event in events:
        if event.get("type") != "m.room.message":
            continue
        content = event.get("content", {})
        relates = content.get("m.relates_to", {})
        if relates.get("rel_type") == "m.replace":
            if relates.get("event_id") in texts:
                texts[relates["event_id"]] = content["m.new_content"]["body"]
        else:
            texts[event["event_id"]] = content.get("body", "")
    return list(texts.values())


@contextlib.contextmanager
def running(folder: Path, *, default_rc_message: bool = False) -> Generator[Synapse | None]:
    """A started Synapse, or None where it is not installed."""
    found = python()
    if found is None:
        yield None
        return
    synapse = Synapse(found, folder, default_rc_message=default_rc_message)
    synapse.start()
    try:
        yield synapse
    finally:
        synapse.stop()
