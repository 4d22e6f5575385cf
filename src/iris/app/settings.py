"""The device's app settings, persisted in ``~/.iris/app.json`` (mode 0600: it holds the token)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, cast

from iris.app.core.reveal import SMOOTHNESS_MAX, SMOOTHNESS_MIN
from iris.private import private_dir

ToolDetail = Literal["everything", "truncated", "nothing"]
TOOL_DETAILS: tuple[ToolDetail, ...] = ("everything", "truncated", "nothing")
DEFAULT_URL = "ws://127.0.0.1:8642/iris/ws"


@dataclass
class Settings:
    streaming: bool = True
    smoothness: float = 0.3  # seconds between visible updates: 60 / 0.3 = 200 chars/s
    tool_detail: ToolDetail = "truncated"
    url: str = DEFAULT_URL
    token: str = ""
    chat_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict[str, Any], repr=False)


def settings_path() -> Path:
    return Path.home() / ".iris" / "app.json"


def load_settings(path: Path | None = None) -> Settings:
    """Read the settings; a missing or damaged file gives the defaults (never a crash)."""
    file = path or settings_path()
    try:
        data = json.loads(file.read_text())
    except (OSError, ValueError):
        return Settings()
    if not isinstance(data, dict):
        return Settings()
    raw = cast(dict[str, Any], data)
    settings = Settings()
    known = {f.name for f in fields(Settings)} - {"extra"}
    if isinstance(raw.get("streaming"), bool):
        settings.streaming = raw["streaming"]
    if isinstance(raw.get("smoothness"), int | float):
        settings.smoothness = min(max(float(raw["smoothness"]), SMOOTHNESS_MIN), SMOOTHNESS_MAX)
    if raw.get("tool_detail") in TOOL_DETAILS:
        settings.tool_detail = raw["tool_detail"]
    for key in ("url", "token"):
        if isinstance(raw.get(key), str):
            setattr(settings, key, raw[key])
    if isinstance(raw.get("chat_id"), str):
        settings.chat_id = raw["chat_id"]
    # Keys written by a newer app survive a save by this one.
    settings.extra = {k: v for k, v in raw.items() if k not in known}
    return settings


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically with mode 0600 from the first byte: the file holds the device token."""
    file = path or settings_path()
    private_dir(file.parent)
    data = {k: v for k, v in asdict(settings).items() if k != "extra"} | settings.extra
    temp = file.with_suffix(".tmp")
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # A temp file left by a crash keeps its old mode through O_CREAT: fix it before writing.
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(data, handle, indent=2)
    os.replace(temp, file)
