"""What files sent with a message become for the model: content parts, or a line for the user.

Every surface (chat platforms, the iris socket) hands the files it received, as bytes, to
``prepare``; nothing here knows where they came from. Each file becomes one of:

- an image part (``image_url`` with an inline ``data:`` URL, never a platform's file URL:
  Telegram's holds the bot token), re-encoded and downscaled to ``attachments.max_edge``
  with Pillow, when the model sees images (``model.vision``; never the embedded model);
- a text part with the file's name, for a UTF-8 document of at most ``attachments.max_text_bytes``;
- a transcript, for a voice note or audio file, through the provider's
  ``/v1/audio/transcriptions`` (the official SDK) when ``attachments.transcribe`` names a model;
- otherwise a note: one line for the user (``Prepared.notes``) and the same in brackets for the
  model, so it knows something was sent it cannot see. Nothing is dropped silently.

What the transcript keeps (``Prepared.stored``): the text, documents and transcripts, with each
image replaced by a short placeholder. A downscaled image is still ~1500 tokens and hundreds of
KB of base64: kept, it would go with every later request of the chat and sit in every store.
The model sees an image in the turn it was sent with; ``without_old_images`` does the same to
a history whose newest user messages still hold their images (a burst: messages that arrived
while a reply was being written are kept whole until a reply answers them).
"""

from __future__ import annotations

import asyncio
import base64
import html
import io
import logging
import math
import mimetypes
import re
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import openai

from iris.config import Config, ModelEndpoint

log = logging.getLogger(__name__)

Kind = Literal["image", "audio", "file"]
KINDS: tuple[Kind, ...] = ("image", "audio", "file")

# What an image part stands for in the history once its turn is over.
IMAGE_PLACEHOLDER = "[image{name}: shown to the model with the message it came with]"


MAX_NAME = 200  # characters of a file's name shown to the user and the model


def shown_name(name: str) -> str:
    """A sender's file name as notes and the model see it: one line (line breaks and other
    control characters as ``\\uXXXX``), at most ``MAX_NAME`` characters; it cannot start a line
    of its own in what the model reads."""
    if not name:
        return "(unnamed)"
    shown = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in name)
    return shown if len(shown) <= MAX_NAME else shown[: MAX_NAME - 1] + "…"


def placeholder(name: str = "") -> str:
    return IMAGE_PLACEHOLDER.format(name=f" {name}" if name else "")


# Formats a provider takes as they are; anything else Pillow reads is re-encoded as PNG.
_AS_SENT = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
_BINARY_MIME = ("image/", "audio/", "video/", "application/pdf", "application/zip")


@dataclass(frozen=True, slots=True)
class File:
    """One file as received: ``kind`` as the sender called it (a platform's photo or voice
    note, the socket's ``kind``), its name and MIME type as given, and its bytes."""

    kind: Kind
    name: str
    mime: str
    data: bytes


def kind_of(mime: str) -> Kind:
    """The kind a surface sends a file of ``mime`` as (the web app's ``kindOf``)."""
    if mime.startswith("image/"):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    return "file"


def too_large(name: str, size: int, limit: int) -> str:
    """The line a file over ``attachments.max_bytes`` gets, on every surface."""
    return f"{name}: too large ({size} bytes; the limit is {limit})"


def read_path(path: Path, max_bytes: int) -> File:
    """A file on this machine as the terminal surfaces send one: its MIME type guessed from its
    name, its kind from that. Raises ``ValueError`` with the line the user is told when it
    cannot go: not there, not a file, unreadable, or over ``max_bytes`` (then never read)."""
    name = path.name or str(path)
    try:
        if not path.is_file():
            raise ValueError(
                f"{path}: no such file" if not path.exists() else f"{path}: not a file"
            )
        size = path.stat().st_size
        if size > max_bytes:
            raise ValueError(too_large(name, size, max_bytes))
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:  # it grew since
        raise ValueError(too_large(name, len(data), max_bytes))
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return File(kind_of(mime), name, mime, data)


@dataclass(frozen=True, slots=True)
class Prepared:
    """A user message with its files: ``content`` for the model now, ``stored`` for the
    history, ``notes`` for the user (one line per file the model did not get whole)."""

    content: str | list[dict[str, Any]]
    stored: str
    notes: list[str] = field(default_factory=list[str])

    def message(self) -> dict[str, Any]:
        return {"role": "user", "content": self.content}

    def kept(self) -> dict[str, Any]:
        return {"role": "user", "content": self.stored}


class Transcriber(Protocol):
    async def transcribe(self, file: File) -> str: ...


def sees_images(config: Config) -> bool:
    """``model.vision``; never for the embedded model (a text-only Gemma)."""
    return config.model.vision and config.model.provider != "local"


