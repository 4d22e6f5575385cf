"""The display sections: ``streaming`` (the master switch, per-surface overrides, the edit
pacing) and ``display`` (reasoning, tool progress, per-platform overrides); the names of the
surfaces, and ``ResolvedDisplay``: one platform's settings after its overrides."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from iris.config._section import Section

Surface = Literal[
    "cli",
    "telegram",
    "discord",
    "slack",
    "whatsapp",
    "matrix",
    "homeassistant",
    "api_server",
    "iris",
]
ToolProgressMode = Literal["off", "new", "all", "verbose"]
ReasoningStyle = Literal["code", "blockquote", "subtext"]
# How a chat reply is shown while it streams: the platform's native preview (Telegram drafts in
# private chats, Slack streams in threads and DMs), edits of a posted message, paragraph-sized
# messages as it forms (``blocks``: what ``auto`` means where a platform cannot edit), or one
# message at the end (``final``).
Transport = Literal["auto", "native", "edit", "blocks", "final"]


class StreamingConfig(Section):
    enabled: bool = False
    cli: bool | None = None
    telegram: bool | None = None
    discord: bool | None = None
    slack: bool | None = None
    whatsapp: bool | None = None
    matrix: bool | None = None
    homeassistant: bool | None = None  # never streams: its answers go out whole
    api_server: bool | None = None
    iris: bool | None = None
    edit_interval: float = Field(default=1.5, gt=0)
    min_tokens: int = Field(default=20, ge=0)
    buffer_threshold: int = Field(default=24, ge=1)


class DisplayOverride(Section):
    streaming: bool | None = None
    show_reasoning: bool | None = None
    reasoning_style: ReasoningStyle | None = None
    tool_progress: ToolProgressMode | None = None
    edit_interval: float | None = Field(default=None, gt=0)
    buffer_threshold: int | None = Field(default=None, ge=1)
    transport: Transport | None = None
    can_stop: bool | None = None  # Telegram drafts: the stop button interrupts the turn
    # Seconds a preview must have been visible for the final answer to come as a new message
    # (which notifies; an edit does not), the preview deleted. 0: off.
    fresh_final_after: float | None = Field(default=None, ge=0)
    # Blocks transport: a block goes once a paragraph (or code block) is complete and this many
    # characters gathered, or after ``block_idle`` seconds of silence.
    min_block_chars: int | None = Field(default=None, ge=0)
    block_idle: float | None = Field(default=None, gt=0)


class DisplayConfig(Section):
    show_reasoning: bool = False
    reasoning_style: ReasoningStyle = "code"
    tool_progress: ToolProgressMode = "all"
    platforms: dict[Surface, DisplayOverride] = Field(
        default_factory=dict[Surface, DisplayOverride]
    )


class ResolvedDisplay(BaseModel):
    """Display settings for one platform after applying its overrides."""

    show_reasoning: bool
    reasoning_style: ReasoningStyle
    tool_progress: ToolProgressMode
    edit_interval: float
    buffer_threshold: int
    min_tokens: int
    transport: Transport = "auto"
    can_stop: bool = False
    fresh_final_after: float = 0.0
    min_block_chars: int = 400
    block_idle: float = 3.0
