"""The Conversations API: conversations whose items ``/v1/responses`` reads and extends.

    POST   /v1/conversations                      create (optional ``items``, ``metadata``)
    GET    /v1/conversations/{id}                 the conversation
    POST   /v1/conversations/{id}                 update its ``metadata``
    DELETE /v1/conversations/{id}                 delete it and its items
    GET    /v1/conversations/{id}/items           its items, paged (``after``, ``limit``,
                                                  ``order``: newest first by default)
    POST   /v1/conversations/{id}/items           add ``items`` at the end
    GET    /v1/conversations/{id}/items/{item_id} one item
    DELETE /v1/conversations/{id}/items/{item_id} delete one item; answers the conversation

Items are validated as ``/v1/responses`` input items are (a bad one is a 400 naming it) and
kept in the Responses format with an id each. A response created with ``conversation`` reads
the conversation's items as the model's history, and its input and output items are appended
when it ends (see ``wires.ResponsesWire``).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from iris.state.item_lists import ItemLists
from iris.surfaces.api.bodies import input_messages
from iris.surfaces.api.items import after_not_found, list_object, page_query, stored_item
from iris.surfaces.api.problems import ApiError, bad_request

Json = dict[str, Any]

MAX_ITEMS = 20  # items one create or add request may carry, as on OpenAI
_METADATA_KEYS = 16


class ConversationRoutes:
    def __init__(self, store: ItemLists, max_bytes: int) -> None:
        self.store = store
        # The most bytes a conversation's items may take (``max_conversation_bytes``): one
        # grew to 152 MB in 40 appends, and every turn on it read all of it.
        self.max_bytes = max_bytes

    async def create(self, request: Request, body: object) -> Response:
        data = _object(body)
        _only(data, {"items", "metadata"})
        items = _items(data.get("items"), required=False)
        self._check_room(0, items)
        conversation: Json = {
            "id": f"conv_{uuid.uuid4().hex}",
            "object": "conversation",
            "created_at": int(time.time()),
            "metadata": _metadata(data.get("metadata")),
        }
        await self.store.create(conversation, items)
        return JSONResponse(conversation)

    async def by_id(self, request: Request, body: object | None) -> Response:
        conversation_id = request.path_params["conversation_id"]
        if request.method == "DELETE":
            if not await self.store.delete(conversation_id):
                raise not_found(conversation_id)
            return JSONResponse(
                {"id": conversation_id, "object": "conversation.deleted", "deleted": True}
            )
        conversation = await self.get(conversation_id)
        if request.method == "POST":
            data = _object(body)
            _only(data, {"metadata"})
            if "metadata" not in data:
                raise bad_request(
                    "'metadata' is required", param="metadata", code="missing_required_parameter"
                )
            conversation = {**conversation, "metadata": _metadata(data["metadata"])}
            await self.store.update(conversation)
        return JSONResponse(conversation)

    async def items(self, request: Request, body: object | None) -> Response:
        conversation_id = request.path_params["conversation_id"]
        if request.method == "POST":
            data = _object(body)
            _only(data, {"items"})
            added = _items(data.get("items"), required=True)
            size = await self.store.size(conversation_id)
            if size is None:
                raise not_found(conversation_id)
            self._check_room(size, added)
            if not await self.store.append(conversation_id, added):
                raise not_found(conversation_id)
            return JSONResponse(list_object(added, False))
        order, limit, after = page_query(request.query_params)
        # Only the page asked for is read: a long conversation is never loaded whole here.
        found = await self.store.page(conversation_id, after=after, limit=limit, order=order)
        if found is None:
            raise not_found(conversation_id)
        if after is not None and not found.after_found:
            raise after_not_found(after)
        return JSONResponse(list_object(found.items, found.has_more))

    async def check_room(self, conversation_id: str) -> None:
        """A 400 when a conversation a response would extend is at its size cap already."""
        size = await self.store.size(conversation_id)
        if size is not None and size >= self.max_bytes:
            raise too_large(conversation_id, self.max_bytes)

    def _check_room(self, size: int, added: list[Json]) -> None:
        if size + sum(len(json.dumps(item).encode()) for item in added) > self.max_bytes:
            raise too_large("", self.max_bytes)

    async def item(self, request: Request, body: object | None) -> Response:
        conversation_id = request.path_params["conversation_id"]
        item_id = request.path_params["item_id"]
        found = await self.store.item(conversation_id, item_id)
        if found is None:
            await self.get(conversation_id)  # a 404 for the conversation when it is missing
            raise ApiError(
                404,
                f"No item with id '{item_id}' in conversation '{conversation_id}'.",
                code="item_not_found",
            )
        if request.method == "DELETE":
            await self.store.delete_item(conversation_id, item_id)
            return JSONResponse(await self.get(conversation_id))
        return JSONResponse(found)

    async def get(self, conversation_id: str) -> Json:
        conversation = await self.store.get(conversation_id)
        if conversation is None:
            raise not_found(conversation_id)
        return conversation


def too_large(conversation_id: str, max_bytes: int) -> ApiError:
    which = f"Conversation '{conversation_id}'" if conversation_id else "The conversation"
    return ApiError(
        400,
        f"{which} would hold more than {max_bytes} bytes of items "
        "(platforms.api_server.max_conversation_bytes); start a new one.",
        param="conversation",
        code="conversation_too_large",
    )


def not_found(conversation_id: str) -> ApiError:
    return ApiError(
        404,
        f"Conversation with id '{conversation_id}' not found.",
        param="conversation",
        code="conversation_not_found",
    )


def _object(body: object) -> Json:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body  # type: ignore[return-value]


def _only(data: Json, allowed: set[str]) -> None:
    for key, value in data.items():
        if value is not None and key not in allowed:
            raise bad_request(
                f"'{key}' is not supported here", param=key, code="unsupported_parameter"
            )


def _items(raw: Any, *, required: bool) -> list[Json]:
    if raw is None and not required:
        return []
    if not isinstance(raw, list) or (required and not raw):
        raise bad_request("'items' must be a non-empty array of items", param="items")
    if len(raw) > MAX_ITEMS:  # pyright: ignore[reportUnknownArgumentType]
        raise bad_request(
            f"'items' has more than {MAX_ITEMS} items", param="items", code="too_many_items"
        )
    if raw:
        try:
            input_messages(raw)  # the same checks as /v1/responses input items
        except ApiError as error:
            raise ApiError(
                error.status, error.message, param=_renamed(error.param), code=error.code
            ) from None
    return [stored_item(item) for item in raw]  # pyright: ignore[reportUnknownVariableType]


def _renamed(param: str | None) -> str | None:
    return None if param is None else param.replace("input", "items", 1)


def _metadata(raw: Any) -> Json:
    if raw is None:
        return {}
    if (
        not isinstance(raw, dict)
        or len(raw) > _METADATA_KEYS  # pyright: ignore[reportUnknownArgumentType]
        or not all(isinstance(v, str) for v in raw.values())  # pyright: ignore[reportUnknownVariableType]
    ):
        raise bad_request(
            f"'metadata' must be an object of at most {_METADATA_KEYS} string values",
            param="metadata",
            code="invalid_value",
        )
    return dict(raw)  # pyright: ignore[reportUnknownArgumentType]
