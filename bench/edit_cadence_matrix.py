"""Edit cadence on Matrix, against a real Synapse (``bench/edit_cadence.py --matrix-rooms N``).

Synapse runs as a homeserver ships (its default ``rc_message``: 0.2 events a second per user,
bursts of 10), from the side venv the tests use (tests/chat/matrix/synapse.py). ``N`` people
each ask the bot in a direct room of their own at once; each reply streams for
``--matrix-seconds`` at ``--rate`` deltas a second through the whole gateway (``ChatSurface``,
the real ``MatrixPlatform``). Two runs: the bot on Synapse's default limit with the default
``platforms.matrix.budgets``, then with budgets well over that limit (the 429s are met and
waited out), then with the bot's limit lifted (the admin API's
``override_ratelimit``, as a homeserver admin does for a bot) and budgets to match.

Prints per run: edits per reply (p50/max), ``M_LIMIT_EXCEEDED`` answers the bot met, the first
visible text after the person asked (p50/max, seen on the person's own ``/sync``), and replies
whole (the last edit's text is the reply) and in one message. Then one ``/stop``: the seconds
from the person's message to the model's stream being cut (target under a second).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.chat.matrix.harness import joined, messages
from tests.chat.matrix.synapse import Person, Synapse, running, shown
from tests.fakes.upstream import FakeUpstream, hold, responder, text

from iris.config import config_from_dict
from iris.runtime import Runtime
from iris.surfaces.chat.platforms.matrix import MatrixPlatform
from iris.surfaces.chat.platforms.matrix_api import MatrixApi
from iris.surfaces.chat.runner import ChatSurface


@dataclass
class Run:
    label: str
    edits: list[int]
    limited: int
    first: list[float]
    whole: int
    rooms: int


def _config(
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    store: str,
    allowed: list[str],
    budgets: dict[str, Any] | None,
) -> Any:
    matrix: dict[str, Any] = {
        "enabled": True,
        "homeserver": synapse.url,
        "user_id": bot[0],
        "access_token": bot[1],
        "allowed_users": allowed,
        "sync_timeout": 5,
    }
    if budgets is not None:
        matrix["budgets"] = budgets
    return config_from_dict(
        {
            "store": {"path": store},
            "model": {
                "provider": "chat_completions",
                "base_url": upstream.base_url,
                "name": "fake-model",
                "api_key": "sk-bench-0123456789",
            },
            "tools": {"enabled": []},
            "streaming": {"enabled": True},
            "platforms": {
                "api_server": {"enabled": False},
                "iris": {"enabled": False},
                "matrix": matrix,
            },
        },
        env={},
    )


async def _people(synapse: Synapse, count: int, bot: str) -> list[tuple[Person, str]]:
    people: list[tuple[Person, str]] = []
    for _ in range(count):
        user_id, token = synapse.register("person")
        person = Person(MatrixApi(synapse.url, token), user_id)
        person.start_sync()
        people.append((person, await person.room(bot, direct=True)))
    return people


FAST = {"bot": {"calls": 20, "per": 1.0}, "room": {"calls": 1, "per": 1.0}}


async def run_once(
    synapse: Synapse, args: argparse.Namespace, label: str, *, lifted: bool, fast: bool
) -> Run:
    bot = synapse.register("iris")
    budgets = FAST if fast else None
    if lifted:
        _, admin = synapse.register("admin", admin=True)
        synapse.limit(admin, bot[0], 0, 0)  # 0: no limit for this user
    chunks = [f"w{i} " for i in range(int(args.matrix_seconds * args.rate))]
    reply = "".join(chunks).strip()
    people = await _people(synapse, args.matrix_rooms, bot[0])
    with FakeUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        upstream.default = responder(lambda _: text(*chunks, delay=1 / args.rate))
        config = _config(
            upstream, synapse, bot, f"{tmp}/iris.db", [p.user_id for p, _ in people], budgets
        )
        runtime = Runtime.create(config)
        surface = ChatSurface(runtime)
        await surface.start()
        (platform,) = surface.platforms
        assert isinstance(platform, MatrixPlatform)
        for person, room in people:
            await joined(person, room, bot[0])
        asked: list[float] = []
        for person, room in people:
            asked.append(time.monotonic())
            await person.say(room, "a question")
        for person, room in people:
            await person.wait_until(
                lambda p=person, r=room: shown(messages(p, r, bot[0])) == [reply], 600
            )
        await surface.idle()
        limited = platform.api.limited
        await surface.stop()
        await runtime.agent.aclose()
        runtime.store.close()
    edits, first, whole = [], [], 0
    for (person, room), at in zip(people, asked, strict=True):
        sent = [s for s in person.timeline if s.room_id == room and s.event.get("sender") == bot[0]]
        sent = [s for s in sent if s.event.get("type") == "m.room.message"]
        edits.append(sum(1 for s in sent if "m.new_content" in s.event["content"]))
        first.append(sent[0].at - at if sent else float("nan"))
        whole += shown([s.event for s in sent]) == [reply]
        await person.stop_sync()
    return Run(label, edits, limited, first, whole, len(people))


async def stop_latency(synapse: Synapse, args: argparse.Namespace) -> float:
    """Seconds from a person's ``/stop`` to the model's stream being cut (the default limit)."""
    bot = synapse.register("iris")
    ((person, room),) = await _people(synapse, 1, bot[0])
    with FakeUpstream() as upstream, tempfile.TemporaryDirectory() as tmp:
        upstream.script(hold(*(f"w{i} " for i in range(40))))
        config = _config(upstream, synapse, bot, f"{tmp}/iris.db", [person.user_id], None)
        runtime = Runtime.create(config)
        surface = ChatSurface(runtime)
        await surface.start()
        await joined(person, room, bot[0])
        await person.say(room, "go")
        await person.wait_until(lambda: shown(messages(person, room, bot[0])), 60)
        asked = time.monotonic()
        await person.say(room, "/stop")
        await asyncio.to_thread(upstream.disconnected.wait, 30)
        cut = (upstream.disconnected_at or float("nan")) - asked
        await surface.idle()
        await surface.stop()
        await runtime.agent.aclose()
        runtime.store.close()
    await person.stop_sync()
    return cut


async def matrix(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory() as folder,
        running(Path(folder), default_rc_message=True) as synapse,
    ):
        if synapse is None:
            print("\nmatrix: Synapse is not installed (see tests/chat/matrix/synapse.py): skipped")
            return
        runs = [
            await run_once(
                synapse, args, "default limit, default budgets", lifted=False, fast=False
            ),
            await run_once(
                synapse, args, "default limit, budgets over it (20/s)", lifted=False, fast=True
            ),
            await run_once(
                synapse, args, "bot's limit lifted, budgets 20/s", lifted=True, fast=True
            ),
        ]
        stopped = await stop_latency(synapse, args)
    print(
        f"\nmatrix: {args.matrix_rooms} direct rooms at once on a real Synapse, replies of"
        f" {args.matrix_seconds:.0f} s at {args.rate:.0f} deltas/s"
    )
    print(
        f"{'run':<44}{'edits p50':>10}{'max':>5}{'429s':>6}{'first p50':>11}{'max':>7}{'whole':>7}"
    )
    for run in runs:
        print(
            f"{run.label:<44}{statistics.median(run.edits):>10.0f}{max(run.edits):>5}"
            f"{run.limited:>6}{statistics.median(run.first):>10.2f}s{max(run.first):>6.2f}s"
            f"{f'{run.whole}/{run.rooms}':>7}"
        )
    print(f"/stop: the model's stream cut {stopped:.2f} s after the person sent it (target < 1 s)")
    print(
        "target: every reply whole in one message; 429s (M_LIMIT_EXCEEDED) waited out, few where"
        " the budgets match the homeserver's limit; first visible text within ~2 x edit_interval"
    )
