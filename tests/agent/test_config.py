"""Config: lookup order, validation errors that name the key, env, streaming precedence."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from iris.config import config_from_dict, default_path, load_config
from iris.errors import ConfigError


def test_first_run_writes_a_commented_template_with_streaming_on(isolated_home: Path) -> None:
    config = load_config()
    written = default_path()
    assert written.exists() and written.is_relative_to(isolated_home)
    assert "streaming:\n  enabled: true" in written.read_text()
    assert config.streaming.enabled is True
    assert config.model.provider == "local"  # no model configured anywhere


def test_lookup_order_flag_then_env_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("server: {port: 1111}\n")
    b.write_text("server: {port: 2222}\n")
    monkeypatch.setenv("IRIS_CONFIG", str(b))
    assert load_config(a).server.port == 1111
    assert load_config().server.port == 2222


def test_unknown_key_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("streaming:\n  edit_intervall: 2\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'streaming.edit_intervall'"):
        load_config(path)


def test_wrong_type_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"'server.port'"):
        config_from_dict({"server": {"port": "eighty"}}, env={})
    with pytest.raises(ConfigError, match=r"'display.tool_progress'"):
        config_from_dict({"display": {"tool_progress": "loud"}}, env={})


def test_missing_file_and_bad_yaml_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("streaming: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(bad)


def test_env_configures_a_provider_without_a_file() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "IRIS_MODEL": "m1", "OPENAI_API_KEY": "k"}
    config = config_from_dict({}, env=env)
    assert config.model.provider == "chat_completions"
    assert config.model.base_url == "http://127.0.0.1:9/v1" and config.model.name == "m1"
    # A model in the file wins over the environment.
    filed = config_from_dict({"model": {"base_url": "http://x/v1", "name": "f"}}, env=env)
    assert filed.model.name == "f" and filed.model.provider == "chat_completions"


@pytest.mark.parametrize("name", ["IRIS_STREAMING_ENABLED", "HERMES_STREAMING_ENABLED"])
@pytest.mark.parametrize("value", ["true", "1", "yes"])
def test_env_master_switch(name: str, value: str) -> None:
    config = config_from_dict({"streaming": {"enabled": False}}, env={name: value})
    assert config.streaming.enabled is True
    assert config.streams("telegram") is True


def test_streaming_precedence() -> None:
    base = {"streaming": {"enabled": True, "cli": False}}
    config = config_from_dict(base, env={})
    # per-surface override > master switch > default off
    assert config.streams("cli") is False
    assert config.streams("telegram") is True
    assert config_from_dict({}, env={}).streams("telegram") is False
    with_display = config_from_dict(
        {"streaming": {"iris": False}, "display": {"platforms": {"iris": {"streaming": True}}}},
        env={},
    )
    assert with_display.streams("iris") is True


def test_display_overrides_per_platform() -> None:
    config = config_from_dict(
        {
            "display": {
                "show_reasoning": False,
                "tool_progress": "new",
                "platforms": {
                    "telegram": {"show_reasoning": True, "reasoning_style": "blockquote"}
                },
            }
        },
        env={},
    )
    tg = config.display_for("telegram")
    assert tg.show_reasoning and tg.reasoning_style == "blockquote" and tg.tool_progress == "new"
    assert not config.display_for("discord").show_reasoning


def test_design_example_config_validates(tmp_path: Path) -> None:
    example = {
        "model": {
            "provider": "chat_completions",
            "base_url": "http://127.0.0.1:8000/v1",
            "api_key": "sk-x",
            "name": "some-model",
            "fallback": [{"provider": "chat_completions", "base_url": "http://b/v1", "name": "b"}],
        },
        "streaming": {
            "enabled": False,
            "cli": True,
            "edit_interval": 1.5,
            "min_tokens": 20,
            "buffer_threshold": 24,
        },
        "display": {
            "show_reasoning": False,
            "reasoning_style": "code",
            "tool_progress": "all",
            "platforms": {"iris": {"streaming": True, "show_reasoning": True}},
        },
        "server": {"host": "127.0.0.1", "port": 8642},
        "platforms": {
            "api_server": {"enabled": True, "api_key": None, "max_concurrent": 16},
            "iris": {"enabled": True, "tokens": ["device-token"]},
            "telegram": {
                "enabled": False,
                "token": "123:abc",
                "base_url": "https://api.telegram.org",
                "allowed_users": [],
            },
            "discord": {"enabled": False, "token": "x", "allowed_users": []},
            "slack": {"enabled": False, "bot_token": "x", "app_token": "y", "allowed_users": []},
        },
        "tools": {"enabled": ["terminal", "read_file"], "terminal": {"cwd": ".", "timeout": 60}},
        "store": {"path": str(tmp_path / "iris.db")},
    }
    path = tmp_path / "full.yaml"
    path.write_text(yaml.safe_dump(example))
    config = load_config(path)
    assert config.model.fallback[0].name == "b"


@pytest.mark.parametrize(
    ("store", "named"),
    [
        ({"mode": "cluster"}, "store.mode cluster needs store.url or store.nodes"),
        ({"mode": "sentinel", "sentinels": ["s1:26379"]}, "store.sentinel_master"),
        ({"mode": "sentinel", "sentinel_master": "m"}, "store.sentinels"),
        ({"nodes": ["n1:7000"]}, "store.nodes is for store.mode cluster"),
        ({"url": "redis://h:6379/0", "sentinel_master": "m"}, "for store.mode sentinel"),
        ({"mode": "cluster", "nodes": ["n1"]}, "'n1' is not host:port"),
        ({"mode": "sharded", "url": "redis://h:6379/0"}, "store.mode"),
    ],
)
def test_a_store_mode_without_its_settings_is_refused_naming_them(
    store: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_dict({"store": store})
    assert named in str(caught.value)


def test_store_modes_each_make_a_shared_store() -> None:
    assert not config_from_dict({}).store.shared
    assert config_from_dict({"store": {"url": "redis://h:6379/0"}}).store.shared
    cluster = config_from_dict({"store": {"mode": "cluster", "nodes": ["n1:7000", "[::1]:7001"]}})
    assert cluster.store.shared and cluster.store.url is None
    sentinel = config_from_dict(
        {"store": {"mode": "sentinel", "sentinels": ["s1:26379"], "sentinel_master": "m"}}
    )
    assert sentinel.store.shared
