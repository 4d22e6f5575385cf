"""ChatView: frames in, view model out, with a fake clock driving the reveal."""

from __future__ import annotations

from typing import Any

from iris.app.core.view import ChatView

from .clock import FakeClock


def frames(*items: dict[str, Any]) -> list[dict[str, Any]]:
    """Number frames like the server: chat-scoped seqs from 1."""
    return [{"chat_id": "c1", "seq": n, **item} for n, item in enumerate(items, start=1)]


def run(store: ChatView, clock: FakeClock, seconds: float) -> None:
    for _ in range(round(seconds * 30)):
        clock.advance(1 / 30)
        store.tick()


def test_update_replaces_the_snapshot_and_stop_waits_for_the_reveal() -> None:
    clock = FakeClock()
    store = ChatView(clock, smoothness=0.5)  # 120 chars/s
    for frame in frames(
        {"type": "typing", "on": True},
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "Hello"},
        {"type": "message.update", "message_id": "m1", "text": "Hello, world. " * 4},
        {
            "type": "message.stop",
            "message_id": "m1",
            "final_text": "Hello, world. " * 4,
            "reasoning": "think",
            "model": "m-1",
            "tokens": 42,
        },
    ):
        store.apply(frame)
    [bubble] = store.bubbles
    assert not store.typing  # message.start hides the typing indicator
    assert bubble.text == "Hello, world. " * 4 and bubble.shown == ""
    assert bubble.streaming and bubble.stopped  # stopped, but the reveal has not caught up
    assert (bubble.reasoning, bubble.model, bubble.tokens) == ("think", "m-1", 42)
    assert bubble.html is None
    run(store, clock, 0.25)
    assert 25 <= len(bubble.shown) <= 35 and bubble.streaming
    run(store, clock, 1.0)
    assert bubble.shown == bubble.text and not bubble.streaming


def test_stop_without_a_live_bubble_materializes_it() -> None:
    store = ChatView(FakeClock())
    store.apply({"type": "message.stop", "seq": 3, "message_id": "m9", "final_text": "Done."})
    [bubble] = store.bubbles
    assert bubble.shown == "Done." and not bubble.streaming


def test_streaming_off_ignores_start_and_update() -> None:
    store = ChatView(FakeClock(), streaming=False)
    for frame in frames(
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "partial"},
    ):
        store.apply(frame)
    assert store.bubbles == []
    store.apply({"type": "message.stop", "seq": 3, "message_id": "m1", "final_text": "whole"})
    assert [(b.shown, b.streaming) for b in store.bubbles] == [("whole", False)]


def test_a_full_turn_groups_tools_and_restyles_commentary() -> None:
    store = ChatView(FakeClock())
    store.add_local_user("summarize the repo")
    for frame in frames(
        {"type": "message.start", "message_id": "m1", "role": "assistant"},
        {"type": "message.update", "message_id": "m1", "text": "Let me look"},
        {
            "type": "tool.start",
            "index": 1,
            "name": "terminal",
            "preview": "ls -la",
            "args": {"command": "ls -la"},
        },
        {"type": "tool.progress", "index": 1, "name": "terminal", "note": "listing"},
        {
            "type": "tool.end",
            "index": 1,
            "name": "terminal",
            "ok": True,
            "duration": 0.4,
            "output_preview": "12 files",
        },
        {"type": "commentary", "message_id": "m1", "text": "Let me look first."},
        {"type": "commentary", "message_id": "m2", "text": "Found 12 files."},
        {"type": "message", "message_id": "m3", "role": "assistant", "text": "The repo has…"},
    ):
        store.apply(frame)
    kinds = [(b.message_id, b.kind) for b in store.bubbles]
    assert kinds == [
        ("local-1", "message"),
        ("m1", "commentary"),
        ("m2", "commentary"),
        ("m3", "message"),
    ]
    [call] = store.bubbles[1].tools
    assert (call.ok, call.duration, call.notes, call.output_preview) == (
        True,
        0.4,
        ["listing"],
        "12 files",
    )


def test_tools_before_any_message_get_a_holder_bubble() -> None:
    store = ChatView(FakeClock())
    store.add_local_user("hi")
    store.apply(
        {"type": "tool.start", "seq": 1, "index": 1, "name": "read_file", "preview": "", "args": {}}
    )
    assert [b.kind for b in store.bubbles] == ["message", "tools"]


