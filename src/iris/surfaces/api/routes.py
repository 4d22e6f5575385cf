"""The OpenAI-compatible API surface: its routes, the turn slots, and what each route runs.

    POST /v1/chat/completions    Chat Completions, streamed (SSE) or not
    POST /v1/responses           Responses, streamed (SSE) or not; stored (SQLite, or Redis);
                                 ``background: true`` runs on without the client
    GET  /v1/responses/{id}      a stored response, or a background one so far;
                                 ``?stream=true&starting_after=N`` follows a background one
    DELETE /v1/responses/{id}    forgets a stored response
    GET  /v1/responses/{id}/input_items  its request's input items, paged
    POST /v1/responses/{id}/cancel  stops a background response
    GET  /v1/models, /v1/models/{id}  the configured model, and ``iris-agent`` (see ``offering``)
    /v1/conversations[/{id}[/items[/{item_id}]]]  the Conversations API (see ``conversations``)

Every request passes the ``gate`` before any work: the cross-site check, CORS for listed
origins only, the API key, the method, and a JSON ``Content-Type`` for a body. (Which requests
get the agent's own tools — the model ``iris-agent``, an API key — is ``offering``'s to say.)
A turn runs in an ``exchange`` through its API's ``wires``.

Every failure before the first byte is an OpenAI error body with a 4xx (see ``problems``);
after it, the encoders report it in-band (see ``exchange``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from iris.agent.core import TurnRequest
from iris.agent.history import kept
from iris.errors import StoreUnavailable
from iris.events import ApprovalRequested
from iris.runtime import Runtime
from iris.state.approvals import Decision
from iris.state.background import SharedRuns
from iris.state.item_lists import item_lists_for
from iris.state.redis_store import translated
from iris.surfaces.api.background import (
    BackgroundRun,
    BackgroundRuns,
    RemoteRunStream,
    RunStream,
)
from iris.surfaces.api.bodies import (
    References,
    ResponsesCall,
    Stored,
    parse_chat,
    parse_responses,
    references,
)
from iris.surfaces.api.conversations import ConversationRoutes
from iris.surfaces.api.exchange import Running, TurnExchange, Wire
from iris.surfaces.api.gate import Gate, Handler, read_json
from iris.surfaces.api.held import (
    APPROVED_BY,
    ApprovalAnswer,
    HeldTurn,
    HeldTurns,
    approval_answer,
)
from iris.surfaces.api.items import input_items, page
from iris.surfaces.api.offering import ServedModel, resolve_model, served_models, voice_model
from iris.surfaces.api.problems import ApiError, bad_request
from iris.surfaces.api.tool_runs import ToolView, listed_before, tool_view
from iris.surfaces.api.voice import Slots, VoiceTurns, for_speech
from iris.surfaces.api.voice_later import VoiceLater
from iris.surfaces.api.wires import ChatWire, ResponsesWire, shown_text
from iris.surfaces.numbers import MAX_SEQUENCE, ascii_count
from iris.surfaces.origin import SiteGuard
from iris.tasks import logged

Json = dict[str, Any]


async def _nothing_seen() -> None:
    """A response that carries a held turn on lists no tools (its turn's first did)."""


def _model_object(model: ServedModel, created: int) -> Json:
    entry: Json = {"id": model.id, "object": "model", "created": created, "owned_by": "iris"}
    if model.description:
        entry["description"] = model.description
    return entry


def _starting_after(raw: str | None) -> int:
    if raw is None:
        return -1
    value = ascii_count(raw)  # ASCII digits only: not " 5", "1_0", "-1" or "٥"
    if value is None:
        raise bad_request(
            "'starting_after' must be a sequence number (ASCII digits, 0 or more)",
            param="starting_after",
            code="invalid_value",
        )
    # Past every run's last event: the rest, which is nothing (a valid stream id too).
    return min(value, MAX_SEQUENCE)


ConversationHandler = Callable[[Request, object | None], Awaitable[Response]]
_ANY = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class ApiSurface:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.config.platforms.api_server
        self.responses = runtime.responses
        ttl = self.settings.background_ttl
        self.background = BackgroundRuns(
            ttl=ttl,
            keep=self.settings.background_keep,
            # Background runs every process can follow and cancel (``store.url``).
            shared=None
            if runtime.shared is None
            else SharedRuns(runtime.shared, ttl=ttl, lease=runtime.config.store.lease),
            save_lost=self._save_lost,
        )
        self.conversations = ConversationRoutes(
            runtime.item_lists or item_lists_for(runtime.store, runtime.shared),
            self.settings.max_conversation_bytes,
        )
        self.exchanges: set[TurnExchange] = set()  # open, wound down on shutdown
        # Responses turns waiting for an approval between requests; one another process
        # answered goes on here, followed there (``store.url``).
        self.held = HeldTurns(self._answered_elsewhere)
        voice = runtime.config.platforms.homeassistant.voice
        later = VoiceLater(
            runtime.agent,
            voice,
            runtime.approvals,
            house=lambda: runtime.house,
            show=lambda: runtime.show_approval,
        )
        self.voice = VoiceTurns(runtime.agent, voice.ack_after, later)
        self._active = 0  # admitted turns, held until their exchange ends
        self.gate = Gate(SiteGuard(runtime.config.server), self.settings.api_key, runtime.guard)

    # -- ServerSurface --------------------------------------------------------------------
    def routes(self) -> list[BaseRoute]:
        # Routes take every method and the last one every /v1 path, so a wrong method or an
        # endpoint Iris lacks is an OpenAI error body too, not Starlette's plain text.
        return [
            Route("/v1/chat/completions", self.gate(self.chat, "POST"), methods=_ANY),
            Route("/v1/responses", self.gate(self.create_response, "POST"), methods=_ANY),
            Route(
                "/v1/responses/{response_id}/cancel",
                self.gate(self.cancel_response, "POST"),
                methods=_ANY,
            ),
            Route(
                "/v1/responses/{response_id}/input_items",
                self.gate(self.input_items, "GET"),
                methods=_ANY,
            ),
            Route(
                "/v1/responses/{response_id}",
                self.gate(self.response_by_id, ("GET", "DELETE")),
                methods=_ANY,
            ),
            Route("/v1/models", self.gate(self.models, "GET"), methods=_ANY),
            Route("/v1/models/{model_id:path}", self.gate(self.model, "GET"), methods=_ANY),
            *self._conversation_routes(),
            Route("/v1/{path:path}", self.gate(self.unknown, None), methods=_ANY),
        ]

    def _conversation_routes(self) -> list[BaseRoute]:
        routes = self.conversations
        at = "/v1/conversations"
        paths: list[tuple[str, ConversationHandler, tuple[str, ...]]] = [
            (at, routes.create, ("POST",)),
            (f"{at}/{{conversation_id}}/items/{{item_id}}", routes.item, ("GET", "DELETE")),
            (f"{at}/{{conversation_id}}/items", routes.items, ("GET", "POST")),
            (f"{at}/{{conversation_id}}", routes.by_id, ("GET", "POST", "DELETE")),
        ]
        return [
            Route(path, self.gate(self._with_body(handler), methods), methods=_ANY)
            for path, handler, methods in paths
        ]

    def _with_body(self, handler: ConversationHandler) -> Handler:
        async def handle(request: Request) -> Response:
            body = await read_json(request) if request.method == "POST" else None
            return await handler(request, body)

        return handle

    async def start(self) -> None:
        await self.background.start()
        await self.held.start()

    async def stop(self) -> None:
        # Background turns have no client to give time to: they end now, stored as
        # interrupted, and their followers get the end of the stream.
        await self.background.stop()
        # uvicorn's graceful shutdown gave open replies their time; what is left ends now, as
        # interrupted, and is waited for so every client gets a proper end of its reply.
        open_now = list(self.exchanges)
        for exchange in open_now:
            exchange.interrupt()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(3.0):
                for exchange in open_now:
                    await exchange.wait_closed()
        await self.held.stop()
        await self.voice.stop()

    # -- endpoints ------------------------------------------------------------------------
    def served(self) -> list[ServedModel]:
        agent = self.runtime.agent
        main = agent.provider(0) if agent.config.model.provider == "local" else None
        description = getattr(main, "description", "") if main is not None else ""
        return served_models(self.runtime.config, agent.model_name, description)

    def model_names(self) -> list[str]:
        return [model.id for model in self.served()]

    async def models(self, _: Request) -> Response:
        created = int(time.time())
        data = [_model_object(model, created) for model in self.served()]
        return JSONResponse({"object": "list", "data": data})

    async def model(self, request: Request) -> Response:
        served = {model.id: model for model in self.served()}
        asked = request.path_params["model_id"]
        model_id = resolve_model(asked, list(served), self.runtime.config)
        return JSONResponse(_model_object(served[model_id], int(time.time())))

    async def chat(self, request: Request) -> Response:
        body = await read_json(request)
        call = parse_chat(body, models=self.model_names(), config=self.runtime.config)
        if call.model == voice_model(self.runtime.config) and for_speech(call.turn):
            slots = Slots(self._admit())  # the turn's, kept if it goes on after its response
            source = self.voice.source(call.turn, slots)
            return self._exchange(
                call.turn,
                ChatWire(call),
                stream=call.stream,
                source=source,
                release=slots.after_response,
            )
        return self._exchange(call.turn, ChatWire(call), stream=call.stream)

    async def _referred(self, named: References) -> Stored:
        """What a Responses request continues and refers to, read off the loop before it is
        parsed (the parser only looks up); a conversation at its cap is a 400 before any work."""
        previous, conversation = named.previous_response_id, named.conversation_id
        if conversation is not None:
            await self.conversations.check_room(conversation)
        history = await self.responses.history(previous) if previous is not None else None
        items = await self.conversations.store.items(conversation) if conversation else None
        found = await self.responses.items(list(named.item_ids)) if named.item_ids else {}
        return Stored(history, items, found)

    async def create_response(self, request: Request) -> Response:
        body = await read_json(request)
        answer = approval_answer(body)
        if answer is not None:
            return await self._answer_approval(answer)
        named = references(body, self.runtime.config)
        stored = await self._referred(named)
        call = parse_responses(
            body, models=self.model_names(), config=self.runtime.config, stored=stored
        )
        raw_input = body.get("input") if isinstance(body, dict) else None
        inputs = input_items(raw_input, stored.items)
        view = await self._first_view(call, stored.conversation)
        wire = ResponsesWire(call, self.responses, inputs, self.conversations.store, view)
        if call.background:
            return await self._start_background(call, wire)
        if call.turn.agent_tools and not call.turn.client_tools:
            # A tool that asks holds the turn until the client answers (``held``). It starts
            # only once admitted: a 429 leaves nothing running.
            limit = self.settings.max_held_turns
            if self.held.count >= limit:
                raise ApiError(
                    429,
                    f"Too many turns wait for an approval: this server holds at most {limit}.",
                    code="too_many_held_turns",
                    headers={"retry-after": "1"},
                )
            release = self._admit()
            call.turn.approvals = self.runtime.approvals
            call.turn.chat_id = f"api:{wire.encoder.response_id}"
            call.turn.unanswered_ends = True  # its client is gone once the request is asked
            held = self.held.run(self.runtime.agent, call.turn, call)
            leg = held.leg(wire.encoder.response_id)
            return self._exchange(call.turn, wire, stream=call.stream, source=leg, release=release)
        return self._exchange(call.turn, wire, stream=call.stream)

    async def _first_view(self, call: ResponsesCall, past: list[Json] | None) -> ToolView | None:
        """How a new request's tool runs show; None where the agent's tools are off."""
        if not call.turn.agent_tools or call.turn.client_tools:
            return None
        seen = listed_before(self.responses, call.echo.get("previous_response_id"), past)
        return await self._tool_view(call.turn, seen)

    async def _tool_view(
        self,
        turn: TurnRequest,
        seen: Awaitable[set[str] | None],
        answered: ApprovalRequested | None = None,
    ) -> ToolView:
        """How this turn's tool runs show (``tool_runs``): ``seen``, the servers listed in
        the conversation already; ``answered``, the approval the request answers."""
        agent, policy = self.runtime.agent, self.runtime.approvals.policy
        offered = [n for n in agent.tools.names() if n != "terminal" or turn.allow_terminal]
        view = await tool_view(agent.tools, lambda n: policy.asks(n, turn.ask_also), offered, seen)
        return dataclasses.replace(view, answered=answered)

    async def _answer_approval(self, answer: ApprovalAnswer) -> Response:
        """The client's ``mcp_approval_response``: the held turn goes on in this response."""
        held = self.held.take(answer.approval_id)
        parked = held.parked if held is not None else None
        if held is None or parked is None or held.ended:
            return await self._not_held(answer, gone=held is not None)
        if answer.previous_response_id != parked.response_id:
            self.held.park(answer.approval_id, held)
            raise bad_request(
                f"approval request {answer.approval_id!r} belongs to response "
                f"{parked.response_id!r}: send that as 'previous_response_id'",
                param="previous_response_id",
                code="invalid_value",
            )
        # The turn gave its slots back while it waited: it takes them again before it goes on
        # (a 429 leaves it parked, for the client to answer again).
        try:
            release = self._admit()
        except ApiError:
            self.held.park(answer.approval_id, held)
            raise
        decision: Decision = "once" if answer.approve else "deny"
        held.attached = True  # before the answer: the turn's next event is this leg's
        try:
            await self.runtime.approvals.respond(answer.approval_id, decision, APPROVED_BY)
        except BaseException:
            release()
            held.attached = False
            self.held.park(answer.approval_id, held)
            raise
        echo = {**held.call.echo, "previous_response_id": answer.previous_response_id}
        call = dataclasses.replace(held.call, stream=answer.stream, echo=echo)
        inputs = [answer.item]
        view = await self._tool_view(call.turn, _nothing_seen(), parked.request)
        wire = ResponsesWire(call, self.responses, inputs, self.conversations.store, view)
        leg = held.leg(wire.encoder.response_id)
        return self._exchange(call.turn, wire, stream=call.stream, source=leg, release=release)

    async def _not_held(self, answer: ApprovalAnswer, *, gone: bool) -> Response:
        """An answer to a request no turn of this process holds (``gone``: its turn ended):
        a 400 if it was decided, the holding process's turn (``store.url``) if the response
        it names asked it, else a 404."""
        found = await self.runtime.approvals.resolution(answer.approval_id)
        if found is not None:
            raise bad_request(
                f"approval request {answer.approval_id!r} already ended: {found.decision}"
                f" by {found.by}",
                param="input",
                code="approval_decided",
            )
        if not gone and self.background.shared is not None:
            chat = await self.runtime.approvals.chat_of(answer.approval_id)
            asked_in = f"api:{answer.previous_response_id}"
            if chat == asked_in:
                return await self._answer_elsewhere(answer, asked_in, self.background.shared)
            if chat is not None and chat.startswith("api:"):
                raise bad_request(
                    f"approval request {answer.approval_id!r} belongs to response "
                    f"{chat[4:]!r}: send that as 'previous_response_id'",
                    param="previous_response_id",
                    code="invalid_value",
                )
        raise ApiError(
            404,
            f"No approval request {answer.approval_id!r} is waiting on this server.",
            param="input",
            code="approval_unknown",
        )

    async def _answer_elsewhere(
        self, answer: ApprovalAnswer, chat: str, shared: SharedRuns
    ) -> Response:
        """The turn is held by another process (``store.url``): the answer is recorded in the
        shared broker, that process goes on with the turn as a run every process can follow
        (``_answered_elsewhere``), and this response follows it, under this process's slots."""
        release = self._admit()
        try:
            decision: Decision = "once" if answer.approve else "deny"
            approvals = self.runtime.approvals
            if await approvals.respond(answer.approval_id, decision, APPROVED_BY, chat_id=chat) != (
                "decided"
            ):
                found = await approvals.resolution(answer.approval_id)
                said = f": {found.decision} by {found.by}" if found is not None else ""
                raise bad_request(
                    f"approval request {answer.approval_id!r} already ended{said}",
                    param="input",
                    code="approval_decided",
                )
            response_id = await self._continued(shared, answer.approval_id)
        except BaseException:
            release()
            raise
        if answer.stream:
            return _Following(shared, response_id, release)
        try:
            return JSONResponse(await _followed_to_the_end(shared, response_id))
        finally:
            release()

    def _continued_key(self, shared: SharedRuns, approval_id: str) -> str:
        return shared.store.tagged_key(f"approval:{approval_id}", "continued")

    async def _continued(self, shared: SharedRuns, approval_id: str) -> str:
        """The response the holding process continues the turn in, once it took the answer."""
        key = self._continued_key(shared, approval_id)
        deadline = time.monotonic() + CONTINUE_WAIT
        while time.monotonic() < deadline:
            with translated(shared.store.url):
                found = await shared.store.aio.get(key)
            if isinstance(found, str):
                return found
            await asyncio.sleep(POLL)
        raise ApiError(
            502,
            "The server holding this turn did not take the answer (it stopped?).",
            code="owner_lost",
        )

    def _answered_elsewhere(self, held: HeldTurn) -> None:
        """A parked turn of this process was answered through another one: the rest of the
        turn runs here as a shared run (``iris.state.background``) that process follows."""
        self.held.group.create_task(
            logged(self._continue_held(held), "continuing a held turn answered elsewhere")
        )

    async def _continue_held(self, held: HeldTurn) -> None:
        parked, shared = held.parked, self.background.shared
        if parked is None or shared is None:
            held.interrupt()  # nobody can follow it: it ends, as a leg's client that left
            return
        approval_id = parked.request.approval_id
        echo = {**held.call.echo, "previous_response_id": parked.response_id}
        call = dataclasses.replace(held.call, stream=True, echo=echo)
        item = {"type": "mcp_approval_response", "approval_request_id": approval_id}
        view = await self._tool_view(call.turn, _nothing_seen(), parked.request)
        wire = ResponsesWire(call, self.responses, [item], self.conversations.store, view)
        leg = held.leg(wire.encoder.response_id)
        run = BackgroundRun(
            wire.encoder.response_id,
            self.runtime.agent,
            call.turn,
            wire,
            release=lambda: None,  # the slots are the following process's
            shared=shared,
            source=leg,
        )
        try:
            lease = await shared.announce(run.id, run.snapshot(), call.history)
            self.background.launch(run, lease)
            with translated(shared.store.url):
                key = self._continued_key(shared, approval_id)
                await shared.store.aio.set(key, run.id, ex=int(KEPT_S))
        except StoreUnavailable:
            held.interrupt()
            raise

    async def _start_background(self, call: ResponsesCall, wire: ResponsesWire) -> Response:
        release = self._admit()  # a background turn holds its slots while it runs
        shared = self.background.shared
        run = BackgroundRun(
            wire.encoder.response_id,
            self.runtime.agent,
            call.turn,
            wire,
            release=release,
            shared=shared,
        )
        lease = None
        if shared is not None:
            # What a survivor stores the run with, should this process die mid-run.
            conversation = call.history if call.store else None
            try:
                # Known to every process before its client hears of it: a poll that lands
                # on another process at once finds it.
                lease = await shared.announce(run.id, run.snapshot(), conversation)
            except StoreUnavailable:
                release()
                raise
        self.background.launch(run, lease)
        if call.stream:
            return RunStream(run, after=-1)
        return JSONResponse(run.snapshot())

    async def _save_lost(self, response: Json, conversation: list[Json] | None) -> None:
        """Store a run another process left when it died, ended here as failed."""
        if conversation is not None:
            shown = shown_text(response["output"])
            await self.responses.save(response, [*conversation, *kept(None, shown)])

    async def unknown(self, request: Request) -> Response:
        raise ApiError(404, f"Iris does not serve {request.url.path}.", code="unknown_url")

    async def response_by_id(self, request: Request) -> Response:
        if request.method == "DELETE":
            return await self.delete_response(request)
        return await self.get_response(request)

    async def delete_response(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        run = self.background.get(response_id)
        if run is not None and not run.ended:
            raise bad_request(
                f"'{response_id}' is still running; cancel it first",
                param="response_id",
                code="response_in_progress",
            )
        if not await self.responses.delete(response_id):
            raise ApiError(
                404, f"No response found with id '{response_id}'.", code="response_not_found"
            )
        return JSONResponse({"id": response_id, "object": "response", "deleted": True})

    async def input_items(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        items = await self.responses.input_items(response_id)
        if items is None:
            raise ApiError(
                404, f"No response found with id '{response_id}'.", code="response_not_found"
            )
        return JSONResponse(page(items, request.query_params))

    async def get_response(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        run = self.background.get(response_id)
        shared = self.background.shared
        # A run another process runs (``store.url``): its state as it shared it.
        elsewhere = None
        if run is None and shared is not None:
            elsewhere = await shared.state(response_id)
        if request.query_params.get("stream", "false").lower() == "true":
            after = _starting_after(request.query_params.get("starting_after"))
            if shared is not None and elsewhere is not None:
                return RemoteRunStream(shared, response_id, after)
            if run is None:
                await self._stored(response_id)  # 404 when there is no such response at all
                raise bad_request(
                    "only a background response can be streamed, and only while its events "
                    f"are kept (platforms.api_server.background_ttl); '{response_id}' has none",
                    param="stream",
                    code="stream_not_available",
                )
            return RunStream(run, after=after)
        if run is not None:
            return JSONResponse(run.snapshot())
        if elsewhere is not None:
            return JSONResponse(elsewhere[0])
        return JSONResponse(await self._stored(response_id))

    async def cancel_response(self, request: Request) -> Response:
        response_id = request.path_params["response_id"]
        run = self.background.get(response_id)
        if run is not None:
            await run.stop("cancelled", "cancelled")  # a run that ended stays as it ended
            return JSONResponse(run.snapshot())
        shared = self.background.shared
        if shared is not None:
            # Another process runs it: asked there, waited for here.
            snapshot = await shared.cancel(response_id, within=BackgroundRun.stop_wait + 1)
            if snapshot is not None:
                return JSONResponse(snapshot)
        found = await self._stored(response_id)
        if not found.get("background"):
            raise bad_request(
                "only a background response can be cancelled",
                param="response_id",
                code="not_cancellable",
            )
        return JSONResponse(found)

    async def _stored(self, response_id: str) -> Json:
        found = await self.responses.response(response_id)
        if found is None:
            raise ApiError(
                404, f"No response found with id '{response_id}'.", code="response_not_found"
            )
        return found

    def _admit(self) -> Callable[[], None]:
        """Take an API slot and a server turn slot, or refuse with a 429; returns the release."""
        limit = self.settings.max_concurrent
        if self._active >= limit:
            raise ApiError(
                429,
                f"Too many concurrent requests: this server runs at most {limit} at once.",
                code="too_many_concurrent_requests",
                headers={"retry-after": "1"},
            )
        slot = self.runtime.turns.acquire()
        if slot is None:
            raise ApiError(
                429,
                f"The server is busy: {self.runtime.turns.limit} turns are running "
                "(server.max_turns). Try again shortly.",
                code="too_many_turns",
                headers={"retry-after": "1"},
            )
        self._active += 1

        def release() -> None:
            self._active -= 1
            slot.release()

        return release

    def _exchange(
        self,
        request: TurnRequest,
        wire: Wire,
        *,
        stream: bool,
        source: AbstractAsyncContextManager[Running] | None = None,
        release: Callable[[], None] | None = None,
    ) -> Response:
        """The exchange of one turn (or one leg of a held one) under its slots: ``release``
        when taken already, else taken here (or a 429)."""
        release = release or self._admit()
        return TurnExchange(
            self.runtime.agent,
            request,
            wire,
            stream=stream,
            live=self.exchanges,
            release=release,
            source=source,
        )


CONTINUE_WAIT = 10.0  # seconds the holding process has to take an answer given here
POLL = 0.05
KEPT_S = 600.0  # seconds the response a held turn goes on in is findable by its request


class _Following(RemoteRunStream):
    """The rest of a held turn another process runs, followed under this process's slots."""

    def __init__(self, runs: SharedRuns, response_id: str, release: Callable[[], None]) -> None:
        super().__init__(runs, response_id, -1)
        self._free = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._free()


async def _followed_to_the_end(runs: SharedRuns, response_id: str) -> dict[str, Any]:
    """The response another process runs, once it ended (for a request without ``stream``)."""
    cursor = "0-0"
    while True:
        entries, ended = await runs.read(response_id, cursor, block=TurnExchange.heartbeat)
        if entries:
            cursor = entries[-1][0]
        if ended or (not entries and await runs.state(response_id) is None):
            break
    state = await runs.state(response_id)
    if state is None:
        raise ApiError(502, "The server running this response stopped.", code="owner_lost")
    return state[0]
