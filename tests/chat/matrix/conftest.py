"""The real Synapse every Matrix test here runs against (one per test session and worker)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from iris.surfaces.chat.platforms.matrix_api import MatrixApi
from tests.chat.matrix.synapse import Person, Synapse, running, venv


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    with running(tmp_path_factory.mktemp("synapse")) as server:
        if server is None:
            pytest.skip(f"Synapse is not installed in {venv()} (.ci/run installs it there)")
        yield server


async def person(synapse: Synapse, name: str) -> Person:
    user_id, token = synapse.register(name)
    someone = Person(MatrixApi(synapse.url, token), user_id)
    someone.start_sync()
    return someone


@pytest.fixture
async def alice(synapse: Synapse) -> AsyncIterator[Person]:
    someone = await person(synapse, "alice")
    yield someone
    await someone.stop_sync()


@pytest.fixture
async def bob(synapse: Synapse) -> AsyncIterator[Person]:
    someone = await person(synapse, "bob")
    yield someone
    await someone.stop_sync()


@pytest.fixture
def bot(synapse: Synapse) -> tuple[str, str]:
    """The bot's account: ``(user_id, access_token)``."""
    return synapse.register("iris")
