"""Paired devices end to end: ``iris devices add|list|revoke`` run as the real command (a
subprocess on a temp config and home), the tokens it prints used on the real server's iris
socket and ``GET /iris/chats``, and revocation seen by a running server."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import httpx
import pytest
import qrcode
from qrcode.constants import ERROR_CORRECT_L

from iris.private import write_private
from iris.surfaces.cli.devices import QR_BORDER, pairing_base, pairing_notes
from iris.surfaces.socket import endpoint
from iris.surfaces.socket.chats import TITLE_CHARS, title
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text
from tests.socket.conftest import TOKEN, WAIT, IrisServer, StartServer
from tests.socket.locks import locked
from tests.socket.pairing import URL, iris, pair


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A config whose store is the one ``make_config`` (and so ``iris_server``) uses."""
    path = tmp_path / "config.yaml"
    write_private(path, f"store: {{path: {tmp_path / 'iris.db'}}}\n")  # 0600: no warning
    return path


def database_bytes(folder: Path) -> bytes:
    """Everything SQLite wrote: the database, its WAL and SHM."""
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.name.startswith("iris.db"))


def http_base(server: IrisServer) -> str:
    return server.url.replace("ws://", "http://").removesuffix("/iris/ws")


# -- the command -------------------------------------------------------------------------------
async def test_add_prints_a_pairing_url_its_qr_code_and_the_token_once(
    config_file: Path,
) -> None:
    added = await iris(config_file, "devices", "add", "phone")
    assert added.code == 0, added.err
    found = URL.search(added.out)
    assert found is not None, added.out
    url, token = found.groups()
    assert url == f"http://127.0.0.1:8642/#token={token}"
    assert len(token) >= 43 and re.fullmatch(r"[A-Za-z0-9_-]+", token)  # 256 bits, url-safe
    assert added.out.splitlines()[-1].strip() == token
    assert "only this machine can open that URL" in added.err  # the default bind is loopback
    assert decoded_qr(added.out) == qr_modules(url)

    again = await pair(config_file, "laptop")
    assert again != token


async def test_list_shows_names_and_dates_never_tokens_and_revoke_removes(
    config_file: Path,
) -> None:
    phone = await pair(config_file, "phone")
    await pair(config_file, "tablet")
    listed = await iris(config_file, "devices", "list")
    assert listed.code == 0
    lines = listed.out.splitlines()
    assert lines[0].split() == ["NAME", "CREATED", "LAST", "SEEN"]
    assert [line.split()[0] for line in lines[1:]] == ["phone", "tablet"]
    assert all(line.endswith("never") for line in lines[1:])
    assert phone not in listed.out

    revoked = await iris(config_file, "devices", "revoke", "phone")
    assert revoked.code == 0 and "Revoked 'phone'" in revoked.out
    listed = await iris(config_file, "devices", "list")
    assert [line.split()[0] for line in listed.out.splitlines()[1:]] == ["tablet"]

    again = await iris(config_file, "devices", "revoke", "phone")
    assert again.code == 2 and again.err.strip() == (
        "iris: no device named 'phone' (see `iris devices list`)"
    )
    assert "Traceback" not in again.err


async def test_names_are_unique_among_paired_devices_and_free_again_once_revoked(
    config_file: Path,
) -> None:
    await pair(config_file, "phone")
    taken = await iris(config_file, "devices", "add", "phone")
    assert taken.code == 2 and "a device named 'phone' exists" in taken.err
    assert (await iris(config_file, "devices", "revoke", "phone")).code == 0
    await pair(config_file, "phone")
    empty = await iris(config_file, "devices", "add", "  ")
    assert empty.code == 2 and "1-64 characters" in empty.err


async def test_url_names_a_reverse_proxy_address(config_file: Path) -> None:
    added = await iris(config_file, "devices", "add", "phone", "--url", "https://iris.example.com/")
    found = URL.search(added.out)
    assert found is not None and found.group(1).startswith("https://iris.example.com/#token=")
    assert added.err == ""
    bad = await iris(config_file, "devices", "add", "tablet", "--url", "iris.example.com")
    assert bad.code == 2 and "--url must be an http:// or https:// address" in bad.err
    listed = await iris(config_file, "devices", "list")
    assert "tablet" not in listed.out  # nothing was paired for a bad address


