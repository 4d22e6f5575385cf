"""The calls one MCP server has in flight, and the person behind each: where the server's
``elicitation/create`` goes (``iris.agent.elicitation``).

A server's request names no call (the protocol relates it to none over stdio), so it goes to
the one call in flight; with none, or calls of several turns at once, it is declined — asking
the wrong person is worse than asking nobody. While the person is asked, the call's idle
timer is held (the person's time is not the server's silence).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from mcp import types

from iris.agent.elicitation import ASKER, Asker

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Call:
    asker: Asker | None
    hold: Callable[[bool], None]  # True: the person is asked (the idle timer waits)


class Callers:
    def __init__(self, server: str) -> None:
        self.server = server
        self._calls: list[_Call] = []

    @contextlib.contextmanager
    def calling(self, hold: Callable[[bool], None]) -> Generator[None]:
        """One call, for the turn in ``ASKER``; its open requests end with it."""
        call = _Call(ASKER.get(), hold)
        self._calls.append(call)
        try:
            yield
        finally:
            self._calls.remove(call)
            if call.asker is not None and call.asker.broker is not None:
                call.asker.broker.cancel(call.asker)

    def asker(self) -> Asker | None:
        """The turn of the one call in flight (None: none, or calls of several turns)."""
        askers = {id(c.asker): c.asker for c in self._calls}
        return next(iter(askers.values())) if len(askers) == 1 else None

    async def elicited(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        """The answer to the server's request (``elicitation_callback``)."""
        turns = {id(c.asker) for c in self._calls}
        call = self._calls[0] if len(turns) == 1 else None
        asker = call.asker if call is not None else None
        if call is None or asker is None:
            return self._declined(None, "no single turn's tool call is in flight")
        if asker.broker is None:
            return self._declined(asker, "this surface cannot ask the person")
        url = params.url if isinstance(params, types.ElicitRequestURLParams) else ""
        schema: dict[str, Any] = {}
        if isinstance(params, types.ElicitRequestFormParams):
            schema = dict(params.requested_schema)
        call.hold(True)
        try:
            answer = await asker.broker.ask(asker, self.server, params.message, schema, url)
        finally:
            call.hold(False)
        return types.ElicitResult(action=answer.action, content=answer.content)

    def _declined(self, asker: Asker | None, why: str) -> types.ElicitResult:
        reason = f"MCP server {self.server} asked for input; declined: {why}"
        log.info("%s", reason)
        if asker is not None:
            asker.note(reason)
        return types.ElicitResult(action="decline", _meta={"reason": reason})
