"""Loading: the lookup order, the first-run template, the environment, and a ``ConfigError``
that names the bad key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from iris.config._root import Config
from iris.errors import ConfigError
from iris.private import private_dir, write_private

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def default_path() -> Path:
    return Path.home() / ".iris" / "config.yaml"


TEMPLATE = """\
# Iris configuration. Every key is optional; see docs/config.md for the full reference.

# model:
#   provider: chat_completions     # chat_completions | responses | local (embedded demo model)
#   base_url: http://127.0.0.1:8000/v1
#   api_key_env: OPENAI_API_KEY    # or api_key: sk-...
#   name: some-model
#   fallback:
#     - {provider: chat_completions, base_url: http://127.0.0.1:8001/v1, name: other-model}

streaming:
  enabled: true                    # master switch (the code default is false)
  # cli: true                      # per-surface overrides: cli, telegram, discord, slack, whatsapp, matrix, api_server, iris
  # edit_interval: 1.5             # seconds between message edits on chat platforms
  # min_tokens: 20                 # deltas before the first visible message on chat platforms

# display:
#   show_reasoning: false
#   reasoning_style: code          # code | blockquote | subtext
#   tool_progress: all             # off | new | all | verbose
#   platforms:                     # per chat platform: streaming, edit_interval, ...
#     telegram: {transport: auto}  # auto | native | edit | blocks | final (drafts in private chats)
#     whatsapp: {transport: blocks}  # blocks | final: platforms that cannot edit

# server: {host: 127.0.0.1, port: 8642, allowed_hosts: [], cors_origins: [], max_turns: 32}
# platforms:
#   api_server: {enabled: true, api_key: null, max_concurrent: 16, agent_tools: on_request}
#   iris: {enabled: true, tokens: [change-me]}
# tools:
#   enabled: [terminal, read_file]
#   terminal: {timeout: 60, env: [PATH, LANG]}   # env: what commands see
#     # sandbox: auto                # auto (bubblewrap, else no terminal) | bwrap | none (host)
#     # network: false               # true: the host's network, loopback included
#     # binds: [{path: /srv/data, mode: ro}]   # host folders a command sees (ro | rw)
#   read_file: {roots: ["."]}      # folders read_file may read; default: the terminal cwd
# mcp_servers:                     # MCP tool servers (docs/tools.md); tools: mcp_<server>_<tool>
#   files: {command: npx, args: ["-y", "@modelcontextprotocol/server-filesystem", "/some/dir"]}
#   search: {url: "http://127.0.0.1:9000/mcp", headers: {}}
"""


def load_config(
    path: str | os.PathLike[str] | None = None, *, write_template: bool = True
) -> Config:
    """Load the config by the lookup order, apply the environment, validate.

    Raises ``ConfigError`` naming the bad key."""
    explicit = path if path is not None else os.environ.get("IRIS_CONFIG") or None
    if explicit is not None:
        file = Path(explicit).expanduser()
        if not file.exists():
            raise ConfigError(f"config file not found: {file}")
    else:
        file = default_path()
        if not file.exists() and write_template:
            try:
                # It will hold keys: private from its first byte.
                private_dir(file.parent)
                write_private(file, TEMPLATE)
            except OSError:
                pass
    data: dict[str, Any] = {}
    if file.exists():
        try:
            loaded = yaml.safe_load(file.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{file}: invalid YAML: {str(exc).splitlines()[0]}") from None
        except OSError as exc:
            raise ConfigError(f"{file}: cannot read: {exc.strerror}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{file}: the top level must be a mapping of keys")
        data = loaded
    return config_from_dict(data, source=str(file) if file.exists() else None)


def config_from_dict(
    data: Mapping[str, Any], *, source: str | None = None, env: Mapping[str, str] | None = None
) -> Config:
    """Validate ``data`` (a parsed config file) and apply the environment."""
    environ = os.environ if env is None else env
    merged: dict[str, Any] = dict(data)
    if "model" not in merged and (environ.get("OPENAI_BASE_URL") or environ.get("IRIS_MODEL")):
        merged["model"] = {
            "provider": "chat_completions",
            "base_url": environ.get("OPENAI_BASE_URL") or None,
            "name": environ.get("IRIS_MODEL", "") or "gpt-4o-mini",
        }
    elif isinstance(merged.get("model"), dict) and "provider" not in merged["model"]:
        # A model section that names an endpoint means a remote provider.
        model = dict(merged["model"])
        if model.get("base_url") or model.get("name"):
            model["provider"] = "chat_completions"
        merged["model"] = model
    try:
        config = Config.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, source)) from None
    config.source = source
    _check_mcp(config)
    flag = _env_flag(environ)
    if flag is not None:
        config.streaming.enabled = flag
    return config


def _check_mcp(config: Config) -> None:
    """Every MCP entry of tools.enabled names a configured server, and no server's name starts
    with another's and ``_`` (``a`` and ``a_b``: a's tool ``b_c`` and a_b's tool ``c`` would
    both be ``mcp_a_b_c``)."""
    names = sorted(config.mcp_servers)
    for short, long in ((a, b) for a in names for b in names if b.startswith(f"{a}_")):
        raise ConfigError(
            f"{config.source + ': ' if config.source else ''}config key 'mcp_servers': the "
            f"server names {short!r} and {long!r} clash (mcp_{long}_x could be a tool of "
            f"either); rename one, e.g. {long.replace('_', '-')!r}"
        )
    for entry in config.tools.enabled:
        if entry.startswith("mcp_") and not any(
            entry.startswith(f"mcp_{name}_") for name in config.mcp_servers
        ):
            raise ConfigError(
                f"{config.source + ': ' if config.source else ''}config key 'tools.enabled': "
                f"{entry!r} names no server of mcp_servers"
            )


def _env_flag(environ: Mapping[str, str]) -> bool | None:
    for name in ("IRIS_STREAMING_ENABLED", "HERMES_STREAMING_ENABLED"):
        value = environ.get(name, "").strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
    return None


def _describe(exc: ValidationError, source: str | None) -> str:
    err = exc.errors()[0]
    key = ".".join(str(part) for part in err["loc"]) or "(top level)"
    where = f"{source}: " if source else ""
    if err["type"] == "extra_forbidden":
        return f"{where}unknown config key '{key}'"
    got = err.get("input")
    # A whole section is not echoed: it may hold keys (an MCP server's env or headers).
    shown = "" if isinstance(got, dict) else f" (got {got!r})"
    return f"{where}config key '{key}': {err['msg']}{shown}"
