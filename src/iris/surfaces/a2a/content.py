"""What an A2A message's parts become for an Iris turn, and what an approval answer says.

Text parts are the message's text. A file part with its bytes (``raw``) is an attachment, as a
file sent on the iris socket (an image the model sees, a document as text: see
``iris.agent.attachments``); a data part is an attachment too, its JSON as ``data-N.json``.
A file part that only names a URL is not fetched (Iris reaches no address a caller names): its
URL joins the text. A file over ``attachments.max_bytes`` refuses the message.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Literal, cast

from a2a.types.a2a_pb2 import Message
from google.protobuf.json_format import MessageToDict

from iris.agent.approvals import DECISIONS, Decision
from iris.protocol.types import SentFile

_YES = {"yes", "y", "approve", "approved", "ok", "once", "allow"}
_NO = {"no", "n", "deny", "denied", "reject", "refuse"}


class ContentError(ValueError):
    """A message Iris cannot take (its ``args[0]`` says why)."""


@dataclass(frozen=True, slots=True)
class Content:
    text: str
    files: list[SentFile]


def content(message: Message, max_bytes: int) -> Content:
    texts: list[str] = []
    files: list[SentFile] = []
    for part in message.parts:
        which = part.WhichOneof("content")
        if which == "text":
            texts.append(part.text)
        elif which == "raw":
            files.append(
                _file(
                    part.raw, part.filename or f"file-{len(files) + 1}", part.media_type, max_bytes
                )
            )
        elif which == "data":
            data = json.dumps(MessageToDict(part.data), ensure_ascii=False).encode()
            files.append(_file(data, f"data-{len(files) + 1}.json", "application/json", max_bytes))
        elif which == "url":
            texts.append(f"[{part.filename or 'file'}: {part.url}]")
    text = "\n".join(t for t in texts if t)
    if not text.strip() and not files:
        raise ContentError("the message has no text, file or data part")
    return Content(text, files)


def _file(data: bytes, name: str, mime: str, max_bytes: int) -> SentFile:
    if len(data) > max_bytes:
        raise ContentError(f"{name} is over {max_bytes} bytes (attachments.max_bytes)")
    mime = mime or "application/octet-stream"
    kind: Literal["image", "audio", "file"] = (
        "image" if mime.startswith("image/") else "audio" if mime.startswith("audio/") else "file"
    )
    encoded = base64.b64encode(data).decode()
    return {"kind": kind, "name": name[:255], "mime": mime, "data_b64": encoded}


def decision(message: Message | None) -> Decision | None:
    """The approval answer a message gives: a data part ``{"decision": once|chat|deny}``, or
    its text (``once``, ``chat``, ``deny``, a yes or a no); None when it says none."""
    if message is None:
        return None
    for part in message.parts:
        which = part.WhichOneof("content")
        if which == "data":
            said: Any = MessageToDict(part.data)  # a Value: any JSON, not only an object
            if isinstance(said, dict):
                answer = cast(dict[str, Any], said).get("decision")
                if answer in DECISIONS:
                    return answer
        elif which == "text":
            word = part.text.strip().lower().rstrip(".!")
            if word in DECISIONS:
                return word
            if word in _YES:
                return "once"
            if word in _NO:
                return "deny"
    return None
