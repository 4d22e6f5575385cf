"""``/prompt``: an MCP server's prompts, listed and run as the person's message.

``/prompt`` lists every connected server's prompts (``server name args``; ``*`` marks a
required argument). ``/prompt <server> <name> [key=value ...]`` fetches that prompt with those
arguments; a surface that runs turns from commands (the iris socket) sends its text to the model
as the person's message, the others answer with the text to send.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from iris.agent.core import Agent

USAGE = "usage: /prompt [SERVER NAME [key=value ...]]"


@dataclass(frozen=True, slots=True)
class PromptRun:
    """A prompt fetched to run: its text, or why it could not be (``problem``)."""

    text: str = ""
    problem: str = ""


async def listing(agent: Agent) -> str:
    mcp = agent.mcp
    lines: list[str] = []
    for name, connection in (mcp.connections if mcp is not None else {}).items():
        lines += [f"{name} {line}" for line in await connection.prompts()]
    return "prompts:\n" + "\n".join(lines) if lines else "no MCP server offers prompts"


def wants_run(arg: str) -> bool:
    """Does ``/prompt``'s argument name a prompt to run (not a listing)?"""
    return len(arg.split()) >= 2


async def answer(agent: Agent, arg: str) -> str:
    """``/prompt``'s answer where a command does not start a turn: the listing, or the text."""
    if not wants_run(arg):
        return await listing(agent)
    run = await fetched(agent, arg)
    return run.problem or f"{run.text}\n\n(send this text to run the prompt)"


async def fetched(agent: Agent, arg: str) -> PromptRun:
    """The prompt ``arg`` names (``server name key=value ...``)."""
    try:
        words = shlex.split(arg)
    except ValueError as exc:
        return PromptRun(problem=f"{USAGE} ({exc})")
    pairs = [w.partition("=") for w in words[2:]]
    if len(words) < 2 or any(not sep or not key for key, sep, _ in pairs):
        return PromptRun(problem=USAGE)
    connection = agent.mcp.connections.get(words[0]) if agent.mcp is not None else None
    if connection is None:
        return PromptRun(problem=f"no MCP server {words[0]!r} is configured")
    try:
        text = await connection.prompt(words[1], {k: v for k, _, v in pairs})
    except LookupError as exc:
        return PromptRun(problem=f"prompt {words[1]!r} of {words[0]}: {exc}")
    return PromptRun(text=text) if text.strip() else PromptRun(problem="the prompt is empty")
