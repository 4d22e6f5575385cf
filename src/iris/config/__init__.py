"""Typed config: loading, validation, environment, and the streaming precedence rule.

Lookup: ``--config FILE``, else ``$IRIS_CONFIG``, else ``~/.iris/config.yaml`` (written from a
commented template on first run, with ``streaming.enabled: true``). Unknown keys and wrong types
are ``ConfigError``s that name the key (``streaming.edit_interval: …``).

Environment: ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` and ``IRIS_MODEL`` configure a
chat-completions provider when the file configures no model; ``IRIS_STREAMING_ENABLED`` (alias
``HERMES_STREAMING_ENABLED``) sets the master streaming switch. With no model anywhere the
provider is ``local``, the embedded demo model.

Every name is imported from here (``from iris.config import Config``); the modules behind it are
private, one per group of sections: ``_model`` (``model``), ``_display`` (``streaming``,
``display``), ``_server`` (``server``, ``telemetry``, the API server, the iris socket, A2A),
``_chat`` (the chat platforms), ``_tools`` (``tools``, ``mcp_servers``, ``a2a_agents``),
``_root`` (``Config`` itself, ``store``, ``attachments``, ``schedules``) and ``_load`` (the
lookup, the template, the environment, the errors).
"""

from __future__ import annotations

from iris.config._chat import (
    BUDGET_MARGIN,
    CHAT_ID,
    HOUSE_USER,
    QUEUE_SIZE,
    DiscordBudgets,
    DiscordConfig,
    GroupsConfig,
    HomeAssistantConfig,
    HomeAssistantVoice,
    HomeAssistantWatch,
    MatrixBudgets,
    MatrixConfig,
    Rate,
    SlackBudgets,
    SlackConfig,
    TelegramBudgets,
    TelegramConfig,
    WhatsAppBudgets,
    WhatsAppConfig,
)
from iris.config._display import (
    DisplayConfig,
    DisplayOverride,
    ReasoningStyle,
    ResolvedDisplay,
    StreamingConfig,
    Surface,
    ToolProgressMode,
    Transport,
)
from iris.config._load import TEMPLATE, config_from_dict, default_path, load_config
from iris.config._model import ExtraParams, LocalModelConfig, ModelConfig, ModelEndpoint
from iris.config._root import (
    AttachmentsConfig,
    Config,
    PlatformsConfig,
    SchedulesConfig,
    StoreConfig,
)
from iris.config._server import (
    A2aConfig,
    A2aSkill,
    ApiServerConfig,
    MetricsConfig,
    PushConfig,
    ServerConfig,
    SocketConfig,
    TelemetryConfig,
)
from iris.config._tools import (
    MCP_SERVER_NAME,
    TERMINAL_ENV,
    A2aAgentConfig,
    ApprovalConfig,
    Bind,
    McpLimits,
    McpSampling,
    McpServerConfig,
    McpServerName,
    ReadFileTool,
    SandboxLimits,
    TerminalTool,
    ToolsConfig,
    looks_secret,
)
from iris.errors import ConfigError

__all__ = [
    "A2aAgentConfig",
    "A2aConfig",
    "A2aSkill",
    "ApiServerConfig",
    "ApprovalConfig",
    "AttachmentsConfig",
    "BUDGET_MARGIN",
    "CHAT_ID",
    "Bind",
    "Config",
    "ConfigError",
    "DiscordBudgets",
    "DiscordConfig",
    "DisplayConfig",
    "DisplayOverride",
    "ExtraParams",
    "GroupsConfig",
    "HOUSE_USER",
    "HomeAssistantConfig",
    "HomeAssistantVoice",
    "HomeAssistantWatch",
    "LocalModelConfig",
    "MCP_SERVER_NAME",
    "MatrixBudgets",
    "MatrixConfig",
    "McpLimits",
    "McpSampling",
    "McpServerConfig",
    "McpServerName",
    "MetricsConfig",
    "ModelConfig",
    "ModelEndpoint",
    "PlatformsConfig",
    "PushConfig",
    "QUEUE_SIZE",
    "Rate",
    "ReadFileTool",
    "ReasoningStyle",
    "ResolvedDisplay",
    "SandboxLimits",
    "SchedulesConfig",
    "ServerConfig",
    "SlackBudgets",
    "SlackConfig",
    "SocketConfig",
    "StoreConfig",
    "StreamingConfig",
    "Surface",
    "TEMPLATE",
    "TERMINAL_ENV",
    "TelegramBudgets",
    "TelegramConfig",
    "TelemetryConfig",
    "TerminalTool",
    "ToolProgressMode",
    "ToolsConfig",
    "Transport",
    "WhatsAppBudgets",
    "WhatsAppConfig",
    "config_from_dict",
    "default_path",
    "load_config",
    "looks_secret",
]
