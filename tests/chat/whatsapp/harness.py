"""``iris serve``'s app with WhatsApp as its only platform, on loopback, for the WhatsApp
tests: Meta's webhook in, the Cloud API stand-in out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from iris.runtime import Runtime
from iris.server.asgi import build_app
from iris.surfaces.chat.platforms.whatsapp import WEBHOOK_PATH
from iris.surfaces.chat.runner import ChatSurface
from tests.chat.harness import platform_config
from tests.conftest import MakeConfig
from tests.fakes import loopback
from tests.fakes.upstream import FakeUpstream
from tests.fakes.whatsapp_api import WhatsAppAPI

OWNER = "15550001111"
STRANGER = "15550009999"
VERIFY = "verify-me-please"


@dataclass
class Served:
    url: str  # the webhook's
    chat: ChatSurface
    runtime: Runtime


async def serve(
    make_config: MakeConfig,
    upstream: FakeUpstream,
    api: WhatsAppAPI,
    sections: dict[str, Any] | None = None,
    **display: Any,
) -> AsyncIterator[Served]:
    """``iris serve``'s app on loopback, WhatsApp its only platform (``sections``: more of the
    config, ``display``: the platform's display keys)."""
    settings = {
        "base_url": api.base_url,
        "phone_number_id": api.phone_number_id,
        "access_token": api.token,
        "app_secret": api.app_secret,
        "verify_token": VERIFY,
        "allowed_users": ["+1 555 000 1111"],  # as people write numbers: the digits count
        "budgets": {"pair": {"calls": 1, "per": 0.3}},
    }
    shown = {"platforms": {"whatsapp": {"min_block_chars": 120, "block_idle": 5.0, **display}}}
    config = platform_config(
        make_config, upstream, "whatsapp", settings, display=shown, **(sections or {})
    )
    runtime = Runtime.create(config)
    app = build_app(config, runtime)
    [chat] = [s for s in app.state.surfaces if isinstance(s, ChatSurface)]
    sock = loopback.bind()
    port = sock.getsockname()[1]
    server = await loopback.start(app, sock)
    try:
        yield Served(f"http://127.0.0.1:{port}{WEBHOOK_PATH}", chat, runtime)
    finally:
        await loopback.stop(server)
        runtime.store.close()
