"""Generation parameters of an API request: read from either API's spelling into the neutral
``iris.llm.params`` dict, refused with a 400 when a configured provider cannot honour them, and
echoed back (Responses) as applied.

| Chat Completions | Responses | neutral |
| --- | --- | --- |
| ``response_format`` | ``text.format`` | ``response_format`` (flat) |
| ``reasoning_effort`` | ``reasoning.effort`` / ``.summary`` | ``reasoning_effort`` / ``_summary`` |
| ``verbosity`` | ``text.verbosity`` | ``verbosity`` |
| ``tool_choice`` ``{"type": "function", "function": {"name"}}`` | ``{"type": "function", "name"}`` | flat |

The rest (temperature, top_p, stop, seed, penalties, logit_bias, parallel_tool_calls, user,
safety_identifier, prompt_cache_key, service_tier, metadata) keep their names, and so do the
extension parameters (``top_k``, ``min_p``, OpenRouter's ``provider``...: see
``iris.llm.params``), read by either API when a configured provider takes them. A literal
``extra_body`` object (the SDKs' keyword, which some clients send as a field) is unpacked into
the body first. Max tokens stay ``TurnRequest.max_tokens``. Any other field is refused by
``fields`` (nothing is dropped silently).
"""

from __future__ import annotations

from typing import Any

from iris.config import Config
from iris.llm.params import Params, extension_problem, known_extensions, unhonoured
from iris.surfaces.api.problems import ApiError, bad_request
from iris.surfaces.numbers import INT64, bounded_int

Json = dict[str, Any]

_NUMBERS = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
_STRINGS = ("user", "safety_identifier", "prompt_cache_key", "service_tier")


def chat_params(
    body: Json, client_tools: list[Json] | None, extensions: frozenset[str] = frozenset()
) -> Params:
    """The parameters of a Chat Completions body; ``extensions``: the extension names to read."""
    params = _shared(body, client_tools, extensions)
    if (stop := body.get("stop")) is not None:
        params["stop"] = _stop(stop)
    if (seed := typed(body, "seed", int, "an integer")) is not None:
        if bounded_int(seed, *INT64) is None:
            raise bad_request("'seed' must be a 64-bit integer", param="seed", code="invalid_value")
        params["seed"] = seed
    if (bias := typed(body, "logit_bias", dict, "an object")) is not None:
        if not all(_is_number(v) and -100 <= v <= 100 for v in bias.values()):
            raise bad_request(
                "'logit_bias' values must be numbers from -100 to 100", param="logit_bias"
            )
        params["logit_bias"] = dict(bias)
    if typed(body, "logprobs", bool, "a boolean"):
        raise _no_logprobs("logprobs")
    if (number := typed(body, "n", int, "an integer")) is not None and number != 1:
        raise bad_request(
            "'n' must be 1: Iris answers with one choice", param="n", code="unsupported_value"
        )
    if (fmt := typed(body, "response_format", dict, "an object")) is not None:
        _set_format(params, _chat_format(fmt))
    for key in ("reasoning_effort", "verbosity"):
        if (value := typed(body, key, str, "a string")) is not None:
            params[key] = value
    return params


def responses_params(
    body: Json, client_tools: list[Json] | None, extensions: frozenset[str] = frozenset()
) -> Params:
    """The parameters of a Responses body (which has no stop, seed or logit_bias)."""
    params = _shared(body, client_tools, extensions)
    if (text := typed(body, "text", dict, "an object")) is not None:
        if (fmt := typed(text, "format", dict, "an object", where="text.format")) is not None:
            _set_format(params, _flat_format(fmt, "text.format"))
        if (verbosity := typed(text, "verbosity", str, "a string", "text.verbosity")) is not None:
            params["verbosity"] = verbosity
    if (reasoning := typed(body, "reasoning", dict, "an object")) is not None:
        effort = typed(reasoning, "effort", str, "a string", where="reasoning.effort")
        summary = typed(reasoning, "summary", str, "a string", where="reasoning.summary")
        summary = summary or typed(
            reasoning, "generate_summary", str, "a string", where="reasoning.generate_summary"
        )
        if effort is not None:
            params["reasoning_effort"] = effort
        if summary is not None:
            params["reasoning_summary"] = summary
    return params