def test_the_pairing_address_is_one_a_device_can_open(make_config: MakeConfig) -> None:
    anywhere = make_config(server={"host": "0.0.0.0", "port": 9000})
    base = pairing_base(anywhere, None)
    assert base.startswith("http://") and base.endswith(":9000")
    assert "0.0.0.0" not in base  # not an address a phone can open
    assert pairing_base(make_config(server={"host": "fe80::1"}), None) == "http://[fe80::1]:8642"
    assert pairing_base(anywhere, "https://iris.example.com/app/") == (
        "https://iris.example.com/app"
    )
    assert pairing_notes(anywhere, "https://iris.example.com") == []
    assert "plain http" in pairing_notes(anywhere, None)[0]
    off = make_config(platforms={"iris": {"enabled": False}})
    assert "platforms.iris.enabled is false" in pairing_notes(off, "https://iris.example.com")[0]


async def test_the_store_keeps_only_a_digest_of_the_token(
    config_file: Path, tmp_path: Path
) -> None:
    token = await pair(config_file, "phone")
    stored = database_bytes(tmp_path)
    assert token.encode() not in stored
    assert hashlib.sha256(token.encode()).hexdigest().encode() in stored


# -- the socket --------------------------------------------------------------------------------
async def test_a_paired_device_connects_with_hello_or_header_and_is_seen(
    iris_server: StartServer, config_file: Path
) -> None:
    server = await iris_server()
    token = await pair(config_file, "phone")
    by_hello = await server.connect(token)
    by_header = await server.connect(token, header=True)
    for device in (by_hello, by_header):
        await device.send({"type": "ping"})
        assert (await device.recv())["type"] == "pong"
    listed = await iris(config_file, "devices", "list")
    assert listed.out.splitlines()[1].split()[0] == "phone"
    assert not listed.out.splitlines()[1].endswith("never")
    assert (await server.connect(TOKEN)) is not None  # config tokens still work


async def test_a_revoked_or_unknown_token_is_refused_with_4401_and_says_which(
    iris_server: StartServer, config_file: Path
) -> None:
    server = await iris_server()
    token = await pair(config_file, "phone")
    assert (await iris(config_file, "devices", "revoke", "phone")).code == 0
    for header in (False, True):
        revoked = await server.connect(token, header=header, ready=False)
        assert await revoked.closed() == 4401 and revoked.frames == []
        assert revoked.ws.close_reason == "revoked"
        unknown = await server.connect(token[:-1] + "x", header=header, ready=False)
        assert await unknown.closed() == 4401 and unknown.frames == []
        assert unknown.ws.close_reason == "unauthorized"


