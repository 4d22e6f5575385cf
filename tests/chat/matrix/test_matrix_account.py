"""The Matrix bot's account against a real Synapse: a password login kept, whose invites it
takes, and what it does not answer in a room it just joined."""

from __future__ import annotations

import stat

import pytest

from iris.surfaces.chat.platforms.matrix import kept_path
from iris.surfaces.chat.platforms.matrix_api import quoted
from tests.chat.matrix.harness import gateway, joined, matrix_config, messages
from tests.chat.matrix.synapse import Person, Synapse, shown
from tests.conftest import MakeConfig
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(150)


async def test_a_password_login_is_made_once_and_its_token_kept_private(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    localpart = bot[0].removeprefix("@").split(":")[0]
    monkeypatch.setenv("IRIS_TEST_MATRIX_PASSWORD", f"pw-{localpart}")
    password = {
        "access_token": "",
        "access_token_env": None,
        "password_env": "IRIS_TEST_MATRIX_PASSWORD",
    }
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id], matrix=password)
    room = await alice.room(bot[0], direct=True)
    upstream.script(text("Logged in."))
    async with gateway(config) as (surface, platform):
        await joined(alice, room, bot[0])
        await alice.say(room, "hi")
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == ["Logged in."])
        await surface.idle()
        token = platform.api.token
    path = kept_path(config.store.resolved_path().parent / "matrix", config.platforms.matrix)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token and token in path.read_text()
    monkeypatch.setenv("IRIS_TEST_MATRIX_PASSWORD", "wrong now")  # the kept token is used
    async with gateway(config) as (_, platform):
        assert platform.api.token == token


async def test_only_an_allowed_persons_invite_is_taken_and_earlier_talk_is_not_answered(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
    bob: Person,
) -> None:
    config = matrix_config(make_config, upstream, synapse, bot, [alice.user_id])
    upstream.script(text("Here now."))
    strangers = await bob.room(bot[0], direct=True)
    room = await alice.room(bot[0], direct=True)
    await alice.say(room, "said before the bot joined")  # the invite waits for the bot
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "now?")
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == ["Here now."])
        await surface.idle()
    assert [r.body["messages"][-1]["content"] for r in upstream.requests] == ["now?"]
    members = await bob.api.call("GET", f"/rooms/{quoted(strangers)}/joined_members")
    assert bot[0] not in members["joined"], "a stranger's invite is left alone"


async def test_the_rooms_configured_are_joined_at_start(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    synapse: Synapse,
    bot: tuple[str, str],
    alice: Person,
) -> None:
    room = await alice.room(public=True)  # nobody invited: the config names it
    config = matrix_config(
        make_config, upstream, synapse, bot, [alice.user_id], matrix={"rooms": [room]}
    )
    upstream.script(text("Joined."))
    async with gateway(config) as (surface, _):
        await joined(alice, room, bot[0])
        await alice.say(room, "anyone?")
        await alice.wait_until(lambda: shown(messages(alice, room, bot[0])) == ["Joined."])
        await surface.idle()
