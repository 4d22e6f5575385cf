"""One chat on the iris socket: runs its turns, one at a time, and publishes their frames.

A room is shared by every device on the chat. ``send`` echoes the user's message to the other
devices, starts the turn and returns at once; the turn's events go through the frame encoder
into the hub. A background flusher sends the waiting text when ``edit_interval`` passes with no
new event, so a model that pauses mid-sentence still shows what it has.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from iris.agent import Turn, TurnRequest
from iris.errors import StoreUnavailable, user_message
from iris.events import TurnEnded, TurnFailed
from iris.fanout.hub import Hub
from iris.fanout.subscription import Subscription
from iris.runtime import Runtime
from iris.surfaces.iris.frames import EncoderSettings, FrameEncoder, new_message_id

log = logging.getLogger(__name__)

# The iris cadence when the config sets none for iris (doc 05 §5.1); the chat-platform
# defaults in ``streaming.*`` are paced for rate-limited edit APIs, which a socket is not.
IRIS_EDIT_INTERVAL = 0.8
IRIS_BUFFER_THRESHOLD = 24


def encoder_settings(runtime: Runtime) -> EncoderSettings:
    config = runtime.config
    display = config.display_for("iris")
    override = config.display.platforms.get("iris")
    return EncoderSettings(
        streaming=config.streams("iris"),
        show_reasoning=display.show_reasoning,
        edit_interval=(
            override.edit_interval
            if override is not None and override.edit_interval is not None
            else IRIS_EDIT_INTERVAL
        ),
        buffer_threshold=(
            override.buffer_threshold
            if override is not None and override.buffer_threshold is not None
            else IRIS_BUFFER_THRESHOLD
        ),
    )


class ChatRoom:
    def __init__(self, runtime: Runtime, hub: Hub, chat_id: str) -> None:
        self.runtime = runtime
        self.hub = hub
        self.chat_id = chat_id
        self.session = f"iris:{chat_id}"
        self._task: asyncio.Task[None] | None = None
        self._turn: Turn | None = None
        self._cancel_requested = False
        self._repair: asyncio.Task[None] | None = None  # history repair after a crash

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def send(self, text: str, origin: Subscription | None = None) -> bool:
        """Start a turn for ``text``; False if one is already running."""
        if self.busy:
            return False
        echo = {"type": "message", "message_id": new_message_id(), "role": "user", "text": text}
        self.hub.publish(self.chat_id, echo, exclude=origin)
        self._cancel_requested = False
        self._task = asyncio.create_task(self._run(text), name=f"iris-turn-{self.chat_id}")
        return True

    def recover(self) -> None:
        """End a turn the log shows open: the server stopped without finishing it (a crash).

        Without this, every device that resumes would show the typing indicator forever. The
        text devices saw also goes into the model's history, as an interrupted reply, so the
        model knows what the user read."""
        log = self.hub.log
        if self.busy or not log.turn_open(self.chat_id):
            return
        shown = log.open_messages(self.chat_id)
        user = next(
            (m["text"] for m in reversed(log.conversation(self.chat_id)) if m["role"] == "user"),
            None,
        )
        self._repair = asyncio.create_task(
            self._repair_history(user, "\n\n".join(t for t in shown.values() if t))
        )
        frames: list[dict[str, Any]] = [
            {"type": "message.stop", "message_id": message_id, "final_text": text}
            for message_id, text in shown.items()
        ]
        frames.append(
            {
                "type": "error",
                "code": "interrupted",
                "message": "the server stopped during this turn",
            }
        )
        frames.append({"type": "typing", "on": False})
        self._publish(frames)

    async def _repair_history(self, user: str | None, shown: str) -> None:
        try:
            await self._add_interrupted(user, shown)
        except StoreUnavailable as exc:
            log.error("history of %s not repaired after a crash: %s", self.chat_id, exc.message)

    async def _add_interrupted(self, user: str | None, shown: str) -> None:
        sessions = self.runtime.sessions
        last = await sessions.last(self.session)
        if last is not None and last.get("role") == "user":
            added: list[dict[str, Any]] = []  # the turn's user message was saved when it began
        elif user is not None and not (last and last.get("content") == shown):
            added = [{"role": "user", "content": user}]
        else:
            return
        if shown:
            added.append({"role": "assistant", "content": f"{shown}\n\n[interrupted]"})
        await sessions.append(self.session, added)

    def cancel(self) -> bool:
        """Interrupt the running turn; False if there is none."""
        if not self.busy:
            return False
        self._cancel_requested = True
        if self._turn is not None:
            self._turn.interrupt()
        return True

    async def close(self) -> None:
        task = self._task
        if task is None or task.done():
            return
        self.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=3.0)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run(self, text: str) -> None:
        loop = asyncio.get_running_loop()
        encoder = FrameEncoder(encoder_settings(self.runtime))
        publish = self._publish
        publish(encoder.begin())
        user: dict[str, Any] = {"role": "user", "content": text}
        wake = asyncio.Event()
        flusher = asyncio.create_task(self._flush(encoder, wake))
        sessions = self.runtime.sessions
        try:
            if self._repair is not None:
                # The history a crash left must be whole before it is read.
                repair, self._repair = self._repair, None
                await repair
            history = await sessions.history(self.session)
            # Saved now, so a crash mid-reply still leaves the question in the history.
            await sessions.append(self.session, [user])
            request = TurnRequest(messages=[*history, user], stream=encoder.settings.streaming)
            async with self.runtime.agent.run(request) as turn:
                self._turn = turn
                if self._cancel_requested:
                    turn.interrupt()
                async for event in turn:
                    publish(encoder.feed(event, loop.time()))
                    wake.set()
                    if isinstance(event, TurnEnded):
                        await sessions.append(self.session, event.messages)
                    elif isinstance(event, TurnFailed) and event.partial_text:
                        kept = {"role": "assistant", "content": event.partial_text}
                        await sessions.append(self.session, [kept])
        except Exception as exc:  # a broken turn must still end with error + typing off
            log.exception("iris turn in %s crashed", self.chat_id)
            code, message, _ = user_message(exc)
            publish(encoder.fail(code, message))
        finally:
            flusher.cancel()
            self._turn = None
            # Also on cancellation (server shutdown): every turn ends with typing off.
            publish(encoder.fail("cancelled", "the turn was cancelled"))

    async def _flush(self, encoder: FrameEncoder, wake: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        publish = self._publish
        while True:
            deadline = encoder.deadline()
            delay = None if deadline is None else deadline - loop.time()
            if delay is None or delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await wake.wait()
                wake.clear()
                continue
            publish(encoder.tick(loop.time()))
            await asyncio.sleep(0)  # never spin, whatever the clock says

    def _publish(self, frames: list[dict[str, Any]]) -> None:
        self.hub.publish_all(self.chat_id, frames)
