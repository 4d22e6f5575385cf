"""The iris wire protocol as types: every frame, both directions, and what the fan-out may do
with each. The one place the protocol is written down; ``frames.schema.json`` is generated
from it (``python -m iris.protocol.types`` rewrites the file; a test checks it).

- **Server frames** are ``TypedDict``s: the encoder builds plain dicts that pyright checks
  against them, so the hot path pays nothing and the bytes on the wire are the dicts'. The hub
  stamps each with ``chat_id`` and ``seq`` (``NotRequired`` here because the encoder's bodies
  lack them; the schema requires them, as every device receives them). ``SERVER`` (one
  ``TypeAdapter``) parses what a device receives — the app's store reads frames through it.
- **Client frames** are frozen dataclasses, parsed by ``CLIENT`` (one ``TypeAdapter``) into the
  requests the endpoint acts on; ``inbound`` turns its errors into the protocol's error codes.
- ``RULES`` marks each server frame type for ``iris.fanout`` (``FrameRules``): which frames a
  later one supersedes, which open and close a message, which answers need one copy in line.

Unknown fields are ignored when parsing (a newer peer may add some) and are not part of the
contract: the schema says ``additionalProperties: false``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, cast

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    TypeAdapter,
    with_config,
)
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from iris.config import CHAT_ID as CHAT_ID
from iris.fanout.rules import PLAIN, Frame, Traits

SCHEMA_FILE = Path(__file__).with_name("frames.schema.json")
MAX_SEQ = 2**63 - 1  # what SQLite stores as an integer
MAX_FEATURES = 16  # names a hello may list; unknown ones are ignored (newer apps, older server)
MAX_FEATURE_NAME = 64
OUTPUT_PREVIEW_CHARS = 500

# Ignore unknown fields when parsing; the contract (the schema) has none.
_CONFIG = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})


def _unicode(value: str) -> str:
    """Refuse a lone surrogate (a JSON ``\\ud800`` escape): no socket, database or provider
    can carry it."""
    try:
        value.encode()
    except UnicodeEncodeError:
        raise PydanticCustomError(
            "lone_surrogate", "a lone surrogate is not valid Unicode"
        ) from None
    return value


Text = Annotated[str, Field(strict=True), AfterValidator(_unicode)]
ChatId = Annotated[str, StringConstraints(strict=True, pattern=f"^{CHAT_ID}$")]
Seq = Annotated[int, Field(strict=True, ge=0, le=MAX_SEQ)]
MessageId = Annotated[str, StringConstraints(min_length=1)]
Tokens = Annotated[int, Field(ge=0)]
ToolIndex = Annotated[int, Field(ge=1)]
ApprovalId = Annotated[str, StringConstraints(strict=True, pattern=r"^appr_[0-9a-f]{1,64}$")]
ElicitationId = Annotated[str, StringConstraints(strict=True, pattern=r"^elic_[0-9a-f]{1,64}$")]
Feature = Annotated[
    str,
    StringConstraints(strict=True, min_length=1, max_length=MAX_FEATURE_NAME),
    AfterValidator(_unicode),
]


# -- server -> app -------------------------------------------------------------------------------
@with_config(_CONFIG)
class _Stamped(TypedDict):
    chat_id: NotRequired[ChatId]
    seq: NotRequired[Seq]


@with_config(_CONFIG)
class Ready(_Stamped):
    """Connection-scoped. Sent once after authentication; seq is the device's position (the
    chat's latest seq, or after_seq when replaying). features: only to a device that named
    features in its hello (or query) — the ones it gets."""

    type: Literal["ready"]
    features: NotRequired[list[Feature]]
    # The chat log's epoch: it changes whenever the chat's seqs restart (the store lost its
    # data); a device that saw another one forgets the seqs it has seen.
    epoch: NotRequired[str]


@with_config(_CONFIG)
class Typing(_Stamped):
    """Chat-scoped. on:true when a turn starts; on:false is the last frame of every turn."""

    type: Literal["typing"]
    on: bool


@with_config(_CONFIG)
class MessageStart(_Stamped):
    """Chat-scoped. A streamed text segment begins."""

    type: Literal["message.start"]
    message_id: MessageId
    role: Literal["assistant"]
    # The reply of a scheduled run (``/remind``, ``/every``): the schedule's id.
    schedule_id: NotRequired[str]


@with_config(_CONFIG)
class MessageUpdate(_Stamped):
    """Chat-scoped. The segment's full text so far (a snapshot, not a delta). A device with the
    append feature gets it only when it has no text for the message (joined mid-message, after
    resume or sync) or the text was rewritten (not an extension of what it has)."""

    type: Literal["message.update"]
    message_id: MessageId
    text: str


@with_config(_CONFIG)
class MessageAppend(_Stamped):
    """Chat-scoped, only to a device that asked for the append feature; in place of a
    message.update that extends what the device has. text follows the first offset UTF-16 code
    units of the message's text (JavaScript string length). A device whose text is not offset
    units long asks for resume instead of applying it."""

    type: Literal["message.append"]
    message_id: MessageId
    offset: Annotated[int, Field(ge=0)]
    text: str


@with_config(_CONFIG)
class MessageStop(_Stamped):
    """Chat-scoped. The streamed segment is final: final_text is its text."""

    type: Literal["message.stop"]
    message_id: MessageId
    final_text: str
    reasoning: NotRequired[str]
    model: NotRequired[str]
    tokens: NotRequired[Tokens]


@with_config(_CONFIG)
class MessageStopAppend(_Stamped):
    """Chat-scoped, only to a device with the append feature: a message.stop whose final text
    extends the text the device holds carries the rest (text, after the first offset UTF-16 code
    units) in place of final_text."""

    type: Literal["message.stop"]
    message_id: MessageId
    offset: Annotated[int, Field(ge=0)]
    text: str
    reasoning: NotRequired[str]
    model: NotRequired[str]
    tokens: NotRequired[Tokens]


@with_config(_CONFIG)
class Message(_Stamped):
    """Chat-scoped. A whole reply when streaming is off, or the echo of a user's message.send."""

    type: Literal["message"]
    message_id: MessageId
    text: str
    role: Literal["user", "assistant"]
    reasoning: NotRequired[str]
    model: NotRequired[str]
    tokens: NotRequired[Tokens]


