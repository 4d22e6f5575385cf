"""An MCP server asks the person for input (elicitation) on WhatsApp, which has no buttons:
every field is asked by reply. The fake MCP server (``tests/fakes/mcp_server.py``, the ``mcp``
SDK's ``ctx.elicit``) runs as a stdio child of ``iris serve``'s app; the person's answers are
signed webhook POSTs, the questions come back through the Cloud API stand-in.

The question lists the form's fields and, for an enum, its choices numbered; the next message
answers (an enum by number or name, a boolean yes or no); an answer that does not fit is asked
again with the reason; "decline" / "cancel" end the request; nobody answering declines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.chat.approval_chats import tool_result
from tests.chat.whatsapp.harness import OWNER, Served, serve
from tests.conftest import MakeConfig
from tests.fakes.mcp_launch import stdio
from tests.fakes.upstream import FakeUpstream, text, tool_call
from tests.fakes.whatsapp_api import WhatsAppAPI

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def approval_timeout() -> float:
    """``tools.approval.timeout``: long, unless a test parametrizes it shorter."""
    return 60.0


@pytest.fixture
async def served(
    make_config: MakeConfig, upstream: FakeUpstream, api: WhatsAppAPI, approval_timeout: float
) -> AsyncIterator[Served]:
    sections: dict[str, Any] = {
        "tools": {"enabled": [], "approval": {"mode": "off", "timeout": approval_timeout}},
        "mcp_servers": {"fake": stdio()},
    }
    async for running in serve(make_config, upstream, api, sections):
        yield running


async def said(api: WhatsAppAPI, count: int) -> list[str]:
    """Wait until the bot sent the person ``count`` messages; all it sent."""
    await api.wait_until(lambda: len(api.texts_to(OWNER)) >= count, within=30)
    return api.texts_to(OWNER)


async def test_an_enum_by_number_a_wrong_number_asked_again_then_the_tool_gets_the_form(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    await api.user_says(served.url, OWNER, "paint it")
    [colour] = await said(api, 1)
    assert "fake asks: Which colour?" in colour
    assert "Fields: Color *, Coats * (* required); asking 1 of 2." in colour
    assert "Color * (The colour)\n1. red\n2. green\n3. blue" in colour
    assert 'reply "decline" to refuse, "cancel" to dismiss' in colour
    await api.user_says(served.url, OWNER, "2")  # green, by its number
    coats = (await said(api, 2))[1]
    assert "Coats * (How many coats)" in coats and "asking 2 of 2" in coats
    assert "Reply with the answer (a number)" in coats
    await api.user_says(served.url, OWNER, "9")  # past the schema's maximum: asked again
    again = (await said(api, 3))[2]
    assert "⚠️ must be at most 5, please answer again." in again
    assert "Coats *" in again
    await api.user_says(served.url, OWNER, "2")
    await api.wait_until(lambda: "Painted." in api.texts_to(OWNER), within=30)
    assert tool_result(upstream.requests[1]) == "painted green x2"
    assert len(upstream.requests) == 2, "the replies answered the questions, they ran no turn"
    # WhatsApp edits nothing: the request's end is a message of its own.
    assert any("✅ Answered by" in t for t in api.texts_to(OWNER))


async def test_an_enum_by_name_and_a_word_that_is_no_choice_asked_again(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_paint", ["{}"]), text("Painted."))
    await api.user_says(served.url, OWNER, "paint it")
    await said(api, 1)
    await api.user_says(served.url, OWNER, "purple")
    again = (await said(api, 2))[1]
    assert "⚠️ must be one of: 1. red, 2. green, 3. blue, please answer again." in again
    await api.user_says(served.url, OWNER, "Blue")
    await said(api, 3)
    await api.user_says(served.url, OWNER, "1")
    await api.wait_until(lambda: "Painted." in api.texts_to(OWNER), within=30)
    assert tool_result(upstream.requests[1]) == "painted blue x1"


@pytest.mark.parametrize(("answer", "result"), [("yes", "deleted"), ("n", "kept")])
async def test_a_yes_or_no_by_reply(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream, answer: str, result: str
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Done."))
    await api.user_says(served.url, OWNER, "delete a.txt")
    [question] = await said(api, 1)
    assert "fake asks: Delete a.txt?" in question
    assert "Sure * (Really delete it?)\n↩️ Reply yes or no." in question
    assert "Fields:" not in question, "one field: no list of them"
    await api.user_says(served.url, OWNER, answer)
    await api.wait_until(lambda: "Done." in api.texts_to(OWNER), within=30)
    assert tool_result(upstream.requests[1]) == f"{result} a.txt"


@pytest.mark.parametrize(
    ("word", "result", "outcome"),
    [
        ("Decline", "not deleted (decline)", "❌ Declined by"),
        ("cancel", "not deleted (cancel)", "⏹ Cancelled"),
    ],
)
async def test_the_decline_and_cancel_words_reach_the_server(
    served: Served,
    api: WhatsAppAPI,
    upstream: FakeUpstream,
    word: str,
    result: str,
    outcome: str,
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Kept."))
    await api.user_says(served.url, OWNER, "delete a.txt")
    await said(api, 1)
    await api.user_says(served.url, OWNER, word)
    await api.wait_until(lambda: "Kept." in api.texts_to(OWNER), within=30)
    assert tool_result(upstream.requests[1]) == result
    assert any(outcome in t for t in api.texts_to(OWNER))
    assert len(upstream.requests) == 2, "the word answered the question, it ran no turn"


@pytest.mark.parametrize("approval_timeout", [1.0])
async def test_nobody_answering_declines(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_delete", ['{"path": "a.txt"}']), text("Timed out."))
    await api.user_says(served.url, OWNER, "delete a.txt")
    await api.wait_until(lambda: "Timed out." in api.texts_to(OWNER), within=30)
    assert tool_result(upstream.requests[1]) == "not deleted (decline)"
    assert any("nobody answered in time" in t for t in api.texts_to(OWNER))


async def test_an_optional_field_is_left_out_with_the_skip_word(
    served: Served, api: WhatsAppAPI, upstream: FakeUpstream
) -> None:
    upstream.script(tool_call("mcp_fake_label", ["{}"]), text("Printed."))
    await api.user_says(served.url, OWNER, "print a label")
    [title] = await said(api, 1)
    assert "Fields: Title *, Note (* required); asking 1 of 2." in title
    assert "skip" not in title, "a required field cannot be skipped"
    await api.user_says(served.url, OWNER, "skip")  # no skip word here: the title is "skip"
    note = (await said(api, 2))[1]
    assert '(Optional: reply "skip" to leave it out.)' in note
    await api.user_says(served.url, OWNER, "Skip")
    await api.wait_until(lambda: "Printed." in api.texts_to(OWNER), within=30)
    assert tool_result(upstream.requests[1]) == "label 'skip' note ''"
