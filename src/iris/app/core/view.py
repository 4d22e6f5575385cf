"""ChatView: iris frames in, the chat's view model out.

One bubble per ``message_id``. Streamed bubbles hold the latest full text and a
:class:`Reveal` that shows it at the user's speed; a bubble stays *streaming* after
``message.stop`` until its reveal has caught up (the cursor, the static renderer and the HTML
card all wait for that). Tool calls hang under the bubble of the turn they belong to.

The text of a streaming message arrives as ``message.update`` snapshots or, with the ``append``
feature, as ``message.append`` frames; both go through one path (``_streamed``) that yields the
message's full text. An append that does not fit the text held (its ``offset`` is not that
text's length in UTF-16 code units) is never applied: the store asks for a resume
(``take_resync``) and waits for the snapshot the server then sends. A ``message.stop`` may
also end with an append (``offset`` + ``text`` in place of ``final_text``): same path.

The store never reads a clock of its own: ``clock`` is injected, so tests drive time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from iris.app.core.approval import Answer, ApprovalCard, is_approval_error
from iris.app.core.artifact import find_html
from iris.app.core.elicitation import ElicitationCard, is_elicitation_error
from iris.app.core.reveal import Reveal
from iris.protocol.appends import Held, extended, held
from iris.protocol.types import (
    CHAT_SCOPED,
    SERVER,
    ApprovalRequest,
    ApprovalResolvedFrame,
    Message,
    MessageAppend,
    MessageStop,
    MessageStopAppend,
    MessageUpdate,
    ServerFrame,
    Sync,
    SyncMessage,
    ToolEnd,
    ToolProgress,
    ToolStart,
)

Kind = Literal["message", "commentary", "tools", "error", "approval", "elicitation"]


@dataclass
class ToolCall:
    index: int
    name: str
    preview: str = ""
    args: dict[str, Any] = field(default_factory=dict[str, Any])
    notes: list[str] = field(default_factory=list[str])
    ok: bool | None = None  # None until tool.end
    duration: float | None = None
    output_preview: str = ""


@dataclass
class Bubble:
    message_id: str
    role: str
    kind: Kind = "message"
    text: str = ""  # the latest snapshot (or final text)
    shown: str = ""  # what is revealed so far
    streaming: bool = False  # live, or stopped but the reveal has not caught up
    stopped: bool = False
    reasoning: str | None = None
    model: str | None = None
    tokens: int | None = None
    tools: list[ToolCall] = field(default_factory=list[ToolCall])
    approval: ApprovalCard | None = None  # on a bubble of kind approval
    elicitation: ElicitationCard | None = None  # on a bubble of kind elicitation
    version: int = 0  # bumped on every change, so a widget knows when to look again

    @property
    def html(self) -> str | None:
        """The HTML artifact, offered only once the reveal has finished."""
        return None if self.streaming else find_html(self.text)


class ChatView:
    """Applies frames in order; ``tick()`` advances the reveals."""

    def __init__(
        self, clock: Callable[[], float], *, streaming: bool = True, smoothness: float = 0.3
    ) -> None:
        self._clock = clock
        self.streaming = streaming
        self.smoothness = smoothness
        self.bubbles: list[Bubble] = []
        self._by_id: dict[str, Bubble] = {}
        self._reveals: dict[str, Reveal] = {}
        self.typing = False
        self.chat_id: str | None = None
        self.last_seq = 0  # the resume point: highest chat-scoped seq applied
        self._seen: set[int] = set()
        self.epoch = 0  # bumped when the whole view is replaced (sync)
        self.log_epoch: str | None = None  # the server's chat log epoch (ready / sync)
        self._local = 0
        # The text of each open message as the server sent it to this connection, kept in
        # arrival order (replays included) as the server computes its appends.
        self._wire: dict[str, Held] = {}
        self._resync: int | None = None  # resume from here: an append did not fit
        self._awaiting: set[str] = set()  # messages waiting for the snapshot a resume brings

    # -- settings ---------------------------------------------------------------------------

    def set_smoothness(self, smoothness: float) -> None:
        self.smoothness = smoothness
        for reveal in self._reveals.values():
            reveal.set_smoothness(smoothness)

    def set_streaming(self, on: bool) -> None:
        self.streaming = on

    def reveal_rate(self, message_id: str) -> float | None:
        """The live bubble's base rate (chars/s) from the speed setting; None once revealed."""
        reveal = self._reveals.get(message_id)
        return reveal.base_rate if reveal else None

    # -- input ------------------------------------------------------------------------------

    def new_connection(self) -> None:
        """A new connection: an answer that was in flight may never have arrived."""
        self._approvals_do(ApprovalCard.reconnected)

    def answered(self, approval_id: str, decision: Answer) -> None:
        """This device sent an answer (the app, once it went out)."""
        bubble = self._by_id.get(f"approval-{approval_id}")
        if bubble is not None and bubble.approval is not None:
            bubble.approval.answered(decision)
            bubble.version += 1

    def add_local_user(self, text: str) -> Bubble:
        """The user's own message, shown at once (the server echoes it only to other devices)."""
        self._local += 1
        return self._add(Bubble(f"local-{self._local}", "user", text=text, shown=text))

    def take_resync(self) -> int | None:
        """The ``after_seq`` to send a ``resume`` with, once, when an append did not fit."""
        point, self._resync = self._resync, None
        return point

    def apply(self, data: Mapping[str, Any]) -> bool:
        """Apply one frame as received (parsed JSON); answers whether it was one of the
        protocol's. One that is not (a newer server's type, a missing or mistyped field)
        changes nothing: read whole and strictly (no ``"5"`` for 5), the rule the browser's
        ``frames.js`` follows too (``tests/webjs/cases/view.json``)."""
        try:
            frame = SERVER.validate_python(data, strict=True)
        except ValidationError:
            return False
        self._apply(frame)
        return True

    def _apply(self, frame: ServerFrame) -> None:
        if (frame["type"] == "ready" or frame["type"] == "sync") and "epoch" in frame:
            # The server's log restarted (it lost its data): its seqs begin again, so the
            # ones seen before say nothing about the new frames.
            if self.log_epoch is not None and frame["epoch"] != self.log_epoch:
                self._seen.clear()
                self.last_seq = 0
            self.log_epoch = frame["epoch"]
        # The text this connection holds follows every frame the server sends, before the
        # replay check: the server's side does too.
        if frame["type"] == "message.update" or frame["type"] == "message.append":
            self._streamed(frame)
            return
        if frame["type"] == "message.start":
            self._wire[frame["message_id"]] = Held("", 0)
        elif frame["type"] == "message.stop" and "offset" in frame:
            # With appends, the stop brings the rest of the text (``offset`` + ``text``).
            final = self._streamed_text(frame)
            if final is None:  # not ours to apply: the resume brings the stop again
                return
            frame = _with_final_text(frame, final)
        if (
            frame["type"] == "message.stop"
            or frame["type"] == "message"
            or frame["type"] == "commentary"
        ):
            self._closed(frame["message_id"])
        seq = frame.get("seq")
        if frame["type"] in CHAT_SCOPED and seq is not None:
            if seq in self._seen:
                return  # a replay we already have
            self._seen.add(seq)
            self.last_seq = max(self.last_seq, seq)
        self._show(frame, seq)

    def _closed(self, message_id: str) -> None:
        """The message is final: no more of its text comes."""
        self._wire.pop(message_id, None)
        self._awaiting.discard(message_id)

    def _show(self, frame: ServerFrame, seq: int | None) -> None:
        if frame["type"] == "ready":
            self.chat_id = frame.get("chat_id") or self.chat_id
        elif frame["type"] == "typing":
            self.typing = frame["on"]
        elif frame["type"] == "message.start":
            self.typing = False
            if self.streaming:
                self._start(frame["message_id"], frame["role"])
        elif frame["type"] == "message.stop":
            if "final_text" in frame:
                self._stop(frame)
        elif frame["type"] == "message":
            self._message(frame)
        elif frame["type"] == "commentary":
            self._commentary(frame["message_id"], frame["text"])
        elif (
            frame["type"] == "tool.start"
            or frame["type"] == "tool.progress"
            or frame["type"] == "tool.end"
        ):
            self._tool(frame)
        elif frame["type"] == "approval.request" or frame["type"] == "approval.resolved":
            self._approval(frame)
        elif frame["type"] == "elicitation.request":
            self._elicitation_asked(dict(frame))
        elif frame["type"] == "elicitation.resolved":
            self._elicitation_resolved(frame["elicitation_id"], frame["action"], frame["by"])
        elif frame["type"] == "error" and is_elicitation_error(frame["code"]):
            self._elicitation_refused(frame["message"] or frame["code"])
        elif frame["type"] == "error" and is_approval_error(frame["code"]):
            # The answer to this device's late press; the turn goes on.
            code, message = frame["code"], frame["message"]
            self._approvals_do(lambda card: card.refused(code, message), answering=True)
        elif frame["type"] == "error":
            self.typing = False
            text = f"{frame['code']}: {frame['message']}"
            self._add(Bubble(f"error-{seq}-{len(self.bubbles)}", "system", "error", text, text))
        elif frame["type"] == "sync":
            self._sync(frame)
        elif frame["type"] == "command":  # the answer to this device's /status, /new...
            text = frame["text"]
            self._add(
                Bubble(f"command-{seq}-{len(self.bubbles)}", "system", "commentary", text, text)
            )

    def tick(self) -> list[Bubble]:
        """Advance every reveal to now; returns the bubbles whose shown text changed."""
        now = self._clock()
        changed: list[Bubble] = []
        for message_id, reveal in list(self._reveals.items()):
            bubble = self._by_id[message_id]
            moved = reveal.tick(now)
            if moved:
                bubble.shown = reveal.text
            if bubble.stopped and reveal.caught_up:
                bubble.streaming = False
                del self._reveals[message_id]
                moved = True
            if moved:
                bubble.version += 1
                changed.append(bubble)
        return changed

    # -- frames -----------------------------------------------------------------------------

    def _add(self, bubble: Bubble) -> Bubble:
        self.bubbles.append(bubble)
        self._by_id[bubble.message_id] = bubble
        return bubble

    def _start(self, message_id: str, role: str) -> Bubble:
        bubble = self._by_id.get(message_id)
        if bubble is None:
            bubble = self._add(Bubble(message_id, role))
        bubble.streaming = True
        bubble.stopped = False
        if message_id not in self._reveals:
            self._reveals[message_id] = Reveal(self.smoothness, self._clock())
        bubble.version += 1
        return bubble

    def _streamed(self, frame: MessageUpdate | MessageAppend) -> None:
        """``message.update`` or ``message.append``: one path to the message's full text.

        Applied in arrival order even when replayed (the server made each append against what
        it sent this connection, replays included)."""
        text = self._streamed_text(frame)
        if text is None:
            return
        seq = frame.get("seq")
        if seq is not None:
            self._seen.add(seq)
            self.last_seq = max(self.last_seq, seq)
        if self.streaming:
            self._update(frame["message_id"], text)

    def _streamed_text(
        self, frame: MessageUpdate | MessageAppend | MessageStopAppend
    ) -> str | None:
        """The message's text after a snapshot (``text``) or an append (``offset`` + ``text``);
        None if the append does not fit what we hold: then nothing is shown wrong, and the
        message is asked for again."""
        message_id = frame["message_id"]
        if frame["type"] == "message.update":
            now: Held | None = held(frame["text"])
        else:
            now = extended(self._wire.get(message_id), frame["offset"], frame["text"])
        if now is None:
            self._wire.pop(message_id, None)
            self._ask_again(message_id, frame.get("seq"))
            return None
        self._wire[message_id] = now
        self._awaiting.discard(message_id)
        return now.text

    def _ask_again(self, message_id: str, seq: int | None) -> None:
        """Resume from just before ``seq``: the server resends the message whole (once)."""
        if message_id in self._awaiting:
            return
        self._awaiting.add(message_id)
        point = seq - 1 if seq else self.last_seq
        self._resync = point if self._resync is None else min(self._resync, point)

    def _update(self, message_id: str, text: str) -> None:
        bubble = self._by_id.get(message_id) or self._start(message_id, "assistant")
        bubble.text = text
        self._reveal(bubble, text)
        bubble.version += 1

    def _reveal(self, bubble: Bubble, text: str) -> None:
        """Show ``text``: through the bubble's reveal while one runs, else at once (an update
        after the reveal finished)."""
        reveal = self._reveals.get(bubble.message_id)
        if reveal is None:
            bubble.shown = text
        else:
            reveal.push(text, self._clock())
            bubble.shown = reveal.text

    def _stop(self, frame: MessageStop) -> None:
        message_id = frame["message_id"]
        bubble = self._by_id.get(message_id)
        text = frame["final_text"] or (bubble.text if bubble else "")
        if bubble is None:
            # Streaming off, or a stop for a bubble we never saw: materialize it whole.
            bubble = self._add(Bubble(message_id, "assistant"))
        self._finalize(bubble, frame)
        reveal = self._reveals.get(message_id)
        bubble.text = text
        if reveal is None or not self.streaming:
            bubble.shown = text
            bubble.streaming = False
            self._reveals.pop(message_id, None)
        else:
            reveal.push(text, self._clock())
            bubble.shown = reveal.text
            bubble.streaming = not reveal.caught_up
            if not bubble.streaming:
                del self._reveals[message_id]
        bubble.stopped = True
        bubble.version += 1

    def _finalize(self, bubble: Bubble, frame: MessageStop | Message | SyncMessage) -> None:
        if reasoning := frame.get("reasoning"):
            bubble.reasoning = reasoning
        if model := frame.get("model"):
            bubble.model = model
        tokens = frame.get("tokens")
        if tokens is not None:
            bubble.tokens = tokens

    def _message(self, frame: Message) -> None:
        message_id, role, text = frame["message_id"], frame["role"], frame["text"]
        if role == "user" and self._adopt_local(message_id, text):
            return
        bubble = self._by_id.get(message_id) or self._add(Bubble(message_id, role))
        self._reveals.pop(message_id, None)
        bubble.text = bubble.shown = text
        bubble.streaming = False
        bubble.stopped = True
        self._finalize(bubble, frame)
        bubble.version += 1

    def _adopt_local(self, message_id: str, text: str) -> bool:
        """A user message we already show locally (our own, echoed back on a replay)."""
        for bubble in reversed(self.bubbles):
            local = bubble.role == "user" and bubble.message_id.startswith("local-")
            if local and bubble.text == text:
                del self._by_id[bubble.message_id]
                bubble.message_id = message_id
                self._by_id[message_id] = bubble
                return True
        return False

    def _commentary(self, message_id: str, text: str) -> None:
        bubble = self._by_id.get(message_id)
        if bubble is None:
            self._add(Bubble(message_id, "assistant", "commentary", text, text, stopped=True))
            return
        # The segment streamed as this bubble turned out to be commentary: restyle and close.
        bubble.kind = "commentary"
        bubble.text = text
        bubble.stopped = True
        self._reveal(bubble, text)
        bubble.version += 1

    def _tool(self, frame: ToolStart | ToolProgress | ToolEnd) -> None:
        index, name = frame["index"], frame["name"] or "tool"
        if frame["type"] == "tool.start":
            call = ToolCall(index, name, frame["preview"], dict(frame["args"]))
            anchor = self._turn_anchor()
            anchor.tools.append(call)
            anchor.version += 1
            return
        found = self._find_tool(index, name)
        if found is None:
            return
        bubble, call = found
        if frame["type"] == "tool.progress":
            call.notes.append(frame["note"])
        else:
            call.ok = frame["ok"]
            call.duration = frame["duration"]
            call.output_preview = frame["output_preview"]
        bubble.version += 1

    def _turn_anchor(self) -> Bubble:
        """The latest assistant bubble of the current turn, or a holder for its tools."""
        for bubble in reversed(self.bubbles):
            if bubble.role == "user":
                break
            if bubble.kind not in ("error", "approval", "elicitation"):
                return bubble
        return self._add(Bubble(f"tools-{len(self.bubbles)}", "assistant", "tools"))

    def _find_tool(self, index: int, name: str) -> tuple[Bubble, ToolCall] | None:
        for bubble in reversed(self.bubbles):
            for call in reversed(bubble.tools):
                if call.index == index and call.name == name:
                    return bubble, call
        return None

    # -- approvals (the card's rules are iris.app.core.approval's) -------------------------------

    def _approval(self, frame: ApprovalRequest | ApprovalResolvedFrame) -> None:
        key = f"approval-{frame['approval_id']}"
        bubble = self._by_id.get(key)
        if frame["type"] == "approval.request":
            bubble = bubble or self._add(Bubble(key, "system", "approval"))
            bubble.approval = ApprovalCard(
                frame["approval_id"],
                frame["index"],
                frame["name"],
                frame["args"],
                frame["preview"],
                frame["expires_at"],
            )
        elif bubble is not None and bubble.approval is not None:
            bubble.approval.resolve(frame["decision"], frame["by"])
        else:
            return  # the request was before what this device holds
        bubble.version += 1

    def _approvals_do(
        self, change: Callable[[ApprovalCard], None], *, answering: bool = False
    ) -> None:
        """Apply ``change`` to each card (``answering``: only the latest this device answered)."""
        for bubble in reversed(self.bubbles):
            card = bubble.approval
            if card is None or (answering and card.sent is None):
                continue
            change(card)
            bubble.version += 1
            if answering:
                return

    # -- elicitations (the card's rules are iris.app.core.elicitation's) --------------------------

    def _elicitation_asked(self, frame: dict[str, Any]) -> None:
        key = f"elicitation-{frame['elicitation_id']}"
        bubble = self._by_id.get(key) or self._add(Bubble(key, "system", "elicitation"))
        bubble.elicitation = ElicitationCard.of(frame)
        bubble.version += 1

    def _elicitation_resolved(self, elicitation_id: str, action: str, by: str) -> None:
        bubble = self._by_id.get(f"elicitation-{elicitation_id}")
        if bubble is not None and bubble.elicitation is not None:
            bubble.elicitation.resolve(action, by)
            bubble.version += 1

    def _elicitation_refused(self, message: str) -> None:
        """This device's answer was refused: the latest open form says why, and stays."""
        for bubble in reversed(self.bubbles):
            if bubble.elicitation is not None and bubble.elicitation.pending:
                bubble.elicitation.refused(message)
                bubble.version += 1
                return

    def _sync(self, frame: Sync) -> None:
        """The log no longer reaches back: the server's conversation replaces the view."""
        self.bubbles = []
        self._by_id = {}
        self._reveals = {}
        self._wire = {}
        self._awaiting = set()
        self.typing = False
        for message in frame["messages"]:
            text = message["text"]
            bubble = Bubble(message["message_id"], message["role"], text=text, shown=text)
            bubble.stopped = True
            self._finalize(bubble, message)
            self._add(bubble)
        # Requests still waiting for a yes, whose frames the log no longer holds.
        for open_ in frame.get("approvals", []):
            self._approval({"type": "approval.request", **open_})
        seq = frame.get("seq")
        if seq is not None:
            self.last_seq = max(self.last_seq, seq)
        self.epoch += 1


def _with_final_text(stop: MessageStopAppend, final: str) -> MessageStop:
    """A stop that ended with an append, as the stop of its whole text."""
    whole: MessageStop = {
        "type": "message.stop",
        "message_id": stop["message_id"],
        "final_text": final,
    }
    if "chat_id" in stop:
        whole["chat_id"] = stop["chat_id"]
    if "seq" in stop:
        whole["seq"] = stop["seq"]
    if "reasoning" in stop:
        whole["reasoning"] = stop["reasoning"]
    if "model" in stop:
        whole["model"] = stop["model"]
    if "tokens" in stop:
        whole["tokens"] = stop["tokens"]
    return whole
