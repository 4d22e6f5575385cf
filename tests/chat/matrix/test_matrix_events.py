"""What the Matrix adapter writes and reads, as plain dicts (no homeserver needed)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from iris.surfaces.chat.platforms import matrix_events as events
from iris.surfaces.chat.platforms.matrix import MAX_TEXT

BOT = "@iris:example.org"
# A reply's text: anything a model writes, Markdown and raw HTML among it, and the widest
# texts a message may hold (characters that JSON or HTML escape to several bytes).
_FRAGMENTS = [
    "<",
    ">",
    "&",
    '"',
    "*",
    "`",
    "[a](javascript:alert(1))",
    "![x](http://e/x.png)",
    "<script>x</script>",
    "<img src=x>",
    "\n\n",
    "| a | b |\n| - | - |\n| 1 | 2 |",
]
_pieces = st.lists(
    st.one_of(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
        st.sampled_from(_FRAGMENTS),
    ),
    max_size=100,
).map(lambda parts: "".join(parts)[:MAX_TEXT])
_widest = st.builds(
    lambda char, count: char * count,
    st.sampled_from(['"', "<", "&", "😀", "\\", "\n", "a"]),
    st.integers(0, MAX_TEXT),
)
texts = st.one_of(_pieces, _widest)
EVENT_MAX = 65_536  # bytes of a whole event, the envelope included


@settings(max_examples=200, deadline=None)
@given(texts)
def test_an_edit_of_any_text_that_fits_a_message_fits_an_event(text: str) -> None:
    content = events.edit("$event", text)
    size = len(json.dumps(content, ensure_ascii=False).encode())
    assert size <= events.CONTENT_MAX < EVENT_MAX - 2048  # room for the envelope
    assert content["m.new_content"]["body"] == text, "the plain text is always whole"


@settings(max_examples=300, deadline=None)
@given(texts)
def test_the_formatted_body_carries_nothing_a_client_would_act_on(text: str) -> None:
    html = events.message(text)["formatted_body"]
    assert "<img" not in html and "<script" not in html.lower()
    assert 'href="javascript:' not in html.lower()


def test_a_content_too_large_with_its_html_goes_with_its_plain_body_alone() -> None:
    # Past what a message holds (the splitter never sends this much): the safety net.
    text = "<😀>" * 3000
    content = events.edit("$event", text)
    assert "formatted_body" not in content["m.new_content"]
    assert content["m.new_content"]["body"] == text
    assert len(json.dumps(content, ensure_ascii=False).encode()) <= EVENT_MAX - 2048


def test_a_thread_relation_goes_with_every_new_message_in_a_thread() -> None:
    content = events.message("hi", {events.THREAD_KEY: "$root"})
    assert content["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$root"},
    }
    assert content["m.mentions"] == {}, "the bot pings no one"


def test_a_pill_is_a_mention_and_is_cut_from_the_text() -> None:
    event = {
        "type": "m.room.message",
        "event_id": "$1",
        "sender": "@me:example.org",
        "content": {
            "msgtype": "m.text",
            "body": "Iris: what now?",
            "format": events.HTML,
            "formatted_body": f'<a href="https://matrix.to/#/{BOT}">Iris</a>: what now?',
        },
    }
    seen = events.seen(event, BOT)
    assert BOT in seen.mentions
    assert events.without_mention(seen.text, BOT, seen.pill_labels) == "what now?"


def test_an_edit_a_notice_and_a_reply_fallback_are_read_for_what_they_are() -> None:
    edit = {
        "type": "m.room.message",
        "content": {
            "msgtype": "m.text",
            "body": "* x",
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$0"},
        },
    }
    notice = {"type": "m.room.message", "content": {"msgtype": "m.notice", "body": "a bot"}}
    reply = {
        "type": "m.room.message",
        "content": {
            "msgtype": "m.text",
            "body": "> <@iris:example.org> Four.\n\nand plus one?",
            "m.relates_to": {"m.in_reply_to": {"event_id": "$4"}},
        },
    }
    assert events.seen(edit, BOT).kind == "other"
    assert events.seen(notice, BOT).kind == "other"
    read = events.seen(reply, BOT)
    assert (read.text, read.reply_to) == ("and plus one?", "$4")
