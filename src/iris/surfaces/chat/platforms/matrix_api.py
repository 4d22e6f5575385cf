"""``MatrixApi``: the Matrix client-server API calls the Matrix adapter makes, on httpx.

Raw HTTP rather than mautrix or matrix-nio: the adapter needs ``retry_after_ms`` of an
``M_LIMIT_EXCEEDED`` answer to honour it (mautrix's ``MLimitExceeded`` keeps only the error
code and message; matrix-nio sleeps through 429s itself unless told otherwise), it makes a
dozen plain-JSON calls and hands plain dicts on (no library event classes cross into the
chat surface), and httpx is a dependency already.

One call, one request, as every adapter: nothing here retries or sleeps. An answer of 429
raises ``PlatformRateLimited`` with the homeserver's ``retry_after_ms`` (or ``Retry-After``),
any other refusal ``MatrixRefused`` with its ``errcode``; a request that failed after it went
out may have landed (``maybe_landed``). Sends are ``PUT`` with a transaction id, so the
homeserver itself would take a repeated one once.
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any, cast

import httpx

from iris.surfaces.chat.attachments import read_capped
from iris.surfaces.chat.platforms.base import PlatformError, PlatformRateLimited

_CLIENT = "/_matrix/client/v3"
# A 429 that says nothing of when to come back: wait this long.
_DEFAULT_RETRY = 1.0
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

JSON = dict[str, Any]


class MatrixRefused(PlatformError):
    """The homeserver answered with an error (``errcode``, e.g. ``M_FORBIDDEN``)."""

    def __init__(self, status: int, errcode: str, error: str) -> None:
        super().__init__(f"matrix: {errcode or status}: {error}".rstrip(": "))
        self.status, self.errcode = status, errcode


def quoted(part: str) -> str:
    """One path segment: room ids (``!x:server``) and event ids (``$y``) escaped whole."""
    return urllib.parse.quote(part, safe="")


def _retry_after(answer: JSON, headers: httpx.Headers) -> float:
    millis = answer.get("retry_after_ms")
    if isinstance(millis, int | float) and millis >= 0:
        return float(millis) / 1000
    header = headers.get("retry-after", "")
    return float(header) if header.replace(".", "", 1).isdigit() else _DEFAULT_RETRY


class MatrixApi:
    """One bot's calls to one homeserver, with its access token."""

    def __init__(
        self,
        homeserver: str,
        token: str = "",
        *,
        timeout: float = 15.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = homeserver.rstrip("/")
        self.token = token
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=5.0), transport=transport
        )
        self._txn = itertools.count()
        self.limited = 0  # M_LIMIT_EXCEEDED answers met so far

    async def aclose(self) -> None:
        await self._client.aclose()

    def txn_id(self) -> str:
        return f"iris{time.time_ns()}.{next(self._txn)}"

    async def call(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        params: Mapping[str, str] | None = None,
        read_for: float | None = None,
    ) -> JSON:
        """``method`` on ``/_matrix/client/v3{path}``: the answer's JSON object (``read_for``:
        seconds the request may take, a long poll's)."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        request = self._client.build_request(
            method,
            self.base_url + _CLIENT + path,
            content=None if body is None else json.dumps(body, ensure_ascii=False).encode(),
            headers={**headers, "Content-Type": "application/json"}
            if body is not None
            else headers,
            params=params,
            timeout=httpx.USE_CLIENT_DEFAULT if read_for is None else read_for,
        )
        try:
            response = await self._client.send(request)
        except _NOT_SENT as exc:
            raise PlatformError(f"matrix: cannot connect: {type(exc).__name__}") from None
        except httpx.HTTPError as exc:
            raise PlatformError(
                f"matrix: no answer ({type(exc).__name__})", maybe_landed=True
            ) from None
        return self._answer(response)

    def _answer(self, response: httpx.Response) -> JSON:
        try:
            parsed: object = response.json()
        except ValueError:
            parsed = None
        answer = cast(JSON, parsed) if isinstance(parsed, dict) else {}
        if response.status_code == 429:
            self.limited += 1
            retry_after = _retry_after(answer, response.headers)
            raise PlatformRateLimited(retry_after, "matrix: M_LIMIT_EXCEEDED", scope="bot")
        if response.status_code >= 300 or parsed is None:
            errcode, error = str(answer.get("errcode", "")), str(answer.get("error", ""))
            raise MatrixRefused(response.status_code, errcode, error or response.reason_phrase)
        return answer

    async def send_event(self, room_id: str, kind: str, content: Mapping[str, Any]) -> str:
        """Send an event of type ``kind`` into the room; its event id."""
        path = f"/rooms/{quoted(room_id)}/send/{quoted(kind)}/{self.txn_id()}"
        answer = await self.call("PUT", path, content)
        event_id = answer.get("event_id")
        if not isinstance(event_id, str):
            raise PlatformError("matrix: the send was answered without an event id")
        return event_id

    async def redact(self, room_id: str, event_id: str) -> None:
        path = f"/rooms/{quoted(room_id)}/redact/{quoted(event_id)}/{self.txn_id()}"
        await self.call("PUT", path, {})

    async def download(self, mxc: str, max_bytes: int) -> bytes:
        """The bytes of ``mxc://server/media`` through authenticated media
        (``/_matrix/client/v1/media/download``), read no further than ``max_bytes``."""
        server, _, media = mxc.removeprefix("mxc://").partition("/")
        if not mxc.startswith("mxc://") or not server or not media or "/" in media:
            raise PlatformError("matrix: not a media URI")
        url = f"{self.base_url}/_matrix/client/v1/media/download/{quoted(server)}/{quoted(media)}"
        headers = {"Authorization": f"Bearer {self.token}"}
        try:
            async with self._client.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    raise PlatformError(
                        f"matrix: the media download answered {response.status_code}"
                    )
                return await read_capped(response.aiter_bytes(1 << 16), max_bytes, "matrix")
        except httpx.HTTPError as exc:
            raise PlatformError(
                f"matrix: the media download failed ({type(exc).__name__})"
            ) from None