def check_honoured(params: Params, config: Config, *, names: dict[str, str]) -> None:
    """400 naming the first parameter a provider of the model chain cannot honour.
    ``names``: neutral name → the request's spelling, for the error."""
    refused = unhonoured(params, [config.model, *config.model.fallback])
    if refused:
        name, kind = refused[0]
        spelled = names.get(name, name)
        raise bad_request(
            f"'{spelled}' is not supported by this server's model provider ({kind})",
            param=spelled,
            code="unsupported_parameter",
        )


def extension_names(config: Config) -> frozenset[str]:
    """The extension names a request may carry under this config (then checked per provider)."""
    return known_extensions([config.model, *config.model.fallback])


def unpack_extra_body(body: Json) -> Json:
    """``extra_body`` sent as a field, its members moved to the top level. A member that is
    also a top-level field with another value is a 400: which one was meant is unclear."""
    extra = body.get("extra_body")
    if extra is None:
        return body
    if not isinstance(extra, dict):
        raise bad_request("'extra_body' must be an object", param="extra_body", code="invalid_type")
    members: Json = extra  # pyright: ignore[reportUnknownVariableType]
    out = {k: v for k, v in body.items() if k != "extra_body"}
    for key, value in members.items():
        if key in out and out[key] is not None and out[key] != value:
            raise bad_request(
                f"'{key}' is sent twice, in the body and in 'extra_body', with different values",
                param=f"extra_body.{key}",
                code="invalid_value",
            )
        out[key] = value
    return out


CHAT_NAMES: dict[str, str] = {}  # the neutral names are Chat Completions' own
RESPONSES_NAMES = {
    "response_format": "text.format",
    "verbosity": "text.verbosity",
    "reasoning_effort": "reasoning.effort",
    "reasoning_summary": "reasoning.summary",
}


def responses_echo(params: Params) -> Json:
    """What a Response object repeats of the applied parameters (the rest keep defaults)."""
    echo: Json = {
        key: params[key]
        for key in (*_NUMBERS, *_STRINGS, "parallel_tool_calls", "metadata", "tool_choice")
        if key in params
    }
    if "response_format" in params or "verbosity" in params:
        text: Json = {"format": params.get("response_format", {"type": "text"})}
        if "verbosity" in params:
            text["verbosity"] = params["verbosity"]
        echo["text"] = text
    if "reasoning_effort" in params or "reasoning_summary" in params:
        echo["reasoning"] = {
            "effort": params.get("reasoning_effort"),
            "summary": params.get("reasoning_summary"),
        }
    return echo


# -- the parts both APIs share ----------------------------------------------------------


def _shared(body: Json, client_tools: list[Json] | None, extensions: frozenset[str]) -> Params:
    params: Params = {}
    for key, value in body.items():
        if key not in extensions or value is None:
            continue
        problem = extension_problem(key, value)
        if problem is not None:
            raise bad_request(f"'{key}' {problem}", param=key, code="invalid_type")
        params[key] = value
    for key, (low, high) in _NUMBERS.items():
        value = body.get(key)
        if value is None:
            continue
        if not _is_number(value):
            raise bad_request(f"'{key}' must be a number", param=key, code="invalid_type")
        if not low <= value <= high:
            raise bad_request(
                f"'{key}' must be between {low:g} and {high:g}", param=key, code="invalid_value"
            )
        params[key] = value
    for key in _STRINGS:
        if (value := typed(body, key, str, "a string")) is not None:
            params[key] = value
    if (metadata := typed(body, "metadata", dict, "an object")) is not None:
        if not all(isinstance(v, str) for v in metadata.values()):
            raise bad_request("'metadata' values must be strings", param="metadata")
        params["metadata"] = dict(metadata)
    top_logprobs = typed(body, "top_logprobs", int, "an integer")
    if top_logprobs is not None and bounded_int(top_logprobs, 0, 20) is None:
        raise bad_request(
            "'top_logprobs' must be from 0 to 20", param="top_logprobs", code="invalid_value"
        )
    if top_logprobs:
        raise _no_logprobs("top_logprobs")
    choice = _tool_choice(body.get("tool_choice"), client_tools)
    if choice is not None:
        params["tool_choice"] = choice
    # Applies to every round that offers tools, the client's or the agent's own.
    if (parallel := typed(body, "parallel_tool_calls", bool, "a boolean")) is not None:
        params["parallel_tool_calls"] = parallel
    return params


