"""The ``model`` section: the provider's endpoint, its fallbacks and the embedded model."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import Field, model_validator

from iris.config._section import Section


class ExtraParams(Section):
    """``model.extra_params``: the extension parameters (``top_k``, ``min_p``, OpenRouter's
    ``provider``...) this endpoint takes besides its kind's list (``iris.llm.params``).
    ``allow``: more names passed on as sent; ``deny``: names refused with a 400; ``set``: values
    sent on every request (a client's own value replaces one, unless its name is denied)."""

    allow: list[str] = Field(default_factory=list[str])
    deny: list[str] = Field(default_factory=list[str])
    set: dict[str, Any] = Field(default_factory=dict[str, Any])


class ModelEndpoint(Section):
    provider: Literal["chat_completions", "responses", "local"] = "chat_completions"
    base_url: str | None = None
    api_key: str | None = None
    api_key_env: str | None = None
    name: str = ""
    timeout: float = 60.0
    extra_params: ExtraParams = Field(default_factory=ExtraParams)

    @model_validator(mode="after")
    def _extras_fit(self) -> ModelEndpoint:
        extra = self.extra_params
        if self.provider == "responses" and (extra.allow or extra.set):
            raise ValueError(
                "extra_params: a responses provider (OpenAI's Responses API) takes no "
                "extension parameters; allow and set are for chat_completions and local"
            )
        return self

    def resolved_api_key(self) -> str:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            return os.environ.get(self.api_key_env, "")
        return os.environ.get("OPENAI_API_KEY", "") or "not-needed"


class LocalModelConfig(Section):
    """``model.local``: the embedded model's llama.cpp server (``iris.llm.local``)."""

    # Turns it generates at once (continuous batching): each slot keeps its own context window.
    # 2 by default: on 2 cores a second chat starts at once instead of waiting for the first.
    parallel: int = Field(default=2, ge=1, le=64)


class ModelConfig(ModelEndpoint):
    provider: Literal["chat_completions", "responses", "local"] = "local"
    fallback: list[ModelEndpoint] = Field(default_factory=list[ModelEndpoint])
    # How long a model that rejected stream=True is asked without streaming.
    stream_reject_ttl: float = 600.0
    # Embedded model: path to a GGUF file; empty means the packaged Gemma 3 270M.
    local_path: str = ""
    local: LocalModelConfig = Field(default_factory=LocalModelConfig)
    max_tokens: int | None = None
    system_prompt: str = ""
    # Characters of visible text one turn may produce (reasoning and tool arguments are bounded
    # by the same number): past it the upstream is closed and the turn ends with "length".
    max_output_chars: int = Field(default=200_000, ge=1)
    # Tokens the model reads at once (prompt + reply). None: 2048 for the embedded model, else
    # 32768. Chats whose history Iris keeps fit it (see iris.agent.context).
    context_window: int | None = Field(default=None, ge=256)
    # What happens to older turns that no longer fit: the model summarizes them, or they go.
    compaction: Literal["summarize", "truncate"] = "summarize"
    # The model sees image content parts. Off by default and always for the embedded model:
    # an image sent to a model that cannot see it is an error or silently ignored upstream.
    vision: bool = False
