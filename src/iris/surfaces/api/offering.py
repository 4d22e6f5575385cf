"""Which models the API serves, and which requests get Iris's own tools (the agent opt-in).

The models: the configured model first (apps that pick "the first model", Home Assistant's
``llama_cpp`` among them, pick it), then ``iris-agent`` — the same model with Iris's own tools
(terminal, read_file, MCP) — while ``platforms.api_server.agent_tools`` lets anyone have them.
Then ``iris-voice`` (``platforms.homeassistant.voice.model``): the same model answered for a
speaker, never with Iris's tools (``voice``). The embedded model is listed under an id without spaces (``gemma-3-270m``, its description in a
field of its own) and answers to the alias ``local`` as well.

A request gets the agent's tools only when all of these hold:

- an API key is set (without one anything that reaches the port could run commands);
- the client opted in: it asked for ``iris-agent`` (``agent_tools: on_request``, the default),
  or the operator set ``agent_tools: always``;
- it carries no tools of its own (its own tools are never mixed with Iris's), no
  ``tool_choice: none`` and no ``response_format`` (structured output is data, not a chat);
- it is not an app's background task: Open WebUI sends its title, tags and follow-up requests
  with the chat's model, as one user message made from its task template (``### Task:`` … a
  ``<chat_history>`` block). Such a request is answered by the model alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from iris.config import Config
from iris.surfaces.api.problems import ApiError

Json = dict[str, Any]

AGENT_MODEL = "iris-agent"
LOCAL_ALIAS = "local"


@dataclass(frozen=True)
class ServedModel:
    id: str
    description: str = ""


def served_models(config: Config, main: str, description: str = "") -> list[ServedModel]:
    """What ``/v1/models`` lists: the configured model, then ``iris-agent`` where it is on."""
    models = [ServedModel(main or "iris", description)]
    if agent_available(config):
        models.append(
            ServedModel(AGENT_MODEL, f"{main or 'the model'} with Iris's own tools (the agent)")
        )
    voice = voice_model(config)
    models.append(ServedModel(voice, f"{main or 'the model'} answering for speech (Assist)"))
    return models


def voice_model(config: Config) -> str:
    """The id of the voice profile (``iris-voice``)."""
    return config.platforms.homeassistant.voice.model


def agent_available(config: Config) -> bool:
    settings = config.platforms.api_server
    return settings.agent_tools != "never" and bool(settings.api_key)


def resolve_model(asked: str | None, models: Sequence[str], config: Config) -> str:
    """The id a request's ``model`` names (the first model when absent); ``local`` is the
    embedded model's alias. A 404 for an id this server does not serve."""
    if not asked:
        return models[0]
    if asked in models:
        return asked
    if asked == LOCAL_ALIAS and config.model.provider == "local":
        return models[0]
    why = ""
    if asked == AGENT_MODEL:
        why = (
            " ('iris-agent' needs platforms.api_server.api_key, and agent_tools other than 'never')"
        )
    raise ApiError(
        404,
        f"The model '{asked}' does not exist; this server serves: {', '.join(models)}{why}",
        param="model",
        code="model_not_found",
    )


def agent_tools_for(body: Json, model: str, messages: list[Json], config: Config) -> bool:
    """Whether a request without tools of its own gets the agent's tools (see the module)."""
    settings = config.platforms.api_server
    if not agent_available(config):
        return False
    if settings.agent_tools == "on_request" and model != AGENT_MODEL:
        return False
    if model == voice_model(config):
        return False  # a speaker never gets Iris's tools
    if _asks_structure(body):
        return False
    return not is_app_task(messages)


def _asks_structure(body: Json) -> bool:
    fmt = body.get("response_format")
    text = body.get("text")
    if isinstance(text, dict):
        fmt = fmt or text.get("format")  # pyright: ignore[reportUnknownMemberType]
    return isinstance(fmt, dict) and fmt.get("type") not in (None, "text")  # pyright: ignore[reportUnknownMemberType]


def is_app_task(messages: list[Json]) -> bool:
    """An app's background task: one user message made from Open WebUI's task template (its
    title, tags, follow-up, query and autocomplete prompts all are)."""
    if len(messages) != 1 or messages[0].get("role") != "user":
        return False
    content = messages[0].get("content")
    if isinstance(content, list):
        parts: list[Any] = content
        content = "".join(
            str(part.get("text") or "")
            for part in parts
            if isinstance(part, dict) and part.get("type") == "text"
        )
    if not isinstance(content, str):
        return False
    text = content.lstrip()
    return text.startswith("### Task:") and "<chat_history>" in text and "</chat_history>" in text
