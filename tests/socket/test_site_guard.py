"""The iris socket refuses a handshake from a foreign web page (``Origin``) or under a name
that is not the server's (``Host``: DNS rebinding) with 403, before it is accepted."""

from __future__ import annotations

import asyncio

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.socket.conftest import WAIT, StartServer


@pytest.mark.parametrize(
    "headers",
    [{"Origin": "http://evil.example"}, {"Origin": "null"}],
    ids=["foreign-origin", "null-origin"],
)
async def test_a_foreign_page_cannot_open_the_socket(
    iris_server: StartServer, headers: dict[str, str]
) -> None:
    server = await iris_server()
    with pytest.raises(InvalidStatus) as refused:
        async with connect(server.url, additional_headers=headers, open_timeout=WAIT):
            pass
    assert refused.value.response.status_code == 403


async def test_a_rebound_name_cannot_open_the_socket(iris_server: StartServer) -> None:
    server = await iris_server()
    port = int(server.url.split(":")[2].split("/")[0])
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET /iris/ws HTTP/1.1\r\nHost: evil.example:%d\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        b"Sec-WebSocket-Version: 13\r\n\r\n" % port
    )
    async with asyncio.timeout(WAIT):
        status = await reader.readline()
    writer.close()
    assert status.split()[1] == b"403"


async def test_the_page_iris_serves_and_listed_origins_may(iris_server: StartServer) -> None:
    server = await iris_server(server={"cors_origins": ["https://app.example"]})
    same = "http://" + server.url.split("/")[2]
    for origin in (same, "https://app.example"):
        async with connect(server.url, origin=origin, open_timeout=WAIT) as ws:  # type: ignore[arg-type]
            await ws.send('{"type": "hello", "token": "iris-device-token-t1"}')
            assert '"ready"' in str(await ws.recv())
