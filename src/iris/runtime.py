"""What every surface of a running server shares: config, the agent, the store, sessions.

``Runtime.create`` is the one place that picks where stored data lives: the SQLite file, or
with ``store.url`` the Redis every process shares (sessions, stored responses, devices, the
chats' controls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from starlette.routing import BaseRoute

from iris.agent import Agent
from iris.agent.approvals import ApprovalPolicy, Approvals
from iris.agent.sessions import Sessions, SessionStore
from iris.config import Config
from iris.controls import ControlsStore, MemoryControls
from iris.devices import Devices
from iris.guard import AuthThrottle
from iris.limits import TurnLimiter
from iris.redis.connection import RedisStore, shared_store
from iris.redis.controls import RedisControls
from iris.redis.devices import device_store
from iris.redis.responses import RedisResponsesStore
from iris.redis.sessions import RedisSessionStore
from iris.store import Store
from iris.surfaces.api.conversations_store import StoredConversations, conversation_store
from iris.surfaces.api.responses_store import ResponsesStore, StoredResponses


@dataclass
class Runtime:
    config: Config
    agent: Agent
    store: Store
    sessions: Sessions
    responses: StoredResponses
    devices: Devices
    # The store every process shares (``store.url``); None: this process keeps its state alone.
    shared: RedisStore | None = None
    # What each chat's commands set (``/model``, ``/reasoning``) and its last reply's usage.
    controls: ControlsStore = field(default_factory=MemoryControls)
    # Stored conversations (``/v1/conversations``): SQLite, or Redis with ``store.url``.
    conversations: StoredConversations | None = None
    # Running turns across every surface (``server.max_turns``); each surface takes a slot.
    turns: TurnLimiter = field(init=False)
    # Failed authentications per client address, every surface (``iris.guard``).
    guard: AuthThrottle = field(default_factory=AuthThrottle)
    # Tool calls waiting for a person's yes (``tools.approval``), shared through ``shared``.
    approvals: Approvals = field(init=False)

    def __post_init__(self) -> None:
        self.turns = TurnLimiter(self.config.server.max_turns)
        policy = ApprovalPolicy.configured(self.config.tools.approval)
        self.approvals = Approvals(policy, self.shared)

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
            sessions=SessionStore(store) if shared is None else RedisSessionStore(shared),
            responses=ResponsesStore(store) if shared is None else RedisResponsesStore(shared),
            devices=device_store(store, shared),
            shared=shared,
            controls=MemoryControls() if shared is None else RedisControls(shared),
            conversations=conversation_store(store, shared),
        )


class ServerSurface(Protocol):
    """A part of ``iris serve``: contributes routes and owns background work.

    ``start`` runs in the server's lifespan before it accepts connections; ``stop`` runs on
    shutdown and must finish or cancel in-flight turns and close connections."""

    def routes(self) -> list[BaseRoute]: ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...
