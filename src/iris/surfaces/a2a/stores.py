"""The ``a2a-sdk``'s task and push config stores over ``iris.state.a2a_tasks`` (SQLite or Redis).

The SDK hands its protobuf types; the state module keeps their JSON text. Every caller the A2A
server admits holds the one key the operator gave, so tasks are not partitioned by owner: a
task any admitted client started can be read, cancelled or followed by another, on any
process.
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskPushNotificationConfig
from google.protobuf.json_format import MessageToJson, Parse

from iris.state.a2a_tasks import A2aTasks

LISTED = 1000  # tasks a tasks/list looks through (the newest)


class StoredTasks(TaskStore):
    def __init__(self, tasks: A2aTasks) -> None:
        self._tasks = tasks

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._tasks.save(task.id, task.context_id, MessageToJson(task))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        found = await self._tasks.get(task_id)
        return None if found is None else Parse(found, Task())

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self._tasks.delete(task_id)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        # The SDK's own filters, pages and order over the newest tasks (one code path for both
        # stores, and the same answers as the SDK's reference store).
        page = InMemoryTaskStore()
        for text in await self._tasks.recent(params.context_id or None, LISTED):
            await page.save(Parse(text, Task()), context)
        return await page.list(params, context)


class StoredPushConfigs(PushNotificationConfigStore):
    def __init__(self, tasks: A2aTasks) -> None:
        self._tasks = tasks

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        stored = normalize_push_notification_config(task_id, notification_config)
        await self._tasks.set_push(task_id, stored.id, MessageToJson(stored))
        return stored

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return await self.get_info_for_dispatch(task_id)

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        found = await self._tasks.pushes(task_id)
        return [Parse(text, TaskPushNotificationConfig()) for text in found.values()]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self._tasks.drop_push(task_id, config_id)
