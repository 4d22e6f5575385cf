"""Sign-in to a remote MCP server (``auth: oauth``) against a server written with the ``mcp``
SDK's own server-side auth (``tests/fakes/mcp_oauth_server.py``: authorization server and
protected Streamable HTTP server on loopback, approving at once). What a user notices:
``iris mcp login`` prints a link and says one line once the browser came back; the tokens are
kept owner-only; the server's tools are offered in the next turn; a token past its time is
refreshed (and kept) without asking; a revoked one says one line, the tools go unoffered, the
turn goes on; the tokens never show in a log."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from iris.agent import Agent, TurnRequest
from iris.agent.mcp.oauth import TokenFile
from iris.config import McpServerConfig
from iris.events import ToolEnded
from tests.agent.mcp_turns import call, offered, tool_result, until
from tests.agent.turns import USER, collect
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import ROOT, http_server
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(90)

SERVER = "tests.fakes.mcp_oauth_server"


@pytest.fixture
def protected(tmp_path: Path) -> Iterator[str]:
    """The protected MCP server's URL (``…/mcp``)."""
    with http_server(tmp_path, SERVER) as url:
        yield url


def login(tmp_path: Path, url: str, **server: Any) -> str:
    """``iris mcp login web`` as a person runs it: the printed link is opened (the fake
    approves at once and redirects to the loopback callback); its output."""
    config = tmp_path / "config.yaml"
    entry = {"url": url, "auth": "oauth", **server}
    store = {"path": str(tmp_path / "iris.db")}
    config.write_text(yaml.safe_dump({"store": store, "mcp_servers": {"web": entry}}))
    process = subprocess.Popen(
        [sys.executable, "-m", "iris.cli", "mcp", "login", "web", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "IRIS_TEST_SECRET": "test-secret"},
    )
    assert process.stdout is not None
    lines: list[str] = []
    for line in process.stdout:
        lines.append(line)
        if line.strip().startswith("http"):
            page = httpx.get(line.strip(), follow_redirects=True, timeout=30)
            assert page.status_code == 200 and "Signed in" in page.text
            break
    rest, _ = process.communicate(timeout=60)
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    return output


def token_file(tmp_path: Path) -> Path:
    return tmp_path / "mcp-auth" / "web.json"


def stored(tmp_path: Path) -> dict[str, Any]:
    return json.loads(token_file(tmp_path).read_text())


def admin(url: str, what: str) -> Any:
    base = url.removesuffix("/mcp")
    if what == "grants":
        return httpx.get(f"{base}/admin/grants").json()
    return httpx.post(f"{base}/admin/{what}").json()


@pytest.fixture
async def started(upstream: FakeUpstream, make_config: MakeConfig) -> AsyncIterator[Any]:
    agents: list[Agent] = []

    async def start(url: str) -> Agent:
        servers = {"web": {"url": url, "auth": "oauth"}}
        agent = Agent(make_config(upstream.base_url, mcp_servers=servers))
        agents.append(agent)
        await agent.start_tools()
        return agent

    yield start
    for agent in agents:
        await agent.aclose()


def lines_of(agent: Agent) -> list[str]:
    assert agent.mcp is not None
    return agent.mcp.lines()


