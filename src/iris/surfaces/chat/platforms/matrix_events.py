"""Matrix events as the chat surface reads and writes them. Pure: dicts in, dicts out.

Written: a message's content (plain ``body`` and, beside it, the text's Markdown as
``org.matrix.custom.html``, rendered with raw HTML escaped, links only of safe schemes, no
images: the ``formatted_body`` of a bot that writes what a model says must carry nothing a
client would act on); an edit (``m.new_content`` under an ``m.replace`` relation, the ``* ``
fallback for clients without edits); the thread relation (``m.thread`` with the reply
fallback) that every new message of a reply in a thread carries; a reaction (``m.annotation``).

Read: ``Seen``, what one timeline event says: a message (its text, files, thread root, the
event it replies to, whom it mentions), a reaction, an encrypted event, or nothing to act on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from markdown_it import MarkdownIt

from iris.surfaces.chat.platforms.base import Attachment

HTML = "org.matrix.custom.html"
THREAD_KEY = "thread_root"
# Reactions that answer an approval prompt, in the order the bot adds them.
REACTIONS = {"✅": "o", "🔁": "c", "❌": "d"}
# A Matrix event may be 65536 bytes (JSON, the envelope included): past this much content the
# formatted body is left out and the plain one alone goes.
CONTENT_MAX = 60_000

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)
_MARKDOWN.disable("image")  # an <img> of any URL but mxc:// is dropped by clients anyway
_PILL = re.compile(r'<a href="https://matrix\.to/#/([^"]+)">(.*?)</a>', re.S)
_TEXT_TYPES = {"m.text", "m.emote"}
_FILE_TYPES: dict[str, Literal["image", "audio", "file"]] = {
    "m.image": "image",
    "m.audio": "audio",
    "m.file": "file",
}

JSON = dict[str, Any]


def rendered(text: str) -> str:
    """``text`` as Matrix HTML (its Markdown, sanitized)."""
    return _MARKDOWN.render(text).strip()


def thread_relation(thread: Mapping[str, str] | None) -> JSON:
    """The ``m.relates_to`` of a new message in ``thread`` (empty outside one)."""
    root = (thread or {}).get(THREAD_KEY)
    if not root:
        return {}
    return {
        "rel_type": "m.thread",
        "event_id": root,
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": root},
    }


def message(text: str, thread: Mapping[str, str] | None = None, *, formatted: bool = True) -> JSON:
    """A new ``m.text`` message of the bot: it mentions nobody (``m.mentions`` empty), so
    nothing the model writes pings anyone."""
    content: JSON = {"msgtype": "m.text", "body": text, "m.mentions": {}}
    if formatted:
        content.update(format=HTML, formatted_body=rendered(text))
    relation = thread_relation(thread)
    if relation:
        content["m.relates_to"] = relation
    return _fitting(content)


def edit(event_id: str, text: str, *, formatted: bool = True) -> JSON:
    """An edit replacing the text of the bot's message ``event_id``."""
    new = message(text, formatted=formatted)
    content: JSON = {
        "msgtype": "m.text",
        "body": f"* {text}",
        "m.new_content": new,
        "m.mentions": {},
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }
    return _fitting(content)


def reaction(event_id: str, key: str) -> JSON:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}


def _fitting(content: JSON) -> JSON:
    """``content`` without its formatted bodies when they would take it past ``CONTENT_MAX``
    bytes (HTML escapes can grow a text several times)."""
    if len(json.dumps(content, ensure_ascii=False).encode()) <= CONTENT_MAX:
        return content
    content = {k: v for k, v in content.items() if k not in ("format", "formatted_body")}
    new = content.get("m.new_content")
    if isinstance(new, dict):
        content["m.new_content"] = {
            k: v for k, v in cast(JSON, new).items() if k not in ("format", "formatted_body")
        }
    return content


@dataclass(frozen=True, slots=True)
class Seen:
    """What one timeline event says, for the adapter."""

    kind: Literal["message", "reaction", "encrypted", "membership", "other"]
    event_id: str = ""
    sender: str = ""
    text: str = ""
    thread_root: str = ""
    reply_to: str = ""  # the event it replies to (not a thread's fallback)
    mentions: tuple[str, ...] = ()  # user ids it mentions (m.mentions, pills)
    pill_labels: tuple[str, ...] = ()  # how the body shows the pills of the bot
    attachments: tuple[Attachment, ...] = ()
    reacted_to: str = ""  # a reaction: the event, and its key
    key: str = ""


