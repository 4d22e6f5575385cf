"""A small MCP tool server written with the official ``mcp`` SDK's server API, for the MCP tests.

Run as ``python -m tests.fakes.mcp_server stdio`` (a stdio server) or
``python -m tests.fakes.mcp_server http PORTFILE`` (Streamable HTTP on a free 127.0.0.1 port,
written to PORTFILE once it listens). Its tools:

- ``steps(n, seconds)``: ``n`` progress notifications spread over ``seconds``, then "steps done".
- ``slow(seconds, every)``: runs ``seconds`` reporting progress (no message) every ``every``.
- ``silent(seconds)``: runs ``seconds`` without a word.
- ``crash()``: reports one step, then the process dies.
- ``env(name)``: the value of the variable ``name`` in the server's environment, or "<unset>".
- ``grow()``: adds the tool ``extra`` and tells the client its list changed.
- ``hang(marker)``: reports progress, then waits; when the client cancels the call it writes
  "cancelled" to the file ``marker``.
- ``pictures()``: a text part, an image part and structured content.
- ``refuse()``: an ``isError`` result.
- ``delete(path)``: asks the person to confirm (elicitation, a boolean), then says what it did.
- ``paint()``: asks the person for a colour (an enum) and a count (a required integer).
- ``label()``: asks the person for a title (required text) and a note (optional text).
- ``visit()``: asks the person to open a link (URL-mode elicitation).
- a resource ``notes://today`` ("buy milk") and a prompt ``review(topic)``.
- ``ask_model(question)``: asks the client's model (sampling), says what it answered or why
  it was refused.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any, Literal

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

server = MCPServer("iris-fake")


@server.tool()
async def steps(ctx: Context, n: int = 5, seconds: float = 2.0) -> str:
    """Report n progress steps over the given seconds."""
    for i in range(1, n + 1):
        await asyncio.sleep(seconds / n)
        await ctx.report_progress(i, n, f"step {i} of {n}")
    return "steps done"


@server.tool()
async def slow(ctx: Context, seconds: float = 3.0, every: float = 0.2) -> str:
    """Run for a while, reporting progress without a message."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    done = 0
    while loop.time() < end:
        await asyncio.sleep(every)
        done += 1
        await ctx.report_progress(done)
    return f"slow done after {done} reports"


@server.tool()
async def silent(seconds: float = 30.0) -> str:
    """Run without reporting progress."""
    await asyncio.sleep(seconds)
    return "silent done"


@server.tool()
async def crash(ctx: Context) -> str:
    """Die in the middle of the call."""
    await ctx.report_progress(1, 2, "about to crash")
    sys.stderr.write("fatal: the fake server crashed on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool()
def env(name: str) -> str:
    """One variable of the server's environment."""
    return os.environ.get(name, "<unset>")


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool 'extra' and send notifications/tools/list_changed."""

    def extra() -> str:
        """A tool that appeared later."""
        return "extra here"

    server.add_tool(extra, name="extra")
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
async def hang(ctx: Context, marker: str) -> str:
    """Wait until cancelled; the cancellation is written to ``marker``."""
    await ctx.report_progress(1, None, "waiting")
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")  # noqa: ASYNC240 (a tiny file, on the way out)
        raise
    return "never"


@server.tool()
def pictures() -> types.CallToolResult:
    """Text, an image and structured content."""
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a red square"),
            types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        ],
        structured_content={"width": 1, "color": "red"},
    )


@server.tool()
def refuse() -> types.CallToolResult:
    """A tool error."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="no such record")], is_error=True
    )


class Confirm(BaseModel):
    sure: bool = Field(description="Really delete it?")


class Paint(BaseModel):
    color: Literal["red", "green", "blue"] = Field(description="The colour")
    coats: int = Field(ge=1, le=5, description="How many coats")


class Label(BaseModel):
    title: str = Field(description="The label's title")
    note: str = Field(default="", description="A note under it")


@server.tool()
async def delete(ctx: Context, path: str) -> str:
    """Delete a file, once the person confirmed."""
    answer = await ctx.elicit(f"Delete {path}?", schema=Confirm)
    if answer.action == "accept":
        return f"deleted {path}" if answer.data.sure else f"kept {path}"
    return f"not deleted ({answer.action})"


@server.tool()
async def paint(ctx: Context) -> str:
    """Paint, in the colour the person picks."""
    answer = await ctx.elicit("Which colour?", schema=Paint)
    if answer.action == "accept":
        return f"painted {answer.data.color} x{answer.data.coats}"
    return f"no paint ({answer.action})"


@server.tool()
async def label(ctx: Context) -> str:
    """Print a label, its title and an optional note asked of the person."""
    answer = await ctx.elicit("What goes on the label?", schema=Label)
    if answer.action == "accept":
        return f"label {answer.data.title!r} note {answer.data.note!r}"
    return f"no label ({answer.action})"


@server.tool()
async def visit(ctx: Context) -> str:
    """Send the person to a page."""
    answer = await ctx.elicit_url("Sign in to the printer", "https://printer.test/in", "e1")
    return f"visit: {answer.action}"


@server.resource("notes://today", name="today", mime_type="text/plain")
def today() -> str:
    """Today's notes."""
    return "buy milk"


@server.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic} carefully."


@server.tool()
async def ask_model(ctx: Context, question: str) -> str:
    """Ask the client's model a question."""
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=question)
    )
    try:
        answer = await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
            [message], max_tokens=50, system_prompt="Answer in one word."
        )
    except MCPError as exc:
        return f"refused: {exc.message}"
    content = answer.content
    return f"the model said: {content.text if isinstance(content, types.TextContent) else '?'}"


def _serve_http(port_file: str) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning")
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    port = sock.getsockname()[1]
    Path(port_file).write_text(str(port))
    uvicorn.Server(config).run(sockets=[sock])


def main(argv: list[str]) -> None:
    if argv[:1] == ["http"]:
        _serve_http(argv[1])
        return
    sys.stderr.write("fake MCP server ready\n")
    sys.stderr.flush()
    server.run()


if __name__ == "__main__":
    main(sys.argv[1:])


__all__: list[Any] = []
