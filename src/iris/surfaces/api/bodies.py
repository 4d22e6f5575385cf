"""Request bodies of the API surface: validated and translated into a ``TurnRequest``.

Pure: a parsed JSON body in, plain data out, or an ``ApiError`` (400/404) that names the
offending field. Both APIs end up as chat-format messages, which is what the agent speaks:

- Chat Completions messages pass through (``developer`` becomes ``system``);
- Responses ``input`` (a string, or message / ``function_call`` / ``function_call_output``
  items with ``input_text`` / ``input_image`` parts, or ``item_reference`` items naming a stored
  response's output item) becomes the same messages, after the stored conversation of
  ``previous_response_id``.

A request that carries ``tools`` owns them: they become the turn's ``client_tools`` and the
agent's own tools stay off for that turn, so the two are never mixed. Which requests get the
agent's tools at all (the model ``iris-agent``, an API key) is ``offering``'s to say.

``stream`` absent means false, as on OpenAI (the SDKs omit it): the request alone decides the
response format, and ``streaming.api_server`` only whether the provider is streamed from while a
non-streamed answer is built. Generation parameters are read by ``params``; the per-request
caps (``max_messages``, ``max_input_chars``) are checked before any other work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from iris.agent.core import TurnRequest
from iris.config import Config
from iris.surfaces.api.fields import (
    CHAT_HANDLED,
    CHAT_IGNORED,
    RESPONSES_HANDLED,
    RESPONSES_IGNORED,
    refuse_unhandled,
)
from iris.surfaces.api.functions import answer_function_results, legacy_call, legacy_request
from iris.surfaces.api.items import history_items
from iris.surfaces.api.offering import agent_tools_for, resolve_model, voice_model
from iris.surfaces.api.params import (
    CHAT_NAMES,
    RESPONSES_NAMES,
    chat_params,
    check_honoured,
    extension_names,
    responses_echo,
    responses_params,
    typed,
    unpack_extra_body,
)
from iris.surfaces.api.problems import ApiError, bad_request
from iris.surfaces.api.voice import voice_request

Json = dict[str, Any]


@dataclass(frozen=True)
class ChatCall:
    turn: TurnRequest
    model: str
    stream: bool
    include_usage: bool
    legacy_functions: bool = False  # the request used ``functions``: answer in that shape


@dataclass(frozen=True)
class ResponsesCall:
    turn: TurnRequest
    model: str
    stream: bool
    store: bool
    echo: Json  # the request settings the response object repeats
    conversation: list[Json]  # chat-format history + this input (instructions excluded)
    background: bool = False  # run without a client (see ``background``)
    conversation_id: str | None = None  # the stored conversation the turn reads and extends


# -- shared -----------------------------------------------------------------------------


def _object(body: object) -> Json:
    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    return body  # type: ignore[return-value]


_typed = typed  # one validator for bodies and parameters


def _streams(stream: bool | None, config: Config) -> bool:
    """Whether the turn streams from the provider: always for a streamed reply; for a
    non-streamed one as ``streaming.api_server`` says."""
    return stream is True or config.streams("api_server")


def _check_count(count: int, config: Config, param: str) -> None:
    limit = config.platforms.api_server.max_messages
    if count > limit:
        raise bad_request(
            f"'{param}' has {count} items; this server accepts at most {limit} "
            "(platforms.api_server.max_messages)",
            param=param,
            code="too_many_messages",
        )


def _check_chars(messages: list[Json], instructions: str | None, config: Config) -> None:
    """Text characters of the conversation (content, tool arguments and outputs,
    instructions; image data is bounded by ``max_body_bytes`` instead)."""
    limit = config.platforms.api_server.max_input_chars
    total = len(instructions or "")
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(len(part.get("text") or "") for part in content)  # type: ignore[misc]
        for call in message.get("tool_calls") or ():
            total += len((call.get("function") or {}).get("arguments") or "")
    if total > limit:
        raise bad_request(
            f"the conversation has {total} characters of text; this server accepts at most "
            f"{limit} (platforms.api_server.max_input_chars)",
            param="messages",
            code="input_too_long",
        )


def _model(body: Json, models: Sequence[str], config: Config) -> str:
    return resolve_model(_typed(body, "model", str, "a string"), models, config)


MAX_TOKENS_PARAM = 2**31 - 1  # no model reads or writes more; a larger number is a mistake


def _positive_int(body: Json, key: str) -> int | None:
    value = _typed(body, key, int, "an integer")
    if value is not None and not 1 <= value <= MAX_TOKENS_PARAM:
        raise bad_request(
            f"'{key}' must be from 1 to {MAX_TOKENS_PARAM}", param=key, code="invalid_value"
        )
    return value


def _function_tools(raw: Any, param: str = "tools") -> list[Json] | None:
    """Client tools in chat format (``{"type": "function", "function": {...}}``); both the chat
    and the flat Responses spelling are accepted."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise bad_request(f"'{param}' must be an array", param=param, code="invalid_type")
    tools: list[Json] = []
    for i, tool in enumerate(raw):
        where = f"{param}[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise bad_request(
                f"'{where}': only function tools are supported", param=where, code="invalid_value"
            )
        spec = tool.get("function", tool)
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
            raise bad_request(f"'{where}' needs a function name", param=where)
        function = {
            k: spec[k] for k in ("name", "description", "parameters", "strict") if k in spec
        }
        tools.append({"type": "function", "function": function})
    return tools or None


