"""What a device may send, parsed and checked: raw WebSocket text in, a typed request out. Pure.

The frames' types are ``iris.protocol.types``'s client frames, validated by its one
``CLIENT`` adapter; what fails becomes a ``BadFrame`` whose ``code`` the device gets back in an
``error`` frame:

    bad_json       not UTF-8 JSON text, or nested too deep to parse
    bad_frame      JSON, but not an object with a string ``type``
    unknown_type   a ``type`` the server does not know
    missing_field  a required field is absent
    bad_field      a field has the wrong type or value (a lone surrogate in a string included)
    too_large      ``message.send`` text longer than ``platforms.iris.max_text``, or a file
                   of its ``attachments`` larger than ``attachments.max_bytes`` decoded
    bad_attachment a file of ``attachments`` whose ``data_b64`` is not standard base64
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from iris.protocol.types import (
    CHAT_ID,
    CLIENT,
    MAX_ATTACHMENTS,
    MAX_FEATURE_NAME,
    MAX_FEATURES,
    MAX_FILE_NAME,
    MAX_SEQ,
    ApprovalRespond,
    CancelTurn,
    ClientFrame,
    ElicitationRespond,
    Hello,
    Ping,
    PushSubscribe,
    Resume,
    SendMessage,
    SentFile,
)

__all__ = [
    "ApprovalRespond",
    "BadFrame",
    "CancelTurn",
    "ElicitationRespond",
    "Hello",
    "Ping",
    "PushSubscribe",
    "Request",
    "Resume",
    "SendMessage",
]

_CHAT_ID = re.compile(CHAT_ID)
_SEQ_TEXT = re.compile(r"[0-9]{1,19}")  # ASCII digits only: "²".isdigit() is True, int() fails

Request = ClientFrame

# What a device is told about a field that is there but wrong, and one that is missing.
_BAD_FIELD = {
    "text": "'text' must be a non-empty string",
    "token": "'token' must be a string",
    "chat_id": "'chat_id' must be 1-128 of A-Z a-z 0-9 . _ : @ -",
    "after_seq": f"'after_seq' must be an integer from 0 to {MAX_SEQ}",
    "features": f"'features' must be a list of at most {MAX_FEATURES} names",
    "attachments": f"'attachments' must be a list of at most {MAX_ATTACHMENTS} files, each "
    f"{{kind: image|audio|file, name (at most {MAX_FILE_NAME}), mime, data_b64}}",
    "approval_id": "'approval_id' must be an approval.request's approval_id",
    "decision": "'decision' must be once, chat or deny",
    "elicitation_id": "'elicitation_id' must be an elicitation.request's elicitation_id",
    "action": "'action' must be accept, decline or cancel",
    "content": "'content' must be an object of the form's fields",
    "subscription": "'subscription' must be {endpoint, keys: {p256dh, auth}}",
}
_LONE_SURROGATE = {"text": "'text' holds a lone surrogate (not valid Unicode)"}
_MISSING = {"text": "message.send needs 'text'", "after_seq": "'after_seq' is required"}


@dataclass(frozen=True, slots=True)
class BadFrame:
    code: str
    message: str


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
    if not _SEQ_TEXT.fullmatch(text):
        return None
    seq = int(text)
    return seq if seq <= MAX_SEQ else None


def parse_features(text: str) -> tuple[str, ...] | None:
    """The ``features`` query parameter (``append`` or ``append,other``); None if malformed."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    ok = len(names) <= MAX_FEATURES and all(
        len(name) <= MAX_FEATURE_NAME and valid_text(name) for name in names
    )
    return names if ok else None


def parse(
    raw: str | bytes | None, *, max_text: int, max_file_bytes: int = 20_000_000
) -> Request | BadFrame:
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
    if "after_seq" in frame and frame["after_seq"] is None:
        del frame["after_seq"]  # a null resume point is no resume point
    try:
        request = CLIENT.validate_python(frame)
    except ValidationError as exc:
        return _bad(frame["type"], exc.errors()[0])
    if isinstance(request, SendMessage):
        return _checked_send(request, max_text, max_file_bytes)
    return request


def _checked_send(request: SendMessage, max_text: int, max_file_bytes: int) -> Request | BadFrame:
    if len(request.text) > max_text:
        return BadFrame("too_large", f"'text' is longer than {max_text} characters")
    if not request.text.strip() and not request.attachments:
        return BadFrame("bad_field", _BAD_FIELD["text"])
    for index, file in enumerate(request.attachments):
        try:
            data = decoded(file)
        except ValueError:
            why = f"attachment {index} ({file['name'][:64]!r}): 'data_b64' is not base64"
            return BadFrame("bad_attachment", why)
        if len(data) > max_file_bytes:
            why = (
                f"attachment {index} ({file['name'][:64]!r}) is larger than {max_file_bytes} bytes"
            )
            return BadFrame("too_large", why)
    return request


def decoded(file: SentFile) -> bytes:
    """The bytes of a file sent with a message (``ValueError``: not standard base64)."""
    return base64.b64decode(file["data_b64"], validate=True)


def bad_hello_field(raw: str | bytes | None, bad: BadFrame) -> bool:
    """Is ``bad`` a ``hello`` refused for a field other than its token?"""
    if bad.code != "bad_field" or bad.message == _BAD_FIELD["token"]:
        return False
    try:
        data: Any = json.loads(raw or "")
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("type") == "hello"  # pyright: ignore[reportUnknownMemberType]


def _bad(kind: str, error: ErrorDetails) -> BadFrame:
    if error["type"] == "union_tag_invalid":
        return BadFrame("unknown_type", f"unknown frame type {kind[:64]!r}")
    # loc is (frame type, field, ...): the field is what the device is told about.
    field = str(error["loc"][1]) if len(error["loc"]) > 1 else "type"
    if error["type"] == "missing":
        return BadFrame("missing_field", _MISSING.get(field, f"'{field}' is required"))
    if error["type"] == "lone_surrogate" and field in _LONE_SURROGATE:
        return BadFrame("bad_field", _LONE_SURROGATE[field])
    return BadFrame("bad_field", _BAD_FIELD.get(field, f"'{field}' is not valid"))