async def test_login_prints_a_link_keeps_the_tokens_owner_only_and_the_tools_are_offered(
    tmp_path: Path, protected: str, started: Any, upstream: FakeUpstream, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    output = login(tmp_path, protected)
    assert "Open this link to sign in to web" in output
    assert output.strip().splitlines()[-1].startswith("Signed in to web: 1 tools")
    assert stat.S_IMODE(token_file(tmp_path).stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file(tmp_path).parent.stat().st_mode) == 0o700
    tokens = stored(tmp_path)["tokens"]
    assert admin(protected, "grants") == {"registration": 1, "authorization_code": 1}

    agent = await started(protected)
    upstream.script(call("mcp_web_hello", {}), text("done"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert "mcp_web_hello" in offered(upstream, 0)
    assert tool_result(upstream, 1) == "hello from the protected server"
    assert any(isinstance(e, ToolEnded) and e.ok for e in events)
    logged = caplog.text + output
    assert tokens["access_token"] not in logged and tokens["refresh_token"] not in logged


async def test_a_token_past_its_time_is_refreshed_before_use_and_kept(
    tmp_path: Path, protected: str, started: Any, upstream: FakeUpstream, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    login(tmp_path, protected)
    first = stored(tmp_path)
    # An hour later: the token's stored expiry has passed.
    token_file(tmp_path).write_text(json.dumps({**first, "expires_at": time.time() - 1}))
    agent = await started(protected)
    upstream.script(call("mcp_web_hello", {}), text("done"))
    await collect(agent, TurnRequest(messages=USER))
    assert tool_result(upstream, 1) == "hello from the protected server"
    assert admin(protected, "grants")["refresh_token"] == 1
    second = stored(tmp_path)
    assert second["tokens"]["access_token"] != first["tokens"]["access_token"]
    assert second["expires_at"] > time.time() + 3000
    assert stat.S_IMODE(token_file(tmp_path).stat().st_mode) == 0o600

    admin(protected, "expire")  # the server drops its access tokens: refreshed on its 401
    upstream.script(call("mcp_web_hello", {}), text("done"))
    await collect(agent, TurnRequest(messages=USER))
    assert tool_result(upstream, 3) == "hello from the protected server"
    assert admin(protected, "grants")["refresh_token"] == 2
    third = stored(tmp_path)["tokens"]
    assert third["access_token"] != second["tokens"]["access_token"]
    for tokens in (first["tokens"], second["tokens"], third):
        assert tokens["access_token"] not in caplog.text
        assert tokens["refresh_token"] not in caplog.text


async def test_a_revoked_sign_in_says_one_line_and_the_tools_go_unoffered(
    tmp_path: Path, protected: str, started: Any, upstream: FakeUpstream, caplog: Any
) -> None:
    login(tmp_path, protected)
    agent = await started(protected)
    admin(protected, "revoke")
    caplog.set_level(logging.WARNING)
    upstream.script(call("mcp_web_hello", {}), text("sorry"), text("later"))
    events = await collect(agent, TurnRequest(messages=USER))
    assert "sign-in needed" in tool_result(upstream, 1)
    assert "iris mcp login web" in tool_result(upstream, 1)
    assert any(isinstance(e, ToolEnded) and not e.ok for e in events)
    await until(agent, lambda: any("sign-in needed" in line for line in lines_of(agent)))
    await collect(agent, TurnRequest(messages=USER))
    assert "mcp_web_hello" not in offered(upstream, 2)
    said = [r for r in caplog.records if "web" in r.getMessage() and r.levelno >= logging.WARNING]
    assert len(said) == 1 and "sign-in needed" in said[0].getMessage()


async def test_a_server_never_signed_in_waits_for_a_sign_in_without_a_request(
    tmp_path: Path, protected: str, started: Any, upstream: FakeUpstream
) -> None:
    agent = await started(protected)
    assert lines_of(agent) == [
        "mcp web: sign-in needed: run `iris mcp login web` on the server, or /signin web in "
        "the web app"
    ]
    upstream.script(text("hi"))
    await collect(agent, TurnRequest(messages=USER))
    assert "mcp_web_hello" not in offered(upstream, 0)
    assert admin(protected, "grants") == {}


async def test_a_client_id_registered_by_hand_signs_in_without_registration(
    tmp_path: Path, protected: str
) -> None:
    login(tmp_path, protected, client_id="iris-test", client_secret_env="IRIS_TEST_SECRET")
    assert admin(protected, "grants") == {"authorization_code": 1}
    assert "client" not in stored(tmp_path)  # the configured client is not copied


def test_logout_forgets_the_tokens(tmp_path: Path, protected: str) -> None:
    login(tmp_path, protected)
    config = str(tmp_path / "config.yaml")
    ran = subprocess.run(
        [sys.executable, "-m", "iris.cli", "mcp", "logout", "web", "--config", config],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.stdout.strip() == "web: signed out" and not token_file(tmp_path).exists()


@given(lifetime=st.integers(min_value=1, max_value=10**7))
def test_a_token_is_refreshed_before_it_expires_never_before_half_its_life(lifetime: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tokens = TokenFile(Path(folder), "web", McpServerConfig(url="http://h/mcp", auth="oauth"))
        before = time.time()
        asyncio.run(tokens.set_tokens(OAuthToken(access_token="a", expires_in=lifetime)))
        refresh_at = tokens.refresh_at()
        assert refresh_at is not None
        assert before + lifetime / 2 <= refresh_at + 0.001
        assert refresh_at <= time.time() + lifetime - min(60, lifetime / 2) + 0.001


async def test_a_damaged_token_file_reads_as_not_signed_in(tmp_path: Path) -> None:
    config = McpServerConfig(url="http://h/mcp", auth="oauth")
    tokens = TokenFile(tmp_path, "web", config)
    for damage in ("", "{", "[]", '{"tokens": {"token_type": "Bearer"}}'):
        tokens.path.write_text(damage)
        assert not tokens.signed_in() and await tokens.get_tokens() is None
    client = OAuthClientInformationFull(
        client_id="c", redirect_uris=[AnyUrl("http://127.0.0.1:5/callback")]
    )
    await tokens.set_client_info(client)
    assert stat.S_IMODE(tokens.path.stat().st_mode) == 0o600
    assert await tokens.get_client_info() == client
    other = TokenFile(tmp_path, "web", config, redirect_uri="http://127.0.0.1:6/callback")
    assert await other.get_client_info() is None  # registered for another redirect: anew


def test_a_refused_sign_in_says_why_in_one_line_and_keeps_nothing(
    tmp_path: Path, protected: str
) -> None:
    config = tmp_path / "config.yaml"
    store = {"path": str(tmp_path / "iris.db")}
    servers = {"web": {"url": protected, "auth": "oauth"}}
    config.write_text(yaml.safe_dump({"store": store, "mcp_servers": servers}))
    process = subprocess.Popen(
        [sys.executable, "-m", "iris.cli", "mcp", "login", "web", "--config", str(config)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    link = next(line.strip() for line in process.stdout if line.strip().startswith("http"))
    query = httpx.URL(link).params
    # The person says no: the authorization server redirects with an error, not a code.
    denied = httpx.get(query["redirect_uri"], params={"error": "access_denied", "state": "x"})
    assert denied.status_code == 200 and "Sign-in refused" in denied.text
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 1
    said = rest.strip().splitlines()[-1]
    assert said == "iris: sign-in to web failed: the authorization server said: access_denied"
    assert "Traceback" not in rest and "OAuth flow error" not in rest
    assert not (tmp_path / "mcp-auth" / "web.json").exists() or not stored(tmp_path).get("tokens")


async def test_a_process_whose_token_another_refreshed_takes_the_new_one(
    tmp_path: Path, protected: str, started: Any, upstream: FakeUpstream
) -> None:
    """Two processes (``--workers 2``) on one token file: when the first refreshes (and the
    refresh token rotates), the second, refused with the old token, reads the new one instead
    of refreshing with a refresh token that no longer works."""
    login(tmp_path, protected)
    first, second = await started(protected), await started(protected)
    admin(protected, "expire")
    for agent, n in ((first, 1), (second, 3)):
        upstream.script(call("mcp_web_hello", {}), text("done"))
        await collect(agent, TurnRequest(messages=USER))
        assert tool_result(upstream, n) == "hello from the protected server"
    assert admin(protected, "grants")["refresh_token"] == 1
    assert all("connected" in lines_of(agent)[0] for agent in (first, second))
