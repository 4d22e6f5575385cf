"""What a device may send, parsed and checked: raw WebSocket text in, a typed request out. Pure.

Anything else becomes a ``BadFrame`` whose ``code`` the device gets back in an ``error`` frame:

    bad_json       not UTF-8 JSON text, or nested too deep to parse
    bad_frame      JSON, but not an object with a string ``type``
    unknown_type   a ``type`` the server does not know
    missing_field  a required field is absent
    bad_field      a field has the wrong type or value (a lone surrogate in a string included)
    too_large      ``message.send`` text longer than ``platforms.iris.max_text``
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_CHAT_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_SEQ_TEXT = re.compile(r"[0-9]{1,18}")  # ASCII digits only: "²".isdigit() is True, int() fails
MAX_SEQ = 2**63 - 1  # what SQLite stores as an integer
MAX_FEATURES = 16  # names a hello may list; unknown ones are ignored (newer apps, older server)
MAX_FEATURE_NAME = 64


@dataclass(frozen=True, slots=True)
class Hello:
    token: str = ""
    chat_id: str | None = None
    after_seq: int | None = None
    features: tuple[str, ...] | None = None  # None: the device named none (not even [])


@dataclass(frozen=True, slots=True)
class SendMessage:
    text: str
    chat_id: str | None = None


@dataclass(frozen=True, slots=True)
class CancelTurn:
    pass


@dataclass(frozen=True, slots=True)
class Resume:
    after_seq: int


@dataclass(frozen=True, slots=True)
class Ping:
    pass


@dataclass(frozen=True, slots=True)
class BadFrame:
    code: str
    message: str


Request = Hello | SendMessage | CancelTurn | Resume | Ping


def valid_chat_id(value: object) -> bool:
    return isinstance(value, str) and _CHAT_ID.fullmatch(value) is not None


def valid_text(value: str) -> bool:
    """Is ``value`` encodable as UTF-8? (A JSON ``\\ud800`` escape decodes to a lone surrogate,
    which no socket, database or provider can carry.)"""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def parse_seq(text: str) -> int | None:
    """A resume point given as text (the ``after_seq`` query parameter); None if malformed."""
    return int(text) if _SEQ_TEXT.fullmatch(text) else None


def parse_features(text: str) -> tuple[str, ...] | None:
    """The ``features`` query parameter (``append`` or ``append,other``); None if malformed."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    return names if _features_ok(names) else None


def _features_ok(names: tuple[object, ...]) -> bool:
    return len(names) <= MAX_FEATURES and all(
        isinstance(name, str) and 0 < len(name) <= MAX_FEATURE_NAME and valid_text(name)
        for name in names
    )


def _feature_list(value: object) -> tuple[str, ...] | None | BadFrame:
    if value is None:
        return None
    names: tuple[object, ...] = tuple(value) if isinstance(value, list) else (None,)  # pyright: ignore[reportUnknownArgumentType]
    if not _features_ok(names):
        return BadFrame("bad_field", f"'features' must be a list of at most {MAX_FEATURES} names")
    return tuple(str(name) for name in names)


def parse(raw: str | bytes | None, *, max_text: int) -> Request | BadFrame:
    if isinstance(raw, bytes):
        try:
            raw = raw.decode()
        except UnicodeDecodeError:
            return BadFrame("bad_json", "frames are UTF-8 JSON text")
    if raw is None:
        return BadFrame("bad_json", "empty frame")
    try:
        data: Any = json.loads(raw)
    except ValueError as exc:
        return BadFrame("bad_json", f"invalid JSON: {exc}")
    except RecursionError:
        return BadFrame("bad_json", "invalid JSON: nested too deep")
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        return BadFrame("bad_frame", 'a frame is a JSON object with a string "type"')
    frame: dict[str, Any] = data
    match frame["type"]:
        case "ping":
            return Ping()
        case "turn.cancel":
            return CancelTurn()
        case "resume":
            after = _seq(frame, "after_seq", required=True)
            return after if isinstance(after, BadFrame) else Resume(after or 0)
        case "message.send":
            return _send(frame, max_text)
        case "hello":
            return _hello(frame)
        case other:
            return BadFrame("unknown_type", f"unknown frame type {other[:64]!r}")


def _send(frame: dict[str, Any], max_text: int) -> SendMessage | BadFrame:
    if "text" not in frame:
        return BadFrame("missing_field", "message.send needs 'text'")
    text = frame["text"]
    if not isinstance(text, str) or not text.strip():
        return BadFrame("bad_field", "'text' must be a non-empty string")
    if not valid_text(text):
        return BadFrame("bad_field", "'text' holds a lone surrogate (not valid Unicode)")
    if len(text) > max_text:
        return BadFrame("too_large", f"'text' is longer than {max_text} characters")
    chat_id = frame.get("chat_id")
    if chat_id is not None and not valid_chat_id(chat_id):
        return BadFrame("bad_field", "'chat_id' must be 1-128 of A-Z a-z 0-9 . _ : @ -")
    return SendMessage(text, chat_id)


def _hello(frame: dict[str, Any]) -> Hello | BadFrame:
    token = frame.get("token", "")
    if not isinstance(token, str) or not valid_text(token):
        return BadFrame("bad_field", "'token' must be a string")
    chat_id = frame.get("chat_id")
    if chat_id is not None and not valid_chat_id(chat_id):
        return BadFrame("bad_field", "'chat_id' must be 1-128 of A-Z a-z 0-9 . _ : @ -")
    after = _seq(frame, "after_seq", required=False)
    if isinstance(after, BadFrame):
        return after
    features = _feature_list(frame.get("features"))
    if isinstance(features, BadFrame):
        return features
    return Hello(token, chat_id, after, features)


def _seq(frame: dict[str, Any], key: str, *, required: bool) -> int | None | BadFrame:
    if key not in frame or frame[key] is None:
        return BadFrame("missing_field", f"'{key}' is required") if required else None
    value = frame[key]
    # bool is an int in Python; a JSON true is not a sequence number.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        return BadFrame("bad_field", f"'{key}' must be an integer from 0 to {MAX_SEQ}")
    return value
