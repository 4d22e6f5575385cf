"""The endpoints clients call besides create: a response's input items (paged as OpenAI pages
them), deleting a response, one model by id — through the openai SDK."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai import BadRequestError, NotFoundError, OpenAI

from tests.api.conftest import StartIris
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def client(iris_server: StartIris) -> Iterator[OpenAI]:
    server = iris_server()
    with OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=10) as c:
        yield c


def test_input_items_list_the_request_input_newest_first_and_page(
    client: OpenAI, upstream: FakeUpstream
) -> None:
    upstream.script(text("ok"))
    response = client.responses.create(
        model="fake-model",
        input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "one"},
            {"role": "user", "content": [{"type": "input_text", "text": "two"}]},
        ],
    )
    listed = client.responses.input_items.list(response.id)
    texts = [item.content[0].text for item in listed.data]  # type: ignore[union-attr]
    assert texts == ["two", "one", "Be brief."]  # OpenAI's default order: newest first
    assert all(item.id for item in listed.data)
    first = client.responses.input_items.list(response.id, limit=2, order="asc")
    assert [i.content[0].text for i in first.data] == ["Be brief.", "one"]  # type: ignore[union-attr]
    assert first.has_more is True
    # The SDK's pager follows ``after`` to the end.
    every = list(client.responses.input_items.list(response.id, limit=1, order="asc"))
    assert [i.content[0].text for i in every] == ["Be brief.", "one", "two"]  # type: ignore[union-attr]


def test_input_items_of_a_string_input_and_of_a_reference(
    client: OpenAI, upstream: FakeUpstream
) -> None:
    upstream.script(text("Hi Ada."), text("Ada."))
    first = client.responses.create(model="fake-model", input="I am Ada")
    listed = client.responses.input_items.list(first.id)
    assert [(i.type, i.role) for i in listed.data] == [("message", "user")]  # type: ignore[union-attr]
    second = client.responses.create(
        model="fake-model",
        input=[
            {"type": "item_reference", "id": first.output[0].id},  # type: ignore[arg-type,union-attr]
            {"role": "user", "content": "who?"},
        ],
    )
    items = client.responses.input_items.list(second.id, order="asc").data
    assert items[0].id == first.output[0].id and items[0].type == "message"


def test_delete_forgets_a_response(client: OpenAI, upstream: FakeUpstream) -> None:
    upstream.script(text("gone soon"))
    response = client.responses.create(model="fake-model", input="hi")
    client.responses.delete(response.id)
    with pytest.raises(NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(NotFoundError):
        client.responses.input_items.list(response.id)
    with pytest.raises(NotFoundError):  # its items cannot be referenced any more
        client.responses.create(
            model="fake-model",
            input=[{"type": "item_reference", "id": response.output[0].id}],  # type: ignore[list-item,union-attr]
        )
    with pytest.raises(NotFoundError):
        client.responses.delete(response.id)


def test_a_model_by_id(client: OpenAI) -> None:
    model = client.models.retrieve("fake-model")
    assert (model.id, model.object) == ("fake-model", "model")
    with pytest.raises(NotFoundError) as caught:
        client.models.retrieve("gpt-nope")
    assert caught.value.body["code"] == "model_not_found"  # type: ignore[index]


@pytest.mark.parametrize(
    ("query", "param"),
    [({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"order": "up"}, "order")],
)
def test_bad_paging_is_a_400_naming_it(
    client: OpenAI, upstream: FakeUpstream, query: dict[str, object], param: str
) -> None:
    upstream.script(text("ok"))
    response = client.responses.create(model="fake-model", input="hi")
    with pytest.raises(BadRequestError) as caught:
        client.responses.input_items.list(response.id, extra_query=query)
    assert caught.value.body["param"] == param  # type: ignore[index]
