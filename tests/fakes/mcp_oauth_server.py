"""An MCP server behind the MCP authorization flow, written with the ``mcp`` SDK's own
server-side auth (``mcp.server.auth``): one process is both the authorization server (its
routes: metadata, ``/register``, ``/authorize``, ``/token``) and the protected Streamable HTTP
server (``/mcp``, its protected-resource metadata, a bearer check on every request).

The authorize step approves at once (no person): ``GET /authorize`` redirects straight to the
client's redirect URI with a code. Dynamic registration is on; the client ``iris-test``
(secret ``test-secret``, any loopback redirect) is registered by hand. Access tokens live an
hour, refresh tokens rotate. Test hooks: ``POST /admin/expire`` drops every access token (the
refresh tokens still work), ``POST /admin/revoke`` drops every token, ``GET /admin/grants``
counts the grants served (``authorization_code``, ``refresh_token``) and registrations.

Run as ``python -m tests.fakes.mcp_oauth_server http PORTFILE`` (see ``mcp_launch.http_server``).
Its tool: ``hello()`` says "hello from the protected server".
"""

from __future__ import annotations

import secrets
import socket
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

LIFETIME = 3600
SCOPE = "mcp"


class LoopbackClient(OAuthClientInformationFull):
    """A client registered by hand: any loopback redirect URI (RFC 8252 §7.3: any port)."""

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if redirect_uri is None or redirect_uri.host not in ("127.0.0.1", "localhost"):
            return super().validate_redirect_uri(redirect_uri)
        return redirect_uri


class AutoApprove:
    """An ``OAuthAuthorizationServerProvider`` that keeps everything in memory."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {
            "iris-test": LoopbackClient(
                client_id="iris-test",
                client_secret="test-secret",
                token_endpoint_auth_method="client_secret_post",
                redirect_uris=[AnyUrl("http://127.0.0.1/callback")],
                scope=SCOPE,
            )
        }
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.grants: Counter[str] = Counter()

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.grants["registration"] += 1

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.grants["authorization_code"] += 1
        return self._issue(client, authorization_code.scopes)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)  # refresh tokens rotate
        self.grants["refresh_token"] += 1
        return self._issue(client, scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at or 0) < time.time():
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(self, client: OAuthClientInformationFull, scopes: list[str]) -> OAuthToken:
        client_id = client.client_id or ""
        access, refresh = f"at-{secrets.token_hex(16)}", f"rt-{secrets.token_hex(16)}"
        expires = int(time.time()) + LIFETIME
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            expires_in=LIFETIME,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )


def build(port: int) -> Any:
    provider = AutoApprove()
    base = f"http://127.0.0.1:{port}"
    server = MCPServer(
        "iris-fake-protected",
        auth_server_provider=provider,
        auth=AuthSettings(
            issuer_url=AnyUrl(base),  # pyright: ignore[reportArgumentType]
            resource_server_url=AnyUrl(f"{base}/mcp"),  # pyright: ignore[reportArgumentType]
            validate_token_resource=False,
            required_scopes=[SCOPE],
            client_registration_options=ClientRegistrationOptions(
                enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
            ),
        ),
    )

    @server.tool()
    async def hello() -> str:  # pyright: ignore[reportUnusedFunction]
        """Say hello from behind the sign-in."""
        return "hello from the protected server"

    @server.custom_route("/admin/expire", methods=["POST"])
    async def expire(_request: Request) -> Response:  # pyright: ignore[reportUnusedFunction]
        provider.access.clear()
        return JSONResponse({"ok": True})

    @server.custom_route("/admin/revoke", methods=["POST"])
    async def revoke(_request: Request) -> Response:  # pyright: ignore[reportUnusedFunction]
        provider.access.clear()
        provider.refresh.clear()
        return JSONResponse({"ok": True})

    @server.custom_route("/admin/grants", methods=["GET"])
    async def grants(_request: Request) -> Response:  # pyright: ignore[reportUnusedFunction]
        return JSONResponse(dict(provider.grants))

    return server.streamable_http_app()


def main(argv: list[str]) -> None:
    assert argv[:1] == ["http"], "usage: python -m tests.fakes.mcp_oauth_server http PORTFILE"
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    app = build(port)
    Path(argv[1]).write_text(str(port))
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1:])
