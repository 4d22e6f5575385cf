"""One reply in a chat: which messages it occupies and which call comes next. Pure.

- ``plan.Reply``: the planner's core. It reads the turn's events as segments (a segment opens,
  grows, is reset where a retry diverged, and closes with its final text) and tool batches,
  hears the platform's answers (``landed``, ``rate_limited``, ``failed``) and says what to do
  (``next_action``) and when to ask again (``due``), given the chat's ``Throttle`` and a
  ``now`` from the caller's clock. It never sleeps and never calls a platform;
  ``consumer.StreamConsumer`` does that.
- ``calls``: what the core hands the transport (``Send``, ``Edit``, ``Delete``, ``Draft``)
  and keeps of each message (``Slot``).
- one layout per mode, chosen once when the reply is made (``plan.layout_for``, the mode from
  ``transport.plan_for``): ``layout.Layout`` is the base (text split over messages that grow in
  place), ``EditLayout`` (preview, fresh final, deletes), ``DraftLayout`` (Telegram drafts; it
  hands over to an ``EditLayout`` where drafts are refused), ``StreamLayout`` (Slack streams)
  and ``BlocksLayout`` (platforms that cannot edit: paragraph-sized blocks, ``block_end``).

A reply is a list of slots, one per platform message, in chat order: the text parts of each
segment (a long segment continues in a new message at the limit), one tool-progress message per
batch of tool calls, and a failure notice. A slot is *pending* when what it should show
(``want``) differs from what the platform shows (``shown``): unchanged text is never re-sent.

Delivery rules the core owns, whatever the layout:

- an edit waits ``edit_interval`` after the last visible update, or goes as soon as
  ``buffer_threshold`` new characters wait; either way no sooner than the chat's and the bot's
  budgets allow.
- flood control: a failed preview edit is retried no sooner than the throttle allows; after
  ``PREVIEW_ATTEMPTS`` failures in a row the message is abandoned, the segment stops streaming,
  and at its close the unseen remainder is sent as new messages. A final delivery is tried up
  to ``FINAL_ATTEMPTS`` times.
- a send whose answer was lost (``maybe_landed``) counts as landed but uneditable: never
  re-sent, its unseen remainder continues in a new message.

Which of the bot's shared budgets an action waits for depends on the calls it becomes, which
only the transport knows (a Slack stream's edit is an append, or, once the stream was left, a
``chat.update``): ``draws`` (the transport's, a pure look at its state) names them.
"""

from iris.surfaces.chat.reply.blocks import CORRECTION, INTERRUPTED, BlocksLayout, block_end
from iris.surfaces.chat.reply.calls import (
    FINAL_ATTEMPTS,
    PREVIEW_ATTEMPTS,
    Action,
    Delete,
    Draft,
    Edit,
    Send,
    Slot,
    plain_draws,
)
from iris.surfaces.chat.reply.draft import DRAFT_REFRESH, DraftLayout
from iris.surfaces.chat.reply.edit import EditLayout
from iris.surfaces.chat.reply.layout import CURSOR, EMPTY, Layout
from iris.surfaces.chat.reply.plan import Mode, Reply, layout_for
from iris.surfaces.chat.reply.stream import StreamLayout

__all__ = [
    "CORRECTION",
    "CURSOR",
    "DRAFT_REFRESH",
    "EMPTY",
    "FINAL_ATTEMPTS",
    "INTERRUPTED",
    "PREVIEW_ATTEMPTS",
    "Action",
    "BlocksLayout",
    "Delete",
    "Draft",
    "DraftLayout",
    "Edit",
    "EditLayout",
    "Layout",
    "Mode",
    "Reply",
    "Send",
    "Slot",
    "StreamLayout",
    "block_end",
    "layout_for",
    "plain_draws",
]
