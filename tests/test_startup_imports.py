"""What ``iris serve`` loads: a server with no ``mcp_servers:`` and its optional surfaces off
starts and answers on the API and the iris socket without ever importing the MCP SDK (half a
second of every start, and of every test that starts a server), an off surface's SDK, or Web
Push's before a notification is sent.

The server is the real ``iris serve`` process; code run around ``iris.cli`` in it says, as the
process exits, which of the watched packages it had imported by then."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from tests.fakes.served import serve
from tests.fakes.upstream import FakeUpstream, text
from tests.scale.conftest import socket_url
from tests.scale.devices import device
from tests.socket.conftest import TOKEN

pytestmark = pytest.mark.timeout(90)

# The MCP SDK (client, server and its types package), the SDKs of surfaces that are off, and
# Web Push's (it brings requests) while no browser is subscribed.
WATCHED = ("mcp", "mcp_types", "a2a", "slack_sdk", "telegram", "discord", "nio", "pywebpush")
ENTRY = (
    "-c",
    "import atexit, sys\n"
    "def loaded():\n"
    f"    found = [name for name in {WATCHED!r} if name in sys.modules]\n"
    "    print('loaded:', *found, file=sys.stderr, flush=True)\n"
    "atexit.register(loaded)\n"
    "from iris.cli import main\n"
    "sys.exit(main())\n",
)
API_KEY = "sk-api-key-for-tests"


async def test_a_server_without_mcp_servers_never_imports_the_mcp_sdk(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    server, url = await asyncio.to_thread(
        serve,
        tmp_path,
        upstream.base_url,
        entry=ENTRY,
        platforms={
            "api_server": {"api_key": API_KEY},
            "iris": {"enabled": True, "tokens": [TOKEN]},
        },
        streaming={"enabled": True},
    )
    try:
        upstream.script(text("Hello", " there"))
        with OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=15) as client:
            chunks = await asyncio.to_thread(
                client.chat.completions.create,
                model="fake-model",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
            )
            reply = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert reply == "Hello there"

        phone = await device(socket_url(url))
        upstream.script(text("from ", "the ", "socket"))
        await phone.send({"type": "message.send", "text": "hi"})
        stop = [f for f in await phone.turn() if f["type"] == "message.stop"]
        assert stop[0]["final_text"] == "from the socket"
        await phone.ws.close()

        # /mcp (MCP server mode) is there; a request it refuses does not load the SDK either.
        async with httpx.AsyncClient() as http:
            refused = await http.post(f"{url}/mcp", json={})
        assert refused.status_code == 401

        server.process.terminate()  # a clean exit: the code around iris.cli says what it loaded
        await asyncio.to_thread(server.wait_for, "loaded:")
        assert server.log[-1].split() == ["loaded:"]
        assert await asyncio.to_thread(server.process.wait, 10) == 0
    finally:
        server.stop()
