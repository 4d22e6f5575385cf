"""A model for conversations that outgrow its window: long replies, and summaries on request.

    upstream.context_limit = 30_000            # characters, refused like OpenAI past it
    model = LongChat(reply_chars=2_000)
    upstream.default = model.scenario          # answers whatever is not scripted

Replies are numbered (``reply 7: ...``) and report usage as a real provider would (about four
characters a token), so Iris calibrates its estimate from it. A request whose first message
is Iris's summary instructions gets a summary naming the replies it saw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tests.fakes.scenarios import Received, Scenario, request_chars, responder, text

SUMMARIZER = "You compress conversations"


def is_summary_request(request: Received) -> bool:
    messages = request.body.get("messages") or []
    return bool(messages) and SUMMARIZER in str(messages[0].get("content"))


@dataclass
class LongChat:
    reply_chars: int = 2_000
    replies: int = 0
    summaries: list[str] = field(default_factory=list[str])

    @property
    def scenario(self) -> Scenario:
        return responder(self._answer, "long_chat")

    def _answer(self, request: Received) -> Scenario:
        tokens = max(1, request_chars(request.body) // 4)
        if is_summary_request(request):
            seen = re.findall(r"reply (\d+):", str(request.body["messages"][1]["content"]))
            summary = f"summary {len(self.summaries) + 1} (replies {', '.join(seen) or 'none'})"
            self.summaries.append(summary)
            return text(summary, usage=(tokens, 20))
        self.replies += 1
        head = f"reply {self.replies}: "
        body = ("lorem ipsum " * (self.reply_chars // 12 + 1))[: self.reply_chars - len(head)]
        return text(head, body, usage=(tokens, self.reply_chars // 4))
