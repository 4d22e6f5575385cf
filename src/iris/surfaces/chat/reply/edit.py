"""The edit layout: a preview that grows in place, then the final text, sent anew or not.

- preview: a segment's first message appears after ``min_tokens`` deltas and carries the cursor
  while it streams; the final edit carries the post-processed text without the cursor, so the
  ordinary final send never happens separately.
- fresh final (``fresh_after`` > 0, a platform that deletes): when the turn ends and the
  answer's preview has been visible ``fresh_after`` seconds or more, the answer's messages are
  sent anew (an edit does not notify; a new message does) and each preview is deleted once its
  replacement landed (``Delete``). A replacement that fails outright turns back into the
  ordinary final edit of the preview.
- ``deletes`` (a platform that deletes): a message the settled text no longer needs is deleted
  instead of showing ``…``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from iris.surfaces.chat.budget import Draws
from iris.surfaces.chat.reply.calls import FINAL_ATTEMPTS, Action, Delete, Draft, Slot
from iris.surfaces.chat.reply.layout import EMPTY, Layout
from iris.surfaces.chat.throttle import Throttle

if TYPE_CHECKING:
    from iris.surfaces.chat.reply.plan import Reply

_DELETE: Draws = ("delete",)


@dataclass
class _Deletion:
    message_id: str
    failures: int = 0
    retry_at: float = float("-inf")


class EditLayout(Layout):
    def __init__(
        self, plan: Reply, *, preview: bool, fresh_after: float = 0.0, deletes: bool = False
    ) -> None:
        super().__init__(plan, preview=preview)
        self.fresh_after = fresh_after
        self.deletes = deletes  # the platform deletes messages
        self._fresh_checked = False
        self._deletes: list[_Deletion] = []

    # -- fresh final ----------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        if self.plan.ended and not self._fresh_checked:
            self._fresh_checked = True
            self._freshen(now)

    def _freshen(self, now: float) -> None:
        """At the turn's end: send the answer anew if its preview has been up long enough."""
        plan, seg = self.plan, self.plan.answer
        if self.fresh_after <= 0 or seg is None:
            return
        previews = [
            plan.slots[i]
            for i in seg.run
            if plan.slots[i].message_id is not None and not plan.slots[i].dead
        ]
        if not previews or now - min(p.sent_at for p in previews) < self.fresh_after:
            return
        for slot in previews:
            assert slot.message_id is not None and slot.shown is not None
            slot.replaces = (slot.message_id, slot.shown)
            slot.message_id, slot.shown, slot.failures = None, None, 0
            slot.retry_at = float("-inf")

    def landed(self, index: int) -> None:
        slot = self.plan.slots[index]
        if slot.replaces is not None:
            self._deletes.append(_Deletion(slot.replaces[0]))
            slot.replaces = None
        super().landed(index)

    def copy_failed(
        self, slot: Slot, throttle: Throttle, now: float, *, maybe_landed: bool
    ) -> bool:
        if slot.replaces is None:
            return False
        if not maybe_landed:
            # The fresh copy did not go out: finish the preview in place instead.
            slot.message_id, slot.shown = slot.replaces
            slot.replaces = None
            slot.retry_at = now + throttle.interval
            return True
        # Counted as delivered, like any send whose answer was lost.
        self._deletes.append(_Deletion(slot.replaces[0]))
        slot.replaces = None
        return False

    # -- deletes --------------------------------------------------------------------------------
    def surplus(self, slot: Slot) -> None:
        """Deleted where the platform can (else it shows ``…``)."""
        if self.deletes and slot.message_id is not None and slot.want == EMPTY:
            self._deletes.append(_Deletion(slot.message_id))
            slot.dead = slot.cleaned = True

    def aside(self, throttle: Throttle, now: float, idle: bool) -> Action | None:
        if not idle:
            return None
        if not self._deletes:
            throttle.withdraw()
            return None
        deletion = self._deletes[0]
        if self._delete_ready_at(throttle, deletion, now) <= now:
            throttle.spend("send", now, _DELETE)
            return Delete(deletion.message_id)
        return None

    def aside_due(self, throttle: Throttle, now: float, idle: bool) -> float | None:
        if not idle:
            return None
        if not self._deletes:
            throttle.withdraw()
            return None
        return self._delete_ready_at(throttle, self._deletes[0], now)

    @staticmethod
    def _delete_ready_at(throttle: Throttle, deletion: _Deletion, now: float) -> float:
        if deletion.retry_at > now:
            throttle.withdraw()
            return deletion.retry_at
        # The chat's own budget counts it like a send; the shared ones by its own kind (Slack
        # limits chat.delete per workspace).
        return throttle.ready_at("send", now, "final", _DELETE)

    def aside_landed(self, action: Draft | Delete) -> None:
        if isinstance(action, Delete):
            self._deletes.pop(0)

    def aside_failed(self, action: Draft | Delete, throttle: Throttle, now: float) -> None:
        if isinstance(action, Draft):
            return  # (one in flight when drafts were refused) a preview only
        deletion = self._deletes[0]
        deletion.failures += 1
        deletion.retry_at = now + throttle.interval
        if deletion.failures >= FINAL_ATTEMPTS:
            self._deletes.pop(0)  # the preview stays: the answer shows twice, never lost

    @property
    def settled(self) -> bool:
        return not self._deletes

    def close(self) -> None:
        self._deletes.clear()
