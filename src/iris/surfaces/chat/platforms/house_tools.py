"""The agent's house tools: Home Assistant's states and services, over the platform's connection.

Offered once the Home Assistant platform is connected and ``platforms.homeassistant.expose``
lists something (entity ids or globs such as ``light.*``, or bare domains such as ``cover``);
nothing outside it can be read or acted on:

- ``ha_states`` (``entity_id``: an id or glob, optional): the exposed entities' states, read
  by ``get_states``; it never asks;
- ``ha_call_service`` (``domain``, ``service``, ``entity_id``: one id or a list, ``data``): a
  ``call_service`` with the entities as its ``target``. It acts on the house, so it asks as
  ``tools.approval`` says (asked by default, like ``terminal``); the person approving reads the
  service, the targets and the data. A call without a target, with a target not exposed, or
  with a service of another domain than its targets' (``homeassistant.*`` acts on any) is
  refused before anything is sent.

Why these rather than Home Assistant's MCP Server integration: the connection is the platform's
already (one token, one socket, the reconnects handled), and ``expose`` is Iris's own list, so
what the agent may touch does not depend on what Home Assistant exposes to every assistant.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from iris.agent.tools import Progress, Tool, ToolFn, ToolResult, cap
from iris.surfaces.chat.platforms.base import PlatformError
from iris.surfaces.chat.platforms.house_changes import matches

if TYPE_CHECKING:
    from iris.surfaces.chat.platforms.homeassistant import HomeAssistantPlatform

STATES = "ha_states"
CALL = "ha_call_service"
_MOST = 32_000  # characters of states handed to the model


def exposed(entity_id: str, expose: Sequence[str]) -> bool:
    """Is the entity in ``expose``: named by an id or glob, or by its bare domain?"""
    domain = entity_id.partition(".")[0]
    return any(matches(entity_id, [entry]) if "." in entry else entry == domain for entry in expose)


def house_tools(platform: HomeAssistantPlatform) -> list[Tool]:
    expose = platform.settings.expose
    if not expose:
        return []
    where = f"in Home Assistant at {platform.settings.url}"
    return [
        Tool(STATES, _STATES_DOC, _STATES_SCHEMA, _states(platform, expose)),
        Tool(CALL, _CALL_DOC, _CALL_SCHEMA, _call(platform, expose), where=lambda _: where),
    ]


_STATES_DOC = (
    "Read the current state of the house's devices in Home Assistant (lights, sensors, locks, "
    "covers...). Returns entity ids with their state and attributes."
)
_STATES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entity_id": {
            "type": "string",
            "description": "an entity id or a glob such as 'light.*'; omit it for all",
        }
    },
}
_CALL_DOC = (
    "Act on the house through a Home Assistant service, e.g. domain 'light', service "
    "'turn_on', entity_id 'light.kitchen', data {'brightness_pct': 50}."
)
_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "domain": {"type": "string", "description": "the service's domain, e.g. light"},
        "service": {"type": "string", "description": "the service, e.g. turn_on"},
        "entity_id": {
            "description": "the target entity id, or a list of them",
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
        },
        "data": {"type": "object", "description": "the service's data (optional)"},
    },
    "required": ["domain", "service", "entity_id"],
}


def _states(platform: HomeAssistantPlatform, expose: Sequence[str]) -> ToolFn:
    async def run(args: dict[str, Any], progress: Progress) -> ToolResult:
        pattern = str(args.get("entity_id") or "*")
        try:
            states = await platform.command({"type": "get_states"})
        except PlatformError as exc:
            return ToolResult(False, f"cannot read the states: {exc}")
        found = [
            {k: s.get(k) for k in ("entity_id", "state", "attributes")}
            for s in cast(list[dict[str, Any]], states if isinstance(states, list) else [])
            if exposed(str(s.get("entity_id")), expose)
            and matches(str(s.get("entity_id")), [pattern])
        ]
        if not found:
            return ToolResult(True, f"no exposed entity matches {pattern!r}")
        return ToolResult(True, cap(json.dumps(found, ensure_ascii=False), _MOST))

    return run


def _call(platform: HomeAssistantPlatform, expose: Sequence[str]) -> ToolFn:
    async def run(args: dict[str, Any], progress: Progress) -> ToolResult:
        domain, service = str(args["domain"]), str(args["service"])
        targets = _targets(args.get("entity_id"))
        refusal = _refusal(domain, targets, expose)
        if refusal is not None:
            return ToolResult(False, refusal)
        data = args.get("data")
        command: dict[str, Any] = {
            "type": "call_service",
            "domain": domain,
            "service": service,
            "target": {"entity_id": targets},
        }
        if isinstance(data, dict) and data:
            command["service_data"] = data
        try:
            await platform.command(command)
        except PlatformError as exc:
            return ToolResult(False, f"{domain}.{service} failed: {exc}")
        return ToolResult(True, f"{domain}.{service} done for {', '.join(targets)}")

    return run


def _targets(value: object) -> list[str]:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list):
        return [str(item) for item in cast(list[object], value) if str(item)]
    return []


def _refusal(domain: str, targets: list[str], expose: Sequence[str]) -> str | None:
    if not targets:
        return "refused: name the entities to act on (entity_id); nothing was called"
    hidden = [t for t in targets if not exposed(t, expose)]
    if hidden:
        return f"refused: not exposed to Iris: {', '.join(hidden)}; nothing was called"
    foreign = [t for t in targets if domain != "homeassistant" and not t.startswith(f"{domain}.")]
    if foreign:
        return f"refused: {', '.join(foreign)} is not a {domain} entity; nothing was called"
    return None