async def prepare(
    config: Config,
    text: str,
    files: Sequence[File],
    *,
    notes: Sequence[str] = (),
    transcriber: Transcriber | None = None,
) -> Prepared:
    """The user message of ``text`` and ``files``. ``notes``: what the surface could not
    receive (a failed download), said to the user and the model like any other."""
    settings = config.attachments
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text.strip() else []
    stored: list[str] = [text] if text.strip() else []
    told: list[str] = list(notes)
    for file in files:
        name = shown_name(file.name)
        if len(file.data) > settings.max_bytes:
            told.append(too_large(name, len(file.data), settings.max_bytes))
        elif _is_image(file):
            if not sees_images(config):
                told.append(f"{name}: this model does not see images (model.vision is off)")
                continue
            try:
                url = await asyncio.to_thread(image_url, file.data, settings.max_edge)
            except ValueError as exc:
                told.append(f"{name}: {exc}")
                continue
            parts.append({"type": "image_url", "image_url": {"url": url}})
            stored.append(placeholder(name))
        elif _is_audio(file):
            heard = await _transcript(config, file, transcriber, told)
            if heard is not None:
                line = f"[voice note {name}, transcribed]\n{heard}"
                parts.append({"type": "text", "text": line})
                stored.append(line)
        else:
            document = _document(file, settings.max_text_bytes, told)
            if document is not None:
                parts.append({"type": "text", "text": document})
                stored.append(document)
    for note in told:  # the model is told too, so it does not answer as if it had seen it
        line = f"[attachment not included: {note}]"
        parts.append({"type": "text", "text": line})
        stored.append(line)
    joined = "\n\n".join(stored)
    if any(part["type"] != "text" for part in parts):
        return Prepared(parts, joined, told)
    return Prepared("\n\n".join(part["text"] for part in parts), joined, told)


def without_old_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the image parts of user messages older than the last assistant
    message replaced by their placeholder: a reply answered them already."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        if index < last and message.get("role") == "user" and isinstance(content, list):
            texts = [
                str(p.get("text", "")) if p.get("type") == "text" else placeholder()
                for p in _parts(content)
            ]
            message = {**message, "content": "\n\n".join(t for t in texts if t)}
        out.append(message)
    return out


# -- images ------------------------------------------------------------------------------------
# Pixels an image may decode to (after a JPEG's reduced-size decode): 8.4 million, a 4K
# screenshot (3 840 x 2 160), 32 MB at the four bytes a pixel Pillow keeps for colour. Known from
# the header before anything is decoded: a 343 KB PNG of 9 400 x 9 400 pixels would decode to
# 353 MB. A phone's JPEG photo of any size is decoded reduced, under it.
MAX_PIXELS = 1 << 23
# Images decoded at once in this process, whatever the chats: four chats sending the PNG above
# together peaked at 3.3 GB before this bound.
_DECODES = threading.BoundedSemaphore(2)


def image_url(data: bytes, max_edge: int) -> str:
    """A ``data:`` URL of the image in ``data``, downscaled to ``max_edge`` on its longer
    side and re-encoded where the provider would not take it as it is. Raises ``ValueError``
    (with what the user is told) for what is not a readable image, or one over ``MAX_PIXELS``.
    CPU-bound: run in a thread.

    Memory is bounded before decoding: the size comes from the header (``Image.open`` reads
    no pixels); a JPEG is decoded at 1/2, 1/4 or 1/8 of its size where that still leaves
    ``max_edge`` (``draft``); what would still decode to more than ``MAX_PIXELS`` is refused;
    at most two images are decoded at once (``_DECODES``)."""
    from PIL import Image, UnidentifiedImageError

    with warnings.catch_warnings():
        # Past Pillow's pixel limit an image is a decompression bomb: refused, not decoded.
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data)) as image:
                kind = image.format or ""
                width, height = image.size
                if max(width, height) > max_edge:  # JPEG only; for other formats a no-op
                    ratio = max_edge / max(width, height)  # decoded at least this large
                    image.draft(None, (math.ceil(width * ratio), math.ceil(height * ratio)))
                if image.size[0] * image.size[1] > MAX_PIXELS:
                    raise ValueError(
                        f"the image is too large to read ({width} x {height} pixels; "
                        f"the limit is {MAX_PIXELS / 1e6:.1f} megapixels)"
                    )
                with _DECODES:
                    return _encoded(image, data, kind, max(width, height), max_edge)
        except (Image.DecompressionBombWarning, Image.DecompressionBombError):
            raise ValueError("the image has too many pixels to read") from None
        except (UnidentifiedImageError, OSError, SyntaxError):
            raise ValueError("not an image that can be read") from None