def _tool_policy(
    body: Json, tools: list[Json] | None, model: str, messages: list[Json], config: Config
) -> tuple[list[Json] | None, bool]:
    """(client_tools, agent_tools) for this request. A request that carries ``tools`` at all
    (legacy ``functions`` included, even an empty list) never gets the agent's own tools; one
    without gets them as ``offering`` says."""
    choice = body.get("tool_choice")
    if choice == "none":
        return None, False
    if tools or body.get("tools") is not None:
        return tools, False
    return None, agent_tools_for(body, model, messages, config)


# The agent's tools that ask a person first on the API besides ``tools.approval``'s: reading a
# file there hands Iris's files to whoever holds the key.
API_ASKS = ("read_file",)


# -- chat completions -------------------------------------------------------------------

_CHAT_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}


def parse_chat(body: object, *, models: Sequence[str], config: Config) -> ChatCall:
    data = unpack_extra_body(_object(body))
    refuse_unhandled(data, CHAT_HANDLED | extension_names(config), CHAT_IGNORED)
    data, legacy = legacy_request(data)
    model = _model(data, models, config)
    _check_text_only(data)
    raw_messages = data.get("messages")
    if raw_messages is None:
        raise bad_request(
            "'messages' is required", param="messages", code="missing_required_parameter"
        )
    if not isinstance(raw_messages, list) or not raw_messages:
        raise bad_request("'messages' must be a non-empty array", param="messages")
    _check_count(len(raw_messages), config, "messages")
    messages = [_chat_message(m, i) for i, m in enumerate(raw_messages)]
    answer_function_results(
        messages, {i: m["name"] for i, m in enumerate(messages) if m["role"] == "function"}
    )
    _check_chars(messages, None, config)
    stream = _typed(data, "stream", bool, "a boolean")
    options = _typed(data, "stream_options", dict, "an object") or {}
    include_usage = bool(_typed(options, "include_usage", bool, "a boolean"))
    completion_limit = _positive_int(data, "max_completion_tokens")
    max_tokens = completion_limit or _positive_int(data, "max_tokens")
    tools = _function_tools(data.get("tools"))
    client_tools, agent_tools = _tool_policy(data, tools, model, messages, config)
    params = chat_params(data, client_tools, extension_names(config) - CHAT_HANDLED)
    check_honoured(params, config, names=CHAT_NAMES)
    turn = TurnRequest(
        messages=messages,
        stream=_streams(stream, config),
        client_tools=client_tools,
        agent_tools=agent_tools,
        max_tokens=max_tokens,
        # The client's spelling goes upstream (reasoning models take only the newer one).
        max_tokens_field="max_completion_tokens" if completion_limit else "max_tokens",
        max_tool_calls=1 if legacy else None,  # the legacy answer holds one function_call
        params=params,
        metadata={"surface": "api"},
        ask_also=API_ASKS,
    )
    if model == voice_model(config):
        turn = voice_request(turn)
    return ChatCall(
        turn=turn,
        model=model,
        stream=stream is True,
        include_usage=include_usage,
        legacy_functions=legacy,
    )


