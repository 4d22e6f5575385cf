"""Serves the browser app (``src/iris/web/``) at ``/`` with strict security headers.

The app is static: HTML, ES modules and vendored libraries, no build step. Every answer carries
a Content-Security-Policy that allows only the server's own scripts, styles and socket, so a
model's reply that slipped past the sanitizer still could not run a script or load anything
from elsewhere. ``sandbox.html`` is the one exception: it runs HTML artifacts inside a
``sandbox="allow-scripts"`` iframe (an opaque origin: no cookies, no storage, no access to the
app), so it allows inline scripts and styles but no network at all.
"""

from __future__ import annotations

from pathlib import Path

from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

WEB_ROOT = Path(__file__).resolve().parent.parent / "web"

APP_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "font-src 'self'; connect-src 'self'; manifest-src 'self'; worker-src 'self'; "
    "frame-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
# The artifact sandbox: the page's own inline code runs; nothing is fetched or sent anywhere.
# ``sandbox allow-scripts`` makes the page an opaque origin wherever it is opened: even a page
# that navigates a window straight to it gets no access to the app's origin or its token.
SANDBOX_POLICY = (
    "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; frame-ancestors 'self'; base-uri 'none'; "
    "form-action 'none'"
)
SANDBOX_PAGE = "/sandbox.html"
PERMISSIONS_POLICY = (
    "camera=(), microphone=(), display-capture=(), geolocation=(), usb=(), serial=(), hid=(), "
    "midi=(), payment=(), publickey-credentials-get=(), screen-wake-lock=()"
)


class _SecuredStatic:
    """StaticFiles with the app's headers on every answer (404s included)."""

    def __init__(self, directory: Path) -> None:
        self._files = StaticFiles(directory=directory, html=True)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sandbox = scope["path"] == SANDBOX_PAGE

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                policy = SANDBOX_POLICY if sandbox else APP_POLICY
                headers += [
                    (b"content-security-policy", policy.encode()),
                    # No device, sensor or capture for the app or an artifact.
                    (b"permissions-policy", PERMISSIONS_POLICY.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    # The shell is revalidated so an upgrade of Iris reaches the browser.
                    (b"cache-control", b"no-cache"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self._files(scope, receive, secured)


def web_routes(root: Path = WEB_ROOT) -> list[BaseRoute]:
    """The app's own paths only — ``/``, its top-level files and folders — so every other path
    stays the server's (a JSON 404 or another surface's route), whatever the order."""
    files = _SecuredStatic(root)
    routes: list[BaseRoute] = [Route("/", files, methods=["GET", "HEAD"])]
    for entry in sorted(root.iterdir()):
        if entry.is_dir():
            routes.append(Mount(f"/{entry.name}", app=_SecuredStatic(entry)))
        else:
            routes.append(Route(f"/{entry.name}", files, methods=["GET", "HEAD"]))
    return routes