async def test_a_connected_device_is_closed_when_revoked_and_others_stay(
    iris_server: StartServer, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only this test's sweep: the server's own (every 5 s) could win when the CLI is slow, and
    # the one below would then find nothing left to close (the next test covers that sweep).
    monkeypatch.setattr(endpoint, "REVOCATION_POLL", 3600.0)
    server = await iris_server()
    phone = await server.connect(await pair(config_file, "phone"))
    tablet = await server.connect(await pair(config_file, "tablet"))
    desk = await server.connect(TOKEN)
    assert (await iris(config_file, "devices", "revoke", "phone")).code == 0
    assert await server.surface.revocations.sweep() == 1
    assert await phone.closed() == 4401 and phone.ws.close_reason == "revoked"
    for device in (tablet, desk):
        await device.send({"type": "ping"})
        assert (await device.recv())["type"] == "pong"


async def test_the_server_notices_a_revocation_by_itself(
    iris_server: StartServer, config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(endpoint, "REVOCATION_POLL", 0.05)
    server = await iris_server()
    phone = await server.connect(await pair(config_file, "phone"))
    assert (await iris(config_file, "devices", "revoke", "phone")).code == 0
    assert await phone.closed(within=WAIT) == 4401  # WAIT: a hang guard, not a timing claim


async def test_a_device_token_the_store_cannot_check_is_told_to_try_later_not_refused(
    iris_server: StartServer, config_file: Path, tmp_path: Path
) -> None:
    server = await iris_server()
    token = await pair(config_file, "phone")
    with locked(server, tmp_path / "iris.db"):
        device = await server.connect(token, ready=False)
        assert await device.closed() == 1013 and device.frames == []
        assert (await server.connect(TOKEN)) is not None  # config tokens need no store
    assert (await server.connect(token)) is not None


# -- the chat list -----------------------------------------------------------------------------
async def test_chats_lists_each_chat_with_its_first_message_newest_first(
    iris_server: StartServer, upstream: FakeUpstream, config_file: Path
) -> None:
    upstream.script(text("Hello."), text("Sure."), text("Again."))
    server = await iris_server()
    token = await pair(config_file, "phone")
    main = await server.connect(token)
    await main.send({"type": "message.send", "text": "  plan the\n trip  "})
    await main.turn()
    work = await server.connect(token, chat_id="work")
    await work.send({"type": "message.send", "text": "x" * 200})
    await work.turn()
    await main.send({"type": "message.send", "text": "and the budget"})
    await main.turn()

    async with httpx.AsyncClient(base_url=http_base(server)) as client:
        listed = await client.get("/iris/chats", headers={"Authorization": f"Bearer {token}"})
        by_config = await client.get("/iris/chats", headers={"Authorization": f"Bearer {TOKEN}"})
    assert listed.status_code == 200 and listed.headers["cache-control"] == "no-store"
    chats = listed.json()["chats"]
    assert [(c["chat_id"], c["title"]) for c in chats] == [
        ("main", "plan the trip"),
        ("work", "x" * (TITLE_CHARS - 1) + "…"),
    ]
    assert chats[0]["updated"] >= chats[1]["updated"] > 0
    assert by_config.json() == listed.json()


async def test_chats_wants_a_valid_token_and_the_sites_own_origin(
    iris_server: StartServer, config_file: Path
) -> None:
    server = await iris_server()
    token = await pair(config_file, "phone")
    revoked = await pair(config_file, "old")
    assert (await iris(config_file, "devices", "revoke", "old")).code == 0
    async with httpx.AsyncClient(base_url=http_base(server)) as client:
        empty = await client.get("/iris/chats", headers={"Authorization": f"Bearer {token}"})
        missing = await client.get("/iris/chats")
        wrong = await client.get("/iris/chats", headers={"Authorization": "Bearer nope"})
        basic = await client.get("/iris/chats", headers={"Authorization": f"Basic {token}"})
        gone = await client.get("/iris/chats", headers={"Authorization": f"Bearer {revoked}"})
        foreign = await client.get(
            "/iris/chats",
            headers={"Authorization": f"Bearer {token}", "Origin": "https://evil.example"},
        )
        rebound = await client.get(
            "/iris/chats", headers={"Authorization": f"Bearer {token}", "Host": "evil.example"}
        )
    assert empty.status_code == 200 and empty.json() == {"chats": []}
    for refused in (missing, wrong, basic):
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert refused.headers["www-authenticate"] == "Bearer"
    assert gone.status_code == 401 and gone.json()["error"]["code"] == "revoked"
    assert foreign.status_code == 403
    assert foreign.json()["error"]["code"] == "origin_not_allowed"
    assert rebound.status_code == 403 and rebound.json()["error"]["code"] == "host_not_allowed"


def test_a_title_is_one_line_cut_on_a_word() -> None:
    assert title({"role": "user", "content": "a\n\nb\tc"}) == "a b c"
    long = "word " * 40
    cut = title({"role": "user", "content": long})
    assert cut.endswith("word…") and len(cut) <= TITLE_CHARS
    parts = [{"type": "text", "text": "look"}, {"type": "image_url"}]
    assert title({"role": "user", "content": parts}) == "look"
    assert title(None) == ""


# -- reading the QR code back ------------------------------------------------------------------
_MODULES = {" ": (False, False), "▀": (True, False), "▄": (False, True), "█": (True, True)}


def decoded_qr(out: str) -> list[list[bool]]:
    """The modules the printed code shows (True: light), two rows a line."""
    lines = [line[2:] for line in out.splitlines() if line.startswith("  █")]
    rows: list[list[bool]] = []
    for line in lines:
        pairs = [_MODULES[c] for c in line]
        rows += [[top for top, _ in pairs], [bottom for _, bottom in pairs]]
    return rows


def qr_modules(data: str) -> list[list[bool]]:
    """What a QR code of ``data`` is (True: light), with a light row to an even height."""
    code = qrcode.QRCode(border=QR_BORDER, error_correction=ERROR_CORRECT_L)
    code.add_data(data)
    code.make(fit=True)
    rows = [[not m for m in row] for row in code.get_matrix()]
    return rows + [[True] * len(rows[0])] if len(rows) % 2 else rows
