"""What two processes on one shared store must do together, written once: devices on both
seeing one log and resuming on the other, one turn per chat and a stop or a killed owner
across them, stored responses / background runs / paired devices across them, and a standby
poller taking over a bot. The tests on one Redis node (``test_fanout_two_processes``,
``test_turns_processes``, ``test_data_*``) and on each topology past it (``test_topologies``:
a cluster, Sentinels) run these bodies with their own processes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openai import OpenAI

from tests.api.background_runs import payload, until
from tests.api.openresponses import valid_response
from tests.fakes.served import Served
from tests.fakes.telegram_api import FakeBotApi
from tests.fakes.upstream import FakeUpstream, gated, hold, text
from tests.scale.conftest import LEASE, Shared, serve_on_redis
from tests.scale.devices import chat_frames, device, essential, increasing
from tests.scale.pollers import CHAT, USER, bot_servers, said
from tests.scale.processes import TOKEN, Process
from tests.socket.conftest import Device
from tests.socket.pairing import iris, pair


@contextlib.contextmanager
def data_processes(
    tmp_path: Path, upstream: FakeUpstream, shared: Shared, store: dict[str, Any]
) -> Iterator[tuple[Process, Process]]:
    """``tests/scale/test_data_processes.py``'s two processes, on ``shared``."""
    with serve_on_redis(
        tmp_path,
        upstream.base_url,
        shared,
        store=store,
        platforms={"iris": {"enabled": True, "tokens": [TOKEN]}},
    ) as running:
        started = [
            Process(served, url, tmp_path / f"{name}.yaml")
            for name, (served, url) in zip(("a", "b"), running, strict=True)
        ]
        for process in started:
            process.config.chmod(0o600)
        yield started[0], started[1]


async def data_across_processes(upstream: FakeUpstream, processes: tuple[Process, Process]) -> None:
    """Stored responses, background runs and paired devices work across the two processes, and
    no command was refused for keys in different slots."""
    await asyncio.to_thread(a_run_on_a_is_cancelled_through_b, upstream, processes)
    await asyncio.to_thread(
        a_response_stored_through_a_is_continued_through_b,
        upstream,
        processes,
    )
    await asyncio.to_thread(
        a_run_on_a_is_polled_and_resumed_through_b_with_no_gap_and_no_duplicate,
        upstream,
        processes,
    )
    await a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both(processes)
    for process in processes:
        assert not any("CROSSSLOT" in line for line in process.served.drain())


async def standby_poller_takes_over(
    tmp_path: Path, upstream: FakeUpstream, shared: Shared, store: dict[str, Any]
) -> None:
    """Two pollers for one bot: one polls, the other stands by and takes over after kill -9."""
    async with (
        FakeBotApi() as api,
        bot_servers(tmp_path, upstream, shared, api, lease=1, store_keys=store) as start,
    ):
        a = await start("a")
        await api.wait_until(lambda: "a" in api.polled_by)
        b = await start("b")
        assert any("telegram: standing by" in line for line in b.drain()), b.log
        a.process.kill()  # kill -9: its lease runs out
        await api.wait_until(lambda: "b" in api.polled_by, within=15)
        upstream.script(text("hello from the survivor"))
        api.user_says(chat_id=CHAT, user_id=USER, text="still there?")
        await api.wait_until(lambda: said(api, "hello from the survivor"), within=15)
        assert not any("Traceback" in line for line in b.drain()), b.log


async def devices_on_both_processes_see_one_log(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    upstream.script(gated("one ", "two ", "three ", "four", after=2))
    a_url, b_url = two
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "count"})
    # The turn runs on A; B's device sees the reply stream while the upstream still holds it.
    early = await on_b.until("message.update", text="one two ")
    assert not upstream.finished.is_set()
    assert [f["type"] for f in essential(early)] == ["message", "typing", "message.start"]
    assert early[0]["text"] == "count"
    upstream.release()
    a_got, b_got = await on_a.turn(), await on_b.turn()
    b_all = early + b_got
    assert increasing(a_got) and increasing(b_all)
    # Same seqs, same frames: the user's own echo is the only frame A's sender is not sent.
    assert essential(b_all)[1:] == essential(a_got)
    by_seq = {f["seq"]: f for f in a_got}
    assert all(by_seq[f["seq"]] == f for f in b_all if f["seq"] in by_seq)
    assert a_got[-2]["type"] == "message.stop" and a_got[-2]["final_text"] == "one two three four"
    await on_a.close()
    await on_b.close()


