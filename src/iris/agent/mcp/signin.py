"""A sign-in to an ``auth: oauth`` MCP server, and the sign-ins ``iris serve`` waits on.

``sign_in`` runs the SDK's interactive flow over one short connection of its own: the
server's 401 starts it, ``show`` gets the link for the person, ``callback`` waits for the
authorization server's redirect; once the code is exchanged the server lists its tools with
the new token and the connection ends. The tokens are then in the server's ``TokenFile``,
where every connection (this process's, another's) finds them.

``SignIns`` are the ones the web app starts (``/signin NAME``): each waits for the redirect to
``iris serve``'s callback route, found by the ``state`` of its link, at most ``SIGN_IN_WAIT``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from mcp import Client, types
from mcp.shared.auth import AuthorizationCodeResult

from iris import __version__
from iris.agent.mcp import SignInFailed
from iris.agent.mcp.connection import describe, http_transport
from iris.agent.mcp.oauth import Callback, McpOAuth, Show, TokenFile
from iris.config import McpServerConfig
from iris.tasks import Supervisor

log = logging.getLogger(__name__)

SIGN_IN_WAIT = 600.0  # seconds a link waits for the person
LINK_WAIT = 60.0  # seconds discovery and registration may take before the link is shown
MAX_LISTING_BYTES = 4_194_304


Outcome = asyncio.Future[str]


async def sign_in(
    name: str,
    config: McpServerConfig,
    folder: Path,
    redirect_uri: str,
    show: Show,
    callback: Callback,
) -> int:
    """Sign in to server ``name``; the number of tools it lists once signed in."""
    assert config.url is not None
    store = TokenFile(folder, name, config, redirect_uri=redirect_uri, fresh=True)
    auth = McpOAuth(config.url, store, redirect_uri, show=show, callback=callback)
    limit = (MAX_LISTING_BYTES, lambda _size: None)
    client = Client(
        http_transport(config.url, config.headers, limit, auth),
        mode="legacy",
        client_info=types.Implementation(name="iris", version=__version__),
        cache=None,
    )
    try:
        async with asyncio.timeout(SIGN_IN_WAIT), client:
            listed = await client.list_tools()
    except TimeoutError:
        raise SignInFailed(f"no sign-in within {SIGN_IN_WAIT:g} s") from None
    except Exception as exc:
        raise SignInFailed(_reason(exc)) from None
    if store.fresh:
        raise SignInFailed("the server needs no sign-in (it answered without a token)")
    return len(listed.tools)


def _reason(exc: BaseException) -> str:
    """Why a sign-in failed: a refusal we raised says it as it is, anything else named."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # pyright: ignore[reportUnknownMemberType]
        exc = exc.exceptions[0]  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return str(exc) if isinstance(exc, SignInFailed) else describe(exc)


class SignIns:
    """The sign-ins the web app started, waiting for their redirects (``complete``)."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        # By the state of its link: the redirect it waits for, and how it ended (said).
        self._waiting: dict[str, tuple[asyncio.Future[AuthorizationCodeResult], Outcome]] = {}
        self._tasks = Supervisor()

    async def start(
        self,
        name: str,
        config: McpServerConfig,
        redirect_uri: str,
        done: Callable[[], Awaitable[None]],
    ) -> str:
        """Begin a sign-in to ``name``: the link for the person (raises ``SignInFailed``).
        ``done()`` is awaited once it succeeded (the server connects anew) before the
        redirect's page says so."""
        loop = asyncio.get_running_loop()
        link: asyncio.Future[str] = loop.create_future()
        redirect: asyncio.Future[AuthorizationCodeResult] = loop.create_future()
        outcome: Outcome = loop.create_future()
        state: list[str] = []

        async def show(url: str) -> None:
            state.extend(parse_qs(urlsplit(url).query).get("state", [""])[:1])
            self._waiting[state[0]] = (redirect, outcome)
            link.set_result(url)

        async def run() -> None:
            try:
                tools = await sign_in(
                    name, config, self._folder, redirect_uri, show, lambda: redirect
                )
            except SignInFailed as exc:
                if not link.done():
                    link.set_exception(exc)
                else:
                    log.warning("sign-in to MCP server %s failed: %s", name, exc)
                    outcome.set_result(f"Sign-in to {name} failed: {exc}")
                return
            finally:
                self._waiting.pop(state[0] if state else "", None)
            log.info("signed in to MCP server %s: %d tools", name, tools)
            await done()
            outcome.set_result(f"Signed in to {name}: {tools} tools. You can close this tab.")

        self._tasks.create_task(run(), name=f"sign-in {name}")
        try:
            async with asyncio.timeout(LINK_WAIT):
                return await link
        except TimeoutError:
            raise SignInFailed(f"the server gave no sign-in link within {LINK_WAIT:g} s") from None

    def complete(
        self, state: str, code: str, iss: str | None, error: str | None = None
    ) -> Outcome | None:
        """The redirect of the sign-in whose link had ``state`` (``error``: the person or
        the server refused): how it ends, to await; None when none waits."""
        redirect, outcome = self._waiting.get(state, (None, None))
        if redirect is None or outcome is None or redirect.done():
            return None
        if error is not None:
            redirect.set_exception(SignInFailed(f"the authorization server said: {error}"))
        else:
            redirect.set_result(AuthorizationCodeResult(code=code, state=state, iss=iss))
        return outcome

    async def aclose(self) -> None:
        await self._tasks.close()
