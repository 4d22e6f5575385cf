"""What every surface of a running server shares: config, the agent, the store, sessions.

``Runtime.create`` is the one place that picks where stored data lives: the SQLite file, or
with ``store.url`` the Redis every process shares (sessions, stored responses, devices, the
chats' controls, the webhook deliveries taken).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.routing import BaseRoute

from iris.agent import Agent
from iris.agent.approvals import ApprovalPolicy
from iris.agent.elicitation import Elicitations
from iris.auth_throttle import AuthThrottle
from iris.config import Config
from iris.events import ApprovalRequested, ApprovalResolved
from iris.state.approvals import Approvals, approvals_for
from iris.state.controls import ChatControls, MemoryControls, controls_for
from iris.state.deliveries import Deliveries, MemoryDeliveries, deliveries_for
from iris.state.devices import Devices, devices_for
from iris.state.elicitations import shared_elicitations_for
from iris.state.fingerprint import shared_store
from iris.state.item_lists import ItemLists, item_lists_for
from iris.state.push import PushSubscriptions, push_subscriptions_for
from iris.state.redis_store import RedisStore
from iris.state.responses import Responses, responses_for
from iris.state.schedules import Schedules, schedules_for
from iris.state.sessions import Sessions, sessions_for
from iris.state.sqlite import Store
from iris.state.threads import Threads, threads_for
from iris.turn_slots import TurnLimiter


def _nothing() -> None:
    pass


class House(Protocol):
    """What a voice turn needs of Home Assistant once its spoken reply has ended."""

    async def announce(self, text: str) -> None:
        """Say ``text`` to the house: on the configured satellite, else as a notification."""
        ...

    async def handle_intent(self, name: str, data: dict[str, Any]) -> dict[str, Any]:
        """Carry out one of Assist's intents (``HassTurnOn``...) with its slots; Home
        Assistant's intent response. Raises ``HouseError`` when it was not carried out."""
        ...


class HouseError(Exception):
    """Home Assistant did not carry out what was asked (its answer, or no answer)."""


ShowApproval = Callable[[str, ApprovalRequested | ApprovalResolved], None]


@dataclass
class Runtime:
    config: Config
    agent: Agent
    store: Store
    sessions: Sessions
    responses: Responses
    devices: Devices
    # The store every process shares (``store.url``); None: this process keeps its state alone.
    shared: RedisStore | None = None
    # What each chat's commands set (``/model``, ``/reasoning``) and its last reply's usage.
    controls: ChatControls = field(default_factory=MemoryControls)
    # The Conversations API's item lists (``/v1/conversations``): SQLite, or Redis with ``store.url``.
    item_lists: ItemLists | None = None
    # Chat threads the bot answered in (a follow-up needs no mention): SQLite or Redis.
    threads: Threads | None = None
    # Webhook deliveries taken already (a platform's redelivery is answered once).
    deliveries: Deliveries = field(default_factory=MemoryDeliveries)
    # Scheduled runs (``/remind``, ``/every``): SQLite, or Redis with ``store.url``.
    schedules: Schedules | None = None
    # The web app's Web Push subscriptions (``push.subscribe``): SQLite or Redis.
    push: PushSubscriptions | None = None
    # Called when a schedule was added or moved: the scheduler looks again at once.
    schedule_added: Callable[[], None] = _nothing
    # Running turns across every surface (``server.max_turns``); each surface takes a slot.
    turns: TurnLimiter = field(init=False)
    # Failed authentications per client address, every surface (``iris.auth_throttle``).
    guard: AuthThrottle = field(default_factory=AuthThrottle)
    # Tool calls waiting for a person's yes (``tools.approval``), shared through ``shared``.
    approvals: Approvals = field(init=False)
    # MCP servers' requests for the person's input (``iris.agent.elicitation``), shared through
    # ``shared`` so that an answer reaching another process is taken.
    elicitations: Elicitations = field(init=False)
    # Home Assistant for the voice turns that outlive their spoken reply (the platform sets
    # it once connected): where their answer is announced and their Assist tools carried out.
    house: House | None = None
    # Shows an approval asked outside an iris chat's own turns (a voice turn's) on that chat's
    # devices, then its end (the iris socket sets it; None: no device can be asked).
    show_approval: ShowApproval | None = None

    def __post_init__(self) -> None:
        self.elicitations = Elicitations(
            self.config.tools.approval.timeout, shared=shared_elicitations_for(self.shared)
        )
        self.turns = TurnLimiter(self.config.server.max_turns)
        policy = ApprovalPolicy.configured(self.config.tools.approval, self.config.mcp_servers)
        self.approvals = approvals_for(policy, self.shared)

    @classmethod
    def create(
        cls, config: Config, agent: Agent | None = None, store: Store | None = None
    ) -> Runtime:
        store = store or Store(config.store.resolved_path(), busy_timeout=config.store.busy_timeout)
        shared = shared_store(config)
        return cls(
            config=config,
            agent=agent or Agent(config),
            store=store,
            sessions=sessions_for(store, shared),
            responses=responses_for(store, shared),
            devices=devices_for(store, shared),
            shared=shared,
            controls=controls_for(shared),
            item_lists=item_lists_for(store, shared),
            threads=threads_for(store, shared),
            deliveries=deliveries_for(store, shared),
            schedules=schedules_for(store, shared),
            push=push_subscriptions_for(store, shared),
        )


class ServerSurface(Protocol):
    """A part of ``iris serve``: contributes routes and owns background work.

    ``start`` runs in the server's lifespan before it accepts connections; ``stop`` runs on
    shutdown and must finish or cancel in-flight turns and close connections."""

    def routes(self) -> list[BaseRoute]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