async def a_device_resumes_on_the_other_process_without_gap_or_duplicate(
    two: tuple[str, str], upstream: FakeUpstream
) -> None:
    upstream.script(gated("one ", "two ", "three ", "four", after=2))
    a_url, b_url = two
    stays, moves = await device(a_url), await device(a_url)
    await stays.send({"type": "message.send", "text": "count"})
    await moves.until("message.update", text="one two ")
    seen = moves.max_seq
    await moves.close()  # the device loses A mid-reply ...
    upstream.release()
    whole = await stays.turn()
    back = await device(b_url, after_seq=seen)  # ... and comes back through B
    assert back.frames[0]["seq"] == seen  # ready: the position it resumes from
    rest = chat_frames(await back.turn())
    assert all(f["seq"] > seen for f in rest) and increasing(rest)
    missed = [f for f in whole if f["seq"] > seen]
    # Nothing essential missed or repeated; an update superseded before it was read may be gone.
    assert essential(rest) == essential(missed)
    assert rest[-2]["final_text"] == "one two three four"
    await stays.send({"type": "message.send", "text": "again"})
    upstream.script(gated("more", after=1))
    upstream.release()
    await stays.turn()
    live = chat_frames(await back.turn())  # and B's device follows A's next turn live
    assert live[0]["seq"] == rest[-1]["seq"] + 1 and live[0]["text"] == "again"
    await stays.close()
    await back.close()


def closing(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's closing frames in the log: ``message.stop``, ``error``, ``typing {on:false}``."""
    kinds = ("message.stop", "error", "typing")
    return [f for f in frames if f["type"] in kinds and "seq" in f and f.get("on") is not True]


async def nothing_more(dev: Device) -> None:
    """A round trip shows no chat frame was waiting (nothing duplicated after the end)."""
    await dev.send({"type": "ping"})
    assert [f["type"] for f in await dev.until("pong")] == ["pong"]


async def one_turn_per_chat_and_a_stop_on_the_other_process_reaches_the_owner(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    (_, a_url), (_, b_url) = two
    upstream.script(gated("one ", "two ", "three", after=2), gated("fo", "ur", after=1))
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "count"})
    await on_b.until("message.update", text="one two ")

    # A plain message on B while A runs the turn: the same answer as on A.
    await on_b.send({"type": "message.send", "text": "and me"})
    refused = await on_b.until("error")
    assert refused[-1]["code"] == "turn_active"
    await on_a.send({"type": "message.send", "text": "and me"})
    assert (await on_a.until("error"))[-1]["code"] == "turn_active"

    # /stop on B interrupts the turn running on A; its closing frames reach both through the log.
    await on_b.send({"type": "message.send", "text": "/stop"})
    answer = await on_b.until("command")
    assert answer[-1]["text"] == "stopped"
    ended_a, ended_b = closing(await on_a.turn()), closing(await on_b.turn())
    assert ended_a == ended_b
    assert [f["type"] for f in ended_a] == ["message.stop", "typing"]
    assert ended_a[0]["final_text"] == "one two"  # where it was (an interrupted reply is trimmed)
    assert await asyncio.to_thread(upstream.disconnected.wait, 5)

    # The chat is free on either process; turn.cancel from A stops B's turn the same way.
    upstream.reset_gate()
    await on_b.send({"type": "message.send", "text": "go on"})
    await on_a.until("message.update", text="fo")
    await asyncio.to_thread(upstream.gate_reached.wait, 5)
    await on_a.send({"type": "turn.cancel"})
    ended_a, ended_b = closing(await on_a.turn()), closing(await on_b.turn())
    assert ended_a == ended_b
    assert [f["type"] for f in ended_a] == ["message.stop", "typing"]
    assert ended_a[0]["final_text"] == "fo"
    assert not any(f.get("code") == "no_turn" for f in on_a.frames)
    await nothing_more(on_a)
    await nothing_more(on_b)
    for dev in (on_a, on_b):
        await dev.close()


async def a_killed_owners_turn_is_closed_by_the_survivor_within_the_lease(
    two: list[tuple[Served, str]], upstream: FakeUpstream
) -> None:
    (owner, a_url), (_, b_url) = two
    upstream.script(gated("The sky ", "is ", "blue", after=2), text("Still blue."))
    on_a, on_b = await device(a_url), await device(b_url)
    await on_a.send({"type": "message.send", "text": "what colour is the sky?"})
    seen = await on_b.until("message.update", text="The sky is ")
    owner.process.kill()  # kill -9 mid-reply
    owner.process.wait(10)

    frames = await on_b.turn(within=LEASE + 8)
    ended = closing(frames)
    assert [f["type"] for f in ended] == ["message.stop", "error", "typing"]
    assert ended[0]["final_text"] == "The sky is "  # the text devices were shown
    assert ended[1]["code"] == "owner_lost"
    everything = chat_frames(seen + frames)
    assert increasing(everything)
    assert sum(f["type"] == "message.stop" for f in everything) == 1
    await nothing_more(on_b)

    # The survivor runs the chat from here.
    await on_b.send({"type": "message.send", "text": "sure?"})
    after = closing(await on_b.turn())
    assert after[0]["final_text"] == "Still blue."
    await on_b.close()
    await on_a.closed()  # its server is gone


def sent(upstream: FakeUpstream) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in upstream.requests[-1].body["messages"]]


