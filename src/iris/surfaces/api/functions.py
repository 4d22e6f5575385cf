"""Legacy function calling on Chat Completions, mapped as OpenAI maps it onto tools. Pure.

Before ``tools`` the API had ``functions`` (a list of function specs) and ``function_call``
(``"none"``, ``"auto"`` or ``{"name"}``); an assistant message carried one ``function_call``
``{name, arguments}`` (``content`` may be null) and its result came back as a
``role: "function"`` message with the function's ``name``. Clients still send them (older
LangChain, LlamaIndex, Open WebUI pipes). A request in that shape becomes:

- ``functions`` → ``tools`` (``{"type": "function", "function": spec}``); both at once is a 400;
- ``function_call`` → ``tool_choice`` (a name becomes ``{"type": "function", ...}``); both at
  once is a 400;
- an assistant ``function_call`` → one ``tool_calls`` entry with a made-up id, and the next
  ``role: "function"`` message of that name → a ``role: "tool"`` message answering that id.

The answer then comes back in the legacy shape too: ``message.function_call`` and
``finish_reason: "function_call"`` (streamed: ``delta.function_call``), one call at most, as
the legacy API returned (see ``ChatEncoder``'s ``legacy``).
"""

from __future__ import annotations

from typing import Any

from iris.surfaces.api.problems import bad_request

Json = dict[str, Any]


def legacy_request(body: Json) -> tuple[Json, bool]:
    """``body`` with ``functions`` / ``function_call`` rewritten as ``tools`` /
    ``tool_choice``, and whether it used legacy functions (the answer's shape)."""
    functions, choice = body.get("functions"), body.get("function_call")
    if functions is None and choice is None:
        return body, False
    rewritten = {k: v for k, v in body.items() if k not in ("functions", "function_call")}
    if functions is not None:
        _alone(body, "functions", "tools")
        rewritten["tools"] = _tools(functions)
    if choice is not None:
        _alone(body, "function_call", "tool_choice")
        if functions is None:
            raise bad_request(
                "'function_call' needs 'functions': it applies to the functions the request sends",
                param="function_call",
            )
        rewritten["tool_choice"] = _choice(choice)
    return rewritten, functions is not None


def _alone(body: Json, legacy: str, current: str) -> None:
    """The legacy field ``legacy`` was sent: refuse ``current`` beside it."""
    if body.get(current) is not None:
        raise bad_request(
            f"send '{current}' or the legacy '{legacy}', not both",
            param=legacy,
            code="invalid_value",
        )


def _tools(raw: Any) -> list[Json]:
    if not isinstance(raw, list):
        raise bad_request("'functions' must be an array", param="functions", code="invalid_type")
    tools: list[Json] = []
    for i, spec in enumerate(raw):
        if not isinstance(spec, dict):
            raise bad_request(f"'functions[{i}]' must be an object", param=f"functions[{i}]")
        tools.append({"type": "function", "function": spec})
    return tools


def _choice(raw: Any) -> Any:
    if raw in ("none", "auto"):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("name"), str) and raw["name"]:
        return {"type": "function", "function": {"name": raw["name"]}}
    raise bad_request(
        "'function_call' must be 'none', 'auto' or {\"name\": ...}",
        param="function_call",
        code="invalid_value",
    )


def legacy_call(raw: Any, where: str, call_id: str) -> Json:
    """An assistant message's ``function_call`` as a chat-format tool call named ``call_id``."""
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise bad_request(f"'{where}.function_call' needs a name", param=f"{where}.function_call")
    arguments = raw.get("arguments")
    args = arguments if isinstance(arguments, str) else ""
    return {"id": call_id, "type": "function", "function": {"name": raw["name"], "arguments": args}}


def answer_function_results(messages: list[Json], names: dict[int, str]) -> None:
    """Give each ``role: "function"`` message (index → its function's name in ``names``) the
    id of the latest assistant call of that name before it, as a ``role: "tool"`` message."""
    latest: dict[str, str] = {}
    for index, message in enumerate(messages):
        for call in message.get("tool_calls") or ():
            latest[call["function"]["name"]] = call["id"]
        if index in names:
            name = names[index]
            if name not in latest:
                raise bad_request(
                    f"'messages[{index}]' is the result of function '{name}', which no earlier "
                    "assistant message called",
                    param=f"messages[{index}]",
                    code="invalid_value",
                )
            message["role"] = "tool"
            message["tool_call_id"] = latest.pop(name)
            message.pop("name", None)
