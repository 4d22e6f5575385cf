"""The agent card (``/.well-known/agent-card.json``): who Iris is to another agent.

Its name, description and skills are ``platforms.a2a``'s; it says Iris streams (SSE) and sends
push callbacks, speaks JSON-RPC at ``<base>/a2a`` (``platforms.a2a.url``, else the address the
card was asked at), and, with a key configured, that a request carries
``Authorization: Bearer <key>`` (the security scheme ``bearer``).
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol

from iris import __version__
from iris.config import A2aConfig

PATH = "/a2a"
DEFAULT_SKILL = AgentSkill(
    id="chat",
    name="Chat",
    description="Answers in text, using its tools (a terminal, files, MCP servers) as allowed.",
    tags=["chat", "tools"],
)


def agent_card(settings: A2aConfig, base: str, keyed: bool) -> AgentCard:
    """The card, its interface at ``settings.url`` or ``<base>/a2a``."""
    url = settings.url or base.rstrip("/") + PATH
    skills = [
        AgentSkill(
            id=s.id, name=s.name, description=s.description, tags=s.tags, examples=s.examples
        )
        for s in settings.skills
    ] or [DEFAULT_SKILL]
    card = AgentCard(
        name=settings.name,
        description=settings.description,
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=[
            "text/plain",
            "application/json",
            "image/*",
            "application/octet-stream",
        ],
        default_output_modes=["text/plain"],
        skills=skills,
    )
    if keyed:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer", description="platforms.a2a.api_key (or the API server's key)"
                )
            )
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card
