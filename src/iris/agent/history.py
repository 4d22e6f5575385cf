"""What a turn leaves in the conversation history: one rule for every ending, every surface.

The chat platforms, the iris socket, the REPL and the API's ``previous_response_id`` all keep
what ``kept`` returns after the turn's user message (each saves that message itself):

- **complete** (``TurnEnded`` with any reason but ``interrupted``): the messages the turn
  added — assistant messages with their tool calls, the tool results, the final answer.
- **interrupted** (``TurnEnded(reason="interrupted")``): the messages so far; the text shown
  of the cut reply ends in ``[interrupted]``.
- **failed** (``TurnFailed``): the same, with the partial text shown as the cut reply.
- **crashed** (no terminal event: the surface's own code broke, or the server stopped and
  repairs the history when it starts again): the text the user was shown, as the cut reply.

The mark tells the model that the user read a reply that stopped, so "go on" continues it
instead of the model taking the fragment for its whole answer.
"""

from __future__ import annotations

from typing import Any

from iris.events import TerminalEvent, TurnEnded, TurnFailed

Message = dict[str, Any]

MARK = "[interrupted]"


def kept(end: TerminalEvent | None, shown: str = "") -> list[Message]:
    """The messages a turn adds to the history after its user message.

    ``end`` is the turn's last event (None when it never came); ``shown`` is the text the
    surface showed, used only when ``end`` carries no record of its own."""
    match end:
        case TurnEnded(reason="interrupted", messages=messages, text=text):
            return _cut(messages, text or shown)
        case TurnEnded(messages=messages, text=text, tool_calls=calls):
            if messages:
                return list(messages)
            return _answer(text or shown, calls)
        case TurnFailed(messages=messages, partial_text=partial):
            return _cut(messages, partial or shown)
        case None:
            return _cut([], shown)


def cut_reply(text: str) -> Message:
    """The assistant message of a reply that stopped after ``text`` was shown."""
    return {"role": "assistant", "content": f"{text}\n\n{MARK}"}


def _cut(messages: list[Message], text: str) -> list[Message]:
    """``messages`` of a turn that stopped, with ``text`` (shown last) as the cut reply."""
    kept_messages = list(messages)
    if not text:
        return kept_messages
    last = kept_messages[-1] if kept_messages else None
    if last is not None and _plain_reply(last) and last.get("content") == text:
        kept_messages.pop()
    return [*kept_messages, cut_reply(text)]


def _plain_reply(message: Message) -> bool:
    return message.get("role") == "assistant" and not message.get("tool_calls")


def _answer(text: str, calls: list[dict[str, str]]) -> list[Message]:
    """The answer of a turn whose end did not list its messages (an event from elsewhere)."""
    if not calls:
        return [{"role": "assistant", "content": text}] if text else []
    tool_calls = [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        for call in calls
    ]
    return [{"role": "assistant", "content": text or None, "tool_calls": tool_calls}]
