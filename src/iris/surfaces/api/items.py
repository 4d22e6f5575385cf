"""Responses-format items as they are kept and listed: a response's input items and a
conversation's items. Pure.

``input_items`` turns a request's ``input`` into the items OpenAI lists for it: a string is one
user message, message content becomes ``input_text`` / ``output_text`` parts, an
``item_reference`` is the item it names, and every item gets an id (``msg_…``, ``fc_…``,
``fco_…``) when it came without one. ``page`` cuts a list as OpenAI pages its lists
(``after`` an item id, ``limit`` 1–100, ``order`` ``asc`` or ``desc``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from iris.state.item_lists import Order
from iris.surfaces.api.problems import ApiError, bad_request

Json = dict[str, Any]

_PREFIX = {"message": "msg", "function_call": "fc", "function_call_output": "fco"}
# What a conversation's items may hold and the model reads back (reasoning is kept, not read).
HISTORY_TYPES = frozenset({"message", "function_call", "function_call_output", "reasoning"})


def new_id(kind: str) -> str:
    return f"{_PREFIX.get(kind, 'item')}_{uuid.uuid4().hex}"


def input_items(raw: Any, found: Mapping[str, Json]) -> list[Json]:
    """``input`` (already validated by ``bodies.input_messages``) as stored items."""
    if isinstance(raw, str):
        raw = [{"type": "message", "role": "user", "content": raw}]
    items: list[Json] = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        kind = entry.get("type")
        if kind == "item_reference" or (kind is None and "role" not in entry and "id" in entry):
            referenced = found.get(str(entry.get("id")))
            if referenced is not None:
                items.append(dict(referenced))
            continue
        items.append(stored_item(entry))
    return items


def stored_item(entry: Json) -> Json:
    """One input item as kept: typed, with an id and a status, message content as parts."""
    item = dict(entry)
    kind = item.setdefault("type", "message")
    if not isinstance(item.get("id"), str) or not item["id"]:
        item["id"] = new_id(str(kind))
    if kind == "message":
        part = "output_text" if item.get("role") == "assistant" else "input_text"
        content = item.get("content")
        if isinstance(content, str):
            item["content"] = [{"type": part, "text": content}]
        item.setdefault("status", "completed")
    elif kind in ("function_call", "function_call_output"):
        item.setdefault("status", "completed")
    return item


def page_query(
    query: Mapping[str, str], *, default_order: str = "desc"
) -> tuple[Order, int, str | None]:
    """(``order``, ``limit``, ``after``) of a list request, each checked (a 400 names it)."""
    order = query.get("order", default_order)
    if order not in ("asc", "desc"):
        raise bad_request("'order' must be 'asc' or 'desc'", param="order", code="invalid_value")
    raw_limit = query.get("limit", "20")
    if not (raw_limit.isascii() and raw_limit.isdigit() and 1 <= int(raw_limit) <= 100):
        raise bad_request(
            "'limit' must be an integer from 1 to 100", param="limit", code="invalid_value"
        )
    return order, int(raw_limit), query.get("after") or None


def after_not_found(after: str) -> ApiError:
    return ApiError(
        404, f"No item with id '{after}' in this list.", param="after", code="item_not_found"
    )


def list_object(data: list[Json], has_more: bool) -> Json:
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }


def page(items: list[Json], query: Mapping[str, str], *, default_order: str = "desc") -> Json:
    """A list object of ``items`` (oldest first) as the query asks: ``after``, ``limit``,
    ``order``."""
    order, limit, after = page_query(query, default_order=default_order)
    ordered = items if order == "asc" else items[::-1]
    if after:
        at = next((i for i, item in enumerate(ordered) if item.get("id") == after), None)
        if at is None:
            raise after_not_found(after)
        ordered = ordered[at + 1 :]
    return list_object(ordered[:limit], len(ordered) > limit)


def history_items(items: list[Json]) -> list[Json]:
    """The items a model reads back as history (types the input parser takes)."""
    return [item for item in items if item.get("type", "message") in HISTORY_TYPES]