def test_replayed_frames_are_applied_once_and_set_the_resume_point() -> None:
    store = ChatView(FakeClock())
    turn = frames(
        {"type": "tool.start", "index": 1, "name": "terminal", "preview": "", "args": {}},
        {"type": "message", "message_id": "m1", "role": "assistant", "text": "hi"},
    )
    for frame in turn + turn:
        store.apply(frame)
    assert store.last_seq == 2
    assert len(store.bubbles) == 2 and len(store.bubbles[0].tools) == 1
    # ready and pong carry the latest seq but do not move the resume point.
    store.apply({"type": "ready", "chat_id": "c1", "seq": 9})
    assert store.last_seq == 2 and store.chat_id == "c1"


def test_own_message_echoed_by_the_server_is_not_duplicated() -> None:
    store = ChatView(FakeClock())
    store.add_local_user("hello")
    store.apply({"type": "message", "seq": 1, "message_id": "u1", "role": "user", "text": "hello"})
    assert [b.message_id for b in store.bubbles] == ["u1"]
    store.apply({"type": "message", "seq": 2, "message_id": "u2", "role": "user", "text": "other"})
    assert [b.text for b in store.bubbles] == ["hello", "other"]


def test_sync_replaces_the_view() -> None:
    store = ChatView(FakeClock())
    store.apply(
        {"type": "message", "seq": 1, "message_id": "x", "role": "assistant", "text": "old"}
    )
    store.apply(
        {
            "type": "sync",
            "seq": 40,
            "messages": [
                {"message_id": "a", "role": "user", "text": "q"},
                {
                    "message_id": "b",
                    "role": "assistant",
                    "text": "answer",
                    "model": "m",
                    "tokens": 3,
                },
            ],
        }
    )
    assert [(b.message_id, b.shown) for b in store.bubbles] == [("a", "q"), ("b", "answer")]
    assert store.last_seq == 40 and store.epoch == 1


def test_rate_change_applies_to_live_bubbles() -> None:
    clock = FakeClock()
    store = ChatView(clock, smoothness=0.8)
    store.apply({"type": "message.start", "seq": 1, "message_id": "m1", "role": "assistant"})
    store.apply({"type": "message.update", "seq": 2, "message_id": "m1", "text": "x" * 40})
    assert store.reveal_rate("m1") == 75
    store.set_smoothness(0.2)
    assert store.reveal_rate("m1") == 300


def test_html_artifact_waits_for_the_reveal() -> None:
    clock = FakeClock()
    store = ChatView(clock, smoothness=0.2)
    text = "Here:\n```html\n<h1>hi</h1>\n```\n"
    store.apply({"type": "message.start", "seq": 1, "message_id": "m1", "role": "assistant"})
    store.apply({"type": "message.stop", "seq": 2, "message_id": "m1", "final_text": text})
    assert store.bubbles[0].html is None
    run(store, clock, 1.0)
    assert store.bubbles[0].html == "<h1>hi</h1>\n"


def test_a_command_answer_is_shown_as_a_note() -> None:
    store = ChatView(FakeClock())
    store.add_local_user("/status")
    store.apply({"type": "command", "command": "status", "text": "model: m", "seq": 0})
    note = store.bubbles[-1]
    assert (note.role, note.kind, note.text) == ("system", "commentary", "model: m")


def test_a_frame_that_is_not_the_protocols_changes_nothing() -> None:
    # Read through the protocol's types: a newer server's frame type or a malformed frame is
    # ignored, where field-by-field reading raised (KeyError) or showed "None".
    store = ChatView(FakeClock())
    store.apply({"type": "message.start", "seq": 1, "message_id": "m1", "role": "assistant"})
    for frame in (
        {"type": "message.update", "seq": 2, "text": "no message_id"},
        {"type": "message.stop", "seq": 3, "message_id": "m1"},
        {"type": "tool.end", "seq": 4, "index": 1, "name": "t", "ok": "yes"},
        {"type": "reaction.add", "seq": 5, "emoji": "👍"},
        {"type": "error", "seq": 6, "code": "x"},
    ):
        store.apply(frame)
    assert [(b.message_id, b.text, b.stopped) for b in store.bubbles] == [("m1", "", False)]
    assert store.last_seq == 1