def _tool_choice(raw: Any, client_tools: list[Json] | None) -> str | Json | None:
    """The neutral tool_choice, or None for the default. It applies to the client's own tools:
    the agent's tools (no client tools) always run on ``auto``."""
    if raw is None or raw in ("auto", "none"):
        return None  # "none" is the tool policy's business: no tools are sent at all
    name: Any = None
    if raw == "required":
        choice: str | Json = "required"
    elif isinstance(raw, dict) and raw.get("type") == "function":
        function: Any = raw.get("function")
        name = function.get("name") if isinstance(function, dict) else raw.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request("'tool_choice' needs a function name", param="tool_choice")
        choice = {"type": "function", "name": name}
    else:
        raise bad_request(
            "'tool_choice' must be 'auto', 'none', 'required' or a function",
            param="tool_choice",
            code="invalid_value",
        )
    offered = [tool["function"]["name"] for tool in client_tools or []]
    if not offered:
        raise bad_request(
            "'tool_choice' needs 'tools': it applies to the tools the request sends",
            param="tool_choice",
        )
    if name is not None and name not in offered:
        raise bad_request(
            f"'tool_choice' names '{name}', which is not in 'tools'",
            param="tool_choice",
            code="invalid_value",
        )
    return choice


def _set_format(params: Params, fmt: Json | None) -> None:
    if fmt is not None:  # None: plain text, the default
        params["response_format"] = fmt


def _chat_format(fmt: Json) -> Json | None:
    """Chat's ``response_format`` (schema nested under ``json_schema``) → flat."""
    if fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict):
            raise bad_request(
                "'response_format.json_schema' must be an object",
                param="response_format.json_schema",
            )
        return _flat_format({"type": "json_schema", **spec}, "response_format")
    return _flat_format(fmt, "response_format")


def _flat_format(fmt: Json, where: str) -> Json | None:
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise bad_request(
            f"'{where}.type' must be text, json_object or json_schema",
            param=f"{where}.type",
            code="invalid_value",
        )
    name, schema = fmt.get("name"), fmt.get("schema")
    if not isinstance(name, str) or not name:
        raise bad_request(f"'{where}' needs a schema name", param=f"{where}.name")
    if not isinstance(schema, dict):
        raise bad_request(f"'{where}.schema' must be an object", param=f"{where}.schema")
    out: Json = {"type": "json_schema", "name": name, "schema": schema}
    strict = typed(fmt, "strict", bool, "a boolean", where=f"{where}.strict")
    if strict is not None:
        out["strict"] = strict
    description = typed(fmt, "description", str, "a string", where=f"{where}.description")
    if description is not None:
        out["description"] = description
    return out


def _stop(raw: Any) -> list[str]:
    stops = [raw] if isinstance(raw, str) else raw
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise bad_request("'stop' must be a string or an array of strings", param="stop")
    return list(stops)


def _no_logprobs(key: str) -> ApiError:
    return bad_request(
        f"'{key}' is not supported: Iris does not return log probabilities",
        param=key,
        code="unsupported_parameter",
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def typed(
    body: Json, key: str, kinds: type | tuple[type, ...], what: str, where: str | None = None
) -> Any:
    """``body[key]`` when it is of ``kinds`` (a JSON true is never a number), None when absent;
    else a 400 naming ``where`` (default ``key``)."""
    value = body.get(key)
    if value is None:
        return None
    allows_bool = kinds is bool or (isinstance(kinds, tuple) and bool in kinds)
    if not isinstance(value, kinds) or (isinstance(value, bool) and not allows_bool):
        name = where or key
        raise bad_request(f"'{name}' must be {what}", param=name, code="invalid_type")
    return value