def _check_text_only(data: Json) -> None:
    """``modalities`` other than text, and ``store: true``, are refused: Iris answers in text
    and keeps no chat completions (the Responses API stores its responses)."""
    modalities = data.get("modalities")
    if modalities is not None and (not isinstance(modalities, list) or set(modalities) != {"text"}):
        raise bad_request(
            "'modalities' must be [\"text\"]: Iris answers in text only",
            param="modalities",
            code="unsupported_parameter",
        )
    if _typed(data, "store", bool, "a boolean"):
        raise bad_request(
            "'store: true' is not supported on chat completions: Iris does not keep them; "
            "use /v1/responses (stored by default) to continue or retrieve a conversation",
            param="store",
            code="unsupported_parameter",
        )


def _role(message: Json, where: str, allowed: set[str]) -> str:
    role = message.get("role")
    if not isinstance(role, str) or role not in allowed:
        raise bad_request(
            f"'{where}.role' must be one of {', '.join(sorted(allowed))}",
            param=f"{where}.role",
            code="invalid_value",
        )
    return role


def _chat_message(raw: Any, index: int) -> Json:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise bad_request(f"'{where}' must be an object", param=where)
    role = _role(raw, where, _CHAT_ROLES)
    content = raw.get("content")
    calls = raw.get("tool_calls") or raw.get("function_call")
    if (role == "assistant" and content is None and calls) or (
        role == "function" and content is None
    ):
        pass
    elif isinstance(content, list):
        content = [_chat_part(part, f"{where}.content[{j}]") for j, part in enumerate(content)]
    elif not isinstance(content, str):
        raise bad_request(
            f"'{where}.content' must be a string or an array of content parts",
            param=f"{where}.content",
        )
    message: Json = {"role": "system" if role == "developer" else role, "content": content}
    if role == "tool":
        if not isinstance(raw.get("tool_call_id"), str):
            raise bad_request(f"'{where}.tool_call_id' is required", param=f"{where}.tool_call_id")
        message["tool_call_id"] = raw["tool_call_id"]
    if role == "assistant" and raw.get("tool_calls") is not None:
        message["tool_calls"] = _chat_tool_calls(raw["tool_calls"], where)
    if role == "assistant" and raw.get("function_call") is not None:
        call = legacy_call(raw["function_call"], where, f"call_legacy_{index}")
        message.setdefault("tool_calls", []).append(call)
    if role == "function":
        if not isinstance(raw.get("name"), str) or not raw["name"]:
            raise bad_request(f"'{where}.name' is required", param=f"{where}.name")
        message["content"] = content or ""
    if isinstance(raw.get("name"), str):
        message["name"] = raw["name"]
    return message


def _chat_part(part: Any, where: str) -> Json:
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if isinstance(part, dict) and part.get("type") == "image_url":
        image = part.get("image_url")
        if isinstance(image, dict) and isinstance(image.get("url"), str):
            return {"type": "image_url", "image_url": dict(image)}
    raise bad_request(
        f"'{where}' must be a text or image_url content part", param=where, code="invalid_value"
    )


def _chat_tool_calls(raw: Any, where: str) -> list[Json]:
    if not isinstance(raw, list):
        raise bad_request(f"'{where}.tool_calls' must be an array", param=f"{where}.tool_calls")
    calls: list[Json] = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if not (
            isinstance(call, dict)
            and isinstance(call.get("id"), str)
            and isinstance(function, dict)
            and isinstance(function.get("name"), str)
        ):
            raise bad_request(
                f"'{where}.tool_calls' entries need an id and a function name",
                param=f"{where}.tool_calls",
            )
        arguments = function.get("arguments")
        calls.append(_assistant_call(call["id"], function["name"], arguments))
    return calls


def _assistant_call(call_id: str, name: str, arguments: Any) -> Json:
    args = arguments if isinstance(arguments, str) else ""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


# -- responses --------------------------------------------------------------------------


