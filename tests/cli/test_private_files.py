"""Iris's files are private (issue 10, finding 7): ``~/.iris`` 0700; the database, its WAL and
SHM, the config, the app settings and the CLI history 0600; looser ones tightened at start with
one warning."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from iris.app.settings import Settings, save_settings
from iris.config import load_config
from iris.private import secure_existing
from iris.state.sqlite import Store
from iris.surfaces.cli.repl import _file_history, history_path  # pyright: ignore[reportPrivateUsage]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture(autouse=True)
def open_umask():
    # The modes must not depend on the user's umask: with 000 anything not asked for shows.
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_the_database_its_wal_and_shm_are_0600(tmp_path: Path) -> None:
    database = tmp_path / "data" / "iris.db"
    store = Store(database)
    store.ensure_schema("CREATE TABLE t (x INTEGER)")
    store.execute("INSERT INTO t VALUES (1)")
    try:
        for path in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
            assert mode(path) == 0o600, path
        assert mode(database.parent) == 0o700
    finally:
        store.close()


def test_the_first_run_config_template_is_0600_in_a_0700_home(isolated_home: Path) -> None:
    load_config()
    assert mode(isolated_home / ".iris") == 0o700
    assert mode(isolated_home / ".iris" / "config.yaml") == 0o600


def test_app_settings_are_0600(isolated_home: Path) -> None:
    save_settings(Settings(token="device-secret"))
    assert mode(isolated_home / ".iris") == 0o700
    assert mode(isolated_home / ".iris" / "app.json") == 0o600


def test_the_cli_history_is_0600(isolated_home: Path) -> None:
    _file_history()
    assert mode(history_path()) == 0o600
    assert mode(isolated_home / ".iris") == 0o700


def test_loose_files_are_tightened_at_start_with_one_warning(
    isolated_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = isolated_home / ".iris"
    home.mkdir(mode=0o755)
    (home / "config.yaml").write_text("model: {api_key: sk}")
    (home / "chat_history").write_text("my password is hunter2")
    (home / "config.yaml").chmod(0o644)
    (home / "chat_history").chmod(0o640)
    database = tmp_path / "elsewhere" / "iris.db"
    database.parent.mkdir(mode=0o755)
    for path in (database, Path(f"{database}-wal")):
        path.write_bytes(b"")
        path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="iris.private"):
        secure_existing(config=home / "config.yaml", database=database)
    assert len(caplog.records) == 1
    line = caplog.records[0].getMessage()
    for path in (home, home / "config.yaml", home / "chat_history", database):
        assert str(path) in line
    assert mode(home) == 0o700
    assert mode(home / "config.yaml") == mode(home / "chat_history") == 0o600
    assert mode(database) == mode(Path(f"{database}-wal")) == 0o600
    # The store's own folder is not Iris's to tighten when it lives elsewhere.
    assert mode(database.parent) == 0o755
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="iris.private"):
        secure_existing(config=home / "config.yaml", database=database)
    assert caplog.records == []
