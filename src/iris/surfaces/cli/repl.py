"""``iris chat``: the interactive loop — prompt, slash commands, conversation, one turn at a time.

The prompt is a prompt_toolkit ``PromptSession`` with a persisted history
(``~/.iris/chat_history``): Enter sends, Alt-Enter or a trailing backslash adds a line, Ctrl-C
clears a line (or quits at an empty prompt), Ctrl-D quits. A turn is shown by ``screen.py``.
When stdout or stdin is not a terminal the chat prints plain text; when stdin is not one, it
reads one message per line, so ``iris chat < questions.txt > answers.txt`` works. The
conversation lives in memory for the session (``iris.agent.conversation`` over memory stores,
as a server's chats are over theirs); ``/new`` starts afresh.

The schedule commands (``/remind``, ``/every``...; ``iris.surfaces.schedule_commands``) keep the
chat's schedules in an in-memory SQLite store: the scheduler (``iris.surfaces.scheduler``) runs
them while the chat is open, and they end with it. A due run is a turn of the conversation,
printed like a reply and opened by a ``⏰`` line; it never cuts into a reply: it waits until the
reply ends, and one that comes due at the prompt takes the prompt down, prints, and puts it
back with what was typed.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import logging
import sys
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output, create_output
from prompt_toolkit.patch_stdout import patch_stdout

from iris.agent import Agent
from iris.agent.approvals import ApprovalPolicy
from iris.agent.attachments import prepare
from iris.agent.conversation import Conversation, TurnOptions, UserMessage
from iris.agent.elicitation import Elicitations
from iris.config import Config
from iris.errors import StoreUnavailable
from iris.events import (
    ApprovalRequested,
    ApprovalResolved,
    ElicitationRequested,
    ElicitationResolved,
    Event,
)
from iris.llm.local import DEMO_NOTICE
from iris.private import private_dir, private_file
from iris.state.approvals import Decision, MemoryApprovals
from iris.state.controls import Controls, MemoryControls
from iris.state.schedules import schedules_for
from iris.state.sessions import MemorySessions
from iris.state.sqlite import Store
from iris.surfaces.actions import compacted, status
from iris.surfaces.cli.form_prompt import FormPrompt
from iris.surfaces.cli.render import RenderOptions, ReplyRenderer
from iris.surfaces.cli.repl_commands import ChatSettings, is_command, run_command
from iris.surfaces.cli.screen import EOF, LiveScreen, PlainScreen, Screen, show_turn
from iris.surfaces.cli.staged import Staged, path_of, split_paths
from iris.surfaces.cli.theme import STYLE
from iris.surfaces.commands import parse
from iris.surfaces.schedule_commands import PREVIEW, Desk, answer
from iris.surfaces.scheduler import Delivery, Run, Scheduler
from iris.tasks import Supervisor

log = logging.getLogger(__name__)

SESSION = "cli"  # the key of the REPL's one conversation in its memory stores
IN_MEMORY = (
    "this terminal chat keeps its schedules in memory: they run while it is open and end with it"
)


def history_path() -> Path:
    return Path.home() / ".iris" / "chat_history"


def run_repl(config: Config) -> int:
    """The ``iris chat`` entry point on the real stdin/stdout."""
    if not sys.stdin.isatty():
        return asyncio.run(Chat(config, LinePrompt(sys.stdin), PlainScreen(sys.stdout)).run())
    if not sys.stdout.isatty():
        # Replies go to the pipe; the prompt and what is typed stay on the terminal.
        prompt = TerminalPrompt(create_input(), create_output(sys.stderr), _file_history())
        return asyncio.run(Chat(config, prompt, PlainScreen(sys.stdout)).run())
    input, output = create_input(), create_output()
    # Stray writes (a library's warning on stderr) are printed above the live area and the
    # prompt instead of through them.
    with create_app_session(input=input, output=output), patch_stdout(raw=True):
        return asyncio.run(terminal_chat(config, input, output).run())


def terminal_chat(
    config: Config, input: Input, output: Output, clock: Callable[[], float] = time.time
) -> Chat:
    """The chat on a terminal: the prompt with its persisted history, the live screen."""
    prompt = TerminalPrompt(input, output, _file_history())
    return Chat(config, prompt, LiveScreen(input, output, STYLE), clock)


class Prompt(Protocol):
    async def read(self, default: str = "") -> str:
        """The next message, starting from ``default``; ``EOFError`` when the user is done.
        Cancelling it loses nothing: what was typed is ``typed()``, a line read is kept."""
        ...

    def typed(self) -> str:
        """What is typed at the prompt and not sent yet."""
        ...


class TerminalPrompt:
    def __init__(self, input: Input, output: Output, history: History | None = None) -> None:
        self.session: PromptSession[str] = PromptSession(
            input=input,
            output=output,
            history=history or InMemoryHistory(),
            multiline=True,
            key_bindings=_prompt_bindings(),
            prompt_continuation="… ",
            style=STYLE,
        )

    async def read(self, default: str = "") -> str:
        try:
            return await self.session.prompt_async([("class:prompt", "❯ ")], default=default)
        except KeyboardInterrupt:
            raise EOFError from None  # Ctrl-C at an empty prompt leaves, like Ctrl-D

    def typed(self) -> str:
        return self.session.default_buffer.text


class LinePrompt:
    """Messages from a stream, one per line (a trailing backslash continues the message)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._lines: list[str] = []  # of a message continued with a backslash
        self._reading: asyncio.Future[str] | None = None  # a line read on, if a read was cancelled

    def typed(self) -> str:
        return ""

    async def _line(self) -> str:
        if self._reading is None:
            loop = asyncio.get_running_loop()
            self._reading = loop.run_in_executor(None, self.stream.readline)
        line = await asyncio.shield(self._reading)
        self._reading = None
        return line

    async def read(self, default: str = "") -> str:
        del default  # nothing is typed ahead without a terminal
        lines = self._lines
        while True:
            line = await self._line()
            if not line:
                if lines:
                    self._lines = []
                    return "\n".join(lines)
                raise EOFError
            line = line.rstrip("\n")
            if not line.endswith("\\"):
                self._lines = []
                return "\n".join([*lines, line])
            lines.append(line[:-1])


