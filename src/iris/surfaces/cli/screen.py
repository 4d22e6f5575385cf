"""The terminal while a turn runs: frames from the renderer in, output on the screen.

``LiveScreen`` runs a small prompt_toolkit Application for the length of a turn. Its layout is
the renderer's live tail plus a status line; committed pieces are printed above it inside
``in_terminal`` (prompt_toolkit erases the app, prints, redraws), so output never tears the
screen or a prompt. The Application reads the keyboard in raw mode: Ctrl-C arrives as a key (a
real SIGINT through its ``<sigint>`` binding) and interrupts the turn.

``PlainScreen`` is for a stdout that is not a terminal: the committed text, unstyled, and
SIGINT to interrupt.

``show_turn`` is the transport between them: the driver feeds events to the renderer and, when
text is held for a batch and no event comes, flushes at the renderer's ``due()`` time.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from typing import Protocol, TextIO

from prompt_toolkit.application import Application, in_terminal
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import FormattedTextControl
from prompt_toolkit.output import Output
from prompt_toolkit.renderer import print_formatted_text
from prompt_toolkit.styles import BaseStyle

from iris.events import ApprovalRequested, Event, TerminalEvent, TurnEnded, TurnFailed
from iris.state.approvals import Decision
from iris.surfaces.cli.markdown import Piece
from iris.surfaces.cli.render import Frame, ReplyRenderer
from iris.surfaces.driver import drive
from iris.tasks import task_group

Interrupt = Callable[[], None]
Answer = Callable[[Decision], None]  # a person's answer to the approval being asked
# Keys of the approval prompt: y once, c this chat (then c again to confirm), n or Enter deny.
APPROVAL_KEYS: dict[str, Decision] = {"y": "once", "c": "chat", "n": "deny", "\r": "deny"}
# Seconds the keyboard must be quiet before the prompt takes a key: keys typed as it appeared
# (a sentence begun before it, "can you…") are dropped, each one restarting the wait.
ARM_AFTER = 0.6

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_SPIN_INTERVAL = 0.1  # seconds; the status line is the only thing redrawn on this timer


class Screen(Protocol):
    @property
    def boxed(self) -> bool:
        """True for a terminal: boxes, styles and a live area."""
        ...

    def width(self) -> int: ...

    def running(self, on_interrupt: Interrupt) -> contextlib.AbstractAsyncContextManager[None]:
        """The lifetime of one turn on screen; ``on_interrupt`` runs on Ctrl-C."""
        ...

    async def show(self, frame: Frame) -> None: ...

    async def say(self, text: str) -> None:
        """A line for the user that is not part of a reply (banner, command results)."""
        ...

    def take_typed(self) -> str:
        """What the user typed while the last turn ran (lines ended by Enter are to be sent;
        the rest fills the next prompt), then forgotten."""
        ...

    @property
    def asks(self) -> bool:
        """Can a person answer an approval here (keys are read while a turn runs)?"""
        ...

    def ask(self, request: ApprovalRequested, answer: Answer) -> None:
        """Ask for ``request`` in the status line until ``asked`` (or an answer key)."""
        ...

    def asked(self, approval_id: str) -> None:
        """The request ended (answered here or not): the prompt goes."""
        ...

    def question(self, text: str, answer: Callable[[str], None]) -> None:
        """Ask for a line in the status line (an MCP server's form); Enter gives it to
        ``answer``."""
        ...

    def unquestion(self) -> None:
        """The question's request ended: the prompt goes."""
        ...


EOF = "\x04"  # in what take_typed returns: Ctrl-D pressed on an empty line during a reply


class LiveScreen:
    """A terminal: a live area during turns, everything else printed above it."""

    boxed = True
    asks = True

    def __init__(self, input: Input, output: Output, style: BaseStyle) -> None:
        self.input, self.output, self.style = input, output, style
        self._live: tuple[Piece, ...] = ()
        self._status = ""
        self._typed = ""
        self._app: Application[None] | None = None
        self._asking: tuple[ApprovalRequested, Answer] | None = None
        self.arm_after = ARM_AFTER
        self.clock: Callable[[], float] = time.monotonic
        self._quiet_since = 0.0  # the last key (or the prompt appearing), while asking
        self._ignored = 0  # keys dropped by the prompt not armed yet
        self._confirming = False  # "c" was pressed: "c" again allows the tool in this chat
        self._question: tuple[str, Callable[[str], None]] | None = None
        self._line = ""  # typed in answer to the question
        self._line_armed = False  # the question takes keys (the keyboard was quiet once)

    def question(self, text: str, answer: Callable[[str], None]) -> None:
        self._question, self._line, self._line_armed = (text, answer), "", False
        self._quiet_since, self._ignored = self.clock(), 0
        if self._app is not None:
            self._app.invalidate()

    def unquestion(self) -> None:
        self._question = None
        if self._app is not None:
            self._app.invalidate()

    def _answer_line(self, key: str) -> bool:
        """A key while a question is asked: typed into the answer (Enter gives it). Keys
        before it is armed are dropped, as an approval's are."""
        if self._question is None:
            return False
        # Armed once the keyboard was quiet long enough; then the line is typed freely.
        armed = self._line_armed or self.clock() - self._quiet_since >= self.arm_after
        self._line_armed = armed
        self._quiet_since = self.clock()
        if not armed:
            self._ignored += 1
        elif key == "\r":
            answer, line = self._question[1], self._line
            self._question, self._line = None, ""
            answer(line)
        elif key == "\x7f":
            self._line = self._line[:-1]
        elif key.isprintable():
            self._line += key
        return True

    def ask(self, request: ApprovalRequested, answer: Answer) -> None:
        self._asking = (request, answer)
        self._quiet_since, self._ignored, self._confirming = self.clock(), 0, False
        if self._app is not None:
            self._app.invalidate()

    @property
    def ignored(self) -> int:
        """Keys the approval being asked dropped (typed before it was armed)."""
        return self._ignored

    @property
    def confirming(self) -> bool:
        """ "c" was pressed: the prompt asks to confirm "allow in this chat"."""
        return self._asking is not None and self._confirming

    def armed(self) -> bool:
        """The approval being asked takes keys now (the keyboard was quiet long enough)."""
        return self._asking is not None and self.clock() - self._quiet_since >= self.arm_after

    def asked(self, approval_id: str) -> None:
        if self._asking is not None and self._asking[0].approval_id == approval_id:
            self._asking = None
        if self._app is not None:
            self._app.invalidate()

    def _answer(self, key: str) -> bool:
        """A key pressed while an approval is asked: True when it was the prompt's (while
        asking, no key is typed ahead). A key before the prompt is armed is dropped; "c"
        asks to confirm, and only a second "c" allows the tool for the rest of the chat."""
        if self._asking is None:
            return False
        armed = self.armed()
        self._quiet_since = self.clock()
        if not armed:
            self._ignored += 1
            return True
        decision = APPROVAL_KEYS.get(key.lower())
        if self._confirming or decision == "chat":
            confirmed = self._confirming and decision == "chat"
            self._confirming = not self._confirming
            if not confirmed:
                return True
        if decision is not None:
            answer = self._asking[1]
            self._asking = None
            answer(decision)
        return True

    def width(self) -> int:
        return max(20, min(self.output.get_size().columns, 100))

    @contextlib.asynccontextmanager
    async def running(self, on_interrupt: Interrupt) -> AsyncGenerator[None]:
        self._live, self._status = (), "Ctrl-C to interrupt"
        started_at = time.monotonic()
        live = Window(
            FormattedTextControl(lambda: list(self._live)), wrap_lines=True, dont_extend_height=True
        )
        status = Window(FormattedTextControl(lambda: self._status_line(started_at)), height=1)
        app: Application[None] = Application(
            layout=Layout(
                HSplit([ConditionalContainer(live, Condition(lambda: bool(self._live))), status])
            ),
            key_bindings=self._bindings(on_interrupt),
            style=self.style,
            input=self.input,
            output=self.output,
            erase_when_done=True,
            refresh_interval=_SPIN_INTERVAL,
        )
        started = asyncio.Event()
        async with task_group() as group:
            task = group.create_task(
                app.run_async(pre_run=started.set, set_exception_handler=False)
            )
            # From pre_run to the first await, the app attaches the input synchronously.
            await started.wait()
            self._app = app
            try:
                yield
            finally:
                self._app = None
                self._live = ()
                self._asking = None
                self._question = None
                if not task.done():
                    app.exit()
                # Let it restore the terminal even when the turn was cancelled, not cut it off.
                await asyncio.wait([task])

    def _bindings(self, on_interrupt: Interrupt) -> KeyBindings:
        """The keys while a reply streams: Ctrl-C interrupts, an approval's keys answer it,
        anything else is typed ahead for the next prompt."""
        bindings = KeyBindings()

        @bindings.add("c-c")
        @bindings.add("<sigint>")
        def _interrupt(event: KeyPressEvent) -> None:
            self._status = "interrupting…"
            event.app.invalidate()
            on_interrupt()

        @bindings.add(Keys.Any)
        def _type_ahead(event: KeyPressEvent) -> None:
            # Typing while a reply streams must not land in the reply: keep it for the prompt.
            if self._answer_line(event.data) or self._answer(event.data):
                event.app.invalidate()
            elif event.data.isprintable():
                self._typed += event.data

        @bindings.add("enter")
        def _submit(event: KeyPressEvent) -> None:
            # A line finished while a reply streams is sent after it, as the user meant.
            if self._answer_line("\r") or self._answer("\r"):
                event.app.invalidate()
            else:
                self._typed += "\n"

        @bindings.add("c-d")
        def _end_of_input(event: KeyPressEvent) -> None:
            # As a terminal queues an EOF typed during output: leave once the reply is done.
            if self._typed.endswith("\n") or not self._typed:
                self._typed += EOF + "\n"

        @bindings.add("backspace")
        def _erase(event: KeyPressEvent) -> None:
            if self._answer_line("\x7f"):
                event.app.invalidate()
            elif not self._typed.endswith("\n"):
                self._typed = self._typed[:-1]

        return bindings

    def _status_line(self, started_at: float) -> StyleAndTextTuples:
        """A spinner and the time so far (a slow first token or a long tool is not a hang),
        or the approval being asked."""
        elapsed = time.monotonic() - started_at
        spin = _SPINNER[int(elapsed * 10) % len(_SPINNER)]
        if self._question is not None:
            return self._question_line(spin)
        if self._asking is not None:
            return self._asking_line(self._asking[0], spin)
        shown = self._typed[-40:].replace(EOF, "^D").replace("\n", " ⏎ ")
        typed = f" · next: {shown}" if self._typed else ""
        return [("class:footer", f"{spin} {elapsed:.0f} s · {self._status}{typed}")]

    def _question_line(self, spin: str) -> StyleAndTextTuples:
        assert self._question is not None
        if self.clock() - self._quiet_since < self.arm_after:
            ignored = f" ({self._ignored} ignored)" if self._ignored else ""
            return [("class:footer", f"{spin} keys typed before this are ignored{ignored}")]
        return [
            ("class:approval", f"{spin} {self._question[0]} "),
            ("class:approval.prompt", f"› {self._line}"),
        ]

    def _asking_line(self, request: ApprovalRequested, spin: str) -> StyleAndTextTuples:
        left = max(0.0, request.expires_at - time.time())
        tail = ("class:footer", f" · {left:.0f} s left · Ctrl-C to interrupt")
        if not self.armed():
            ignored = f" ({self._ignored} ignored)" if self._ignored else ""
            return [
                ("class:approval", f"{spin} run {request.name}? "),
                ("class:footer", f"keys typed before this are ignored{ignored}"),
                tail,
            ]
        if self._confirming:
            return [
                ("class:approval", f"{spin} allow {request.name} in this chat? "),
                ("class:approval.prompt", "c again to confirm · any other key: back"),
                tail,
            ]
        return [
            ("class:approval", f"{spin} run {request.name}? "),
            ("class:approval.prompt", "y once · c this chat · n/Enter deny"),
            tail,
        ]

    async def show(self, frame: Frame) -> None:
        if frame.commit:
            # in_terminal erases the app, lets us print, then redraws it with the new live area;
            # without a running app it simply prints.
            async with in_terminal():
                self._live = frame.live
                print_formatted_text(self.output, list(frame.commit), self.style)
        else:
            self._live = frame.live
            if self._app is not None:
                self._app.invalidate()

    async def say(self, text: str) -> None:
        await self.show(Frame((("class:info", text + "\n"),)))

    def take_typed(self) -> str:
        typed, self._typed = self._typed, ""
        return typed


class PlainScreen:
    """Not a terminal: replies as plain text on ``stream``; SIGINT interrupts.

    Everything else goes to ``info`` (stderr), so ``iris chat < q.txt > a.txt`` keeps only the
    replies in the file."""

    boxed = False
    asks = False  # no keys are read while a turn runs: a tool that asks is refused

    def ask(self, request: ApprovalRequested, answer: Answer) -> None:
        del request, answer

    def asked(self, approval_id: str) -> None:
        del approval_id

    def question(self, text: str, answer: Callable[[str], None]) -> None:
        del text, answer

    def unquestion(self) -> None:
        pass

    def __init__(self, stream: TextIO, info: TextIO | None = None) -> None:
        self.stream = stream
        self.info = info if info is not None else sys.stderr

    def width(self) -> int:
        return 80

    @contextlib.asynccontextmanager
    async def running(self, on_interrupt: Interrupt) -> AsyncGenerator[None]:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, on_interrupt)
        except (ValueError, RuntimeError, NotImplementedError):  # not the main thread
            yield
            return
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    async def show(self, frame: Frame) -> None:
        text = "".join(piece[1] for piece in frame.commit)
        if text:
            self.stream.write(text)
            self.stream.flush()

    async def say(self, text: str) -> None:
        self.info.write(text + "\n")
        self.info.flush()

    def take_typed(self) -> str:
        return ""  # without a terminal nothing is read while a turn runs


async def show_turn(
    events: AsyncIterable[Event], renderer: ReplyRenderer, screen: Screen
) -> TerminalEvent:
    """Render one turn's events on ``screen``; return its last event."""
    showing = _Showing(renderer, screen)
    await drive(events, showing, clock=renderer.clock)
    if showing.last is None:
        raise RuntimeError("the turn ended without TurnEnded or TurnFailed")
    return showing.last


class _Showing:
    """The renderer as the driver's planner: frames go to the screen as they are made."""

    def __init__(self, renderer: ReplyRenderer, screen: Screen) -> None:
        self.renderer, self.screen = renderer, screen
        self.last: TerminalEvent | None = None
        self.settled = True  # the last event's frame is shown when it is fed

    async def feed(self, event: Event) -> bool:
        frame = self.renderer.feed(event)
        if frame is not None:
            await self.screen.show(frame)
        if isinstance(event, TurnEnded | TurnFailed):
            self.last = event
            return True
        return False

    async def act(self, now: float) -> bool:
        due = self.renderer.due()
        if due is None or now < due:
            return False
        frame = self.renderer.flush()
        if frame is not None:
            await self.screen.show(frame)
        return True

    def due(self, now: float) -> float | None:
        return self.renderer.due()