@with_config(_CONFIG)
class ToolStart(_Stamped):
    """Chat-scoped. A tool call began; index is monotonic per turn."""

    type: Literal["tool.start"]
    index: ToolIndex
    name: str
    preview: str
    args: dict[str, Any]


@with_config(_CONFIG)
class ToolProgress(_Stamped):
    """Chat-scoped. Progress of a running tool."""

    type: Literal["tool.progress"]
    index: ToolIndex
    name: str
    note: str


@with_config(_CONFIG)
class ToolEnd(_Stamped):
    """Chat-scoped. A tool call finished."""

    type: Literal["tool.end"]
    index: ToolIndex
    name: str
    ok: bool
    duration: Annotated[float, Field(ge=0)]
    output_preview: Annotated[str, StringConstraints(max_length=OUTPUT_PREVIEW_CHARS)]


@with_config(_CONFIG)
class ApprovalRequest(_Stamped):
    """Chat-scoped. Tool call index waits for a yes: answer with approval.respond before
    expires_at (Unix seconds). args is the call's whole arguments, an object as in tool.start,
    preview a person's rendering of them (a terminal command in full); neither is ever cut."""

    type: Literal["approval.request"]
    approval_id: ApprovalId
    index: ToolIndex
    name: str
    args: dict[str, Any]
    preview: str
    expires_at: float


class OpenApproval(TypedDict):
    """One approval request still waiting, as a sync carries it: an approval.request's fields
    but its type and stamps."""

    approval_id: ApprovalId
    index: ToolIndex
    name: str
    args: dict[str, Any]
    preview: str
    expires_at: float


@with_config(_CONFIG)
class ElicitationRequest(_Stamped):
    """Chat-scoped. An MCP server (server) asks the person for input in the middle of a tool
    call: message, and a form in schema (a JSON object schema of primitive fields: string,
    number, integer, boolean, enum as choices; required lists the fields that must be
    answered), or url (a link to open; schema is then empty). Answer with
    elicitation.respond before expires_at (Unix seconds); unanswered, it is declined."""

    type: Literal["elicitation.request"]
    elicitation_id: ElicitationId
    server: str
    message: str
    schema: dict[str, Any]
    expires_at: float
    url: NotRequired[str]


