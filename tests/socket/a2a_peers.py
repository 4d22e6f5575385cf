"""The A2A side of the socket tests: ``iris serve`` with its A2A server on, and the official
``a2a-sdk`` client pointed at it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest

from tests.socket.conftest import IrisServer, StartServer

KEY = "a2a-key-0123456789abcdef"


def base_url(server: IrisServer) -> str:
    return server.url.replace("ws://", "http://").replace("/iris/ws", "")


async def a2a_server(iris_server: StartServer, **a2a: Any) -> IrisServer:
    return await iris_server(
        streaming={"enabled": True}, a2a={"enabled": True, "api_key": KEY, **a2a}
    )


@contextlib.asynccontextmanager
async def a2a_client(
    server: IrisServer, *, streaming: bool = True, polling: bool = False
) -> AsyncGenerator[Client]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
    client = await create_client(base_url(server), client_config=config)
    try:
        yield client
    finally:
        await client.close()
        await http.aclose()


def user(
    text_: str, context_id: str | None = None, task_id: str | None = None
) -> SendMessageRequest:
    message = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[Part(text=text_)],
        context_id=context_id or "",
        task_id=task_id or "",
    )
    return SendMessageRequest(message=message)


def reply_text(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)
