"""An MCP server's request for input in the browser app: the form drawn from its schema (an
enum as a choice, an integer, required fields marked), an answer that does not fit refused
with the reason and the form kept, a fitting one reaching the server. Against the real
``iris serve``, the fake MCP server (``tests/fakes/mcp_server.py``, written with the ``mcp``
SDK) as its stdio child, and real chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import text, tool_call

from .conftest import Web, send, web_on

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    with web_on(tmp_path_factory.mktemp("elicit"), mcp_servers={"fake": stdio()}) as running:
        yield running


def test_the_form_is_asked_checked_and_its_answer_reaches_the_server(web: Web) -> None:
    web.upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    page = web.open("elicit-form")
    send(page, "paint it")
    card = page.locator(".bubble.elicitation .elicitation.pending")
    card.wait_for(timeout=20_000)
    assert card.locator(".elicitation-head").text_content() == "fake asks: Which colour?"
    labels = [s.text_content() for s in card.locator(".elicitation-field > span").all()]
    assert labels == ["Color *", "Coats *"]  # the fields' titles, required marked
    options = card.locator("select[name=color] option").all_text_contents()
    assert options == ["red", "green", "blue"]
    card.locator("select[name=color]").select_option("green")
    card.locator("input[name=coats]").fill("9")
    card.locator(".elicitation-accept").click()
    note = page.locator(".elicitation-note")
    note.wait_for()
    assert note.text_content() == "'coats' must be at most 5"
    card.locator("input[name=coats]").fill("2")
    card.locator(".elicitation-accept").click()
    page.locator(".elicitation-outcome").wait_for()
    assert (page.locator(".elicitation-outcome").text_content() or "").startswith("Answered")
    page.wait_for_function("() => !window.__iris.view.typing", timeout=20_000)
    told = web.upstream.requests[-1].body["messages"][-1]
    assert told["role"] == "tool" and told["content"] == "painted green x2"