@with_config(_CONFIG)
class ElicitationResolvedFrame(_Stamped):
    """Chat-scoped. How an elicitation ended: accept, decline, cancel, or timeout (declined);
    by names who answered, or is timeout / interrupt."""

    type: Literal["elicitation.resolved"]
    elicitation_id: ElicitationId
    action: Literal["accept", "decline", "cancel", "timeout"]
    by: str


@with_config(_CONFIG)
class ApprovalResolvedFrame(_Stamped):
    """Chat-scoped. How an approval request ended: once, chat (this tool unasked for the rest
    of the chat's session), deny, timeout or cancelled (the turn was interrupted); by names
    who answered (a device or user), or is timeout / interrupt."""

    type: Literal["approval.resolved"]
    approval_id: ApprovalId
    decision: Literal["once", "chat", "deny", "timeout", "cancelled"]
    by: str


@with_config(_CONFIG)
class Commentary(_Stamped):
    """Chat-scoped. Text that accompanied tool calls; when it was streamed as message_id, this
    closes that bubble."""

    type: Literal["commentary"]
    message_id: MessageId
    text: str


@with_config(_CONFIG)
class Error(_Stamped):
    """Chat-scoped when a turn failed (then typing off follows); connection-scoped for bad
    input."""

    type: Literal["error"]
    code: str
    message: str


@with_config(_CONFIG)
class Pong(_Stamped):
    """Connection-scoped. The answer to ping."""

    type: Literal["pong"]


@with_config(_CONFIG)
class Command(_Stamped):
    """Connection-scoped. The answer to a chat command (/status, /new...) sent as message.send;
    only the sending device gets it."""

    type: Literal["command"]
    command: Annotated[str, StringConstraints(pattern=r"^[a-z]+$")]
    text: str


@with_config(_CONFIG)
class SyncMessage(TypedDict):
    """One message of a sync: a closed message, or one still streaming with its latest text."""

    message_id: MessageId
    role: Literal["user", "assistant", "commentary"]
    text: str
    reasoning: NotRequired[str]
    model: NotRequired[str]
    tokens: NotRequired[Tokens]


@with_config(_CONFIG)
class Sync(_Stamped):
    """Connection-scoped. The conversation so far, when the log no longer reaches back to
    after_seq."""

    type: Literal["sync"]
    messages: list[SyncMessage]
    epoch: NotRequired[str]  # as in ready: a change means the seqs restarted
    # The chat's approval requests still open (their approval.request frames may be past the
    # log's reach): a device shows each as it would that frame.
    approvals: NotRequired[list[OpenApproval]]


# Frames that always take the chat's next seq: logged, replayed on resume, told apart by seq.
# ready, pong, sync and command are one connection's; error may be either (a failed turn's, or
# the answer to bad input), so it is not among them.
CHAT_SCOPED = frozenset(
    {
        "typing",
        "message.start",
        "message.update",
        "message.append",
        "message.stop",
        "message",
        "tool.start",
        "tool.progress",
        "tool.end",
        "commentary",
        "approval.request",
        "approval.resolved",
    }
)


def _server_tag(frame: Any) -> str | None:
    kind = frame.get("type") if isinstance(frame, dict) else getattr(frame, "type", None)
    if kind == "message.stop" and isinstance(frame, dict) and "final_text" not in frame:
        return "message.stop+append"
    return kind if isinstance(kind, str) else None


ServerFrame = (
    Ready
    | Typing
    | MessageStart
    | MessageUpdate
    | MessageAppend
    | MessageStop
    | MessageStopAppend
    | Message
    | ToolStart
    | ToolProgress
    | ToolEnd
    | ApprovalRequest
    | ApprovalResolvedFrame
    | ElicitationRequest
    | ElicitationResolvedFrame
    | Commentary
    | Error
    | Pong
    | Command
    | Sync
)

