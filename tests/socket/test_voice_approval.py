"""A voice turn's tool that needs a person's yes, asked on the devices of the owner chat: the
real server on 127.0.0.1 with its API (``iris-voice``, asked as Home Assistant's ``llama_cpp``
integration asks, with the official openai SDK), the Home Assistant platform on the stand-in,
and a paired device on the owner chat speaking the iris protocol with ``websockets``.

What a person notices: the speaker says where to approve and stops; the phone shows the call
(``approval.request``); approved, Home Assistant carries it out and the answer is announced;
denied, nothing happens in the house and the announced answer says it was not done; with no
owner chat the speaker refuses in one sentence and nothing runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from openai import AsyncOpenAI

from iris.surfaces.api.voice import ACK
from iris.surfaces.api.voice_later import APPROVE, REFUSED
from tests.fakes.homeassistant import HomeAssistant
from tests.fakes.push_service import PushService
from tests.fakes.scenarios import Received, Scenario
from tests.fakes.upstream import FakeUpstream, responder, text, tool_call
from tests.interop.home_assistant_steps import ASSIST_TOOLS, KEY, ask
from tests.scale.processes import until_async
from tests.socket.conftest import Device, IrisServer, StartServer

pytestmark = pytest.mark.timeout(30)

ASKED = ["HassTurnOff"]  # voice.approval: turning things off (the alarm, a lock) asks


def model(request: Received) -> Scenario:
    """Turns the alarm off when asked; then says what happened, as the tool result says."""
    last = request.body["messages"][-1]
    if last["role"] != "tool":
        return tool_call("HassTurnOff", ['{"name": ', '"alarm"}'], "call_alarm")
    if str(last["content"]).startswith("not approved"):
        return text("I did **not** turn the alarm off: it was not approved.")
    return text("The alarm is off.")


@pytest.fixture
async def ha() -> AsyncIterator[HomeAssistant]:
    async with HomeAssistant(states={"switch.alarm": "on"}) as fake:
        yield fake


async def voice_server(
    iris_server: StartServer,
    upstream: FakeUpstream,
    ha: HomeAssistant,
    wait: float = 20,
    **voice: Any,
) -> tuple[IrisServer, AsyncOpenAI]:
    """``iris serve`` with its API, the iris socket and Home Assistant; ``wait``: seconds an
    approval waits (``tools.approval.timeout``)."""
    upstream.default = responder(model)
    house: dict[str, Any] = {"enabled": True, "url": ha.url, "token": ha.token}
    house["voice"] = {"ack_after": 20, "approval": ASKED, **voice}
    server = await iris_server(
        platforms={"api_server": {"enabled": True, "api_key": KEY}, "homeassistant": house},
        tools={"approval": {"mode": "ask", "timeout": wait}},
    )
    await ha.wait_until(lambda: ha.connections)
    base = server.url.replace("ws://", "http://").removesuffix("/iris/ws") + "/v1"
    return server, AsyncOpenAI(base_url=base, api_key=KEY, max_retries=0)


async def phone_on_main(server: IrisServer) -> Device:
    token = server.surface.runtime.devices.add("phone")
    return await server.connect(token)  # the default chat: main


async def decide(phone: Device, asked: dict[str, Any], decision: str) -> None:
    """The phone answers the approval request ``asked``."""
    await phone.send(
        {"type": "approval.respond", "approval_id": asked["approval_id"], "decision": decision}
    )


async def test_approved_on_the_phone_it_runs_in_the_house_and_the_answer_is_announced(
    iris_server: StartServer, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    server, client = await voice_server(iris_server, upstream, ha, owner_chat="main")
    phone = await phone_on_main(server)
    async with client:
        said = await ask(client, "Turn off the alarm")
    assert said == APPROVE  # one sentence that says where; the call never went to Assist
    asked = (await phone.until("approval.request"))[-1]
    assert asked["name"] == "HassTurnOff" and asked["args"] == {"name": "alarm"}
    assert asked["preview"].endswith("(runs in Home Assistant, asked by voice)")
    assert ha.intents == [] and ha.states["switch.alarm"] == "on"  # nothing before the yes
    await decide(phone, asked, "once")
    resolved = (await phone.until("approval.resolved"))[-1]
    assert (resolved["decision"], resolved["by"]) == ("once", "phone")
    await ha.wait_until(lambda: ha.notifications)
    assert ha.intents == [
        {"name": "HassTurnOff", "data": {"name": "alarm"}, "assistant": "conversation"}
    ]
    assert ha.states["switch.alarm"] == "off"
    [note] = ha.notifications
    assert note.message == "The alarm is off."


async def test_denied_nothing_happens_and_the_announced_answer_says_it_was_not_done(
    iris_server: StartServer, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    server, client = await voice_server(iris_server, upstream, ha, owner_chat="main")
    phone = await phone_on_main(server)
    async with client:
        assert await ask(client, "Turn off the alarm") == APPROVE
    asked = (await phone.until("approval.request"))[-1]
    await decide(phone, asked, "deny")
    await ha.wait_until(lambda: ha.notifications)
    assert ha.intents == [] and ha.states["switch.alarm"] == "on"
    told = upstream.requests[1].body["messages"][-1]["content"]
    assert told.startswith("not approved (denied by phone)")
    [note] = ha.notifications
    assert note.message == "I did not turn the alarm off: it was not approved."


async def test_without_an_owner_chat_it_is_refused_in_one_sentence_and_nothing_runs(
    iris_server: StartServer, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    server, client = await voice_server(iris_server, upstream, ha)
    async with client:
        assert await ask(client, "Turn off the alarm") == REFUSED
    assert len(upstream.requests) == 1  # the turn stopped at the call: no round after it
    assert server.surface.runtime.approvals.pending_now("iris:main") == []
    assert ha.intents == [] and ha.states["switch.alarm"] == "on"


async def test_allowed_in_the_chat_the_next_voice_request_goes_to_assist_unasked(
    iris_server: StartServer, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    server, client = await voice_server(iris_server, upstream, ha, owner_chat="main")
    phone = await phone_on_main(server)
    async with client:
        assert await ask(client, "Turn off the alarm") == APPROVE
        asked = (await phone.until("approval.request"))[-1]
        await decide(phone, asked, "chat")
        await ha.wait_until(lambda: ha.notifications)
        # Allowed in the owner chat: the call goes back to Home Assistant, which runs it.
        stream = await client.chat.completions.create(
            model="iris-voice",
            messages=[{"role": "user", "content": "Turn off the alarm again"}],
            tools=ASSIST_TOOLS,
            stream=True,
        )
        calls = [
            c
            for chunk in [c async for c in stream]
            if chunk.choices
            for c in chunk.choices[0].delta.tool_calls or []
        ]
    assert calls[0].function is not None and calls[0].function.name == "HassTurnOff"
    assert len(ha.intents) == 1  # the first one only: Assist runs the second itself


def slow_model(request: Received) -> Scenario:
    """``model``, but its call comes after the acknowledgement (held back by its thinking)."""
    if request.body["messages"][-1]["role"] == "tool":
        return model(request)
    thinking = ["The alarm, then."]
    return tool_call(
        "HassTurnOff", ['{"name": "alarm"}'], "call_a", reasoning=thinking, gate_after=0
    )


async def test_a_call_after_the_acknowledgement_asks_too_and_unanswered_it_is_not_done(
    iris_server: StartServer, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    # Nobody answers within a second: the broker's own clock ends the request.
    server, client = await voice_server(
        iris_server, upstream, ha, wait=1.0, owner_chat="main", ack_after=0.3
    )
    upstream.default = responder(slow_model)
    phone = await phone_on_main(server)
    async with client:
        assert await ask(client, "Turn off the alarm") == ACK
    upstream.release()
    asked = (await phone.until("approval.request"))[-1]
    assert asked["name"] == "HassTurnOff"
    resolved = (await phone.until("approval.resolved"))[-1]
    assert (resolved["decision"], resolved["by"]) == ("timeout", "timeout")
    await ha.wait_until(lambda: ha.notifications)
    assert ha.intents == [] and ha.states["switch.alarm"] == "on"
    assert ha.notifications[0].message == "I did not turn the alarm off: it was not approved."


async def test_a_phone_away_from_the_app_is_told_by_web_push(
    iris_server: StartServer, upstream: FakeUpstream, ha: HomeAssistant
) -> None:
    async with PushService() as service:
        server, client = await voice_server(iris_server, upstream, ha, owner_chat="main")
        phone = await phone_on_main(server)
        browser = service.browser("phone")
        await phone.send({"type": "push.subscribe", "subscription": browser.subscription()})
        push = server.surface.runtime.push
        assert push is not None

        async def kept() -> bool:  # the frame has no answer: the store says when it was kept
            return bool(await push.of_chat("main"))

        await until_async(kept, "the push subscription")
        await phone.close()  # the phone is in a pocket
        async with client:
            assert await ask(client, "Turn off the alarm") == APPROVE
        (pushed,) = await service.wait_for(1)
    assert pushed["to"] == "phone" and pushed["chat_id"] == "main"
    assert pushed["title"] == "Approval needed"
    assert pushed["body"] == "HassTurnOff waits for your approval"
