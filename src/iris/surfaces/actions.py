"""What the chat commands do to a conversation Iris keeps (chat platforms, the iris socket).

Each conversation has its ``Controls`` (``iris.state.controls``: kept by ``runtime.controls``, in
memory or, with a shared store, in Redis): the model it uses, whether reasoning is shown, and
the usage of its last reply. ``execute`` runs one parsed command and returns the text to answer
with; the surface delivers it (a bot message, a ``command`` frame) and never sends the command
to the model or into the history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from iris.agent import Agent
from iris.agent.context import NOTE, Compaction
from iris.config import Config
from iris.runtime import Runtime
from iris.surfaces.commands import Command, help_text

BUSY = "a reply is being written: /stop it first"


@dataclass
class CommandTarget:
    """What a command may act on: the store's session (and its controls), its running reply."""

    runtime: Runtime
    session: str
    busy: bool
    stop: Callable[[], bool]  # interrupt the running reply; False if there is none
    show_reasoning: bool  # what the config says for this surface


async def execute(command: Command, chat: CommandTarget) -> str:
    """Run ``command`` on ``chat``; the answer for the user (raises ``StoreUnavailable``)."""
    agent = chat.runtime.agent
    kept = chat.runtime.controls
    match command.name:
        case "new":
            if chat.busy:
                return BUSY
            await chat.runtime.sessions.cut(chat.session)
            await chat.runtime.approvals.new_session(chat.session)  # "allow in this chat" ends
            return "new conversation: the model no longer sees the earlier one (it is kept)"
        case "stop":
            return "stopped" if chat.stop() else "nothing to stop"
        case "model":
            names = agent.model_names
            controls = await kept.load(chat.session)
            current = controls.model or names[0]
            if not command.arg:
                others = ", ".join(n for n in names if n != current)
                return f"model: {current}" + (f" (also configured: {others})" if others else "")
            if command.arg not in names:
                return f"unknown model {command.arg!r}; configured: {', '.join(names)}"
            controls.model = None if command.arg == names[0] else command.arg
            await kept.save(chat.session, controls, "model")
            return f"model: {command.arg} (from the next message)"
        case "reasoning":
            value = {"on": True, "off": False}.get(command.arg.lower())
            if command.arg and value is None:
                return "usage: /reasoning on|off"
            controls = await kept.load(chat.session)
            if value is not None:
                controls.show_reasoning = value
                await kept.save(chat.session, controls, "show_reasoning")
            shown = controls.reasoning(chat.show_reasoning)
            return f"reasoning {'shown' if shown else 'hidden'}"
        case "compact":
            if chat.busy:
                return BUSY
            return await _compact(chat)
        case "status":
            return await _status(chat)
        case "help":
            return "commands:\n" + help_text()
        case _:
            raise AssertionError(f"not a chat command: {command.name}")


async def compact(
    agent: Agent, messages: list[dict[str, Any]], model: str | None
) -> Compaction | None:
    """Compact a chat's ``messages`` now (``/compact``): what was replaced, or None."""
    head = _head(agent.config)
    _, compaction = await agent.compact(
        [*head, *messages], agent.tools.schemas(), model=model, force=True, head=len(head)
    )
    return compaction


def compacted(compaction: Compaction | None) -> str:
    """The answer to ``/compact``."""
    if compaction is None:
        return "nothing to compact yet"
    done = NOTE if compaction.summary else "earlier conversation dropped (no summary)"
    return f"{done}: {compaction.replaced} messages"


async def status(
    agent: Agent, messages: list[dict[str, Any]], model: str | None, usage: dict[str, int]
) -> list[str]:
    """The lines of ``/status`` every surface shows: model, context used, last reply."""
    budget = agent.budget(model)
    used = await budget.count([*_head(agent.config), *messages], agent.tools.schemas())
    last = (
        f"{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out"
        if usage
        else "none yet"
    )
    return [
        f"model: {budget.model}",
        f"context: ~{used} of {budget.window} tokens ({budget.reserve} kept for the reply; "
        f"compaction: {agent.config.model.compaction})",
        f"last reply: {last}",
        *agent.tool_lines(),
    ]


def _head(config: Config) -> list[dict[str, Any]]:
    prompt = config.model.system_prompt
    return [{"role": "system", "content": prompt}] if prompt else []


async def _compact(chat: CommandTarget) -> str:
    sessions = chat.runtime.sessions
    transcript = await sessions.transcript(chat.session)
    controls = await chat.runtime.controls.load(chat.session)
    compaction = await compact(chat.runtime.agent, transcript.messages, controls.model)
    if compaction is not None:
        after = transcript.cut_after(compaction.replaced)
        await sessions.cut(chat.session, compaction.summary, after=after)
    return compacted(compaction)


async def _status(chat: CommandTarget) -> str:
    transcript = await chat.runtime.sessions.transcript(chat.session)
    controls = await chat.runtime.controls.load(chat.session)
    lines = await status(
        chat.runtime.agent, transcript.messages, controls.model, controls.last_usage
    )
    lines += [
        f"reasoning: {'shown' if controls.reasoning(chat.show_reasoning) else 'hidden'}",
        f"reply running: {'yes' if chat.busy else 'no'}",
    ]
    return "\n".join(lines)