SERVER: TypeAdapter[ServerFrame] = TypeAdapter(
    Annotated[
        Annotated[Ready, Tag("ready")]
        | Annotated[Typing, Tag("typing")]
        | Annotated[MessageStart, Tag("message.start")]
        | Annotated[MessageUpdate, Tag("message.update")]
        | Annotated[MessageAppend, Tag("message.append")]
        | Annotated[MessageStop, Tag("message.stop")]
        | Annotated[MessageStopAppend, Tag("message.stop+append")]
        | Annotated[Message, Tag("message")]
        | Annotated[ToolStart, Tag("tool.start")]
        | Annotated[ToolProgress, Tag("tool.progress")]
        | Annotated[ToolEnd, Tag("tool.end")]
        | Annotated[ApprovalRequest, Tag("approval.request")]
        | Annotated[ApprovalResolvedFrame, Tag("approval.resolved")]
        | Annotated[ElicitationRequest, Tag("elicitation.request")]
        | Annotated[ElicitationResolvedFrame, Tag("elicitation.resolved")]
        | Annotated[Commentary, Tag("commentary")]
        | Annotated[Error, Tag("error")]
        | Annotated[Pong, Tag("pong")]
        | Annotated[Command, Tag("command")]
        | Annotated[Sync, Tag("sync")],
        Discriminator(_server_tag),
    ]
)


# -- app -> server -------------------------------------------------------------------------------
@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class Hello:
    """First frame when no Authorization header was sent. token is required when
    platforms.iris.tokens is set."""

    token: Text = ""
    chat_id: ChatId | None = None
    after_seq: Seq | None = None
    # None: the device named none (not even []).
    features: (
        Annotated[
            tuple[Feature, ...],
            Field(
                max_length=MAX_FEATURES,
                description='Protocol features this device understands, e.g. ["append"];'
                " unknown names are ignored.",
            ),
        ]
        | None
    ) = None
    type: Literal["hello"] = "hello"


MAX_ATTACHMENTS = 8  # files one message.send may carry
MAX_FILE_NAME = 255
MAX_MIME = 127


@with_config(_CONFIG)
class SentFile(TypedDict):
    """A file sent with a message: ``kind`` ``image``, ``audio`` or ``file``, its name and MIME
    type, its bytes in standard base64. Each is at most ``attachments.max_bytes`` decoded, and
    the whole frame fits the socket's 1 MiB frame limit."""

    kind: Literal["image", "audio", "file"]
    name: Annotated[Text, StringConstraints(max_length=MAX_FILE_NAME)]
    mime: Annotated[str, StringConstraints(strict=True, max_length=MAX_MIME)]
    data_b64: Annotated[str, StringConstraints(strict=True)]


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class SendMessage:
    """Start a turn on the connection's chat. ``text`` may be blank only when files come
    with it."""

    text: Text
    chat_id: ChatId | None = None
    attachments: Annotated[tuple[SentFile, ...], Field(max_length=MAX_ATTACHMENTS)] = ()
    type: Literal["message.send"] = "message.send"


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class CancelTurn:
    """Interrupt the running turn."""

    type: Literal["turn.cancel"] = "turn.cancel"


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class Resume:
    """Replay every frame after after_seq, then continue live."""

    after_seq: Seq
    type: Literal["resume"] = "resume"


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class Ping:
    """Liveness; answered with pong."""

    type: Literal["ping"] = "ping"


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class ApprovalRespond:
    """Answer an approval.request of the connection's chat: once, chat (this tool runs
    unasked for the rest of the chat's session) or deny. The first answer from any device
    wins; a later one gets an error frame (approval_decided), an id the chat is not waiting
    on one with approval_unknown."""

    approval_id: ApprovalId
    decision: Literal["once", "chat", "deny"]
    type: Literal["approval.respond"] = "approval.respond"


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class ElicitationRespond:
    """Answer an elicitation.request of the connection's chat: accept with content (the
    form's fields; it must fit the schema, else an error frame elicitation_invalid says why
    and the request stays open, to be answered again), decline or cancel (no content). An id
    the chat is not waiting on gets elicitation_unknown."""

    elicitation_id: ElicitationId
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None
    type: Literal["elicitation.respond"] = "elicitation.respond"


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class PushKeys:
    """A push subscription's keys, as the browser gives them (base64url)."""

    p256dh: Annotated[str, Field(min_length=1, max_length=200)]
    auth: Annotated[str, Field(min_length=1, max_length=100)]


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class PushSubscriptionInfo:
    """A browser's push subscription (``PushSubscription.toJSON()``)."""

    endpoint: Annotated[str, Field(min_length=8, max_length=2048)]
    keys: PushKeys
    expirationTime: float | None = None  # noqa: N815 (the browser's name)


