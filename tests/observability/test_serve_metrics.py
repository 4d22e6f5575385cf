"""``GET /metrics`` of a real ``iris serve`` after real turns on the API, the iris socket and
Telegram (the Bot API fake over real sockets): the counts match what ran, the ids stay out of
the labels, and each turn's end is one structured log line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

from tests.fakes.served import serve
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, gated, text, tool_call
from tests.observability.helpers import METRICS, TOKEN, log_lines, scrape
from tests.scale.conftest import socket_url
from tests.scale.devices import device
from tests.socket.conftest import TOKEN as DEVICE_TOKEN

pytestmark = pytest.mark.timeout(90)

# Ids no float in the metrics text can contain by chance (a timestamp's digits once held 777).
CHAT, USER = 4242424201, 7777777301
API_KEY = "sk-api-key-for-tests"  # agent tools run on the API only behind a key


def ask(url: str, prompt: str, *, stream: bool = False, model: str = "fake-model") -> str:
    with OpenAI(base_url=f"{url}/v1", api_key=API_KEY, max_retries=0, timeout=15) as client:
        if not stream:
            reply = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}]
            )
            return reply.choices[0].message.content or ""
        chunks = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": prompt}], stream=True
        )
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_counts_after_turns_on_the_api_the_iris_socket_and_telegram(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    (tmp_path / "notes.txt").write_text("the notes")
    async with FakeBotApi() as api:
        server, url = await asyncio.to_thread(
            serve,
            tmp_path,
            upstream.base_url,
            server=METRICS,
            platforms={
                "api_server": {"api_key": API_KEY},
                "iris": {"enabled": True, "tokens": [DEVICE_TOKEN]},
                "telegram": {
                    "enabled": True,
                    "token": api.token,
                    "base_url": api.base_url,
                    "allowed_users": [USER],
                    "poll_timeout": 1,
                },
            },
            streaming={"enabled": True},
            tools={"enabled": ["read_file"], "read_file": {"roots": [str(tmp_path)]}},
        )
        try:
            before = await asyncio.to_thread(scrape, url)
            assert before.value("iris_turns_started_total") == 0

            # The API: one answer, one stream, one turn with a tool call.
            upstream.script(text("one"), text("two ", "three"))
            assert await asyncio.to_thread(ask, url, "a") == "one"
            assert await asyncio.to_thread(ask, url, "b", stream=True) == "two three"
            path = str(tmp_path / "notes.txt")
            upstream.script(tool_call("read_file", [f'{{"path": "{path}"}}']), text("read it"))
            answer = await asyncio.to_thread(ask, url, "c", model="iris-agent")
            assert answer == "read it"

            # The iris socket: a device sends one message and sees its reply.
            phone = await device(socket_url(url))
            upstream.script(text("from ", "the ", "socket"))
            await phone.send({"type": "message.send", "text": "hi"})
            await phone.turn()
            during = await asyncio.to_thread(scrape, url)
            assert during.value("iris_socket_connections") == 1

            # Telegram: one message; its first send meets a 429 (flood control), then lands.
            api.flood("sendMessage", retry_after=1)
            upstream.script(text("from telegram"))
            api.user_says(CHAT, USER, "hello")
            await api.wait_until(lambda: "from telegram" in api.chat(CHAT), within=20)
            await phone.ws.close()

            # Everything the turns recorded is in before the next scrape: the last one to end
            # is the Telegram turn; its line is logged after its last send.
            await asyncio.to_thread(server.wait_for, '"surface": "chat"')
            got = await asyncio.to_thread(scrape, url)
        finally:
            server.stop()

    started = "iris_turns_started_total"
    assert got.value(started, surface="api", model="fake-model") == 3
    assert got.value(started, surface="iris") == 1
    assert got.value(started, surface="chat", platform="telegram") == 1
    assert got.value("iris_turns_ended_total", outcome="complete") == 5
    assert got.value("iris_turns_running") == 0
    assert got.value("iris_time_to_first_token_seconds_count", surface="api") == 3
    assert got.value("iris_turn_duration_seconds_count") == 5
    # Every fake answer reports 5 output tokens; the tool turn made two rounds.
    assert got.value("iris_tokens_total", type="output", surface="api") == 20
    assert got.value("iris_provider_requests_total", status="ok") == 6
    assert got.value("iris_tool_calls_total", tool="read_file", outcome="ok") == 1
    assert got.value("iris_tool_duration_seconds_count", tool="read_file") == 1
    assert got.value("iris_chat_rate_limited_total", platform="telegram", scope="chat") == 1
    assert got.value("iris_chat_platform_calls_total", platform="telegram", status="ok") >= 1
    assert got.value("iris_chat_platform_calls_total", status="rate_limited") == 1
    assert got.value("iris_socket_frames_sent_total", kind="ready") == 1
    assert got.value("iris_socket_frames_sent_total", kind="message.stop") == 1
    assert got.value("iris_socket_bytes_sent_total") > 100
    assert got.value("iris_socket_connections") == 0
    assert got.value("iris_store_frame_appends_total", backend="sqlite") > 3
    assert got.value("iris_api_streams_open") == 0
    # No chat or user id became a label.
    assert str(CHAT) not in got.text and str(USER) not in got.text  # no chat or user as a label

    ends = log_lines(server, "turn.end")
    assert len(ends) == 5
    chat = next(line for line in ends if line["surface"] == "chat")
    assert chat["platform"] == "telegram" and chat["outcome"] == "complete"
    assert chat["output_tokens"] == 5 and chat["model"] == "fake-model"
    assert isinstance(chat["chat"], str) and len(chat["chat"]) == 16
    assert chat["chat"] != str(CHAT) and chat["user"] != str(USER)
    tool_turn = next(line for line in ends if line["tool_calls"] == 1)
    assert tool_turn["surface"] == "api" and tool_turn["reason"] == "stop"
    assert all(isinstance(line["duration_s"], float) for line in ends)


async def test_a_client_that_leaves_mid_stream_is_counted_and_logged(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    server, url = await asyncio.to_thread(serve, tmp_path, upstream.base_url, server=METRICS)
    try:
        upstream.script(gated("first ", "second", after=1))
        body = {
            "model": "fake-model",
            "stream": True,
            "messages": [{"role": "user", "content": "go"}],
        }
        async with (
            httpx.AsyncClient(timeout=10) as client,
            client.stream("POST", f"{url}/v1/chat/completions", json=body) as answer,
        ):
            async for chunk in answer.aiter_text():
                if "first" in chunk:
                    break  # the client stops reading and hangs up mid-reply
        await asyncio.to_thread(server.wait_for, '"event": "turn.cancelled"')
        upstream.release()
        got = await asyncio.to_thread(scrape, url)
    finally:
        server.stop()
    assert got.value("iris_api_client_disconnects_total") == 1
    assert got.value("iris_turns_ended_total", surface="api", outcome="interrupted") == 1
    assert got.value("iris_api_streams_open") == 0
    (cancelled,) = log_lines(server, "turn.cancelled")
    assert cancelled["cause"] == "client_disconnected" and cancelled["surface"] == "api"
    (ended,) = log_lines(server, "turn.end")
    assert ended["turn_id"] == cancelled["turn_id"] and ended["outcome"] == "interrupted"


def test_metrics_need_the_token_and_are_off_by_default(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    server, url = serve(tmp_path, upstream.base_url, server=METRICS)
    try:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
            answer = httpx.get(f"{url}/metrics", headers=headers)
            assert answer.status_code == 401, headers
            assert answer.json()["error"]["code"] == "invalid_metrics_token"
        # Another site's page (DNS rebinding) is refused even with the token.
        rebound = httpx.get(
            f"{url}/metrics",
            headers={"authorization": f"Bearer {TOKEN}", "host": "evil.example"},
        )
        assert rebound.status_code == 403
        assert scrape(url).value("iris_turns_started_total") == 0
    finally:
        server.stop()
    plain, plain_url = serve(tmp_path, upstream.base_url, name="plain.yaml")
    try:
        for path in ("/metrics", "/status"):
            assert httpx.get(f"{plain_url}{path}").status_code == 404
    finally:
        plain.stop()


def test_metrics_without_a_token_refuse_a_public_bind(tmp_path: Path) -> None:
    from iris.config import config_from_dict
    from iris.errors import ConfigError
    from iris.server.asgi import check_bind_safety

    config = config_from_dict(
        {
            "server": {"host": "0.0.0.0", "metrics": {"enabled": True}},
            "platforms": {"api_server": {"api_key": "k" * 32}},
        },
        env={},
    )
    with pytest.raises(ConfigError, match=r"/metrics has no token; set server.metrics.token"):
        check_bind_safety(config)
    config.server.metrics.token = "t"  # a token short enough to guess is refused too
    with pytest.raises(ConfigError, match=r"server.metrics.token is 1 characters"):
        check_bind_safety(config)
    config.server.metrics.token = "t" * 32
    check_bind_safety(config)
