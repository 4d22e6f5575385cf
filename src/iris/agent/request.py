"""What one turn is asked: ``TurnRequest``, the agent's input from every surface."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from iris.agent.elicitation import Elicitations
    from iris.state.approvals import Approvals


@dataclass
class TurnRequest:
    """One turn. ``messages`` is the chat-format conversation ending with the new user message."""

    messages: list[dict[str, Any]]
    stream: bool = True  # stream from the provider; False asks for the whole answer at once
    client_tools: list[dict[str, Any]] | None = None  # OpenAI function tools owned by the caller
    agent_tools: bool = True  # run Iris's own tools (never mixed with client tools)
    allow_terminal: bool = True  # False for a user who is not allowed: terminal never runs
    model: str | None = None  # override the configured model name
    instructions: str | None = None  # an extra system message
    max_tokens: int | None = None
    # How the limit is spelled upstream (Chat Completions): the client's own spelling.
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    max_tool_calls: int | None = None  # tool calls one turn may make (Responses' max_tool_calls)
    # Generation parameters in the neutral spelling of ``iris.llm.params``, sent every round.
    params: dict[str, Any] = field(default_factory=dict[str, Any])
    metadata: dict[str, Any] = field(default_factory=dict[str, Any])
    # The caller keeps this history (a chat): fit it to the model's window, compacting older
    # turns, and retry once after the provider's "context length exceeded".
    fit_context: bool = False
    show_compaction: bool = False  # say so as Commentary when older turns were compacted
    # Who approves the tools that ask (``tools.approval``): the broker and the chat asking.
    # None: nobody can be asked here, so such a tool is refused, never run unasked.
    approvals: Approvals | None = None
    chat_id: str = ""
    # Nobody is there to hear the turn go on (an API turn held between two requests): an
    # approval nobody answered in time ends the turn, as interrupted, without another round.
    unanswered_ends: bool = False
    # Tools that ask on this surface besides those ``tools.approval`` asks for (unless its
    # ``auto`` lists them): the API asks for read_file too.
    ask_also: tuple[str, ...] = ()
    # Who answers an MCP server's elicitation (``iris.agent.elicitation``): the broker, on a
    # surface that can ask the person. None: such a request is declined at once.
    elicitations: Elicitations | None = None