@with_config(_CONFIG)
@dataclass(frozen=True, slots=True)
class PushSubscribe:
    """Web Push: notify this browser of the connection's chat (a reply finished while no
    device was connected, an approval waits, a scheduled run delivered)."""

    subscription: PushSubscriptionInfo
    type: Literal["push.subscribe"] = "push.subscribe"


ClientFrame = (
    Hello
    | SendMessage
    | CancelTurn
    | Resume
    | Ping
    | ApprovalRespond
    | ElicitationRespond
    | PushSubscribe
)

CLIENT: TypeAdapter[ClientFrame] = TypeAdapter(Annotated[ClientFrame, Field(discriminator="type")])


# -- what the fan-out may do with each server frame ----------------------------------------------
_TRAITS: dict[str, Traits] = {
    "message.start": Traits(opens=True),
    "message.update": Traits(snapshot=True),
    "message.stop": Traits(closes=True),
    "commentary": Traits(closes=True),
    "typing": Traits(turn=True),
    "pong": Traits(one_pending="first"),  # any pong answers every ping sent before it
    "sync": Traits(one_pending="last"),  # the newest conversation is the one to show
}


class IrisRules:
    """``iris.fanout.rules.FrameRules`` for the iris protocol."""

    @property
    def marks(self) -> Mapping[str, Traits]:
        return _TRAITS

    def traits(self, kind: str) -> Traits:
        return _TRAITS.get(kind, PLAIN)

    def snapshot_text(self, frame: Frame) -> str:
        return frame["text"]

    def snapshot_with(self, frame: Frame, text: str) -> Frame:
        return {**frame, "text": text}

    def transcript_entry(self, frame: Frame) -> dict[str, Any] | None:
        """The message a closing frame leaves in the conversation, in the shape ``sync`` sends."""
        kind = frame["type"]
        if kind == "commentary":
            return {"message_id": frame["message_id"], "role": "commentary", "text": frame["text"]}
        if kind == "message":
            entry = {
                "message_id": frame["message_id"],
                "role": frame["role"],
                "text": frame["text"],
            }
        elif kind == "message.stop":
            entry = {
                "message_id": frame["message_id"],
                "role": "assistant",
                "text": frame["final_text"],
            }
        else:
            return None
        for key in ("reasoning", "model", "tokens"):
            if key in frame:
                entry[key] = frame[key]
        return entry

    def sync(self, messages: list[dict[str, Any]], epoch: str, approvals: list[Frame]) -> Frame:
        frame: Frame = {"type": "sync", "messages": messages, "epoch": epoch}
        if approvals:
            frame["approvals"] = approvals
        return frame

    def turn_open(self, frame: Frame) -> bool:
        return frame.get("on") is True


RULES = IrisRules()


# -- the JSON Schema -----------------------------------------------------------------------------
def schema() -> dict[str, Any]:
    """The JSON Schema of every frame, as ``frames.schema.json`` ships it: a frame's ``$defs``
    entry is ``server.<type>`` / ``client.<type>`` (a part of one, snake_case); the root
    validates a server frame, ``$defs/ClientFrame`` an app frame."""
    server, client = SERVER.json_schema(), CLIENT.json_schema()
    names: dict[str, str] = {}
    defs: dict[str, Any] = {}
    for side, generated in (("server", server), ("client", client)):
        for name, definition in generated["$defs"].items():
            kind = definition["properties"].get("type", {}).get("const")
            new = _PARTS[name] if kind is None or name in _PARTS else f"{side}.{kind}"
            names[name] = new
            defs[new] = _tidy(definition, frame=kind is not None, stamped=side == "server")
    defs["ServerFrame"] = {"oneOf": server["oneOf"]}
    defs["ClientFrame"] = {"oneOf": client["oneOf"]}
    text = json.dumps(dict(sorted(defs.items())))
    for old, new in names.items():
        text = text.replace(f'"#/$defs/{old}"', f'"#/$defs/{new}"')
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://iris.invalid/schemas/iris-frames.json",
        "title": "Iris WebSocket frames",
        "description": "Frames of the iris protocol (docs/iris-protocol.md), generated from"
        " iris.protocol.types. The root validates a server frame; $defs/ClientFrame"
        " validates what an app sends.",
        "$defs": json.loads(text),
        "$ref": "#/$defs/ServerFrame",
    }


