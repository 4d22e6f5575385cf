"""``GET /iris/chats``: the iris chats so far, newest first, for an app's chat list.

``Authorization: Bearer <token>`` with a config token or a paired device's (``access``); the
same Host/Origin guard as the socket (``iris.surfaces.origin``). Answers
``{"chats": [{"chat_id", "title", "updated"}]}``: ``title`` is the chat's first user message,
whitespace folded and cut to ``TITLE_CHARS``; ``updated`` is when its history last grew (Unix
seconds). A chat is listed once its first message was sent. Failures are JSON
(``{"error": {message, type, code}}``): 401 ``unauthorized`` / ``revoked``, 403 for the site
guard, 503 ``store_unavailable``.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from iris.auth_throttle import AuthThrottle, client_address
from iris.errors import StoreUnavailable
from iris.state.sessions import Sessions, SessionSummary
from iris.surfaces.origin import SiteGuard
from iris.surfaces.refusals import PRIVATE, throttled, unauthorized
from iris.surfaces.refusals import refusal as reject
from iris.surfaces.socket.access import TokenGate, bearer

SESSION_PREFIX = "iris:"
TITLE_CHARS = 80
MAX_CHATS = 200
_SPACE = re.compile(r"\s+")


def session_key(chat_id: str) -> str:
    """The history session of an iris chat."""
    return SESSION_PREFIX + chat_id


def title(message: dict[str, Any] | None) -> str:
    """A chat's title from its first user message: one line, at most ``TITLE_CHARS``."""
    content: Any = None if message is None else message.get("content")
    if isinstance(content, list):  # content parts: their text
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    text = _SPACE.sub(" ", content if isinstance(content, str) else "").strip()
    if len(text) <= TITLE_CHARS:
        return text
    cut = text[: TITLE_CHARS - 1]
    space = cut.rfind(" ")
    if space >= TITLE_CHARS // 2:  # end on a word when one ends late enough
        cut = cut[:space]
    return cut.rstrip() + "…"


def listing(summaries: list[SessionSummary]) -> dict[str, Any]:
    return {
        "chats": [
            {
                "chat_id": s.session[len(SESSION_PREFIX) :],
                "title": title(s.first_user),
                "updated": int(s.updated),
            }
            for s in summaries
        ]
    }


def route(sessions: Sessions, gate: TokenGate, site: SiteGuard, guard: AuthThrottle) -> Route:
    async def list_chats(request: Request) -> JSONResponse:
        scope = request.scope
        refusal = site.refusal(request.headers, scope.get("server"), scope["scheme"])
        if refusal is not None:
            return reject(403, refusal.message, refusal.code, "permission_error")
        address = client_address(scope)
        wait = guard.refused(address, "iris_chats")
        if wait is not None:  # guessing: too many wrong tokens from this address
            return throttled(wait)
        try:
            check = await gate.check(bearer(request.headers.get("authorization", "")) or "")
            if check.status != "ok":
                guard.failed(address, "iris_chats")
            if check.status == "revoked":
                return unauthorized("revoked", "This device's token was revoked.")
            if check.status != "ok":
                return unauthorized(
                    "unauthorized", "Send 'Authorization: Bearer <token>' with a device token."
                )
            found = await sessions.summaries(SESSION_PREFIX, MAX_CHATS)
        except StoreUnavailable as exc:
            return reject(503, exc.message, exc.code, "server_error")
        return JSONResponse(listing(found), headers=PRIVATE)

    return Route("/iris/chats", list_chats, methods=["GET"])
