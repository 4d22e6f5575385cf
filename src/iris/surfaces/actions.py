"""What the chat commands do to a conversation Iris keeps (chat platforms, the iris socket).

Each conversation (``iris.agent.conversation``) has its ``Controls`` (``iris.state.controls``: kept
by ``runtime.controls``, in memory or, with a shared store, in Redis): the model it uses,
whether reasoning is shown, and the usage of its last reply. ``execute`` runs one parsed
command and returns the text to answer with; the surface delivers it (a bot message, a
``command`` frame) and never sends the command to the model or into the history. The REPL
answers ``/compact`` and ``/status`` with ``compacted`` and ``status`` too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from iris.agent.context import NOTE, Compaction
from iris.agent.conversation import Conversation
from iris.surfaces import schedule_commands, signin_command
from iris.surfaces.commands import Command, help_text
from iris.surfaces.prompts_command import answer as prompt_answer

BUSY = "a reply is being written: /stop it first"


@dataclass
class CommandTarget:
    """What a command may act on: the chat's conversation (history, controls), its reply."""

    conversation: Conversation
    busy: bool
    stop: Callable[[], bool]  # interrupt the running reply; False if there is none
    show_reasoning: bool  # what the config says for this surface
    # The chat's schedules (``/remind``, ``/every``...); None where runs cannot be delivered.
    desk: schedule_commands.Desk | None = None

    @property
    def session(self) -> str:
        return self.conversation.session


async def execute(command: Command, chat: CommandTarget) -> str:
    """Run ``command`` on ``chat``; the answer for the user (raises ``StoreUnavailable``)."""
    conversation = chat.conversation
    if command.name in schedule_commands.COMMANDS:
        if chat.desk is None:
            return f"/{command.name}: schedules run in `iris serve` (not here)"
        return await schedule_commands.answer(command, chat.desk)
    match command.name:
        case "new":
            if chat.busy:
                return BUSY
            await conversation.new()  # "allow in this chat" ends too
            return "new conversation: the model no longer sees the earlier one (it is kept)"
        case "stop":
            return "stopped" if chat.stop() else "nothing to stop"
        case "model":
            names = conversation.agent.model_names
            controls = await conversation.controls()
            current = controls.model or names[0]
            if not command.arg:
                others = ", ".join(n for n in names if n != current)
                return f"model: {current}" + (f" (also configured: {others})" if others else "")
            if command.arg not in names:
                return f"unknown model {command.arg!r}; configured: {', '.join(names)}"
            controls.model = None if command.arg == names[0] else command.arg
            await conversation.save(controls, "model")
            return f"model: {command.arg} (from the next message)"
        case "reasoning":
            value = {"on": True, "off": False}.get(command.arg.lower())
            if command.arg and value is None:
                return "usage: /reasoning on|off"
            controls = await conversation.controls()
            if value is not None:
                controls.show_reasoning = value
                await conversation.save(controls, "show_reasoning")
            shown = controls.reasoning(chat.show_reasoning)
            return f"reasoning {'shown' if shown else 'hidden'}"
        case "compact":
            if chat.busy:
                return BUSY
            return compacted(await conversation.compact())
        case "status":
            return await _status(chat)
        case "prompt":
            return await prompt_answer(conversation.agent, command.arg)
        case "signin":
            return signin_command.elsewhere(conversation.agent, command.arg)
        case "help":
            return "commands:\n" + help_text()
        case _:
            raise AssertionError(f"not a chat command: {command.name}")


def compacted(compaction: Compaction | None) -> str:
    """The answer to ``/compact``."""
    if compaction is None:
        return "nothing to compact yet"
    done = NOTE if compaction.summary else "earlier conversation dropped (no summary)"
    return f"{done}: {compaction.replaced} messages"


async def status(conversation: Conversation) -> list[str]:
    """The lines of ``/status`` every surface shows: model, context used, last reply, tools."""
    use = await conversation.context_use()
    agent = conversation.agent
    usage = use.last_usage
    last = (
        f"{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out"
        if usage
        else "none yet"
    )
    return [
        f"model: {use.model}",
        f"context: ~{use.used} of {use.window} tokens ({use.reserve} kept for the reply; "
        f"compaction: {agent.config.model.compaction})",
        f"last reply: {last}",
        *agent.tool_lines(),
    ]


async def _status(chat: CommandTarget) -> str:
    controls = await chat.conversation.controls()
    lines = await status(chat.conversation)
    lines += [
        f"reasoning: {'shown' if controls.reasoning(chat.show_reasoning) else 'hidden'}",
        f"reply running: {'yes' if chat.busy else 'no'}",
    ]
    return "\n".join(lines)
