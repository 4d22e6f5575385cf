"""``TelegramPlatform``: the Telegram Bot API through python-telegram-bot, with long polling.

Requests go to ``{base_url}/bot{token}/{method}`` (``platforms.telegram.base_url``), so tests
point the real library at a local Bot API server. The adapter uses ``telegram.Bot`` directly,
not ``Application``: no update queue, no built-in rate limiter or retries — the consumer's
throttle owns pacing, and a 429 surfaces at once as ``PlatformRateLimited``.

Telegram facts this relies on: 4096 UTF-16 code units per message; about one message per
second per private chat and 20 per minute per group, edits included, and about 30 a second for
the whole bot (``budget``, shared by every chat: ``platforms.telegram.budgets``); editing to identical text
fails with "message is not modified" (treated as success); the typing action lasts ~5 s. A
chat action counts against the bot-wide limit too, so typing is sent only from what the
replies leave of it (``SharedBudget.spare``): it never delays a reply.

Native streaming (``native_for``): in a private chat a reply is previewed with
``sendMessageDraft`` (Bot API 9.3; a draft is not a message, lives 30 s after its last update,
and an empty text shows "Thinking…"); with ``can_stop`` the draft carries a stop button, whose
``stopped_message_generation`` update (Bot API 10.3, read from the update's unparsed fields:
python-telegram-bot 22.8 predates it) arrives as an ``IncomingMessage`` with ``stop`` and the
``draft_id`` whose button was pressed.
Groups and channels have no drafts.

In a group a message addresses the bot (``IncomingMessage.addressed``) when a ``mention``
entity names its ``@username`` (or a ``text_mention`` its id), when it replies to one of the
bot's messages, or when its leading ``bot_command`` names the bot (``/status@iris_bot``); the
mention is cut out of the text (``/status@iris_bot`` becomes ``/status``). A command that names
another bot is not for this one and is dropped. Entities count UTF-16 code units. In a forum
topic every message that replies to nothing carries the topic's ``forum_topic_created`` service
message as ``reply_to_message``: that is the topic, not a reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import warnings
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, cast

import httpx
from telegram import (
    Bot,
    BotCommand,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    Update,
)
from telegram.constants import ChatAction
from telegram.error import (
    BadRequest,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from iris.config import TelegramConfig
from iris.surfaces.chat.budget import Limit, SharedBudget, rate_budget, whole_chat
from iris.surfaces.chat.downloads import read_capped
from iris.surfaces.chat.platforms.base import (
    Attachment,
    Capabilities,
    IncomingMessage,
    Native,
    NativeRefused,
    OnMessage,
    PlatformError,
    PlatformRateLimited,
)
from iris.surfaces.chat.prompts import Press, Prompt
from iris.surfaces.commands import CHAT_COMMANDS
from iris.tasks import OpenGroup, logged

log = logging.getLogger(__name__)

THREAD_KEY = "message_thread_id"
STOPPED = "stopped_message_generation"
# answerCallbackQuery shows at most 200 characters.
_ANSWER_MAX = 200
# Errors before a request left this machine: the message cannot have landed.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_POLL_BACKOFF_MAX = 30.0
_SPACE = " ".encode("utf-16-le")


def _retry_after(exc: RetryAfter) -> float:
    # PTB 22.2+ warns on reading it as int; the value is the same either way.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value: int | float | dt.timedelta = exc.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


def _platform_error(exc: TelegramError) -> PlatformError:
    if isinstance(exc, RetryAfter):
        return PlatformRateLimited(_retry_after(exc), str(exc))
    if isinstance(exc, TimedOut | NetworkError) and not isinstance(exc, BadRequest):
        # A timeout or dropped connection after the request went out: it may have landed.
        return PlatformError(str(exc), maybe_landed=not isinstance(exc.__cause__, _NOT_SENT))
    return PlatformError(str(exc))


async def _unless_done(call: Awaitable[object], done: str) -> None:
    """Await a Bot API call; a Bad Request that says ``done`` means its work is done already
    (an edit to the same text, a delete of a message gone): success, not an error."""
    try:
        await call
    except BadRequest as exc:
        if done in str(exc).lower():
            return
        raise _platform_error(exc) from exc
    except TelegramError as exc:
        raise _platform_error(exc) from exc


def _thread_id(thread: Mapping[str, str] | None) -> int | None:
    value = (thread or {}).get(THREAD_KEY)
    return int(value) if value else None


def _chat(chat_id: str) -> int | str:
    # Numeric ids as ints; "@channelname" stays a string.
    number = chat_id.removeprefix("-")
    return int(chat_id) if number.isascii() and number.isdigit() else chat_id


class TelegramPlatform:
    name = "telegram"
    approval_limit = 4096  # a message with an inline keyboard takes as much text as any
    asks_questions = True  # any number of buttons: an MCP server's question (``questions``)
    capabilities: Capabilities  # per chat, from platforms.telegram.budgets
    budget: SharedBudget  # shared by every chat of the bot

    def __init__(self, settings: TelegramConfig) -> None:
        if not settings.token:
            raise PlatformError("platforms.telegram.token is empty")
        self.settings = settings
        budgets = settings.budgets
        self.capabilities = Capabilities(
            can_edit=True,
            max_length=4096,
            length_unit="utf16",
            rate=rate_budget(budgets.private_chat),
            group_rate=rate_budget(budgets.group_chat),
        )
        # Sends, edits and chat actions count against the bot-wide limit; drafts are not
        # messages and draw on nothing.
        self.budget = SharedBudget(
            [Limit("bot", rate_budget(budgets.bot))],
            {"send": ["bot"], "edit": ["bot"], "delete": ["bot"], "typing": ["bot"]},
            scope=whole_chat,  # a group's limit counts all its topics together
        )
        poll = settings.poll_timeout
        self.bot = Bot(
            settings.token,
            base_url=settings.base_url.rstrip("/") + "/bot",
            base_file_url=settings.base_url.rstrip("/") + "/file/bot",
            request=HTTPXRequest(connection_pool_size=16, read_timeout=15.0),
            # Long polling holds the request open for ``poll`` seconds.
            get_updates_request=HTTPXRequest(connection_pool_size=1, read_timeout=poll + 10.0),
        )
        self._poller: asyncio.Task[None] | None = None
        self._polling = OpenGroup()  # the poller's

    # -- receiving ----------------------------------------------------------------------------
    async def connect(self, on_message: OnMessage) -> None:
        try:
            await self.bot.initialize()  # getMe: a wrong token or base_url fails here, loudly
        except TelegramError as exc:
            raise PlatformError(f"telegram: cannot connect: {exc}") from None
        try:  # the "/" menu of Telegram's apps lists the chat commands
            await self.bot.set_my_commands(
                [BotCommand(name, spec.summary) for name, spec in CHAT_COMMANDS.items()]
            )
        except TelegramError as exc:  # a nicety: the commands work typed all the same
            log.warning("telegram: commands not registered: %s", exc)
        await self._polling.open()
        polling = logged(self._poll(on_message), "telegram polling")
        self._poller = self._polling.create_task(polling, name="telegram-poll")

    async def disconnect(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()  # it polls until told to stop
            await self._polling.close()
        with contextlib.suppress(TelegramError):
            await self.bot.shutdown()

    async def _poll(self, on_message: OnMessage) -> None:
        offset: int | None = None
        backoff = 1.0
        while True:
            try:
                updates = await self.bot.get_updates(
                    offset=offset,
                    timeout=int(self.settings.poll_timeout),
                    allowed_updates=["message", "callback_query", STOPPED],
                )
            except RetryAfter as exc:
                await asyncio.sleep(_retry_after(exc))
                continue
            except TelegramError as exc:
                log.warning("telegram getUpdates failed: %s (retrying in %.0fs)", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _POLL_BACKOFF_MAX)
                continue
            backoff = 1.0
            for update in updates:
                offset = update.update_id + 1
                incoming = self._incoming(update)
                if incoming is not None:
                    try:
                        await on_message(incoming)
                    except Exception:  # one bad message must not stop receiving
                        log.exception("telegram message handler failed")

    def _incoming(self, update: Update) -> IncomingMessage | None:
        stopped = update.api_kwargs.get(STOPPED)
        if isinstance(stopped, dict):
            return _stopped(cast(dict[str, Any], stopped))
        if update.callback_query is not None:
            return self._pressed(update.callback_query)
        message: Message | None = update.message
        if message is None or message.from_user is None:
            return None
        text, attachments = message.text or message.caption or "", _attachments(message)
        if not text and not attachments:
            return None
        addressing = _addressing(message, self.bot.id, self.bot.username)
        if addressing is None:
            return None  # a command for another bot
        text, addressed, bot_thread = addressing
        thread: dict[str, str] = {}
        # Only forum topics are threads to answer in; a reply chain elsewhere also carries a
        # message_thread_id, and sending into it can fail with "message thread not found".
        if message.is_topic_message and message.message_thread_id is not None:
            thread[THREAD_KEY] = str(message.message_thread_id)
        return IncomingMessage(
            platform="telegram",
            chat_id=str(message.chat.id),
            user_id=str(message.from_user.id),
            text=text,
            user_name=message.from_user.username or "",
            is_group=message.chat.type in ("group", "supergroup"),
            message_id=str(message.message_id),
            thread=thread,
            addressed=addressed,
            bot_thread=bot_thread,
            attachments=attachments,
        )

    def _pressed(self, query: CallbackQuery) -> IncomingMessage:
        """A press of an inline keyboard button: answered with ``answerCallbackQuery``."""

        async def answer(text: str, refused: bool) -> None:
            try:
                await self.bot.answer_callback_query(
                    query.id, text=text[:_ANSWER_MAX], show_alert=refused
                )
            except TelegramError as exc:
                raise _platform_error(exc) from exc

        message = query.message
        chat = message.chat if message is not None else None
        thread: dict[str, str] = {}
        if isinstance(message, Message) and message.is_topic_message and message.message_thread_id:
            thread[THREAD_KEY] = str(message.message_thread_id)
        return IncomingMessage(
            platform="telegram",
            chat_id=str(chat.id) if chat is not None else "",
            user_id=str(query.from_user.id),
            text="",
            user_name=query.from_user.username or "",
            is_group=chat is not None and chat.type in ("group", "supergroup"),
            message_id=str(message.message_id) if message is not None else "",
            thread=thread,
            press=Press(query.data or "", answer),
        )

    def native_for(self, message: IncomingMessage) -> Native | None:
        """Drafts in private chats only (the Bot API refuses them elsewhere)."""
        return None if message.is_group else Native("draft", message.thread)

    # -- sending ------------------------------------------------------------------------------
    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        try:
            sent = await self.bot.send_message(
                _chat(chat_id), text, message_thread_id=_thread_id(thread)
            )
        except TelegramError as exc:
            raise _platform_error(exc) from exc
        return str(sent.message_id)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        # editMessageText identifies the message by chat and id; the thread goes along anyway
        # so every call of a reply carries it (the Bot API ignores unknown parameters).
        extra: dict[str, Any] = {}
        thread_id = _thread_id(thread)
        if thread_id is not None:
            extra[THREAD_KEY] = thread_id
        edit = self.bot.edit_message_text(
            text, chat_id=_chat(chat_id), message_id=int(message_id), api_kwargs=extra or None
        )
        await _unless_done(edit, "message is not modified")

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        """Delete a message of this bot (a preview replaced by a fresh final)."""
        delete = self.bot.delete_message(_chat(chat_id), int(message_id))
        await _unless_done(delete, "message to delete not found")  # gone: what a retry wanted

    async def send_prompt(
        self, chat_id: str, prompt: Prompt, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """The prompt with an inline keyboard: the two allows on a row, deny below."""
        row = [InlineKeyboardButton(b.label, callback_data=b.data) for b in prompt.buttons]
        markup = InlineKeyboardMarkup([row[:-1], row[-1:]])
        try:
            sent = await self.bot.send_message(
                _chat(chat_id),
                prompt.text,
                message_thread_id=_thread_id(thread),
                reply_markup=markup,
            )
        except TelegramError as exc:
            raise _platform_error(exc) from exc
        return str(sent.message_id)

    async def send_as_written(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        return await self.send(chat_id, text, thread=thread)  # no parse mode: as written

    async def close_prompt(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        # editMessageText without reply_markup takes the inline keyboard away.
        await self.edit_message(chat_id, message_id, text, thread=thread)

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        # A courtesy: only from what the replies leave of the bot-wide budget.
        if not self.budget.spare("typing", asyncio.get_running_loop().time()):
            return
        try:
            await self.bot.send_chat_action(
                _chat(chat_id), ChatAction.TYPING, message_thread_id=_thread_id(thread)
            )
        except TelegramError as exc:
            raise _platform_error(exc) from exc

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """``getFile``, then the file from ``{base_url}/file/bot{token}/{file_path}`` (a URL
        that holds the token: it never leaves this adapter). The Bot API serves 20 MB at most.

        The body is streamed through ``read_capped``, never read whole first: ``getFile``'s
        ``file_size`` is the server's word, and a body that outgrows it is cut off at
        ``max_bytes``. A ``file_path`` that would not be fetched from ``base_url`` (PTB reads
        a path that exists on this machine as a local file) is refused."""
        try:
            file = await self.bot.get_file(attachment.ref)
        except TelegramError as exc:
            raise PlatformError(f"telegram: {exc}") from exc
        if (file.file_size or 0) > max_bytes:
            raise PlatformError(f"larger than {max_bytes} bytes")
        url = file.file_path or ""
        if not url.startswith(self.bot.base_file_url + "/"):
            raise PlatformError("telegram: getFile named no file on the Bot API's host")
        try:
            async with (
                httpx.AsyncClient(timeout=httpx.Timeout(15.0, connect=5.0)) as client,
                client.stream("GET", url) as response,
            ):
                if response.status_code != 200:
                    raise PlatformError(
                        f"telegram: the file download answered {response.status_code}"
                    )
                return await read_capped(response.aiter_bytes(1 << 16), max_bytes, "telegram")
        except httpx.HTTPError as exc:
            # The message names the URL, which holds the token: say only what kind it was.
            raise PlatformError(
                f"telegram: the file download failed ({type(exc).__name__})"
            ) from None

    async def send_draft(
        self,
        chat_id: str,
        draft_id: int,
        text: str,
        *,
        thread: Mapping[str, str] | None = None,
        can_stop: bool = False,
    ) -> None:
        try:
            await self.bot.send_message_draft(
                int(_chat(chat_id)),
                draft_id,
                text,
                message_thread_id=_thread_id(thread),
                api_kwargs={"can_stop": True} if can_stop else None,
            )
        except (BadRequest, Forbidden, EndPointNotFound, InvalidToken) as exc:
            # (A 404 for a method is InvalidToken in PTB; the token itself passed getMe.)
            # Not a private chat, or a Bot API without drafts: this chat streams by edits.
            raise NativeRefused(f"telegram: {exc}") from exc
        except TelegramError as exc:
            raise _platform_error(exc) from exc


def _addressing(message: Message, bot_id: int, username: str) -> tuple[str, bool, bool] | None:
    """(text without the bot's mention, addressed to the bot, in a topic the bot opened), or
    None for a command that names another bot."""
    text = message.text or message.caption or ""  # a photo's caption addresses like a text
    entities = message.parse_entities if message.text else message.parse_caption_entities
    me = f"@{username}".lower()
    # UTF-16 (offset, length, with a space beside it) spans to cut out
    cuts: list[tuple[int, int, bool]] = []
    addressed = False
    for entity, part in entities(
        [MessageEntity.MENTION, MessageEntity.TEXT_MENTION, MessageEntity.BOT_COMMAND]
    ).items():
        if entity.type == MessageEntity.BOT_COMMAND:
            if entity.offset != 0 or "@" not in part:
                continue
            target = part[part.index("@") :]
            if target.lower() != me:
                return None
            addressed = True
            size = len(target.encode("utf-16-le")) // 2
            cuts.append((entity.offset + entity.length - size, size, False))
        elif (entity.type == MessageEntity.MENTION and part.lower() == me) or (
            entity.user is not None and entity.user.id == bot_id
        ):
            addressed = True
            cuts.append((entity.offset, entity.length, True))
    bot_thread = False
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == bot_id:
        if replied.forum_topic_created is None:
            addressed = True  # a reply to one of the bot's messages
        else:
            bot_thread = True  # a topic the bot opened
    return _cut(text, cuts), addressed, bot_thread


def _cut(text: str, cuts: Sequence[tuple[int, int, bool]]) -> str:
    """``text`` without the UTF-16 spans ``cuts`` (a mention with one space beside it, so that
    "ask @bot now" reads "ask now"; a command's ``@bot`` alone)."""
    if not cuts:
        return text
    units = text.encode("utf-16-le")
    for offset, length, spaced in sorted(cuts, reverse=True):
        start, end = offset * 2, (offset + length) * 2
        if spaced and units[end : end + 2] == _SPACE:
            end += 2
        elif spaced and start >= 2 and units[start - 2 : start] == _SPACE:
            start -= 2
        units = units[:start] + units[end:]
    return units.decode("utf-16-le").strip()


def _stopped(stopped: dict[str, Any]) -> IncomingMessage | None:
    """The stop button of a draft: a ``stop`` for the chat's turn (a private chat: the chat
    id is the person's id)."""
    chat = stopped.get("chat")
    if not isinstance(chat, dict) or "id" not in chat:
        return None
    chat_id = str(cast(dict[str, Any], chat)["id"])
    thread = stopped.get("message_thread_id")
    draft_id = stopped.get("draft_id")
    return IncomingMessage(
        platform="telegram",
        chat_id=chat_id,
        user_id=chat_id,
        text="",
        thread={THREAD_KEY: str(thread)} if thread else {},
        stop=True,
        draft_id=draft_id if isinstance(draft_id, int) else None,
    )


def _attachments(message: Message) -> tuple[Attachment, ...]:
    """The files of a message: the largest size of a photo, a document (an image document is
    an image), a voice note or audio file. Stickers, videos and the rest are not read."""
    found: list[Attachment] = []
    if message.photo:
        photo = message.photo[-1]  # sizes come smallest first
        name = f"photo_{photo.file_unique_id}.jpg"
        found.append(Attachment("image", name, "image/jpeg", photo.file_id, photo.file_size or 0))
    if message.document is not None:
        doc = message.document
        mime = doc.mime_type or ""
        kind = "image" if mime.startswith("image/") else "file"
        name = doc.file_name or f"file_{doc.file_unique_id}"
        found.append(Attachment(kind, name, mime, doc.file_id, doc.file_size or 0))
    for audio, default in ((message.voice, "voice"), (message.audio, "audio")):
        if audio is not None:
            name = getattr(audio, "file_name", None) or f"{default}_{audio.file_unique_id}.ogg"
            mime = audio.mime_type or "audio/ogg"
            found.append(Attachment("audio", name, mime, audio.file_id, audio.file_size or 0))
    return tuple(found)
