"""One MCP server: its connection through the official ``mcp`` SDK's ``Client`` (a stdio child
or Streamable HTTP), kept up with retries, its tool listing, and its calls.

Lifetime: ``run`` is one long task (anyio's contexts must be left by the task that entered
them). It connects within ``connect_timeout``, lists the tools, then waits: a
``notifications/tools/list_changed`` lists them again; the child's stdout ending (a crash) or a
call that finds the connection closed ends the session, and the next attempt follows after a
backoff (1 s, doubling to 60 s; ``Backoff``). The backoff starts over only once the server
stayed up ``STAYED_UP`` seconds: one that crashes right after listing its tools is an outage
that goes on, not a new one each time. The first failure of an outage is logged once, with the
tail of the child's stderr; the retries after it are logged at debug level.

A message from the server over ``tools.mcp.max_result_bytes`` (a result, a listing) is read
through and dropped, never held whole (``stdio.py``; over HTTP the response is cut), and the
call it answered ends as a tool error; logged once per server.

A stdio child gets a scrubbed environment: the variables ``tools.terminal.env`` allows (those
Iris has, never one that looks like a secret) and the server's own ``env`` — no provider keys,
nothing else of Iris's. Its stderr is read into a capped tail, never onto Iris's own.

A call carries a progress token (the SDK's progress callback); each progress notification
restarts its idle timer (``timeout``), and ``max_duration`` caps it whatever the progress.
Cancelling the calling task (an interrupted turn) sends ``notifications/cancelled``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from iris import __version__
from iris.agent.mcp.callers import Callers
from iris.agent.mcp.oauth import McpOAuth, TokenFile
from iris.agent.mcp.results import progress_note, result
from iris.agent.mcp.sampling import Sampler
from iris.agent.mcp.stdio import stdio_transport
from iris.agent.reach import command_env
from iris.agent.sandbox import UID, Sandbox, Workspaces
from iris.agent.tools import ToolResult
from iris.config import McpServerConfig
from iris.private import private_dir, write_private_bytes

log = logging.getLogger(__name__)

FIRST_RETRY = 1.0
MAX_RETRY = 60.0
STAYED_UP = 60.0  # seconds up after which a failure is a new outage (the backoff starts over)
MAX_LISTED = 4096  # tools read from one listing at most (the caps choose among them)
STDERR_TAIL = 4000  # characters of a child's stderr kept for the log and the model
# Progress notes one call shows at most (each still restarts its idle timer): a server that
# floods them must not push a chat's earlier frames out of its log.
MAX_NOTES = 500

State = Literal["starting", "connected", "down", "signin", "stopped"]
Note = Callable[[str], None]


class StderrTail(asyncio.Protocol):
    """The last ``STDERR_TAIL`` characters a child wrote to its stderr."""

    def __init__(self) -> None:
        self._data = bytearray()

    def data_received(self, data: bytes) -> None:
        self._data += data
        del self._data[: max(0, len(self._data) - STDERR_TAIL)]

    def text(self) -> str:
        return self._data.decode(errors="replace").strip()


@dataclass
class Backoff:
    """When to try a server again, and whether its failure is news (pure; ``clock`` in
    seconds). ``up()`` when a session is serving; ``down()`` when it ended or failed: the wait
    before the next attempt, and whether to log it (the first failure of an outage)."""

    clock: Callable[[], float] = time.monotonic
    delay: float = FIRST_RETRY
    quiet: bool = False  # this outage was logged already
    up_since: float | None = None

    def up(self) -> None:
        self.up_since = self.clock()

    def down(self) -> tuple[float, bool]:
        if self.up_since is not None and self.clock() - self.up_since >= STAYED_UP:
            self.delay, self.quiet = FIRST_RETRY, False  # it stayed up: a new outage
        self.up_since = None
        wait, news = self.delay, not self.quiet
        self.delay, self.quiet = min(self.delay * 2, MAX_RETRY), True
        return wait, news


class McpConnection:
    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        terminal_env: Sequence[str],
        output_limit: int,
        on_change: Callable[[McpConnection], None],
        max_result_bytes: int = 4_194_304,
        clock: Callable[[], float] = time.monotonic,
        sandbox: Confined | str | None = None,
        sampler: Sampler | None = None,
        auth_dir: Path | None = None,
    ) -> None:
        self.name = name
        self.config = config
        # The sandbox a stdio child runs in, or why it cannot (the server then stays down).
        self.sandbox = sandbox
        self.state: State = "starting"
        self.error = ""  # why it is down, for /status and the log
        self.tools: list[types.Tool] = []
        self.has_resources = False  # it offers resources: the model may list and read them
        self.attempted = asyncio.Event()  # the first attempt ended (connected or not)
        self._terminal_env = list(terminal_env)
        self._output_limit = output_limit
        self._on_change = on_change
        self._client: Client | None = None
        self._stderr = StderrTail()
        self._wake = asyncio.Event()
        self._stopping = False
        self._lost = False
        self._relist = False
        self._max_result_bytes = max_result_bytes
        self.backoff = Backoff(clock)
        self.attempts = 0  # connection attempts so far
        self._said: set[str] = set()  # what was dropped and logged already (once each)
        self.callers = Callers(name)  # the calls in flight: where an elicitation goes
        self.sampler = sampler  # a request for the model (``sampling``); None: refused
        # ``auth: oauth``: its sign-in record, and the record as it was when the server refused
        # it (tried again only once it changed: a sign-in here or in another process).
        self.tokens = TokenFile(auth_dir, name, config) if auth_dir is not None else None
        self._refused: tuple[int, int] | None = None
        self._signin = False  # the server wants a sign-in: no retry helps until one
        self._signin_said = False  # and that was logged (once per sign-in)
        self._retry = False  # try again now (a sign-in finished)

    # -- the connection's life -------------------------------------------------------------------
    async def run(self) -> None:
        """Connect, serve, reconnect after a backoff; until ``stop``."""
        while not self._stopping:
            self._retry = False
            try:
                await self._session()
                why = "the server closed the connection"
            except Exception as exc:
                why = describe(exc)
            if self._stopping:
                break
            delay, news = self.backoff.down()
            if self._signin:
                why, news = self._signin_note(), not self._signin_said
                self._signin_said = True
            self._down(why, quiet=not news)
            self.attempted.set()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    while not (self._stopping or self._retry):
                        await self._wait()
        self.state = "stopped"
        self.attempted.set()

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def retry_now(self) -> None:
        """Connect again at once, the backoff from the start (a sign-in finished)."""
        self._signin, self._refused, self._retry = False, None, True
        self.state = "starting"
        self.backoff = Backoff(self.backoff.clock)
        self._poke(lost=True)

    def _refused_tokens(self) -> None:
        """The server refused the stored tokens and no refresh helped: sign-in needed."""
        assert self.tokens is not None
        self._signin, self._refused = True, self.tokens.stamp()
        self._poke(lost=True)

    def _signin_note(self) -> str:
        return (
            f"sign-in needed: run `iris mcp login {self.name}` on the server, or "
            f"/signin {self.name} in the web app"
        )

    async def _wait(self) -> None:
        await self._wake.wait()
        self._wake.clear()

    def _poke(self, *, lost: bool = False, relist: bool = False) -> None:
        self._lost |= lost
        self._relist |= relist
        self._wake.set()

    def once(self, what: str, message: str, *args: object) -> None:
        """Log a warning about ``what`` the first time only (a drop past a cap)."""
        if what not in self._said:
            self._said.add(what)
            log.warning(message, *args)

    def _down(self, why: str, quiet: bool) -> None:
        tail = self._stderr.text()
        self.state, self.error = "signin" if self._signin else "down", why
        self._on_change(self)
        if quiet:
            log.debug("MCP server %s still unavailable: %s", self.name, why)
        elif tail:
            log.warning("MCP server %s unavailable: %s; its stderr ends:\n%s", self.name, why, tail)
        else:
            log.warning("MCP server %s unavailable: %s", self.name, why)

    async def _session(self) -> None:
        """One connection, from connecting to its end (lost, or ``stop``)."""
        self._lost = self._relist = False
        self.attempts += 1
        self._stderr = StderrTail()
        self._check_signed_in()
        client = Client(
            self._transport(),
            mode="legacy",  # the initialize handshake every deployed server speaks
            message_handler=self._message,
            elicitation_callback=self._elicited,
            sampling_callback=self._sampled,
            client_info=types.Implementation(name="iris", version=__version__),
            cache=None,
        )
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.timeout(self.config.connect_timeout):
                await stack.enter_async_context(client)
                await self._list(client)
            self._client, self.state, self.error = client, "connected", ""
            self._signin_said = False
            self.backoff.up()
            log.info("MCP server %s connected: %d tools", self.name, len(self.tools))
            self.attempted.set()
            self._on_change(self)
            try:
                while not (self._stopping or self._lost):
                    if self._relist:
                        self._relist = False
                        async with asyncio.timeout(self.config.connect_timeout):
                            await self._list(client)
                        self._on_change(self)
                        continue
                    await self._wait()
            finally:
                self._client, self.tools, self.has_resources = None, [], False
                self._on_change(self)

    def _check_signed_in(self) -> None:
        """An ``auth: oauth`` server is tried only with tokens it has not refused yet."""
        tokens = self.tokens
        if tokens is None:
            return
        if not tokens.signed_in():
            self._signin = True
            raise PermissionError("not signed in")
        stamp = tokens.stamp()
        if self._refused is not None and stamp == self._refused:
            self._signin = True
            raise PermissionError("the server refused the stored token")
        self._signin, self._refused = False, None

    async def _list(self, client: Client) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang the connection
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None or len(tools) >= MAX_LISTED:
                break
        if len(tools) > MAX_LISTED or cursor is not None:
            self.once("listed", "MCP server %s lists more than %d tools", self.name, MAX_LISTED)
        self.tools = tools[:MAX_LISTED]
        self.has_resources = client.server_capabilities.resources is not None

    async def _message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._poke(relist=True)

    def _transport(self) -> Any:
        config = self.config
        if config.url is not None:
            auth = None
            if self.tokens is not None:
                auth = McpOAuth(config.url, self.tokens, refused=self._refused_tokens)
            return http_transport(config.url, config.headers, self._transport_limit(), auth)
        assert config.command is not None
        env = command_env(self._terminal_env) | config.env
        if isinstance(self.sandbox, str):
            raise RuntimeError(self.sandbox)
        if self.sandbox is not None:
            spawn = self.sandbox.spawn([config.command, *config.args], env)
        else:
            spawn = (config.command, config.args, env)
        return _stdio(spawn, self._stderr, lambda: self._poke(lost=True), self._transport_limit())

    def _transport_limit(self) -> tuple[int, Callable[[int], None]]:
        def dropped(size: int) -> None:
            self.once(
                "result",
                "MCP server %s sent a message of %d bytes, over tools.mcp.max_result_bytes "
                "(%d): dropped (logged once)",
                self.name,
                size,
                self._max_result_bytes,
            )

        return self._max_result_bytes, dropped

    # -- calls -------------------------------------------------------------------------------
    async def call(self, tool: str, args: dict[str, Any], note: Note) -> ToolResult:
        """Call ``tool``; every outcome is a ``ToolResult`` (a failure is a tool error)."""
        client = self._client
        if client is None:
            why = f" ({self.error})" if self.error else ""
            return ToolResult(False, f"error: MCP server '{self.name}' is not connected{why}")
        loop = asyncio.get_running_loop()
        idle, cap = self.config.timeout, loop.time() + self.config.max_duration
        limit = asyncio.timeout_at(min(loop.time() + idle, cap))
        finished = False
        notes = 0

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if finished:  # a late notification must not follow the call's end
                return
            nonlocal notes
            limit.reschedule(min(loop.time() + idle, cap))
            notes += 1
            if notes <= MAX_NOTES:
                note(progress_note(progress, total, message))

        def hold(asking: bool) -> None:
            if finished:  # the call ended (interrupted) while the person was asked
                return
            limit.reschedule(cap if asking else min(loop.time() + idle, cap))

        try:
            with self.callers.calling(hold):
                async with limit:
                    answer = await client.call_tool(tool, args, progress_callback=progress)
        except TimeoutError:
            if not limit.expired():
                raise
            if loop.time() >= cap:
                why = f"ran past max_duration ({self.config.max_duration:g} s)"
            else:
                why = f"sent neither a result nor progress for {idle:g} s"
            return ToolResult(False, f"error: the MCP tool {why}; it was cancelled")
        except MCPError as exc:
            if self._signin:
                return ToolResult(False, f"error: MCP server '{self.name}': {self._signin_note()}")
            return self._failed(exc)
        except (OSError, httpx2.HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._poke(lost=True)
            return ToolResult(False, self._closed_note())
        finally:
            finished = True
        return result(answer, self._output_limit)

    def _failed(self, exc: MCPError) -> ToolResult:
        """A call the server answered with an error, or whose connection closed under it."""
        if exc.code != types.CONNECTION_CLOSED:
            return ToolResult(False, f"error: {exc.message}")
        self._poke(lost=True)
        if "byte limit" in exc.message:  # the SDK's cap on one SSE event: ours
            self._transport_limit()[1](self._max_result_bytes + 1)
            return ToolResult(
                False,
                f"error: the MCP server's answer was over the cap of "
                f"{self._max_result_bytes:,} bytes (tools.mcp.max_result_bytes); it was "
                "dropped",
            )
        return ToolResult(False, self._closed_note())

    async def _elicited(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        del context  # the request names no call: ``Callers`` finds the one in flight
        return await self.callers.elicited(params)

    async def _sampled(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        del context
        if self.sampler is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="Iris refused: no model")
        return await self.sampler.sample(params, self.callers.asker())

    async def resources(self) -> ToolResult:
        """The server's resources, one line each (``uri``, name, type, description)."""
        client = self._client
        if client is None:
            return ToolResult(False, f"error: MCP server '{self.name}' is not connected")
        try:
            listed = await client.list_resources()
        except MCPError as exc:
            return ToolResult(False, f"error: {exc.message}")
        lines = [
            " — ".join(
                part for part in (r.uri, r.name, r.mime_type or "", r.description or "") if part
            )
            for r in listed.resources[:MAX_LISTED]
        ]
        return ToolResult(True, "\n".join(lines) or "(no resources)")

    async def read(self, uri: str) -> ToolResult:
        """One resource's text (a binary part is named with its type and size, not sent)."""
        client = self._client
        if client is None:
            return ToolResult(False, f"error: MCP server '{self.name}' is not connected")
        try:
            answer = await client.read_resource(uri)
        except MCPError as exc:
            return ToolResult(False, f"error: {exc.message}")
        parts = [
            c.text
            if isinstance(c, types.TextResourceContents)
            else f"[{c.mime_type or 'binary'} resource, {len(c.blob) * 3 // 4} bytes]"
            for c in answer.contents
        ]
        return ToolResult(True, "\n".join(parts)[-self._output_limit :])

    async def prompts(self) -> list[str]:
        """The server's prompts, one line each: name, arguments (``*`` required), description."""
        client = self._client
        if client is None or client.server_capabilities.prompts is None:
            return []
        listed = await client.list_prompts()
        lines: list[str] = []
        for prompt in listed.prompts[:MAX_LISTED]:
            args = " ".join(f"{a.name}{'*' if a.required else ''}" for a in prompt.arguments or [])
            lines.append(" ".join(p for p in (prompt.name, args, prompt.description or "") if p))
        return lines

    async def prompt(self, name: str, args: dict[str, str]) -> str:
        """The text of prompt ``name`` with ``args`` (its messages' text, joined); raises
        ``LookupError`` with the server's reason when it cannot be had."""
        client = self._client
        if client is None:
            raise LookupError(f"MCP server '{self.name}' is not connected")
        try:
            got = await client.get_prompt(name, args)
        except MCPError as exc:
            raise LookupError(exc.message) from None
        texts = [m.content.text for m in got.messages if isinstance(m.content, types.TextContent)]
        return "\n\n".join(texts)

    def _closed_note(self) -> str:
        tail = self._stderr.text()[-500:]
        said = f"; its stderr ends: {tail}" if tail else ""
        return f"error: MCP server '{self.name}' closed the connection during the call{said}"


