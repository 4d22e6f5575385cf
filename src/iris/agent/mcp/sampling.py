"""A server's request for Iris's model (MCP ``sampling/createMessage``).

Off unless ``mcp_servers.<name>.sampling.enabled``; then at most ``max_per_minute`` requests
in any minute. The request runs on ``sampling.model`` (default ``model.name``) through the
first endpoint's provider, without tools, with the server's system prompt, messages (text
parts; other parts are named, not sent) and ``maxTokens``. Its tokens count in the usage of
the turn whose tool call the request came during (``Asker.spend``), so they reach the turn's
log line and metrics. A refusal is an MCP error whose message says why.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from mcp import types

from iris.agent.elicitation import Asker
from iris.config import McpSampling
from iris.llm.provider import Provider, ProviderRequest, RawText, RawUsage

log = logging.getLogger(__name__)

WINDOW = 60.0  # seconds max_per_minute counts over


class Sampler:
    def __init__(
        self,
        server: str,
        settings: McpSampling,
        provider: Callable[[], tuple[Provider, str]] | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.server = server
        self.settings = settings
        self._provider = provider  # the provider and the configured model's name
        self._clock = clock
        self._recent: deque[float] = deque()

    def refusal(self) -> str | None:
        """Why a request now is refused (None: it may run; it is counted)."""
        if not self.settings.enabled or self._provider is None:
            return f"sampling is off for this server (mcp_servers.{self.server}.sampling.enabled)"
        now = self._clock()
        while self._recent and now - self._recent[0] >= WINDOW:
            self._recent.popleft()
        if len(self._recent) >= self.settings.max_per_minute:
            limit = self.settings.max_per_minute
            return f"over mcp_servers.{self.server}.sampling.max_per_minute ({limit}); try later"
        self._recent.append(now)
        return None

    async def sample(
        self, params: types.CreateMessageRequestParams, asker: Asker | None
    ) -> types.CreateMessageResult | types.ErrorData:
        why = self.refusal()
        if why is not None or self._provider is None:
            log.info("MCP server %s asked for the model; refused: %s", self.server, why)
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"Iris refused: {why}")
        provider, configured = self._provider()
        model = self.settings.model or configured
        request = ProviderRequest(model, chat_messages(params), [], params.max_tokens)
        parts: list[str] = []
        used = [0, 0]
        async for raw in provider.complete(request):
            if isinstance(raw, RawText):
                parts.append(raw.text)
            elif isinstance(raw, RawUsage):
                used = [raw.input_tokens, raw.output_tokens]
        if asker is not None and asker.spend is not None:
            asker.spend(used[0], used[1])
        text = types.TextContent(type="text", text="".join(parts))
        return types.CreateMessageResult(
            role="assistant", content=text, model=model, stop_reason="endTurn"
        )


def chat_messages(params: types.CreateMessageRequestParams) -> list[dict[str, Any]]:
    """The request in chat format: the server's system prompt, then its messages' text."""
    messages: list[dict[str, Any]] = []
    if params.system_prompt:
        messages.append({"role": "system", "content": params.system_prompt})
    for message in params.messages:
        content = message.content if isinstance(message.content, list) else [message.content]
        text = "\n".join(
            part.text if isinstance(part, types.TextContent) else f"[{part.type}]"
            for part in content
        )
        messages.append({"role": message.role, "content": text})
    return messages
