"""Sign-in to a remote MCP server (``auth: oauth``): its tokens in Iris's private files and the
``mcp`` SDK's ``OAuthClientProvider``, driven two ways.

Interactive (``iris mcp login``, ``/signin`` on the web app): the SDK's whole flow — protected
resource metadata, authorization-server metadata, dynamic client registration (or the
configured ``client_id``), PKCE, the person's consent through a link, the code exchanged for
tokens. Unattended (every connection of ``iris serve`` / ``iris chat``): the stored tokens,
refreshed ``REFRESH_EARLY`` before they expire and once more when the server refuses one;
when that fails too, ``refused`` is called and the server waits for a sign-in — never a
link nobody sees, never a wait on a person inside a turn.

``TokenFile`` keeps one server's tokens, its registered client and the discovered metadata
(the token endpoint a refresh after a restart needs) in ``mcp-auth/<name>.json`` beside the
database: the folder 0700, the file 0600 from its first byte, replaced whole (never half
written). Nothing here logs a token or a code.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from pydantic import AnyUrl, ValidationError

from iris import __version__
from iris.config import McpServerConfig
from iris.private import FILE_MODE, private_dir

AUTH_DIR = "mcp-auth"
# What an unattended provider registers with (it never registers: it refreshes or gives up).
UNATTENDED_REDIRECT = "http://127.0.0.1/callback"
REFRESH_EARLY = 60.0  # seconds before expiry a token is refreshed (at most half its lifetime)

Model = TypeVar(
    "Model", OAuthToken, OAuthClientInformationFull, OAuthMetadata, ProtectedResourceMetadata
)
Show = Callable[[str], Awaitable[None]]
Callback = Callable[[], Awaitable[AuthorizationCodeResult]]


def auth_dir(data_dir: Path) -> Path:
    return data_dir / AUTH_DIR


class TokenFile:
    """One server's sign-in record (the SDK's ``TokenStorage``). ``redirect_uri``: a stored
    client registered for another redirect URI is not offered (a sign-in registers anew);
    ``fresh``: stored tokens are not offered (a sign-in always asks the person)."""

    def __init__(
        self,
        folder: Path,
        name: str,
        config: McpServerConfig,
        *,
        redirect_uri: str | None = None,
        fresh: bool = False,
    ) -> None:
        self.path = folder / f"{name}.json"
        self._config = config
        self._redirect_uri = redirect_uri
        self.fresh = fresh  # no tokens offered, none got yet (a sign-in under way)

    def read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}  # pyright: ignore[reportUnknownVariableType]

    def write(self, data: dict[str, Any]) -> None:
        """Replace the file whole; the new one is 0600 from its first byte."""
        private_dir(self.path.parent)
        staged = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        staged.unlink(missing_ok=True)
        descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        with os.fdopen(descriptor, "w") as handle:
            json.dump(data, handle)
        staged.replace(self.path)

    def stamp(self) -> tuple[int, int] | None:
        """When and how the file last changed (None: no file): a sign-in elsewhere shows."""
        try:
            found = self.path.stat()
        except OSError:
            return None
        return found.st_mtime_ns, found.st_size

    def signed_in(self) -> bool:
        return _token(self.read().get("tokens")) is not None

    def forget(self) -> bool:
        """Drop the tokens and the client (``iris mcp logout``); was there any?"""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def refresh_at(self) -> float | None:
        """When the stored access token is refreshed (None: it names no expiry)."""
        data = self.read()
        expires_at, lifetime = data.get("expires_at"), data.get("lifetime")
        if not isinstance(expires_at, int | float) or not isinstance(lifetime, int | float):
            return None
        return expires_at - min(REFRESH_EARLY, lifetime / 2)

    def metadata(self) -> tuple[OAuthMetadata | None, ProtectedResourceMetadata | None]:
        data = self.read()
        return (
            _parsed(OAuthMetadata, data.get("authorization_server")),
            _parsed(ProtectedResourceMetadata, data.get("resource")),
        )

    def keep_metadata(
        self, server: OAuthMetadata | None, resource: ProtectedResourceMetadata | None
    ) -> None:
        data = self.read()
        if server is not None:
            data["authorization_server"] = server.model_dump(mode="json", exclude_none=True)
        if resource is not None:
            data["resource"] = resource.model_dump(mode="json", exclude_none=True)
        self.write(data)

    # -- TokenStorage ------------------------------------------------------------------------
    async def get_tokens(self) -> OAuthToken | None:
        return None if self.fresh else _token(self.read().get("tokens"))

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.fresh = False
        data = self.read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        lifetime = tokens.expires_in
        data["lifetime"] = lifetime
        data["expires_at"] = time.time() + lifetime if lifetime is not None else None
        self.write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        configured = configured_client(self._config)
        if configured is not None:
            return configured
        client = _parsed(OAuthClientInformationFull, self.read().get("client"))
        if client is None or self._redirect_uri is None:
            return client
        registered = [str(uri) for uri in client.redirect_uris or []]
        return client if self._redirect_uri in registered else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self.read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self.write(data)


def configured_client(config: McpServerConfig) -> OAuthClientInformationFull | None:
    """The client registered by hand (``client_id``, its secret from ``client_secret_env``)."""
    if config.client_id is None:
        return None
    secret = os.environ.get(config.client_secret_env or "") or None
    return OAuthClientInformationFull(
        client_id=config.client_id,
        client_secret=secret,
        token_endpoint_auth_method="client_secret_post" if secret else "none",
    )


class McpOAuth(OAuthClientProvider):
    """The SDK's provider with Iris's storage: interactive when ``show`` and ``callback`` are
    given (a sign-in), unattended otherwise (``refused`` is called when the server refuses the
    tokens and no refresh helps)."""

    def __init__(
        self,
        url: str,
        store: TokenFile,
        redirect_uri: str = UNATTENDED_REDIRECT,
        *,
        show: Show | None = None,
        callback: Callback | None = None,
        refused: Callable[[], None] = lambda: None,
    ) -> None:
        metadata = OAuthClientMetadata(
            redirect_uris=[AnyUrl(redirect_uri)],
            client_name="Iris",
            software_id="iris",
            software_version=__version__,
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="none",
        )
        super().__init__(url, metadata, store, show, callback)
        _quiet_flow_errors()
        self.store = store
        self._interactive = show is not None
        self._refused = refused

    async def _initialize(self) -> None:
        """The stored tokens, when to refresh them, and the metadata found at sign-in."""
        await super()._initialize()
        context = self.context
        context.token_expiry_time = self.store.refresh_at()
        server, resource = self.store.metadata()
        context.oauth_metadata = context.oauth_metadata or server
        context.protected_resource_metadata = context.protected_resource_metadata or resource
        if context.auth_server_url is None and resource is not None:
            context.auth_server_url = str(resource.authorization_servers[0])

    def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self._interactive:
            return super()._auth_flow(request)
        return self._unattended(request)

    async def _unattended(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Send with the stored token, refreshed when due or refused; never ask a person."""
        context = self.context
        async with context.lock:
            if not self._initialized or not context.is_token_valid():
                await self._initialize()  # another process may have refreshed or signed in
            if not context.is_token_valid() and context.can_refresh_token():
                await self._handle_refresh_response((yield await self._refresh_token()))
            response = yield self._signed(request)
            if response.status_code == 401 and await self._newer_on_file(request):
                response = yield self._signed(request)  # another process refreshed first
            # A token the server no longer takes (revoked, expired early): refresh once.
            if response.status_code == 401 and context.can_refresh_token():
                refreshed = await self._handle_refresh_response((yield await self._refresh_token()))
                if refreshed:
                    response = yield self._signed(request)
            if response.status_code == 401:
                self._refused()

    def _signed(self, request: httpx2.Request) -> httpx2.Request:
        if self.context.is_token_valid():
            self._add_auth_header(request)
        return request

    async def _newer_on_file(self, request: httpx2.Request) -> bool:
        """Does the file hold a token other than the one ``request`` was refused with (another
        process refreshed it: its refresh token, rotated, would now be refused too)?"""
        sent = request.headers.get("Authorization")
        await self._initialize()
        tokens = self.context.current_tokens
        if tokens is None or not self.context.is_token_valid():
            return False
        return f"Bearer {tokens.access_token}" != sent

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._kept()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        """Store a refreshed token; a refusal drops the token quietly (the connection says
        one line about it, the SDK's own warning would be a second)."""
        if response.status_code != 200:
            await response.aread()
            self.context.clear_tokens()
            return False
        if not await super()._handle_refresh_response(response):
            return False
        self._kept()
        return True

    def _kept(self) -> None:
        """After new tokens: keep what a refresh after a restart needs; refresh early."""
        context = self.context
        self.store.keep_metadata(context.oauth_metadata, context.protected_resource_metadata)
        context.token_expiry_time = self.store.refresh_at()


class _FlowError(logging.Filter):
    """The SDK logs a failed sign-in with its traceback; Iris's caller says why in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "OAuth flow error"


def _quiet_flow_errors() -> None:
    sdk = logging.getLogger("mcp.client.auth.oauth2")
    if not any(isinstance(f, _FlowError) for f in sdk.filters):
        sdk.addFilter(_FlowError())


def _token(data: object) -> OAuthToken | None:
    return _parsed(OAuthToken, data)


def _parsed(kind: type[Model], data: object) -> Model | None:
    if not isinstance(data, dict):
        return None
    try:
        return kind.model_validate(data)
    except ValidationError:
        return None
