"""The Conversations API through the openai SDK, and ``/v1/responses`` with ``conversation``:
the model reads the conversation's items as history, and the turn's items join it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from tests.api.conftest import StartIris
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.interop.conftest import upstream_bodies

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def client(iris_server: StartIris) -> Iterator[OpenAI]:
    server = iris_server()
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def said(body: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["role"], m.get("content")) for m in body["messages"]]


def test_conversation_lifecycle(client: OpenAI) -> None:
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "I am Ada"}],
        metadata={"topic": "names"},
    )
    assert conversation.id.startswith("conv_") and conversation.metadata == {"topic": "names"}
    assert client.conversations.retrieve(conversation.id).id == conversation.id
    updated = client.conversations.update(conversation.id, metadata={"topic": "people"})
    assert updated.metadata == {"topic": "people"}

    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "assistant", "content": "Hi Ada."},
            {"type": "message", "role": "user", "content": "Remember me."},
        ],
    )
    assert len(added.data) == 2
    listed = client.conversations.items.list(conversation.id, order="asc")
    assert [i.content[0].text for i in listed.data] == [  # type: ignore[union-attr]
        "I am Ada",
        "Hi Ada.",
        "Remember me.",
    ]
    one = client.conversations.items.retrieve(added.data[0].id, conversation_id=conversation.id)
    assert one.id == added.data[0].id
    after = client.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
    assert after.id == conversation.id
    left = client.conversations.items.list(conversation.id, order="asc").data
    assert [i.content[0].text for i in left] == ["I am Ada", "Remember me."]  # type: ignore[union-attr]

    deleted = client.conversations.delete(conversation.id)
    assert deleted.deleted is True
    with pytest.raises(NotFoundError):
        client.conversations.retrieve(conversation.id)
    with pytest.raises(NotFoundError):
        client.conversations.items.list(conversation.id)


def test_a_response_in_a_conversation_reads_and_extends_it(
    client: OpenAI, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hi Ada."), text("You are Ada."))
    conversation = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "I am Ada"}]
    )
    first = client.responses.create(model="fake-model", conversation=conversation.id, input="Hello")
    assert first.conversation is not None and first.conversation.id == conversation.id
    second = client.responses.create(
        model="fake-model", conversation={"id": conversation.id}, input="Who am I?"
    )
    assert second.output_text == "You are Ada."
    bodies = upstream_bodies(upstream)
    assert said(bodies[0]) == [("user", "I am Ada"), ("user", "Hello")]
    assert said(bodies[1]) == [
        ("user", "I am Ada"),
        ("user", "Hello"),
        ("assistant", "Hi Ada."),
        ("user", "Who am I?"),
    ]
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "user"),
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert items[-1].id == second.output[0].id


def test_client_tool_calls_round_trip_in_a_conversation(
    client: OpenAI, upstream: FakeUpstream
) -> None:
    tool: Any = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}
    upstream.script(tool_call("get_weather", ['{"city": "Paris"}']), text("Sunny."))
    conversation = client.conversations.create()
    first = client.responses.create(
        model="fake-model", conversation=conversation.id, input="Weather?", tools=[tool]
    )
    call = first.output[-1]
    assert call.type == "function_call"
    final = client.responses.create(
        model="fake-model",
        conversation=conversation.id,
        tools=[tool],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
    )
    assert final.output_text == "Sunny."
    sent = upstream_bodies(upstream)[1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}


def test_conversation_errors(client: OpenAI, upstream: FakeUpstream) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.responses.create(model="fake-model", conversation="conv_nope", input="hi")
    assert missing.value.body["code"] == "conversation_not_found"  # type: ignore[index]
    upstream.script(text("ok"))
    first = client.responses.create(model="fake-model", input="hi")
    conversation = client.conversations.create()
    with pytest.raises(BadRequestError) as both:
        client.responses.create(
            model="fake-model",
            conversation=conversation.id,
            previous_response_id=first.id,
            input="hi",
        )
    assert both.value.body["param"] == "conversation"  # type: ignore[index]
    with pytest.raises(BadRequestError) as bad_item:
        client.conversations.items.create(
            conversation.id,
            items=[{"type": "message", "role": "robot", "content": "x"}],  # type: ignore[list-item]
        )
    assert bad_item.value.body["param"] == "items[0].role"  # type: ignore[index]
    assert not upstream.pending