@dataclass(frozen=True, slots=True)
class Confined:
    """A stdio server's sandbox: ``sandbox`` with ``folder`` as its workspace; the seccomp
    filter goes through a file in ``data_dir`` (the SDK starts the child: no descriptor can
    be handed to it, so a shell opens the file as descriptor 3 and execs bwrap)."""

    sandbox: Sandbox
    folder: Path
    data_dir: Path

    def spawn(
        self, command: list[str], env: dict[str, str]
    ) -> tuple[str, list[str], dict[str, str]]:
        """What the stdio transport starts: bwrap (through ``sh``) and its arguments."""
        owner = UID if self.sandbox.setpriv is not None else None
        Workspaces(self.folder, "shared", owner).open("")
        if self.sandbox.seccomp is None:
            argv = self.sandbox.argv(command, self.folder, env)
            return argv[0], argv[1:], {}
        private_dir(self.data_dir)
        filter_file = self.data_dir / "sandbox-seccomp.bpf"
        fresh = filter_file.with_name(f"{filter_file.name}.{os.getpid()}")
        fresh.unlink(missing_ok=True)
        write_private_bytes(fresh, self.sandbox.seccomp)
        fresh.replace(filter_file)
        argv = self.sandbox.argv(command, self.folder, env, seccomp_fd=3)
        opener = ["-c", 'file=$1; shift; exec "$@" 3<"$file"', "sh", str(filter_file)]
        return "/bin/sh", [*opener, *argv], {}


def describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "it did not answer within connect_timeout"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, BaseExceptionGroup):
        inner: list[BaseException] = list(exc.exceptions)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
        if inner:
            return describe(inner[0])
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@contextlib.asynccontextmanager
async def http_transport(
    url: str,
    headers: dict[str, str],
    limit: tuple[int, Callable[[int], None]],
    auth: httpx2.Auth | None = None,
) -> AsyncGenerator[Any]:
    """Streamable HTTP with each answer capped: an SSE event by the SDK, a JSON body by
    ``_CappedTransport`` (read through the cap, then the call fails); ``auth`` signs each
    request (``auth: oauth``)."""
    max_bytes, dropped = limit
    async with (
        httpx2.AsyncClient(
            auth=auth,
            headers=headers,
            timeout=httpx2.Timeout(30.0, read=300.0),
            transport=_CappedTransport(max_bytes, dropped),
        ) as http,
        streamable_http_client(url, http_client=http, max_sse_event_size=max_bytes) as streams,
    ):
        yield streams


class _TooLarge(httpx2.StreamError):
    pass


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, max_bytes: int, dropped: Callable[[int], None]
    ) -> None:
        self._inner, self._max_bytes, self._dropped = inner, max_bytes, dropped

    async def __aiter__(self) -> AsyncGenerator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._max_bytes:
                self._dropped(seen)
                raise _TooLarge(
                    f"the MCP server's answer was over the cap of {self._max_bytes:,} bytes "
                    "(tools.mcp.max_result_bytes); it was dropped"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _CappedTransport(httpx2.AsyncBaseTransport):
    """A JSON answer over ``max_bytes`` fails while it is read, never held whole (an event
    stream is left to the SDK's per-event cap)."""

    def __init__(self, max_bytes: int, dropped: Callable[[int], None]) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self._max_bytes, self._dropped = max_bytes, dropped

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return response
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedBody(response.stream, self._max_bytes, self._dropped)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def _stdio(
    spawn: tuple[str, list[str], dict[str, str]],
    stderr: StderrTail,
    lost: Callable[[], None],
    limit: tuple[int, Callable[[int], None]],
) -> AsyncGenerator[Any]:
    """The child's transport (``stdio_transport``, capped) with its stderr read into
    ``stderr`` and ``lost`` called when its stdout ends (the child exited or closed it)."""
    loop = asyncio.get_running_loop()
    read_end, write_end = os.pipe()
    errlog = os.fdopen(write_end, "w")
    pipe: asyncio.BaseTransport | None = None
    try:
        pipe, _ = await loop.connect_read_pipe(lambda: stderr, os.fdopen(read_end, "rb"))
        command, args, env = spawn
        max_bytes, dropped = limit
        async with stdio_transport(
            command, args, env, errlog, max_bytes=max_bytes, dropped=dropped
        ) as (read, write):
            errlog.close()  # the child holds its own copy
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def pump() -> None:
                try:
                    async with send:
                        async for item in read:
                            await send.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass
                finally:
                    lost()

            async with anyio.create_task_group() as group:
                group.start_soon(pump)
                try:
                    yield receive, write
                finally:
                    group.cancel_scope.cancel()
                    receive.close()
    finally:
        errlog.close()
        if pipe is not None:
            pipe.close()
        else:
            os.close(read_end)