def parse_responses(
    body: object,
    *,
    models: Sequence[str],
    config: Config,
    history: Callable[[str], list[Json] | None],
    items: Callable[[str], Json | None] | None = None,
    conversation_items: Callable[[str], list[Json] | None] | None = None,
) -> ResponsesCall:
    """``history(response_id)``: the stored conversation of a response, or None;
    ``items(item_id)``: a stored output item, or None; ``conversation(conversation_id)``: the
    items of a stored conversation (Conversations API), or None (``conversation_items``)."""
    data = unpack_extra_body(_object(body))
    refuse_unhandled(data, RESPONSES_HANDLED | extension_names(config), RESPONSES_IGNORED)
    model = _model(data, models, config)
    if "input" not in data or data["input"] is None:
        raise bad_request("'input' is required", param="input", code="missing_required_parameter")
    if isinstance(data["input"], list):
        _check_count(len(data["input"]), config, "input")  # type: ignore[arg-type]
    new_messages = input_messages(data["input"], items)
    instructions = _typed(data, "instructions", str, "a string")
    previous_id = _typed(data, "previous_response_id", str, "a string")
    past: list[Json] = []
    if previous_id is not None:
        found = history(previous_id)
        if found is None:
            raise ApiError(
                404,
                f"Previous response with id '{previous_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        past = found
    conversation_id = _conversation_id(data.get("conversation"))
    if conversation_id is not None:
        if previous_id is not None:
            raise bad_request(
                "send 'conversation' or 'previous_response_id', not both",
                param="conversation",
                code="invalid_value",
            )
        stored = conversation_items(conversation_id) if conversation_items else None
        if stored is None:
            raise ApiError(
                404,
                f"Conversation with id '{conversation_id}' not found.",
                param="conversation",
                code="conversation_not_found",
            )
        past = input_messages(history_items(stored)) if history_items(stored) else []
    stream = _typed(data, "stream", bool, "a boolean")
    store = _typed(data, "store", bool, "a boolean")
    background = _typed(data, "background", bool, "a boolean") is True
    if background and store is False:
        # As on OpenAI: a background response is polled and resumed from the store.
        raise bad_request(
            "background responses must be stored; drop 'store': false",
            param="background",
            code="invalid_value",
        )
    if model == voice_model(config):
        raise bad_request(
            f"'{model}' answers Chat Completions only (/v1/chat/completions)",
            param="model",
            code="model_not_supported",
        )
    raw_tools = data.get("tools")
    tools = _function_tools(raw_tools)
    everything = [*past, *new_messages]
    client_tools, agent_tools = _tool_policy(data, tools, model, everything, config)
    params = responses_params(data, client_tools, extension_names(config) - RESPONSES_HANDLED)
    check_honoured(params, config, names=RESPONSES_NAMES)
    echo: Json = {
        "previous_response_id": previous_id,
        "instructions": instructions,
        "tools": [_flat_tool(t) for t in tools or []],
        "store": store is not False,
        "background": background,
        **({"conversation": {"id": conversation_id}} if conversation_id is not None else {}),
        **responses_echo(params),
    }
    for key in ("max_output_tokens", "max_tool_calls"):
        echo[key] = _positive_int(data, key)
    if (truncation := _typed(data, "truncation", str, "a string")) is not None:
        if truncation != "disabled":
            # Iris sends the whole conversation; it never drops items to fit a window.
            raise bad_request(
                f"'truncation: {truncation}' is not supported; Iris sends the conversation "
                "whole ('disabled')",
                param="truncation",
                code="unsupported_parameter",
            )
        echo["truncation"] = truncation
    if data.get("tool_choice") == "none":
        echo["tool_choice"] = "none"  # applied by sending no tools at all
    conversation = [*past, *new_messages]
    _check_count(len(conversation), config, "input")
    _check_chars(conversation, instructions, config)
    turn = TurnRequest(
        messages=conversation,
        stream=_streams(stream, config),
        client_tools=client_tools,
        agent_tools=agent_tools,
        instructions=instructions,
        max_tokens=echo["max_output_tokens"],
        max_tool_calls=echo["max_tool_calls"],
        params=params,
        metadata={"surface": "api"},
        ask_also=API_ASKS,
    )
    return ResponsesCall(
        turn=turn,
        model=model,
        stream=stream is True,
        store=store is not False,
        echo=echo,
        conversation=conversation,
        background=background,
        conversation_id=conversation_id,
    )


def _conversation_id(raw: Any) -> str | None:
    """A request's ``conversation``: an id, or ``{"id": ...}``; None when absent."""
    if raw is None:
        return None
    if isinstance(raw, dict):
        raw = raw.get("id")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(raw, str) or not raw:
        raise bad_request(
            "'conversation' must be a conversation id or {\"id\": ...}",
            param="conversation",
            code="invalid_type",
        )
    return raw


def _flat_tool(tool: Json) -> Json:
    function = tool["function"]
    return {
        "type": "function",
        "name": function["name"],
        "description": function.get("description"),
        "parameters": function.get("parameters"),
        "strict": function.get("strict"),
    }


_INPUT_ROLES = {"system", "developer", "user", "assistant"}


def input_messages(raw: Any, items: Callable[[str], Json | None] | None = None) -> list[Json]:
    """Responses ``input`` → chat-format messages. ``items(item_id)`` finds the stored output
    item an ``item_reference`` names; it then counts as if it had been given inline."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise bad_request("'input' must be a string or a non-empty array of items", param="input")
    messages: list[Json] = []
    for i, item in enumerate(raw):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise bad_request(f"'{where}' must be an object", param=where)
        if _is_reference(item):
            item = _referenced(item, where, items)
        _add_input_item(messages, item, where)
    return messages


def referenced_ids(raw: Any) -> list[str]:
    """The item ids an ``input`` names in ``item_reference`` items (to look up beforehand)."""
    if not isinstance(raw, list):
        return []
    return [
        item["id"]
        for item in raw
        if isinstance(item, dict) and _is_reference(item) and isinstance(item.get("id"), str)
    ]


def _is_reference(item: Json) -> bool:
    # The specification lets a reference omit its type: then it is an id and nothing else.
    kind = item.get("type")
    return kind == "item_reference" or (kind is None and "role" not in item and "id" in item)


def _referenced(item: Json, where: str, items: Callable[[str], Json | None] | None) -> Json:
    item_id = item.get("id")
    if not isinstance(item_id, str) or not item_id:
        raise bad_request(f"'{where}.id' must be a non-empty string", param=f"{where}.id")
    found = items(item_id) if items is not None else None
    if found is None:
        raise ApiError(
            404,
            f"Item with id '{item_id}' not found (only output items of stored responses can "
            "be referenced).",
            param=where,
            code="item_not_found",
        )
    return found


def _add_input_item(messages: list[Json], item: Json, where: str) -> None:
    kind = item.get("type", "message")
    if kind == "message":
        messages.append(_input_message(item, where))
    elif kind == "function_call":
        call_id, name = item.get("call_id"), item.get("name")
        if not isinstance(call_id, str) or not isinstance(name, str):
            raise bad_request(f"'{where}' needs call_id and name", param=where)
        call = _assistant_call(call_id, name, item.get("arguments"))
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant":
            last.setdefault("tool_calls", []).append(call)
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind == "function_call_output":
        call_id, output = item.get("call_id"), item.get("output")
        if not isinstance(call_id, str):
            raise bad_request(f"'{where}.call_id' is required", param=f"{where}.call_id")
        if isinstance(output, list):
            texts = [p.get("text") for p in output if isinstance(p, dict)]
            output = "".join(t for t in texts if isinstance(t, str))
        if not isinstance(output, str):
            raise bad_request(f"'{where}.output' must be a string", param=f"{where}.output")
        messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
    elif kind == "reasoning":
        return  # the agent keeps no reasoning across turns
    else:
        raise bad_request(
            f"'{where}.type' {kind!r} is not supported",
            param=f"{where}.type",
            code="invalid_value",
        )


def _input_message(item: Json, where: str) -> Json:
    role = _role(item, where, _INPUT_ROLES)
    content = item.get("content")
    if isinstance(content, list):
        parts = [_input_part(p, f"{where}.content[{j}]") for j, p in enumerate(content)]
        if all(p["type"] == "text" for p in parts):
            content = "".join(p["text"] for p in parts)
        else:
            content = parts
    elif not isinstance(content, str):
        raise bad_request(
            f"'{where}.content' must be a string or an array of content parts",
            param=f"{where}.content",
        )
    return {"role": "system" if role == "developer" else role, "content": content}


def _input_part(part: Any, where: str) -> Json:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: Json = {"url": part["image_url"]}
        if isinstance(part.get("detail"), str):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    raise bad_request(
        f"'{where}' must be an input_text or input_image (with image_url) part",
        param=where,
        code="invalid_value",
    )