class DueRuns:
    """The chat as the scheduler's surface: a run that comes due waits for the chat's next
    turn (``Chat._scheduled_runs``), which resolves its delivery."""

    run_targets = ("cli",)

    def __init__(self) -> None:
        self.waiting: list[tuple[Run, asyncio.Future[Delivery]]] = []
        self.came = asyncio.Event()

    def ready(self, target: Mapping[str, Any]) -> bool:
        return True  # the chat runs its runs itself, while it is open

    async def run(self, run: Run) -> Delivery:
        done: asyncio.Future[Delivery] = asyncio.get_running_loop().create_future()
        self.waiting.append((run, done))
        self.came.set()
        return await done


class Chat:
    """One chat session: the conversation so far and the settings the slash commands change."""

    def __init__(
        self,
        config: Config,
        prompt: Prompt,
        screen: Screen,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.prompt = prompt
        self.screen = screen
        self.agent = Agent(config)
        self.settings = ChatSettings.from_config(config, self.agent.model_name)
        # The session's conversation, in this process's memory: the same lifecycle as a
        # server's chats (iris.agent.conversation), gone when the chat ends.
        self.controls = MemoryControls()
        # The REPL's own approvals: asked in the status line while a turn runs (a screen
        # that reads no keys asks nobody, so a tool that asks is refused there).
        self.approvals = MemoryApprovals(
            ApprovalPolicy.configured(config.tools.approval, config.mcp_servers)
        )
        self.user = _user_name()
        self.staged = Staged(config.attachments.max_bytes)  # files for the next message
        self._answering = Supervisor()  # the screen's answers to approval prompts
        asking = self.approvals if screen.asks else None
        # An MCP server's requests for input, asked in the status line too (declined where
        # the screen reads no keys).
        elicitations = Elicitations(config.tools.approval.timeout) if screen.asks else None
        self.forms = FormPrompt(screen, elicitations, SESSION, self.user) if elicitations else None
        self.conversation = Conversation(
            self.agent, MemorySessions(), self.controls, SESSION, asking, elicitations
        )
        # Its schedules, in memory like its conversation: run while the chat is open.
        self._schedule_store = Store(":memory:")
        self.schedules = schedules_for(self._schedule_store, None)
        self.due = DueRuns()
        self.scheduler = Scheduler(self.schedules, config.schedules, {"cli": self.due}, clock=clock)
        self.desk = Desk(
            self.schedules,
            config.schedules,
            chat=SESSION,
            user=f"cli:{self.user}",
            target={"surface": "cli"},
            clock=clock,
            added=self.scheduler.wake,
        )
        self._reading = Supervisor()  # the prompt, while a run may come due

    async def run(self) -> int:
        try:
            await self.agent.start_tools()  # MCP servers, each connected or failed once
            await self.say(self.banner())
            await self.scheduler.start()
            queued: list[str] = []  # lines finished (Enter) while a reply streamed
            draft = ""
            while True:
                await self._scheduled_runs()
                *finished, tail = self.screen.take_typed().split("\n")
                queued.extend(line for line in finished if line.strip())
                draft += tail
                if queued:
                    line = queued.pop(0)
                    if line == EOF:
                        return 0
                    await self.say(f"❯ {line}")
                else:
                    try:
                        read = await self._read(draft)
                    except EOFError:
                        return 0
                    if read is None:  # a scheduled run came due first
                        draft = self.prompt.typed() or draft
                        continue
                    line, draft = read, ""
                if not line.strip():
                    continue
                if not is_command(line):
                    line = await self._attach_pasted(line)
                    if not line.strip():
                        continue
                if is_command(line):
                    result = run_command(line, self.settings)
                    if result.text:
                        await self.say(result.text)
                    if result.action == "quit":
                        return 0
                    if result.action == "new":
                        await self.conversation.new()
                    elif result.action == "compact":
                        await self.say(await self.compact())
                    elif result.action == "status":
                        await self.say(await self.status())
                    elif result.action == "tools":
                        await self.say("\n".join(self.agent.tool_lines()))
                    elif result.action == "attach":
                        await self.say(self._attach(result.arg))
                    elif result.action == "schedule":
                        await self.say(await self._schedule(line))
                    continue
                await self.turn(line)
        finally:
            await self._reading.close()
            await self.scheduler.stop()
            self._schedule_store.close()
            await self.agent.aclose()

    def banner(self) -> str:
        streaming = "on" if self.settings.streaming else "off"
        head = f"Iris · {self.settings.model} · streaming {streaming} · /help for commands"
        if self.config.model.provider == "local":
            return f"{head}\n{DEMO_NOTICE}"
        return head

    async def say(self, text: str) -> None:
        await self.screen.say(text)

    def _attach(self, written: str) -> str:
        """``/attach PATH`` (or ``/attach``: what is attached)."""
        if not written.strip():
            return self.staged.listing()
        return self.staged.add(path_of(written))

    async def _attach_pasted(self, message: str) -> str:
        """Attach the files the message's lines name alone (a pasted or dragged path); the
        rest of the message."""
        text, paths = split_paths(message)
        for path in paths:
            await self.say(self.staged.add(path))
        return text

    async def turn(self, text: str, heading: str = "") -> None:
        """One turn; ``heading``: a scheduled run's first line (it takes no staged files)."""
        settings = self.settings
        await self._follow_settings()
        options = TurnOptions(stream=settings.streaming, metadata={"surface": "cli"})
        files = () if heading else self.staged.take()
        user = UserMessage(text, await prepare(self.config, text, files) if files else None)
        if user.notes:  # what the model did not get of the files, as every surface says it
            await self.say("\n".join(user.notes))
        exchange = await self.conversation.begin(user, options)
        renderer = ReplyRenderer(
            RenderOptions(
                width=self.screen.width(),
                box=self.screen.boxed,
                streaming=settings.streaming,
                show_reasoning=settings.show_reasoning,
                tool_progress=settings.tool_progress,
                heading=heading,
            )
        )
        async with exchange.turn as turn, self.screen.running(turn.interrupt):
            end = await show_turn(self._asking(turn), renderer, self.screen)
        await self._answering.wait()
        # A failed or interrupted reply stays in the conversation as far as it was shown.
        if not await exchange.keep(end):
            assert exchange.unkept is not None
            raise exchange.unkept

    async def _asking(self, events: AsyncIterable[Event]) -> AsyncIterator[Event]:
        """The turn's events, with its approval requests and MCP servers' questions asked on
        the screen."""
        async for event in events:
            if isinstance(event, ApprovalRequested):
                self.screen.ask(event, functools.partial(self._answer, event.approval_id))
            elif isinstance(event, ApprovalResolved):
                self.screen.asked(event.approval_id)
            elif isinstance(event, ElicitationRequested) and self.forms:
                self.forms.open(event)
            elif isinstance(event, ElicitationResolved) and self.forms:
                self.forms.close(event.elicitation_id)
            yield event

    # -- schedules ------------------------------------------------------------------------------
    async def _schedule(self, line: str) -> str:
        """Answer ``/remind``, ``/every``, ``/schedules``, ``/unschedule`` or ``/tz``."""
        command = parse(line)
        assert command is not None
        try:
            said = await answer(command, self.desk)
        except StoreUnavailable as exc:
            return f"schedules unavailable: {exc.message}"
        return f"{said}\n({IN_MEMORY})" if command.name == "schedules" else said

    async def _scheduled_runs(self) -> None:
        """Run, one turn each, the runs that came due (never while a reply is printed)."""
        while self.due.waiting:
            run, done = self.due.waiting.pop(0)
            if done.done():
                continue  # the scheduler gave it up (the chat is closing)
            for note in await self.schedules.notes(SESSION):
                await self.say(note)
            try:
                await self.turn(run.schedule.text, heading=_heading(run))
            except Exception as exc:  # the chat goes on; the scheduler reports the failure
                log.exception("scheduled run %s failed", run.schedule.id)
                done.set_result(Delivery("failed", str(exc) or type(exc).__name__))
            else:
                done.set_result(Delivery("delivered"))

    async def _read(self, draft: str) -> str | None:
        """The next message from the prompt; None when a scheduled run came due first (the
        prompt is taken down; what was typed stays in ``prompt.typed()``)."""
        if self.due.waiting:
            return None
        self.due.came.clear()
        reading = self._reading.create_task(self.prompt.read(draft), name="prompt")
        due = self._reading.create_task(self.due.came.wait(), name="came-due")
        try:
            await asyncio.wait({reading, due}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            due.cancel()
            if not reading.done():
                reading.cancel()
            await asyncio.wait({reading, due})
        if reading.cancelled():
            return None
        return reading.result()

    def _answer(self, approval_id: str, decision: Decision) -> None:
        self._answering.create_task(self.approvals.respond(approval_id, decision, self.user))

    async def _follow_settings(self) -> None:
        """The chat's controls take the model ``/model`` chose (the REPL's own settings)."""
        model = self.settings.model
        chosen = Controls(model=model if model != self.agent.model_name else None)
        await self.controls.save(SESSION, chosen, "model")

    async def compact(self) -> str:
        await self._follow_settings()
        return compacted(await self.conversation.compact())

    async def status(self) -> str:
        await self._follow_settings()
        return "\n".join(await status(self.conversation))


def _heading(run: Run) -> str:
    """A scheduled run's first line: ``⏰``, its prompt's start, why it is late if it is."""
    text = run.schedule.text.split("\n", 1)[0]
    text = text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"
    return f"⏰ {text} ({run.note})" if run.note else f"⏰ {text}"


def _user_name() -> str:
    """Who answers an approval in the terminal: the login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "you"


def _file_history() -> History:
    path = history_path()
    try:
        # What was typed may hold secrets: owner-only before prompt_toolkit appends to it.
        private_dir(path.parent)
        private_file(path)
        return FileHistory(str(path))
    except OSError:
        return InMemoryHistory()


def _prompt_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @bindings.add("enter")
    def _send(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):
            buffer.delete_before_cursor()
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("c-c")
    def _clear_or_quit(event: KeyPressEvent) -> None:
        if event.current_buffer.text:
            event.current_buffer.reset()
        else:
            event.app.exit(exception=KeyboardInterrupt())

    return bindings
