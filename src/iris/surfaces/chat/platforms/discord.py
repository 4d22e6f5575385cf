"""The Discord adapter: Discord REST for sending, editing and typing; discord.py for the gateway.

Sending goes through Iris's own REST client (``discord_rest``): one request per call, a 429 or
a dry rate-limit bucket raised at once for the consumer's throttle. discord.py is used only
through its public client for the gateway (it logs in against Discord's own REST root first).

A Discord thread is a channel of its own: a message in a thread arrives with ``chat_id`` = the
parent channel and ``thread = {"thread_id": <thread channel id>}``, and every send, edit and
typing call of the reply goes to the thread channel.

In a guild channel or thread a message addresses the bot (``IncomingMessage.addressed``) when
it mentions it (``<@id>`` / ``<@!id>``, also in ``mentions``; the mention is cut from the text)
or replies to one of its messages (``referenced_message``). A thread the bot started is one it
answered in (``bot_thread``).

Approval prompts (``prompts``) are messages with components (a row of buttons, built as a
discord.py ``View``), sent and closed over the same REST client; a press arrives on the
gateway as INTERACTION_CREATE, and is answered through discord.py's ``interaction.response``
(the interaction callback endpoint): an ephemeral message when it changed nothing, else a
deferred update (the consumer edits the message to say what was decided).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

import discord

from iris.config import DiscordConfig
from iris.surfaces.chat.budget import Limit, SharedBudget, rate_budget
from iris.surfaces.chat.platforms.base import (
    Attachment,
    Capabilities,
    IncomingMessage,
    OnMessage,
    PlatformError,
    aiohttp_failures,
)
from iris.surfaces.chat.platforms.discord_rest import DiscordREST
from iris.surfaces.chat.prompts import Press, Prompt, is_button
from iris.tasks import OpenGroup

log = logging.getLogger(__name__)

THREAD_KEY = "thread_id"


class DiscordPlatform:
    """``ChatPlatform`` for Discord, built from ``config.platforms.discord``."""

    name = "discord"
    # Half of Discord's 2000: the prompt's markdown is escaped, at most doubling it.
    approval_limit = 1000
    asks_questions = True  # any number of buttons: an MCP server's question (``questions``)
    capabilities: Capabilities  # per chat, from platforms.discord.budgets
    budget: SharedBudget  # shared by every chat of the bot

    def __init__(
        self,
        config: DiscordConfig,
        *,
        request_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._timeout = request_timeout
        self._clock = clock
        budgets = config.budgets
        self.capabilities = Capabilities(
            can_edit=True,
            max_length=2000,
            length_unit="chars",
            rate=rate_budget(budgets.channel),
        )
        # Discord's global limit counts every request of the bot, typing included.
        self.budget = SharedBudget(
            [Limit("global", rate_budget(budgets.bot))],
            {"send": ["global"], "edit": ["global"], "delete": ["global"], "typing": ["global"]},
            scope=_channel,  # the per-route buckets Discord reports are per channel
        )
        self._rest: DiscordREST | None = None
        self._client: _IrisClient | None = None
        self._gateway: asyncio.Task[BaseException | None] | None = None
        self._gateway_tasks = OpenGroup()  # the gateway's, from connect to disconnect

    async def connect(self, on_message: OnMessage) -> None:
        """Log in, then open the gateway; returns once the session is up (READY).

        Messages flow from READY on; discord.py's own ``ready`` waits seconds longer for every
        guild to stream in, which receiving does not need."""
        await self.login()
        if self._client is not None and self._gateway is not None and not self._gateway.done():
            self._client.hand_off = on_message
            return  # already receiving: only the hand-off changes
        await self._close_gateway()
        client = self._client = _IrisClient()
        client.hand_off = on_message
        try:
            with aiohttp_failures("discord"):
                async with asyncio.timeout(self._timeout):
                    await client.login(self._config.token)
        except BaseException as exc:
            await self._close_gateway()
            if isinstance(exc, discord.LoginFailure):
                raise PlatformError("discord: login failed: the bot token was refused") from None
            if isinstance(exc, discord.HTTPException):
                raise PlatformError(f"discord: login: {exc.status} {exc.text}") from None
            raise
        await self._gateway_tasks.open()
        connected = self._gateway_tasks.create_task(_connected(client))
        gateway = self._gateway_tasks.create_task(_run_gateway(client), name="discord-gateway")
        self._gateway = gateway
        await asyncio.wait({gateway, connected}, return_when=asyncio.FIRST_COMPLETED)
        if connected.done():
            gateway.add_done_callback(_report_gateway_end)
            return
        connected.cancel()
        await self.disconnect()
        raise _gateway_error(None if gateway.cancelled() else gateway.result())

    async def login(self) -> None:
        """Check the token over REST: enough to send, edit and type."""
        if self._rest is not None:
            return
        if not self._config.token:
            raise PlatformError("discord: platforms.discord.token is not set")
        rest = DiscordREST(
            token=self._config.token,
            base_url=self._config.base_url,
            timeout=self._timeout,
            clock=self._clock,
            on_global=self._globally_limited,
            on_dry=self._bucket_dry,
        )
        try:
            await rest.me()
        except BaseException:
            await rest.close()
            raise
        self._rest = rest

    async def disconnect(self) -> None:
        rest, self._rest = self._rest, None
        if rest is not None:
            await rest.close()
        await self._close_gateway()

    async def _close_gateway(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        gateway, self._gateway = self._gateway, None
        if gateway is not None:
            gateway.cancel()
            await self._gateway_tasks.close()

    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        return await self._session().create_message(_channel(chat_id, thread), text)

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        await self._session().edit_message(_channel(chat_id, thread), message_id, text)

    async def delete_message(
        self, chat_id: str, message_id: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        await self._session().delete_message(_channel(chat_id, thread), message_id)

    async def send_prompt(
        self, chat_id: str, prompt: Prompt, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """The prompt as shown (markdown escaped: a command's ``*`` stays a ``*``), with its
        buttons as one row of components."""
        view = discord.ui.View(timeout=None)
        for button in prompt.buttons:
            style = _STYLES.get(button.decision or "", discord.ButtonStyle.secondary)
            view.add_item(discord.ui.Button(label=button.label, custom_id=button.data, style=style))
        text = discord.utils.escape_markdown(prompt.text)
        return await self._session().create_message(
            _channel(chat_id, thread), text, components=view.to_components()
        )

    async def send_as_written(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        escaped = discord.utils.escape_markdown(text)
        return await self._session().create_message(_channel(chat_id, thread), escaped)

    async def close_prompt(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        await self._session().edit_message(
            _channel(chat_id, thread),
            message_id,
            discord.utils.escape_markdown(text),
            components=[],
        )

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        # A courtesy: only from what the replies leave of the global budget.
        if self.budget.spare("typing", asyncio.get_running_loop().time()):
            await self._session().trigger_typing(_channel(chat_id, thread))

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        return await self._session().download(attachment.ref, max_bytes)

    def _bucket_dry(self, channel: str, wait: float) -> None:
        # The chat of that channel waits, out of the line, until its bucket refills.
        now = asyncio.get_running_loop().time()
        self.budget.hold(channel, now + wait, now)

    def _globally_limited(self, retry_after: float) -> None:
        # Every chat waits, in line, instead of each meeting the global limit on its own.
        self.budget.block(asyncio.get_running_loop().time() + retry_after)

    def _session(self) -> DiscordREST:
        if self._rest is None:
            raise PlatformError("discord: not logged in (call connect first)")
        return self._rest


# An approval's buttons by decision; an MCP server's question's (no decision) are plain.
_STYLES = {
    "once": discord.ButtonStyle.success,
    "chat": discord.ButtonStyle.primary,
    "deny": discord.ButtonStyle.danger,
}


def _channel(chat_id: str, thread: Mapping[str, str] | None) -> str:
    return (thread or {}).get(THREAD_KEY) or chat_id


def _gateway_error(exc: BaseException | None) -> PlatformError:
    """Why the gateway ended before READY, in words an operator can act on."""
    if isinstance(exc, discord.PrivilegedIntentsRequired):
        return PlatformError(
            "discord: the gateway refused the Message Content intent; enable it for the bot"
            " in the developer portal"
        )
    if isinstance(exc, discord.ConnectionClosed):
        return PlatformError(f"discord: the gateway closed ({exc.code}): {exc.reason}")
    return PlatformError(f"discord: the gateway closed before the session started: {exc}")


async def _connected(client: discord.Client) -> None:
    await client.wait_for("connect")


async def _run_gateway(client: discord.Client) -> BaseException | None:
    """The gateway until it ends; how it failed, returned rather than raised, so that its end
    neither aborts the task group nor cancels the task that owns it (the platform's runner)."""
    try:
        await client.connect(reconnect=True)
    except Exception as exc:
        return exc
    return None


def _report_gateway_end(gateway: asyncio.Task[BaseException | None]) -> None:
    # discord.py reconnects by itself; an end it did not recover from means no more messages.
    if not gateway.cancelled() and (exc := gateway.result()) is not None:
        log.error("discord: the gateway stopped, no more messages arrive: %s", _gateway_error(exc))


def incoming_message(message: discord.Message, *, bot_id: int | None = None) -> IncomingMessage:
    """Plain data for the runner from a discord.py message (``user_id`` for allowed_users).

    A mention of the bot (``<@id>``, ``<@!id>``) is addressing, not content: it is dropped."""
    channel = message.channel
    thread: dict[str, str] = {}
    chat_id = str(channel.id)
    if isinstance(channel, discord.Thread):
        thread = {THREAD_KEY: str(channel.id)}
        chat_id = str(channel.parent_id)
    addressed = bot_id is not None and (
        any(user.id == bot_id for user in message.mentions)
        or re.search(rf"<@!?{bot_id}>", message.content) is not None
        or _replies_to(message, bot_id)
    )
    return IncomingMessage(
        platform="discord",
        chat_id=chat_id,
        user_id=str(message.author.id),
        text=_without_mention(message.content, bot_id),
        # The unique username, not the display name anyone can set to look like someone else:
        # the runner may match allowed_users by name.
        user_name=message.author.name,
        # Anything but a DM is a group, also a guild channel discord.py has not cached.
        is_group=not isinstance(channel, discord.DMChannel),
        message_id=str(message.id),
        thread=thread,
        addressed=addressed,
        bot_thread=isinstance(channel, discord.Thread) and channel.owner_id == bot_id,
        attachments=tuple(map(_attachment, message.attachments)),
    )


def pressed(interaction: discord.Interaction, custom_id: str) -> IncomingMessage:
    """A component interaction as plain data; its ``answer`` is the interaction's response."""

    async def answer(text: str, refused: bool) -> None:
        try:
            if refused:
                await interaction.response.send_message(text, ephemeral=True)
            else:  # the message is edited to show the decision: acknowledge only
                await interaction.response.defer()
        except discord.HTTPException as exc:
            raise PlatformError(f"discord: interaction response: {exc.status} {exc.text}") from None

    channel = interaction.channel
    thread: dict[str, str] = {}
    chat_id = str(interaction.channel_id or "")
    if isinstance(channel, discord.Thread):
        thread = {THREAD_KEY: str(channel.id)}
        chat_id = str(channel.parent_id)
    user = interaction.user
    message = interaction.message
    return IncomingMessage(
        platform="discord",
        chat_id=chat_id,
        user_id=str(user.id),
        text="",
        user_name=user.name,
        is_group=interaction.guild_id is not None,
        message_id=str(message.id) if message is not None else "",
        thread=thread,
        press=Press(custom_id, answer),
    )


def _replies_to(message: discord.Message, bot_id: int) -> bool:
    """Does ``message`` reply to one of the bot's messages?"""
    reference = message.reference
    replied = reference.resolved if reference is not None else None
    return isinstance(replied, discord.Message) and replied.author.id == bot_id


def _attachment(file: discord.Attachment) -> Attachment:
    """A file of a message: a voice message (audio/ogg) and audio files are audio, images
    images, the rest files; ``ref`` the attachment's CDN URL."""
    mime = (file.content_type or "").split(";")[0].strip()
    kind = "audio" if file.is_voice_message() or mime.startswith("audio/") else "file"
    kind = "image" if mime.startswith("image/") else kind
    return Attachment(kind, file.filename, mime, file.url, file.size)


def _without_mention(text: str, bot_id: int | None) -> str:
    if bot_id is None:
        return text
    return re.sub(rf"<@!?{bot_id}>", "", text).strip()


class _IrisClient(discord.Client):
    """discord.py's client for the gateway, handing each user message to the runner."""

    def __init__(self) -> None:
        intents = discord.Intents.default()
        intents.message_content = True  # privileged: enable it in the developer portal
        super().__init__(
            intents=intents,
            # Iris receives from READY on and never waits for "ready": without this,
            # discord.py's guild wait outlives close() by seconds, a task nobody owns.
            guild_ready_timeout=0.0,
        )
        self.hand_off: OnMessage | None = None  # set by connect(); None: receive nothing

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        """A press of an approval prompt's button, handed on as an ``IncomingMessage``."""
        data: Any = interaction.data or {}
        custom_id = str(data.get("custom_id", "")) if isinstance(data, dict) else ""
        if interaction.type is not discord.InteractionType.component or self.hand_off is None:
            return
        if not is_button(custom_id):
            return
        await self.hand_off(pressed(interaction, custom_id))

    async def on_message(self, message: discord.Message) -> None:
        me = self.user
        # Never answer ourselves or another bot: two bots would talk forever.
        if self.hand_off is None or message.author.bot or (me and message.author.id == me.id):
            return
        await self.hand_off(incoming_message(message, bot_id=me.id if me else None))