def _encoded(image: Any, data: bytes, kind: str, longest: int, max_edge: int) -> str:
    """Decode ``image`` (a Pillow image, opened) and answer its data URL."""
    image.load()
    if longest <= max_edge and kind in _AS_SENT:
        return _data_url(_AS_SENT[kind], data)
    image.thumbnail((max_edge, max_edge))
    opaque = image.mode in ("RGB", "L", "CMYK", "YCbCr")
    out = io.BytesIO()
    if opaque:
        image.convert("RGB").save(out, "JPEG", quality=85)
        return _data_url("image/jpeg", out.getvalue())
    image.convert("RGBA").save(out, "PNG", optimize=True)
    return _data_url("image/png", out.getvalue())


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _is_image(file: File) -> bool:
    return file.kind == "image" or file.mime.lower().startswith("image/")


def _is_audio(file: File) -> bool:
    return file.kind == "audio" or file.mime.lower().startswith("audio/")


# -- documents ---------------------------------------------------------------------------------
def _document(file: File, max_text_bytes: int, told: list[str]) -> str | None:
    """A text part for a UTF-8 document, or None (and a note) for anything else."""
    name = shown_name(file.name)
    kind = file.mime or "unknown type"
    if file.mime.lower().startswith(_BINARY_MIME) or b"\x00" in file.data:
        told.append(f"{name}: can't read this kind of file ({kind})")
        return None
    try:
        text = file.data.decode("utf-8")
    except UnicodeDecodeError:
        told.append(f"{name}: can't read this kind of file ({kind}; not UTF-8 text)")
        return None
    if len(file.data) > max_text_bytes:
        told.append(
            f"{name}: too long to attach as text ({len(file.data)} bytes; the limit is "
            f"{max_text_bytes})"
        )
        return None
    return wrapped(name, text.removeprefix(chr(0xFEFF)))


# A file tag inside a document, any case: ``</FILE >`` closes as well for a reader.
_FILE_TAG = re.compile(r"<(?=\s*/?\s*file\b)", re.IGNORECASE)


def wrapped(name: str, text: str) -> str:
    """``<file name="…">`` … ``</file>`` around a document's text, unforgeable by either: the
    name is escaped as an XML attribute (quotes, ``<``, ``>``, ``&``, line breaks and other
    control characters), and a file tag inside the text has its ``<`` escaped (``&lt;/file>``),
    so the only tags are these two and nothing a sender writes reads as outside the file."""
    quoted = html.escape(name, quote=True)
    quoted = "".join(c if c.isprintable() else f"&#{ord(c)};" for c in quoted)
    return f'<file name="{quoted}">\n{_FILE_TAG.sub("&lt;", text)}\n</file>'


# -- audio -------------------------------------------------------------------------------------
async def _transcript(
    config: Config, file: File, transcriber: Transcriber | None, told: list[str]
) -> str | None:
    name = shown_name(file.name)
    if transcriber is None:
        transcriber = transcriber_for(config)
    if transcriber is None:
        told.append(
            f"{name}: voice notes and audio are not transcribed here (attachments.transcribe is off)"
        )
        return None
    try:
        async with asyncio.timeout(config.attachments.timeout):
            heard = (await transcriber.transcribe(file)).strip()
    except TimeoutError:
        told.append(f"{name}: could not be transcribed: no answer in time")
        return None
    except (openai.APIError, OSError) as exc:
        log.warning("transcription of %s failed: %s", name, exc)
        told.append(f"{name}: could not be transcribed: {_why(exc)}")
        return None
    if not heard:
        told.append(f"{name}: nothing was heard in it")
        return None
    return heard


def _why(exc: Exception) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"the provider answered HTTP {exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):
        return "cannot reach the provider"
    return type(exc).__name__


class ProviderTranscriber:
    """``/v1/audio/transcriptions`` of an endpoint, through the official SDK."""

    def __init__(self, endpoint: ModelEndpoint, model: str, timeout: float) -> None:
        self.endpoint, self.model, self.timeout = endpoint, model, timeout

    async def transcribe(self, file: File) -> str:
        client = openai.AsyncOpenAI(
            base_url=self.endpoint.base_url,
            api_key=self.endpoint.resolved_api_key(),
            max_retries=0,
            timeout=self.timeout,
        )
        async with client:
            result = await client.audio.transcriptions.create(
                model=self.model,
                file=(file.name or "audio", file.data, file.mime or "application/octet-stream"),
                response_format="json",
            )
        return result.text


def transcriber_for(config: Config) -> Transcriber | None:
    """The transcriber ``attachments.transcribe`` asks for: on the model's endpoint, or the
    first fallback with a ``base_url`` when the model is the embedded one. None when off."""
    model = config.attachments.transcribe
    if not model:
        return None
    for endpoint in (config.model, *config.model.fallback):
        if endpoint.provider != "local" and endpoint.base_url:
            return ProviderTranscriber(endpoint, model, config.attachments.timeout)
    return None


def _parts(content: list[Any]) -> list[dict[str, Any]]:
    return [part for part in content if isinstance(part, dict)]