def a_response_stored_through_a_is_continued_through_b(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a, b = processes
    upstream.script(text("Blue."), text("Yes, blue."))
    with a.client() as on_a, b.client() as on_b:
        first = on_a.responses.create(model="fake-model", input="sky?")
        assert on_b.responses.retrieve(first.id).output_text == "Blue."
        second = on_b.responses.create(
            model="fake-model", input="sure?", previous_response_id=first.id
        )
        assert sent(upstream) == [("user", "sky?"), ("assistant", "Blue."), ("user", "sure?")]
        assert on_a.responses.retrieve(second.id).output_text == "Yes, blue."
        # An output item made on A is referenced on B.
        upstream.script(text("Noted."))
        message = first.output[0]
        referenced: Any = [{"type": "item_reference", "id": message.id}]
        on_b.responses.create(
            model="fake-model", input=[*referenced, {"role": "user", "content": "ok"}]
        )
        assert sent(upstream) == [("assistant", "Blue."), ("user", "ok")]


async def a_device_paired_once_is_accepted_by_both_and_a_revoke_reaches_both(
    processes: tuple[Process, Process],
) -> None:
    a, b = processes
    token = await pair(a.config, "phone")

    connected = [await a.device(token), await b.device(token)]
    for each in connected:
        await each.send({"type": "ping"})
        assert (await each.recv())["type"] == "pong"
    listed = await iris(b.config, "devices", "list")  # b's config: the same Redis
    assert listed.code == 0 and listed.out.splitlines()[1].split()[0] == "phone"
    assert not listed.out.splitlines()[1].endswith("never")  # seen by a server

    revoked = await iris(b.config, "devices", "revoke", "phone")
    assert revoked.code == 0, revoked.err
    # Each process finds the revocation by itself (REVOCATION_POLL, 5 s): a hang guard here.
    for each in connected:
        assert await each.closed(within=20) == 4401
        assert each.ws.close_reason == "revoked"
    for process in (a, b):
        refused = await process.device(token, ready=False)
        assert await refused.closed() == 4401 and refused.ws.close_reason == "revoked"
    assert "phone" not in (await iris(a.config, "devices", "list")).out


def a_run_on_a_is_polled_and_resumed_through_b_with_no_gap_and_no_duplicate(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a, b = processes
    upstream.script(gated("Hel", "lo", " there", after=1))
    with a.client() as on_a, b.client() as on_b:
        first: list[dict[str, Any]] = []
        stream = on_a.responses.create(model="fake-model", input="hi", background=True, stream=True)
        for event in stream:
            first.append(payload(event))
            if event.type == "response.created":
                # Through B at once: every process knows the run before its client does.
                found = on_b.responses.retrieve(event.response.id)
                assert found.status in ("queued", "in_progress")
            if event.type == "response.output_item.added":
                break
        stream.close()  # the client drops; the turn waits at the upstream's gate, on A
        response_id = first[0]["response"]["id"]
        so_far = until(  # polled on B: the output so far, as A shared it
            lambda: (r := on_b.responses.retrieve(response_id)).output_text == "Hel" and r,
            "the first text on B",
        )
        valid_response(so_far)
        assert so_far.status == "in_progress"

        last = first[-1]["sequence_number"]
        rest: list[dict[str, Any]] = []
        for event in on_b.responses.retrieve(response_id, stream=True, starting_after=last):
            rest.append(payload(event))
            if event.type == "response.output_text.delta":
                upstream.release()  # "Hel" was replayed; what follows is live, run on A
        numbers = [e["sequence_number"] for e in first + rest]
        assert numbers == list(range(len(numbers))), "no gap, no duplicate"
        assert rest[-1]["type"] == "response.completed"
        deltas = [e["delta"] for e in first + rest if e["type"] == "response.output_text.delta"]
        assert "".join(deltas) == "Hello there"
        for client in (on_a, on_b):
            assert client.responses.retrieve(response_id).output_text == "Hello there"
        # The whole stream again, from either process, is the same events.
        on_a_again = [payload(e) for e in on_a.responses.retrieve(response_id, stream=True)]
        on_b_again = [payload(e) for e in on_b.responses.retrieve(response_id, stream=True)]
        assert on_a_again == on_b_again == first + rest


def take_until_text(client: OpenAI) -> list[Any]:
    """A streamed background run's events up to its first text; then the client drops."""
    taken: list[Any] = []
    with client.responses.create(
        model="fake-model", input="hi", background=True, stream=True
    ) as stream:
        for event in stream:
            taken.append(event)
            if event.type == "response.output_text.delta":
                break
    return taken


def a_run_on_a_is_cancelled_through_b(
    upstream: FakeUpstream, processes: tuple[Process, Process]
) -> None:
    a, b = processes
    upstream.script(hold("Hel"))
    with a.client() as on_a, b.client() as on_b:
        events = [payload(e) for e in take_until_text(on_a)]
        response_id = events[0]["response"]["id"]
        following = on_b.responses.retrieve(response_id, stream=True)
        cancelled = on_b.responses.cancel(response_id)
        valid_response(cancelled)
        assert cancelled.status == "cancelled" and cancelled.output_text == "Hel"
        assert upstream.disconnected.wait(5), "the upstream request on A stayed open"
        events = [payload(e) for e in following]  # B's follower gets the end too
        assert events[-1]["type"] == "response.incomplete"
        assert events[-1]["response"]["status"] == "cancelled"
        assert on_a.responses.retrieve(response_id).status == "cancelled"
        assert on_b.responses.cancel(response_id).status == "cancelled", "idempotent"
