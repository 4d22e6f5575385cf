"""The files of a chat message fetched from the platform, and the user message they make.

Each file goes through its platform's file API (``FilePlatform.download``: Telegram
``getFile`` + the file download, Discord's attachment URL, Slack ``files.info`` +
``url_private`` with the bot token, WhatsApp ``GET {media-id}`` + the media URL with the
access token), one at a time, each within ``attachments.timeout`` and
``attachments.max_bytes`` (a size the platform reported over the cap is not downloaded at
all). A file that cannot be had is a one-line note; the text goes through all the same.
``iris.agent.attachments`` decides what the model gets of the rest.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from iris.agent.attachments import File, Transcriber, prepare
from iris.agent.conversation import UserMessage
from iris.config import Config
from iris.surfaces.chat.platforms.base import (
    Attachment,
    ChatPlatform,
    FilePlatform,
    IncomingMessage,
    PlatformError,
)

log = logging.getLogger(__name__)

# Files of one message fetched at most; the rest are named in a note.
MAX_FILES = 10


async def gather(
    platform: ChatPlatform,
    message: IncomingMessage,
    config: Config,
    *,
    transcriber: Transcriber | None = None,
) -> UserMessage:
    """The user message of ``message``: its text and what its files became (a text-only
    message as it is: nothing is fetched or prepared)."""
    if not message.attachments:
        return UserMessage(message.text)
    files: list[File] = []
    notes: list[str] = []
    for attachment in message.attachments[:MAX_FILES]:
        data = await _fetch(platform, attachment, config, notes)
        if data is not None:
            files.append(File(attachment.kind, attachment.name, attachment.mime, data))
    extra = message.attachments[MAX_FILES:]
    if extra:
        names = ", ".join(a.name or "(unnamed)" for a in extra)
        notes.append(f"{names}: not read (at most {MAX_FILES} files a message)")
    try:
        made = await prepare(config, message.text, files, notes=notes, transcriber=transcriber)
    except Exception:  # a file no reader expected must not cost the message its text
        log.exception("%s: the files of a message could not be read", platform.name)
        names = ", ".join(a.name or "(unnamed)" for a in message.attachments)
        made = await prepare(config, message.text, [], notes=[f"{names}: could not be read"])
    return UserMessage(message.text, made)


async def _fetch(
    platform: ChatPlatform, attachment: Attachment, config: Config, notes: list[str]
) -> bytes | None:
    name = attachment.name or "(unnamed)"
    most = config.attachments.max_bytes
    if attachment.size > most:
        notes.append(f"{name}: too large ({attachment.size} bytes; the limit is {most})")
        return None
    download = getattr(platform, "download", None)
    if download is None:
        notes.append(f"{name}: files sent on {platform.name} are not read")
        return None
    files: FilePlatform = platform  # pyright: ignore[reportAssignmentType]
    try:
        async with asyncio.timeout(config.attachments.timeout):
            return await files.download(attachment, most)
    except TimeoutError:
        notes.append(f"{name}: could not be downloaded: no answer in time")
    except PlatformError as exc:
        log.info("%s: download of %s failed: %s", platform.name, name, exc)
        notes.append(f"{name}: could not be downloaded: {exc}")
    return None


async def read_capped(chunks: AsyncIterator[bytes], max_bytes: int, platform: str) -> bytes:
    """A download's body, refused (``PlatformError``) once it passes ``max_bytes``: a file
    bigger than its metadata said is not read to its end."""
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > max_bytes:
            raise PlatformError(f"{platform}: larger than {max_bytes} bytes")
    return bytes(body)
