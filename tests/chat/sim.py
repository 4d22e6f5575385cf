"""A virtual-time run of ``Reply`` + ``Throttle``: timed events in, the chat's timeline out.

The same loop as ``StreamConsumer`` (next action, else sleep until due or the next event), but
on a virtual clock, so cadence tests are exact and instant. ``outcomes`` scripts what the
platform answers per call, in call order: None (ok), ``RateLimited(s)`` or ``Failed(maybe)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iris.config import ResolvedDisplay
from iris.events import Event
from iris.surfaces.chat.platform import Capabilities, RateBudget
from iris.surfaces.chat.reply import CURSOR, Edit, Reply, Send
from iris.surfaces.chat.throttle import Throttle

TELEGRAM = Capabilities(
    can_edit=True, max_length=4096, length_unit="utf16", rate=RateBudget(1, 1.0)
)


@dataclass(frozen=True)
class RateLimited:
    retry_after: float


@dataclass(frozen=True)
class Failed:
    maybe_landed: bool = False


Outcome = RateLimited | Failed | None


@dataclass(frozen=True)
class SimCall:
    t: float
    kind: str  # "send" | "edit" | "cleanup"
    message_id: str
    text: str
    ok: bool


@dataclass
class SimResult:
    calls: list[SimCall] = field(default_factory=list[SimCall])
    messages: dict[str, str] = field(default_factory=dict[str, str])
    order: list[str] = field(default_factory=list[str])
    end: float = 0.0

    def chat(self) -> list[str]:
        return [self.messages[m] for m in self.order]

    def ok_calls(self) -> list[SimCall]:
        return [c for c in self.calls if c.ok]


def display(**over: object) -> ResolvedDisplay:
    base: dict[str, object] = {
        "show_reasoning": False,
        "reasoning_style": "code",
        "tool_progress": "all",
        "edit_interval": 1.5,
        "buffer_threshold": 24,
        "min_tokens": 3,
    }
    base.update(over)
    return ResolvedDisplay.model_validate(base)


def deltas(
    words: list[str], *, start: float = 0.0, every: float = 0.1
) -> list[tuple[float, Event]]:
    from iris.events import TextDelta

    return [(start + i * every, TextDelta(w)) for i, w in enumerate(words)]


def simulate(
    events: list[tuple[float, Event]],
    *,
    caps: Capabilities = TELEGRAM,
    shown: ResolvedDisplay | None = None,
    preview: bool = True,
    budget: RateBudget | None = None,
    outcomes: list[Outcome] | None = None,
    latency: float = 0.05,
    horizon: float = 3600.0,
) -> SimResult:
    shown = shown or display()
    reply = Reply(caps, shown, preview=preview)
    throttle = Throttle(budget or caps.rate, shown.edit_interval)
    script = list(outcomes or [])
    result = SimResult()
    pending = sorted(events, key=lambda item: item[0])
    t = 0.0
    i = 0

    def feed(until: float) -> None:
        nonlocal i
        while i < len(pending) and pending[i][0] <= until:
            if not reply.ended:  # like the consumer's pump: nothing after the last event
                reply.apply(pending[i][1])
            i += 1

    while t < horizon:
        feed(t)
        action = reply.next_action(throttle, t)
        if action is not None:
            outcome = script.pop(0) if script else None
            done = t + latency
            feed(done)  # events keep arriving while the call is in flight
            kind = "send" if isinstance(action, Send) else "edit"
            if isinstance(action, Edit) and action.cleanup:
                kind = "cleanup"
            message_id = (
                str(len(result.order) + 1) if isinstance(action, Send) else action.message_id
            )
            result.calls.append(SimCall(t, kind, message_id, action.text, outcome is None))
            match outcome:
                case None:
                    result.messages[message_id] = action.text
                    if isinstance(action, Send):
                        result.order.append(message_id)
                        reply.landed(action, throttle, message_id)
                    else:
                        reply.landed(action, throttle)
                case RateLimited(retry_after=seconds):
                    reply.rate_limited(action, throttle, seconds, done)
                case Failed(maybe_landed=maybe):
                    if maybe and isinstance(action, Send):
                        result.messages[message_id] = action.text
                        result.order.append(message_id)
                    reply.failed(action, throttle, done, maybe_landed=maybe)
            t = done
            continue
        if i >= len(pending) and reply.settled:
            result.end = t
            return result
        due = reply.due(throttle, t)
        upcoming = pending[i][0] if i < len(pending) else None
        candidates = [x for x in (due, upcoming) if x is not None]
        assert candidates, "stuck: nothing due and no events left, but not settled"
        t = max(t, min(candidates))
    raise AssertionError(f"not settled after {horizon} virtual seconds")


def visible(text: str) -> str:
    return text.removesuffix(CURSOR)