def seen(event: JSON, bot: str) -> Seen:
    """Read one timeline event of a joined room (``bot``: the bot's user id)."""
    kind, event_id, sender = (
        event.get("type"),
        str(event.get("event_id", "")),
        str(event.get("sender", "")),
    )
    content = _mapping(event.get("content"))
    if kind == "m.room.encrypted" or kind == "m.room.encryption":
        return Seen("encrypted", event_id, sender)
    if kind == "m.room.member":
        return Seen("membership", event_id, sender)
    relates = _mapping(content.get("m.relates_to"))
    if kind == "m.reaction" and relates.get("rel_type") == "m.annotation":
        key = str(relates.get("key", "")).replace("\ufe0f", "")
        return Seen(
            "reaction", event_id, sender, reacted_to=str(relates.get("event_id", "")), key=key
        )
    if kind != "m.room.message" or relates.get("rel_type") == "m.replace":
        return Seen("other", event_id, sender)  # an edit of a message is not a new one
    return _message(content, relates, event_id, sender, bot)


def _message(content: JSON, relates: JSON, event_id: str, sender: str, bot: str) -> Seen:
    msgtype = content.get("msgtype")
    body = str(content.get("body", ""))
    attachment = _attachment(content, msgtype, body)
    if msgtype not in _TEXT_TYPES and attachment is None:
        return Seen("other", event_id, sender)  # a notice (another bot), a location...
    thread = str(relates.get("event_id", "")) if relates.get("rel_type") == "m.thread" else ""
    in_reply = _mapping(relates.get("m.in_reply_to")).get("event_id")
    falling_back = bool(thread) and relates.get("is_falling_back") is True
    reply_to = str(in_reply) if isinstance(in_reply, str) and not falling_back else ""
    pills = _PILL.findall(str(content.get("formatted_body", "")))
    mentioned = _mapping(content.get("m.mentions")).get("user_ids")
    mentions = (
        {str(u) for u in cast(list[Any], mentioned)} if isinstance(mentioned, list) else set[str]()
    )
    mentions |= {target for target, _ in pills}
    if bot in body:
        mentions.add(bot)
    labels = tuple(_strip_tags(label) for target, label in pills if target == bot)
    text = "" if attachment is not None else _without_reply_fallback(body)
    if attachment is not None and str(content.get("filename", "")) not in ("", body):
        text = body  # a caption: the file has a name of its own
    return Seen(
        "message",
        event_id,
        sender,
        text=text,
        thread_root=thread,
        reply_to=reply_to,
        mentions=tuple(sorted(mentions)),
        pill_labels=labels,
        attachments=() if attachment is None else (attachment,),
    )


def _attachment(content: JSON, msgtype: object, body: str) -> Attachment | None:
    if not isinstance(msgtype, str) or msgtype not in _FILE_TYPES:
        return None
    url = content.get("url")
    if not isinstance(url, str) or not url.startswith("mxc://"):
        return None  # an encrypted file (``file``), or none at all
    info = _mapping(content.get("info"))
    size = info.get("size")
    name = str(content.get("filename") or body or "file")
    mime = str(info.get("mimetype") or "application/octet-stream")
    return Attachment(_FILE_TYPES[msgtype], name, mime, url, size if isinstance(size, int) else 0)


def without_mention(text: str, bot: str, labels: tuple[str, ...]) -> str:
    """``text`` without the bot's mention: its user id, or a pill's label at the start
    (``Iris: hello`` reads ``hello``)."""
    text = text.replace(bot, " ")
    for label in sorted(labels, key=len, reverse=True):
        if label and text.lstrip().startswith(label):
            text = text.lstrip()[len(label) :].lstrip(":,")
            break
    return " ".join(part for part in text.split(" ") if part) if "\n" not in text else text.strip()


def _without_reply_fallback(body: str) -> str:
    """A reply's body quotes the message it answers in ``> `` lines first: not the user's."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> <"):
        return body
    while lines and lines[0].startswith(">"):
        lines.pop(0)
    return "\n".join(lines).strip()


def _strip_tags(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


def _mapping(value: object) -> JSON:
    return cast(JSON, value) if isinstance(value, dict) else {}
