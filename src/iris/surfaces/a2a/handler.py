"""The ``a2a-sdk``'s request handler, with ``tasks/resubscribe`` on any process.

The SDK re-attaches a stream to the event queue of the process that runs the task. A task
another process runs (a shared store: its stream dropped and the client came back elsewhere)
is followed here from its chat's shared frame log instead (``IrisExecutor.watch``); what this
process streams is not written to the task store, whose writer stays the task's owner.

``tasks/cancel`` of a task another process runs: the SDK only writes ``canceled`` to the store,
for the owner to notice through a versioned store (ours is not); here the turn is stopped too,
through the chat's turn owners' inbox, and the owner ends the task ``canceled``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventConsumer, EventQueueLegacy
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.types.a2a_pb2 import CancelTaskRequest, SubscribeToTaskRequest, Task
from a2a.utils.errors import TaskNotFoundError

from iris.surfaces.a2a.executor import IrisExecutor


class IrisRequestHandler(DefaultRequestHandler):
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        if await _runs_here(self, params.id):
            async for event in super().on_subscribe_to_task(params, context):
                yield event
            return
        task = await self.task_store.get(params.id, context)
        executor = self.agent_executor
        if not isinstance(task, Task) or not isinstance(executor, IrisExecutor):
            raise TaskNotFoundError
        if task.status.state in _ENDED or not executor.follows(task):
            # Ended, or nothing runs it: the SDK's answers (terminal state, not found).
            async for event in super().on_subscribe_to_task(params, context):
                yield event
            return
        yield task
        async for event in _watched(executor, task):
            yield event

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        if not await _runs_here(self, params.id):
            task = await self.task_store.get(params.id, context)
            executor = self.agent_executor
            if (
                isinstance(task, Task)
                and isinstance(executor, IrisExecutor)
                and task.status.state not in _ENDED
            ):
                executor.interrupt(task)  # then the SDK stores it canceled and answers
        return await super().on_cancel_task(params, context)


async def _runs_here(handler: DefaultRequestHandler, task_id: str) -> bool:
    """Does this process hold the task (the SDK's registry of active tasks, kept private)?"""
    registry = getattr(handler, "_active_task_registry", None)
    if registry is None:
        return False
    return await registry.get(task_id) is not None


async def _watched(executor: IrisExecutor, task: Task) -> AsyncGenerator[Event, None]:
    queue = EventQueueLegacy()

    async def produce() -> None:
        try:
            await executor.watch(task, queue)
        finally:
            await queue.close()

    producer = asyncio.create_task(produce())
    consumer = EventConsumer(queue)
    producer.add_done_callback(consumer.agent_task_callback)
    try:
        async for event in consumer.consume_all():
            yield event
    finally:
        producer.cancel()
        await asyncio.wait([producer])


def _ended_states() -> frozenset[int]:
    from a2a.server.request_handlers.default_request_handler import TERMINAL_TASK_STATES

    return frozenset(TERMINAL_TASK_STATES)


_ENDED = _ended_states()
