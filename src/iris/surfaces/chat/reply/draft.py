"""The draft layout (Telegram private chats): the text being written as the chat's draft.

Messages are sent once, whole, when settled (as without preview); while the turn runs,
``Draft`` actions show the text being written (or the tool lines, or "Thinking…" as an empty
draft) at the edit interval, re-sent every ``DRAFT_REFRESH`` seconds so the platform's
30-second draft never lapses. Drafts are not messages: they never touch the chat's send budget,
and a lost one costs nothing. Where the platform refuses drafts the reply goes on as an
``EditLayout`` (``without_drafts``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iris.surfaces.chat.reply.calls import Action, Delete, Draft, waiting
from iris.surfaces.chat.reply.edit import EditLayout
from iris.surfaces.chat.reply.layout import Layout
from iris.surfaces.chat.splitter import split
from iris.surfaces.chat.throttle import Throttle

if TYPE_CHECKING:
    from iris.surfaces.chat.reply.plan import Reply

# A Telegram draft lives 30 s after its last update: refresh it well before.
DRAFT_REFRESH = 20.0


class DraftLayout(Layout):
    def __init__(self, plan: Reply, *, drafts: bool) -> None:
        super().__init__(plan, preview=False)
        self.drafts = drafts  # the reply streams: its drafts show it being written
        self._shown: str | None = None
        self._at = float("-inf")

    def _draft(self, throttle: Throttle) -> tuple[float, Draft] | None:
        """The draft to show and when: changes at the edit interval, the same text refreshed
        before the platform drops it. None once the turn is over."""
        if not self.drafts or self.plan.ended:
            return None
        text = self._text()
        if text == self._shown:
            wait = DRAFT_REFRESH
        elif waiting(text, self._shown) >= self.plan.display.buffer_threshold:
            # Early, as an edit would be, but no faster than the chat's budget paces messages.
            wait = min(throttle.interval, throttle.budget.spacing)
        else:
            wait = throttle.interval
        return max(self._at + wait, throttle.blocked_until), Draft(self.plan.draft_id, text)

    def _text(self) -> str:
        plan = self.plan
        seg = plan.segment
        text = "" if seg is None else seg.closed if seg.closed is not None else seg.text
        if text:
            # The part being written: the earlier parts will be messages of their own.
            return split(text, plan.caps.max_length, plan.caps.length_unit)[-1].text
        if plan.tools_slot is not None:
            return plan.slots[plan.tools_slot].want
        return ""  # "Thinking…"

    def aside(self, throttle: Throttle, now: float, idle: bool) -> Action | None:
        draft = self._draft(throttle)
        if draft is not None and draft[0] <= now:
            self._at = now  # a draft is not a message: no budget of either kind
            return draft[1]
        return super().aside(throttle, now, idle)

    def aside_due(self, throttle: Throttle, now: float, idle: bool) -> float | None:
        draft = self._draft(throttle)
        super().aside_due(throttle, now, idle)
        return None if draft is None else max(draft[0], now)

    def aside_landed(self, action: Draft | Delete) -> None:
        if isinstance(action, Draft):
            self._shown = action.text

    def sent(self) -> None:
        self._shown = None  # a message clears the chat's draft: the next one starts afresh

    def drafted(self, draft_id: int) -> bool:
        return self.drafts and self.plan.first_draft <= draft_id <= self.plan.draft_id

    def without_drafts(self) -> Layout:
        if not self.drafts:
            return self
        return EditLayout(self.plan, preview=self.plan.caps.can_edit)
