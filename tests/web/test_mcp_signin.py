"""Sign-in to an ``auth: oauth`` MCP server from the browser app: ``/signin web`` shows the
link, clicking it opens the authorization server in a new tab, which comes back to ``iris
serve``'s callback page saying it is signed in; the server's tool then runs in the chat.
Against the real ``iris serve``, the protected server written with the ``mcp`` SDK's
server-side auth (``tests/fakes/mcp_oauth_server.py``, approving at once) and real chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.fakes.mcp_launch import http_server
from tests.fakes.upstream import text, tool_call

from .conftest import Web, send, web_on

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    folder = tmp_path_factory.mktemp("signin")
    with http_server(folder, "tests.fakes.mcp_oauth_server") as url:
        servers = {"web": {"url": url, "auth": "oauth"}}
        with web_on(folder, mcp_servers=servers) as running:
            yield running


def test_the_signin_link_opens_signs_in_and_the_tool_runs(web: Web) -> None:
    folder = web.config.parent
    page = web.open("signin")
    send(page, "/signin web")
    link = page.locator(".bubble a.command-link")
    link.wait_for(timeout=20_000)
    assert link.get_attribute("target") == "_blank"
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.wait_for_load_state()
    tab.get_by_text("Signed in to web: 1 tools").wait_for(timeout=20_000)
    assert tab.url.startswith(f"{web.url}/iris/mcp/callback?")

    web.upstream.script(tool_call("mcp_web_hello", ["{}"]), text("It said hello."))
    send(page, "/status")
    page.get_by_text("mcp web: connected").wait_for(timeout=20_000)
    send(page, "say hello")
    page.get_by_text("It said hello.").wait_for(timeout=20_000)
    told = web.upstream.requests[-1].body["messages"][-1]
    assert told == {
        "role": "tool",
        "tool_call_id": told["tool_call_id"],
        "content": "hello from the protected server",
    }
    tokens = json.loads((folder / "mcp-auth" / "web.json").read_text())["tokens"]
    logged = "\n".join(web.server.drain())
    assert "code=" not in logged and "sign-in needed" in logged
    assert tokens["access_token"] not in logged and tokens["refresh_token"] not in logged
