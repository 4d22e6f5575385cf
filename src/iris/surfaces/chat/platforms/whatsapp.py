"""``WhatsAppPlatform``: the WhatsApp Business Cloud API, Graph API calls over ``httpx``.

Messages arrive at Meta's webhook, ``/platforms/whatsapp/webhook`` on ``iris serve``:

- ``GET``: Meta's verification (``hub.mode=subscribe``, ``hub.verify_token`` equal to
  ``platforms.whatsapp.verify_token``): the answer is ``hub.challenge``; anything else 403.
- ``POST``: an event. Before anything reads it, ``X-Hub-Signature-256`` must be
  ``sha256=<hex HMAC-SHA256 of the raw body, keyed with the app secret>``, compared in constant
  time: a missing or wrong signature is a 401 and nothing else happens. Meta retries a
  delivery that was not answered 200 in time, so each message id is taken once, in the
  server's state (``iris.state.deliveries``: the SQLite file, or Redis shared by every
  process), and a message whose ``timestamp`` is older than ``max_age`` is not taken at all (a
  signed body replayed after the window, a redelivery after a long outage). A body that is not
  JSON, or nested past what can be parsed, is a 400. Text messages (and the text of a button or list reply) and
  media messages (image, audio and voice notes, document, video, sticker: their caption as the
  text, the media as ``Attachment``s) of this ``phone_number_id`` reach the runner; other kinds
  and status updates do not, except that a failed delivery Meta reports later is said in the
  log, once per chat and error.

Media are fetched the Cloud API way (``download``): ``GET {base_url}/{media-id}`` with the
access token answers the media's ``url``, ``mime_type`` and ``file_size``; the file is then
``GET url`` with the same token, which goes only to Meta's hosts (or ``base_url``'s).

A WhatsApp user's profile name is theirs to choose, so it never identifies anyone: only the
phone number (``wa_id``) is matched against ``allowed_users``.

Replies go to ``POST {base_url}/{phone_number_id}/messages`` with the access token. WhatsApp
cannot edit a message, so replies stream in blocks (``reply`` mode ``blocks``). Its limits:

- 4 096 characters a text message;
- the pair rate limit, about one message every 6 seconds to the same user (error 131056):
  each chat's own budget (``capabilities.rate``, ``platforms.whatsapp.budgets.pair``);
- the throughput of the business number, 80 messages a second by default (error 130429):
  the bot-wide ``budget`` (``budgets.number``), shared by every chat;
- the 24-hour customer-service window: outside it only template messages may be sent
  (error 131047). That is ``ChatClosed``: the reply is dropped and said once in the log, never
  retried; the window opens again when the user writes.

Errors map to what the consumer does: rate limits to ``PlatformRateLimited`` (waited out),
Meta's transient errors (1, 2, 131000, 131016) and 5xx answers to ``PlatformError`` (retried a
few times), every other coded error to ``ChatClosed`` (the request itself is refused: retrying
it cannot help).

A reply that a newer message of the user overtook (the rest of an interrupted reply) quotes the
message it answers (``context.message_id``), so it is clear what it belongs to; other replies
quote nothing (in a one-to-one chat they follow the question).

The typing indicator marks the user's last message read and shows "typing…" (Meta dismisses it
after 25 s or at the next message); it only uses what replies leave of the number's budget.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import mimetypes
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, Literal, cast

import httpx
from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from iris.config import WhatsAppConfig
from iris.state.deliveries import Deliveries, MemoryDeliveries
from iris.surfaces.chat.budget import Limit, SharedBudget, rate_budget
from iris.surfaces.chat.downloads import read_capped
from iris.surfaces.chat.platforms.base import (
    Attachment,
    Capabilities,
    ChatClosed,
    IncomingMessage,
    OnMessage,
    PlatformError,
    PlatformRateLimited,
)

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/platforms/whatsapp/webhook"
MAX_BODY = 1_000_000  # a webhook POST larger than this is no Meta event
_CLOCK_SKEW = 300.0  # seconds a message's timestamp may run ahead of this clock
_FORGED_EVERY = 60.0  # seconds between two log lines about refused POSTs
PAIR_LIMIT = 131056
WINDOW_CLOSED = 131047
THROUGHPUT_LIMIT = 130429
# Meta's transient errors: the same request may work a moment later.
_TRANSIENT = frozenset({1, 2, 131000, 131016})
# Rate limits other than the pair and throughput ones (the app's, the account's): seconds.
_LIMITED = {4: 60.0, 80007: 60.0, 613: 60.0}
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The media message types and what each becomes (a document of an image type is an image).
_MEDIA: dict[str, Literal["image", "audio", "file"]] = {
    "image": "image",
    "sticker": "image",
    "audio": "audio",
    "document": "file",
    "video": "file",
}
# The hosts Meta serves media from: the access token goes to no other (but ``base_url``'s).
_MEDIA_HOSTS = (".fbsbx.com", ".facebook.com", ".whatsapp.net")


def signature(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value Meta sends for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WhatsAppPlatform:
    name = "whatsapp"
    asks_by_reply = True  # no buttons: an MCP server's question, field by field (``questions``)
    capabilities: Capabilities
    budget: SharedBudget

    def __init__(self, settings: WhatsAppConfig) -> None:
        self.token = settings.resolved_access_token()
        self.secret = settings.resolved_app_secret()
        if not settings.phone_number_id:
            raise PlatformError("platforms.whatsapp.phone_number_id is empty")
        if not self.token:
            raise PlatformError("platforms.whatsapp.access_token is empty")
        if not self.secret:
            # Without it no webhook POST can be checked: refuse them all rather than trust them.
            raise PlatformError("platforms.whatsapp.app_secret is empty")
        self.settings = settings
        budgets = settings.budgets
        self.capabilities = Capabilities(
            can_edit=False, max_length=4096, length_unit="chars", rate=rate_budget(budgets.pair)
        )
        # Messages and typing indicators count against the business number's throughput.
        self.budget = SharedBudget(
            [Limit("number", rate_budget(budgets.number))],
            {"send": ["number"], "typing": ["number"]},
        )
        self._pair_wait = budgets.pair.per / budgets.pair.calls
        self._client: httpx.AsyncClient | None = None
        self._on_message: OnMessage | None = None
        # Where taken message ids are kept: the server's (``ChatSurface`` sets it) or this one.
        self.deliveries: Deliveries = MemoryDeliveries()
        self._last_in: dict[str, str] = {}  # chat -> the user's last message id (typing)
        self._reported: set[tuple[str, int]] = set()  # failed deliveries already logged
        self._forged_said = float("-inf")

    # -- receiving ----------------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        return [Route(WEBHOOK_PATH, self._webhook, methods=["GET", "POST"])]

    async def connect(self, on_message: OnMessage) -> None:
        client = httpx.AsyncClient(
            base_url=self.settings.base_url.rstrip("/") + "/",
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=httpx.Timeout(15.0, connect=5.0),
        )
        try:  # a wrong token or base_url fails here, loudly
            answer = await client.get(self.settings.phone_number_id, params={"fields": "id"})
        except httpx.HTTPError as exc:
            await client.aclose()
            raise PlatformError(f"whatsapp: cannot connect: {exc}") from None
        if answer.status_code != 200:
            await client.aclose()
            raise PlatformError(f"whatsapp: cannot connect: {_describe(answer)}")
        self._client, self._on_message = client, on_message

    async def disconnect(self) -> None:
        client, self._client, self._on_message = self._client, None, None
        if client is not None:
            await client.aclose()

    async def _webhook(self, request: Request) -> Response:
        if request.method == "GET":
            return self._verify(request)
        # The server's ``BodyGuard`` bounds the read: ``MAX_BODY`` (413) within
        # ``server.timeout_body`` (408), before the signature can be checked.
        try:
            body = await request.body()
        except ClientDisconnect:
            return Response(status_code=400)
        given = request.headers.get("x-hub-signature-256", "")
        if not hmac.compare_digest(given.encode(), signature(self.secret, bytes(body)).encode()):
            now = asyncio.get_running_loop().time()
            if now - self._forged_said >= _FORGED_EVERY:  # a flood of them is one line a minute
                self._forged_said = now
                log.warning("whatsapp webhook: a POST without a valid signature refused")
            return Response(status_code=401)
        on_message = self._on_message
        if on_message is None:
            return Response(status_code=503)  # Meta delivers it again later
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested past Python's stack
            return Response(status_code=400)
        for message in self._messages(payload):
            if await self.deliveries.first(f"whatsapp:{message.message_id}", self._keep):
                await on_message(message)  # the runner returns at once
            # else: Meta delivered it again (to this process or another)
        return Response(status_code=200)

    def _verify(self, request: Request) -> Response:
        params = request.query_params
        token = params.get("hub.verify_token", "")
        expected = self.settings.verify_token
        if (
            params.get("hub.mode") == "subscribe"
            and expected
            and hmac.compare_digest(token.encode(), expected.encode())
        ):
            return PlainTextResponse(params.get("hub.challenge", ""))
        return Response(status_code=403)

    def _messages(self, payload: object) -> list[IncomingMessage]:
        """The messages for this number in one webhook event sent within ``max_age``."""
        found: list[IncomingMessage] = []
        for value in _values(payload):
            metadata = _dict(value.get("metadata"))
            if str(metadata.get("phone_number_id", "")) != self.settings.phone_number_id:
                continue
            for status in _list(value.get("statuses")):
                self._status(status)
            for message in _list(value.get("messages")):
                incoming = self._incoming(message)
                if incoming is not None:
                    found.append(incoming)
        return found

    def _incoming(self, message: dict[str, Any]) -> IncomingMessage | None:
        message_id, sender = str(message.get("id", "")), str(message.get("from", ""))
        text = _text(message)
        attachments = _attachments(message)
        if attachments:
            text = text or ""
        if not message_id or not sender or text is None:
            return None
        if not self._recent(message):
            log.info("whatsapp: message %s is older than max_age: not answered", message_id)
            return None
        self._last_in[sender] = message_id
        self._reported = {key for key in self._reported if key[0] != sender}  # window reopened
        return IncomingMessage(
            platform="whatsapp",
            chat_id=sender,
            user_id=sender,
            text=text,
            message_id=message_id,
            attachments=attachments,
        )

    def _recent(self, message: dict[str, Any]) -> bool:
        """Was it sent within ``max_age`` (Meta's ``timestamp``: Unix seconds, a string)?"""
        sent = str(message.get("timestamp", ""))
        if not (sent.isascii() and sent.isdigit() and len(sent) < 16):
            return False
        age = time.time() - int(sent)
        return -_CLOCK_SKEW <= age <= self.settings.max_age

    @property
    def _keep(self) -> float:
        # Taken ids are kept past the window (and the clock skew): a redelivery is refused by
        # one or the other.
        return self.settings.max_age + 2 * _CLOCK_SKEW

    def _status(self, status: dict[str, Any]) -> None:
        """A delivery Meta reports failed after accepting it: said once per chat and error."""
        if status.get("status") != "failed":
            return
        chat = str(status.get("recipient_id", ""))
        for error in _list(status.get("errors")):
            code = _code(error)
            if (chat, code) in self._reported:
                continue
            self._reported.add((chat, code))
            log.warning(
                "whatsapp: a message to %s was not delivered: (#%s) %s",
                chat,
                code,
                error.get("title") or error.get("message") or "",
            )

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """``GET {media-id}`` for the media's URL and size, then the file from that URL with
        the access token (Meta's media URLs want it too), read no further than ``max_bytes``."""
        client = self._client
        if client is None:
            raise PlatformError("whatsapp: not connected")
        try:
            answer = await client.get(urllib.parse.quote(attachment.ref, safe=""))
            if answer.status_code != 200:
                raise PlatformError(f"whatsapp: the media answered {_describe(answer)}")
            try:
                media = _dict(answer.json())
            except ValueError:
                media = {}
            size = media.get("file_size")
            if isinstance(size, int) and size > max_bytes:
                raise PlatformError(f"larger than {max_bytes} bytes")
            url = str(media.get("url") or "")
            if not self._media_host(url):
                raise PlatformError("whatsapp: the media has no URL on Meta's hosts")
            async with client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise PlatformError(f"whatsapp: the file answered {response.status_code}")
                return await read_capped(response.aiter_bytes(), max_bytes, "whatsapp")
        except httpx.HTTPError as exc:
            raise PlatformError(f"whatsapp: the media could not be fetched: {exc}") from None

    def _media_host(self, url: str) -> bool:
        parts, base = urllib.parse.urlsplit(url), urllib.parse.urlsplit(self.settings.base_url)
        if parts.scheme == "https" and (parts.hostname or "").endswith(_MEDIA_HOSTS):
            return True
        return bool(parts.netloc) and (parts.scheme, parts.netloc) == (base.scheme, base.netloc)

    # -- sending ------------------------------------------------------------------------------
    async def send(
        self, chat_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        return await self.send_quoting(chat_id, text, "")

    async def send_quoting(
        self, chat_id: str, text: str, quoted: str, *, thread: Mapping[str, str] | None = None
    ) -> str:
        """A text message; with ``quoted`` (a message id) shown as a reply to that message."""
        body: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": chat_id,
            "type": "text",
            "text": {"body": text, "preview_url": False},
        }
        if quoted:
            body["context"] = {"message_id": quoted}
        answer = await self._post(body)
        messages = _list(answer.get("messages"))
        return str(messages[0].get("id", "")) if messages else ""

    async def edit_message(
        self, chat_id: str, message_id: str, text: str, *, thread: Mapping[str, str] | None = None
    ) -> None:
        raise PlatformError("whatsapp: messages cannot be edited")

    async def send_typing(self, chat_id: str, *, thread: Mapping[str, str] | None = None) -> None:
        message_id = self._last_in.get(chat_id)
        if message_id is None:
            return
        # A courtesy: only from what the replies leave of the number's budget.
        if not self.budget.spare("typing", asyncio.get_running_loop().time()):
            return
        body = {
            "messaging_product": "whatsapp",
            "status": "read",
            "message_id": message_id,
            "typing_indicator": {"type": "text"},
        }
        await self._post(body)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        client = self._client
        if client is None:
            raise PlatformError("whatsapp: not connected")
        try:
            answer = await client.post(f"{self.settings.phone_number_id}/messages", json=body)
        except _NOT_SENT as exc:
            raise PlatformError(f"whatsapp: cannot connect: {exc}") from None
        except httpx.HTTPError as exc:
            raise PlatformError(f"whatsapp: no answer: {exc}", maybe_landed=True) from None
        if answer.status_code == 200:
            try:
                return _dict(answer.json())
            except ValueError:
                return {}
        raise self._error(answer)

    def _error(self, answer: httpx.Response) -> PlatformError:
        """What a refused call means for the consumer: wait, retry, or give up."""
        code = _code(_error_of(answer))
        text = f"whatsapp: {_describe(answer)}"
        if code == PAIR_LIMIT:
            return PlatformRateLimited(self._pair_wait, text)
        if code == THROUGHPUT_LIMIT:
            self.budget.block(asyncio.get_running_loop().time() + 1.0)
            return PlatformRateLimited(1.0, text)
        if code in _LIMITED:
            wait = _LIMITED[code]
            self.budget.block(asyncio.get_running_loop().time() + wait)
            return PlatformRateLimited(wait, text)
        if code == WINDOW_CLOSED:
            return ChatClosed(
                f"{text}: more than 24 hours since the user last wrote, so only template "
                "messages may be sent until they write again"
            )
        if code in _TRANSIENT or code == 0 and answer.status_code >= 500:
            return PlatformError(text)
        return ChatClosed(text)


def _values(payload: object) -> list[dict[str, Any]]:
    """The ``value`` of each ``messages`` change in a webhook event."""
    values: list[dict[str, Any]] = []
    for entry in _list(_dict(payload).get("entry")):
        for change in _list(entry.get("changes")):
            if change.get("field") == "messages":
                values.append(_dict(change.get("value")))
    return values


def _text(message: dict[str, Any]) -> str | None:
    """The text a message carries: a text's body, a button's or a list row's title, a
    medium's caption."""
    match message.get("type"):
        case "text":
            body = _dict(message.get("text")).get("body")
        case "button":
            body = _dict(message.get("button")).get("text")
        case "interactive":
            interactive = _dict(message.get("interactive"))
            reply = _dict(interactive.get("button_reply") or interactive.get("list_reply"))
            body = reply.get("title")
        case "image" | "video" | "document":
            body = _dict(message.get(message["type"])).get("caption")
        case _:
            body = None
    return body if isinstance(body, str) else None


def _attachments(message: dict[str, Any]) -> tuple[Attachment, ...]:
    """The media of a message as an ``Attachment`` (``ref``: the media id), or none."""
    kind = message.get("type")
    found = _MEDIA.get(kind) if isinstance(kind, str) else None
    media = _dict(message.get(kind)) if isinstance(kind, str) else {}
    media_id = media.get("id")
    if found is None or not isinstance(media_id, str) or not media_id:
        return ()
    mime = str(media.get("mime_type") or "").split(";")[0].strip()
    if found == "file" and mime.startswith("image/"):
        found = "image"
    name = media.get("filename")
    if not isinstance(name, str) or not name:
        prefix = "voice" if media.get("voice") is True else kind
        extension = ".ogg" if mime == "audio/ogg" else mimetypes.guess_extension(mime) or ""
        name = f"{prefix}_{media_id}{extension}"
    return (Attachment(found, name, mime, media_id, _size(media.get("file_size"))),)


def _size(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _error_of(answer: httpx.Response) -> dict[str, Any]:
    try:
        return _dict(_dict(answer.json()).get("error"))
    except ValueError:
        return {}


def _code(error: dict[str, Any]) -> int:
    code = error.get("code")
    return code if isinstance(code, int) else 0


def _describe(answer: httpx.Response) -> str:
    error = _error_of(answer)
    if not error:
        return f"HTTP {answer.status_code}"
    details = _dict(error.get("error_data")).get("details") or ""
    message = str(error.get("message", ""))
    return f"HTTP {answer.status_code} (#{_code(error)}) {message} {details}".strip()


def _dict(value: object) -> dict[str, Any]:
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _list(value: object) -> list[dict[str, Any]]:
    items = cast(list[object], value) if isinstance(value, list) else []
    return [cast(dict[str, Any], item) for item in items if isinstance(item, dict)]
