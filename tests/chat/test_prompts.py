"""Approval prompts: what the messages say, one reply's calls in their order, no buttons, no asking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iris.events import ApprovalRequested, ApprovalResolved
from iris.formats.visible import CUT, read_back, shown
from iris.surfaces.chat.platforms.base import IncomingMessage
from iris.surfaces.chat.prompts import (
    ATTEMPTS,
    NO_BUTTONS,
    ClosePrompt,
    OpenPrompt,
    Prompts,
    ReplyPrompts,
    SendPart,
    SendPrompt,
    parse_press,
    render,
)
from iris.surfaces.chat.splitter import Unit, measure
from tests.chat.conftest import Gateway
from tests.conftest import anywhere
from tests.fakes.upstream import FakeUpstream, text, tool_call


def request(preview: str = "rm -rf build", approval_id: str = "appr_1") -> ApprovalRequested:
    args = '{"command": "' + preview + '"}'
    return ApprovalRequested(1, "terminal", args, preview, approval_id, expires_at=1_000.0 + 120)


def reply(prompts: Prompts | None, limit: int = 4096) -> ReplyPrompts:
    return ReplyPrompts(
        prompts,
        platform="telegram",
        chat_id="42",
        session="telegram:42",
        thread={},
        limit=limit,
        unit="utf16",
    )


def test_a_short_command_is_one_message_with_three_buttons_whose_data_fits_telegram() -> None:
    rendered = render("terminal", "rm -rf build", 120, "0123456789abcdef", limit=4096, unit="utf16")
    assert rendered.parts == ()
    assert "rm -rf build" in rendered.prompt.text
    assert "2 min" in rendered.prompt.text
    labels = [b.label for b in rendered.prompt.buttons]
    assert labels == ["Allow once", "Allow in this chat", "Deny"]
    for button in rendered.prompt.buttons:
        assert len(button.data.encode()) <= 64  # Telegram's callback_data
        assert parse_press(button.data) == ("0123456789abcdef", button.decision)


@pytest.mark.parametrize(
    "data", ["", "iris-approval", "iris-approval:x:tok", "other:o:tok", "iris-approval:o:"]
)
def test_data_that_is_no_approval_button_is_not_a_press(data: str) -> None:
    assert parse_press(data) is None


@given(
    body=st.text(min_size=1, max_size=3000),
    limit=st.integers(min_value=240, max_value=1200),
    unit=st.sampled_from(["utf16", "chars"]),
)
def test_every_message_fits_and_the_parts_join_to_the_whole_body(
    body: str, limit: int, unit: Unit
) -> None:
    rendered = render("terminal", body, 60, "0123456789abcdef", limit=limit, unit=unit)
    assert measure(rendered.prompt.text, unit) <= limit
    assert all(measure(part, unit) <= limit for part in rendered.parts)
    if rendered.parts:
        # Never cut: the parts, their cut marks taken out, read back to the whole command.
        joined = "".join(rendered.parts).replace(CUT, "")
        assert read_back(joined) == body, "never cut: the parts are the whole command"
        assert all(part.endswith(CUT) for part in rendered.parts[:-1])
        assert all(part.startswith(CUT) for part in rendered.parts[1:])
    else:
        assert shown(body) in rendered.prompt.text


def test_a_request_goes_out_as_parts_then_the_prompt_and_closes_with_who_decided() -> None:
    prompts = Prompts()
    plan = reply(prompts, limit=200)
    plan.requested(request("x" * 500), now=1_000.0)
    actions: list[object] = []
    while (action := plan.next()) is not None and not isinstance(action, SendPrompt):
        assert isinstance(action, SendPart)
        actions.append(action)
        plan.landed(action, f"m{len(actions)}")
    joined = "".join(a.text for a in actions if isinstance(a, SendPart))
    assert joined.replace(CUT, "") == "x" * 500
    prompt = plan.next()
    assert isinstance(prompt, SendPrompt)
    plan.landed(prompt, "m9")
    assert len(prompts) == 1
    plan.resolved(ApprovalResolved("appr_1", "once", "ada"))
    close = plan.next()
    assert isinstance(close, ClosePrompt) and close.message_id == "m9"
    assert close.text.startswith("✅ Allowed once by ada")
    assert len(prompts) == 0, "a closed request's buttons count no more"


def test_a_request_resolved_before_its_prompt_went_out_sends_nothing_more() -> None:
    plan = reply(Prompts())
    plan.requested(request(), now=1_000.0)
    plan.resolved(ApprovalResolved("appr_1", "timeout", "timeout"))
    assert plan.next() is None and not plan.pending


def test_a_rate_limited_prompt_is_retried_then_given_up() -> None:
    plan = reply(Prompts())
    plan.requested(request(), now=1_000.0)
    prompt = plan.next()
    assert isinstance(prompt, SendPrompt)
    for _ in range(ATTEMPTS - 1):
        plan.failed(prompt, retry=True)
        assert plan.next() is prompt
    plan.failed(prompt, retry=True)
    assert plan.next() is None


def test_a_turn_that_ends_with_a_request_open_closes_it_as_cancelled() -> None:
    plan = reply(Prompts())
    plan.requested(request(), now=1_000.0)
    prompt = plan.next()
    assert prompt is not None
    plan.landed(prompt, "m1")
    plan.ended()
    close = plan.next()
    assert isinstance(close, ClosePrompt) and close.text.startswith("⏹ Cancelled")


def test_without_buttons_the_chat_is_told_where_to_answer_and_how_it_ended() -> None:
    plan = reply(None)
    plan.requested(request(), now=1_000.0)
    note = plan.next()
    assert isinstance(note, SendPart) and "rm -rf build" in note.text and NO_BUTTONS in note.text
    plan.landed(note, "m1")
    plan.resolved(ApprovalResolved("appr_1", "deny", "phone"))
    outcome = plan.next()
    assert isinstance(outcome, SendPart) and outcome.text.startswith("❌ Denied by phone")


def test_a_token_is_random_and_names_one_request() -> None:
    prompts = Prompts()
    a = prompts.open(OpenPrompt("appr_a", "terminal", "telegram", "42", "telegram:42"))
    b = prompts.open(OpenPrompt("appr_b", "terminal", "telegram", "42", "telegram:42"))
    assert a != b
    found = prompts.get(a)
    assert found is not None and found.approval_id == "appr_a"
    prompts.close("appr_a")
    assert prompts.get(a) is None and prompts.get(b) is not None


async def test_on_a_platform_without_buttons_a_tool_that_asks_is_refused_not_run(
    gateway: Gateway, upstream: FakeUpstream, tmp_path: Path
) -> None:
    # The recording platform has no send_prompt (as WhatsApp): nobody can be asked there.
    command = json.dumps({"command": "echo ran > marker"})
    upstream.script(tool_call("terminal", [command]), text("It was not run."))
    terminal = {"cwd": str(tmp_path)}
    tools = {"enabled": ["terminal"], "terminal": terminal, "approval": {"mode": "ask"}}
    surface, platform = await gateway(tools=tools)
    await platform.deliver(IncomingMessage("telegram", "c1", "7", "run it"))
    await surface.idle()
    assert not anywhere(tmp_path, "marker")
    told = next(m for m in upstream.requests[1].body["messages"] if m["role"] == "tool")
    assert "nobody can be asked here" in told["content"]
    assert platform.chat()[-1] == "It was not run."
