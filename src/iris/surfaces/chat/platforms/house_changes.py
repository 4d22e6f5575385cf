"""Which state changes of the house become messages to the agent, and when. Pure: callers pass ``now``.

Home Assistant sends every ``state_changed`` of every entity; ``Changes`` keeps those of the
watched entities (``platforms.homeassistant.watch``) and says when a message is due:

- a change waits ``settle`` seconds (the platform's ``debounce``), so changes that come together
  (a door opening, the hall light switching on) are one message;
- per entity, a message comes at most once per ``cooldown`` seconds: the changes in between are
  one change, from the first old state to the newest new one (a burst of a flapping sensor is
  one line), and none at all when the entity is back where the last message left it;
- an attribute change alone (the state the same) counts only with ``attributes``;
- after a reconnect, the states Home Assistant holds now are compared with the last ones seen
  (``resync``): what changed while the connection was down is one change per entity, said as
  such, never the missed events replayed as if new.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from iris.config import HomeAssistantWatch

State = dict[str, Any]  # a Home Assistant state object: entity_id, state, attributes, ...


def matches(entity_id: str, patterns: Iterable[str]) -> bool:
    """Does an entity id match one of the ids or globs (``light.*``)?"""
    return any(fnmatchcase(entity_id, pattern) for pattern in patterns)


def watched(entity_id: str, watch: HomeAssistantWatch) -> bool:
    domain = entity_id.partition(".")[0]
    named = matches(entity_id, watch.entities) or domain in watch.domains
    return named and not matches(entity_id, watch.ignore)


@dataclass(frozen=True, slots=True)
class Change:
    entity_id: str
    old: State | None
    new: State | None
    missed: bool = False  # it happened while the connection was down

    def line(self) -> str:
        """The change as the agent reads it."""
        name = _name(self.new) or _name(self.old) or self.entity_id
        before, after = _state(self.old), _state(self.new)
        when = " while Iris was not connected" if self.missed else ""
        if self.new is None:
            return f"- {name} ({self.entity_id}) was removed{when} (it was {before})."
        if before == after:
            return f"- {name} ({self.entity_id}): attributes changed{when} (state {after})."
        return f"- {name} ({self.entity_id}) changed from {before} to {after}{when}."


def _name(state: State | None) -> str:
    if state is None:
        return ""
    attributes = state.get("attributes")
    name = attributes.get("friendly_name") if isinstance(attributes, dict) else None
    return name if isinstance(name, str) else ""


def _state(state: State | None) -> str:
    return "unknown" if state is None else str(state.get("state", "unknown"))


@dataclass(slots=True)
class _Entity:
    reported: State | None  # the state the last message (or the baseline) left it in
    reported_at: float = float("-inf")
    first_old: State | None = None  # the state before the pending changes
    newest: State | None = None
    pending_since: float | None = None
    missed: bool = False


@dataclass
class Changes:
    watch: HomeAssistantWatch
    settle: float
    _entities: dict[str, _Entity] = field(default_factory=dict[str, _Entity])

    def baseline(self, states: Sequence[State]) -> None:
        """The states at the first connection: what later changes are measured from."""
        for state in states:
            entity_id = str(state.get("entity_id", ""))
            if watched(entity_id, self.watch):
                self._entities[entity_id] = _Entity(state)

    def offer(self, entity_id: str, old: State | None, new: State | None, now: float) -> None:
        """One ``state_changed`` event."""
        if not watched(entity_id, self.watch):
            return
        entity = self._entities.setdefault(entity_id, _Entity(old))
        if entity.pending_since is None:
            entity.first_old, entity.pending_since = entity.reported, now
        entity.newest = new

    def resync(self, states: Sequence[State], now: float) -> None:
        """After a reconnect: the states now, against the last ones seen."""
        current = {str(s.get("entity_id", "")): s for s in states}
        for entity_id in set(current) | set(self._entities):
            if not watched(entity_id, self.watch):
                continue
            entity = self._entities.setdefault(entity_id, _Entity(None))
            seen = entity.newest if entity.pending_since is not None else entity.reported
            new = current.get(entity_id)
            if self._differs(seen, new):
                self.offer(entity_id, seen, new, now)
                entity.missed = True

    def due(self, now: float) -> float | None:
        """When the next message is due (None: nothing waits)."""
        times = [self._due(e) for e in self._entities.values() if e.pending_since is not None]
        return min(times) if times else None

    def take(self, now: float) -> list[Change]:
        """The changes due now, in entity order; each entity's pending changes are taken."""
        changes: list[Change] = []
        for entity_id in sorted(self._entities):
            entity = self._entities[entity_id]
            if entity.pending_since is None or self._due(entity) > now:
                continue
            if self._differs(entity.reported, entity.newest):
                changes.append(Change(entity_id, entity.reported, entity.newest, entity.missed))
                entity.reported_at = now
            entity.reported, entity.pending_since, entity.missed = entity.newest, None, False
        return changes

    def _due(self, entity: _Entity) -> float:
        assert entity.pending_since is not None
        return max(entity.pending_since + self.settle, entity.reported_at + self.watch.cooldown)

    def _differs(self, old: State | None, new: State | None) -> bool:
        if (old is None) != (new is None):
            return True
        if old is None or new is None:
            return False
        if old.get("state") != new.get("state"):
            return True
        return self.watch.attributes and old.get("attributes") != new.get("attributes")
