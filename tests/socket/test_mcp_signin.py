"""Sign-in to an ``auth: oauth`` MCP server from the web app: ``/signin NAME`` on the iris
socket answers with the link, the authorization server sends the browser back to ``iris
serve``'s callback route, the server keeps the tokens and connects, and its tools are offered
in the chat's next turn. The protected server is ``tests/fakes/mcp_oauth_server.py`` (the
``mcp`` SDK's server-side auth, approving at once) on loopback."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from iris.surfaces.signin_command import CALLBACK_PATH, QuietCallback
from tests.fakes.mcp_launch import http_server
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.socket.conftest import StartServer

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def protected(tmp_path: Path) -> Iterator[str]:
    with http_server(tmp_path, "tests.fakes.mcp_oauth_server") as url:
        yield url


async def test_signin_in_the_web_app_gives_a_link_whose_redirect_signs_the_server_in(
    iris_server: StartServer, upstream: FakeUpstream, protected: str, tmp_path: Path
) -> None:
    server = await iris_server(mcp_servers={"web": {"url": protected, "auth": "oauth"}})
    device = await server.connect()
    await device.send({"type": "message.send", "text": "/signin"})
    listed = str((await device.until("command"))[-1]["text"])
    assert "mcp web: sign-in needed" in listed

    await device.send({"type": "message.send", "text": "/signin web"})
    said = str((await device.until("command"))[-1]["text"])
    assert said.startswith("Open this link to sign in to web")
    link = said.splitlines()[-1]
    base = server.url.replace("ws://", "http://").removesuffix("/iris/ws")
    assert (
        f"redirect_uri={httpx.URL(base + CALLBACK_PATH)}".replace(":", "%3A").replace("/", "%2F")
        in link
    )
    async with httpx.AsyncClient(follow_redirects=True, timeout=30) as browser:
        page = await browser.get(link)
    assert page.status_code == 200 and "Signed in to web: 1 tools" in page.text
    token_file = tmp_path / "mcp-auth" / "web.json"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

    mcp = server.surface.runtime.agent.mcp
    assert mcp is not None
    await mcp.wait_until(lambda: mcp.connections["web"].state == "connected")
    upstream.script(tool_call("mcp_web_hello", ["{}"]), text("It said hello."))
    await device.send({"type": "message.send", "text": "say hello"})
    frames = await device.turn()
    assert [f["type"] for f in frames] == ["typing", "tool.start", "tool.end", "message", "typing"]
    tool = next(m for m in upstream.requests[1].body["messages"] if m["role"] == "tool")
    assert tool["content"] == "hello from the protected server"


async def test_a_callback_no_sign_in_waits_for_and_a_wrong_name_are_refused(
    iris_server: StartServer, protected: str
) -> None:
    server = await iris_server(mcp_servers={"web": {"url": protected, "auth": "oauth"}})
    base = server.url.replace("ws://", "http://").removesuffix("/iris/ws")
    async with httpx.AsyncClient() as browser:
        page = await browser.get(f"{base}{CALLBACK_PATH}?code=x&state=guessed")
    assert page.status_code == 400 and "No sign-in waits for this link" in page.text
    device = await server.connect()
    await device.send({"type": "message.send", "text": "/signin nosuch"})
    error = (await device.until("error"))[-1]
    assert error["code"] == "signin_failed"
    assert (
        error["message"] == "no enabled MCP server 'nosuch' with auth: oauth (those with it: web)"
    )


def test_the_access_log_shows_the_callback_without_its_code() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", f"{CALLBACK_PATH}?code=SECRET&state=s", "1.1", 200),
        None,
    )
    assert QuietCallback().filter(record)
    assert "SECRET" not in record.getMessage() and CALLBACK_PATH in record.getMessage()