# Definitions that are not a frame type of their own.
_PARTS = {
    "SyncMessage": "sync_message",
    "MessageStopAppend": "message_stop_append",
    "SentFile": "sent_file",
    "OpenApproval": "open_approval",
    "PushKeys": "push_keys",
    "PushSubscriptionInfo": "push_subscription",
}


def _tidy(definition: dict[str, Any], *, frame: bool, stamped: bool) -> dict[str, Any]:
    """Without pydantic's generated titles and defaults, ``type`` first; ``type`` (and on a
    server frame the hub's ``chat_id`` and ``seq``) is always on the wire."""
    props: dict[str, Any] = definition["properties"]
    order = sorted(props, key=lambda name: name != "type")
    out = {key: value for key, value in definition.items() if key != "title"}
    out["properties"] = {
        name: {key: value for key, value in props[name].items() if key not in ("title", "default")}
        for name in order
    }
    if "description" in out:
        out["description"] = " ".join(out["description"].split())
    always = (["type", "chat_id", "seq"] if stamped else ["type"]) if frame else []
    required = [name for name in definition.get("required", []) if name not in always]
    out["required"] = [*always, *required]
    return out


def schema_text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


# -- how a device reads a server frame (the browser's copy of SERVER's rule) ---------------------
READING_FILE = Path(__file__).parents[1] / "web" / "js" / "reading.js"
_DROPPED = frozenset({"title", "description", "default", "additionalProperties"})


def reading() -> dict[str, Any]:
    """``SERVER``'s rule as data: each frame type's definition as pydantic validates it with
    ``strict=True`` (``chat_id`` and ``seq`` optional, unknown fields ignored), and the
    discriminator's tags. ``src/iris/web/js/frames.js`` reads frames by it."""
    generated = SERVER.json_schema()
    defs = {name: _bare(definition) for name, definition in generated["$defs"].items()}
    tags: dict[str, str] = {}
    for name, definition in defs.items():
        kind = definition["properties"].get("type", {}).get("const")
        if kind is not None:
            tags[_tag(kind, definition)] = name
    return {"tags": dict(sorted(tags.items())), "defs": dict(sorted(defs.items()))}


def _tag(kind: str, definition: dict[str, Any]) -> str:
    """The tag ``_server_tag`` gives a frame this definition accepts."""
    appended = kind == "message.stop" and "final_text" not in definition["properties"]
    return "message.stop+append" if appended else kind


def _bare(node: Any) -> Any:
    """Only the keywords that decide what is valid (``additionalProperties`` included: unknown
    fields are ignored when reading), less a bound a JavaScript number cannot hold exactly
    (``seq``'s 2**63 - 1: the browser never sees a number that large as itself)."""
    if isinstance(node, dict):
        items = cast(dict[str, Any], node).items()
        return {
            key: _bare(value)
            for key, value in items
            if key not in _DROPPED and not (key == "maximum" and value > 2**53 - 1)
        }
    if isinstance(node, list):
        return [_bare(value) for value in cast(list[Any], node)]
    return node


def reading_text() -> str:
    data = json.dumps(reading(), indent=1, ensure_ascii=False)
    return (
        "// @ts-check\n"
        "// Generated by `python -m iris.protocol.types` from iris.protocol.types (do not edit):\n"
        "// how a device reads a server frame, the rule of its SERVER adapter. frames.js reads by it.\n"
        f"export const READING = {data};\n"
    )


if __name__ == "__main__":
    SCHEMA_FILE.write_text(schema_text())
    READING_FILE.write_text(reading_text())
    sys.stdout.write(f"wrote {SCHEMA_FILE} and {READING_FILE}\n")
