"""Which state changes become messages, and when: the pure core fed lists and a clock."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iris.config import HomeAssistantWatch
from iris.surfaces.chat.platforms.house_changes import Change, Changes, watched

WATCH = HomeAssistantWatch(entities=["binary_sensor.*"], ignore=["*_battery"], cooldown=30.0)


def state(entity_id: str, value: str, **attributes: object) -> dict[str, object]:
    return {"entity_id": entity_id, "state": value, "attributes": attributes}


def drain(changes: Changes, until: float) -> list[tuple[float, Change]]:
    """Every message taken when due, up to ``until``."""
    out: list[tuple[float, Change]] = []
    while (due := changes.due(0.0)) is not None and due <= until:
        out += [(due, change) for change in changes.take(due)]
    return out


def test_globs_domains_and_ignore() -> None:
    watch = HomeAssistantWatch(
        entities=["binary_sensor.front_*"], domains=["lock"], ignore=["*_battery"]
    )
    assert watched("binary_sensor.front_door", watch)
    assert watched("lock.back", watch)
    assert not watched("binary_sensor.front_door_battery", watch)
    assert not watched("light.hall", watch)
    assert not watched("light.hall", HomeAssistantWatch())  # nothing named: nothing watched


@given(
    st.lists(
        st.tuples(st.floats(0, 100, allow_nan=False), st.sampled_from(["on", "off", "open"])),
        min_size=1,
        max_size=40,
    )
)
def test_one_entity_speaks_at_most_once_per_cooldown_and_ends_where_it_is(
    events: list[tuple[float, str]],
) -> None:
    changes = Changes(WATCH, settle=1.0)
    door = "binary_sensor.door"
    changes.baseline([state(door, "off")])
    current = "off"
    out: list[tuple[float, Change]] = []
    for at, value in sorted(events):
        out += drain(changes, at)
        changes.offer(door, state(door, current), state(door, value), at)
        current = value
    out += drain(changes, 10_000.0)
    times = [t for t, _ in out]
    assert all(b - a >= WATCH.cooldown - 1e-9 for a, b in zip(times, times[1:], strict=False))
    # Each message starts where the last one left the entity, and none says nothing changed.
    said = "off"
    for _, change in out:
        assert change.old is not None and change.old["state"] == said
        assert change.new is not None and change.new["state"] != said
        said = change.new["state"]
    assert said == current  # the house's last state is what the agent was told last


def test_a_flap_back_to_where_it_was_says_nothing() -> None:
    changes = Changes(WATCH, settle=1.0)
    door = "binary_sensor.door"
    changes.baseline([state(door, "off")])
    changes.offer(door, state(door, "off"), state(door, "on"), 0.0)
    changes.offer(door, state(door, "on"), state(door, "off"), 0.5)
    assert drain(changes, 100.0) == []


def test_attribute_changes_count_only_when_asked() -> None:
    door = "binary_sensor.door"
    for attributes, expected in ((False, 0), (True, 1)):
        watch = WATCH.model_copy(update={"attributes": attributes})
        changes = Changes(watch, settle=0.0)
        changes.baseline([state(door, "on", battery=90)])
        changes.offer(door, state(door, "on", battery=90), state(door, "on", battery=80), 0.0)
        assert len(drain(changes, 10.0)) == expected


def test_a_resync_says_each_missed_change_once_as_missed() -> None:
    changes = Changes(WATCH, settle=0.0)
    door, window = "binary_sensor.door", "binary_sensor.window"
    changes.baseline([state(door, "off"), state(window, "off")])
    changes.resync([state(door, "on"), state(window, "off")], 5.0)
    [(_, change)] = drain(changes, 10.0)
    assert change.entity_id == door and change.missed
    assert "while Iris was not connected" in change.line()
    changes.resync([state(door, "on"), state(window, "off")], 20.0)  # nothing new
    assert drain(changes, 100.0) == []
