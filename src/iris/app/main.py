"""``iris app``: resolve the server URL, device token and chat, then run the Textual app."""

from __future__ import annotations

import argparse
from dataclasses import replace

from iris.app.settings import Settings, load_settings, save_settings
from iris.errors import ConfigError


def resolve_settings(args: argparse.Namespace) -> Settings:
    """Flags win over the device's saved settings; a token or URL given as a flag is saved."""
    settings = load_settings()
    changed = replace(
        settings,
        url=args.url or settings.url,
        token=args.token or settings.token,
        chat_id=args.chat or settings.chat_id,
    )
    if not changed.token:
        changed = replace(changed, token=_token_from_config(args.config))
    if (changed.url, changed.token, changed.chat_id) != (
        settings.url,
        settings.token,
        settings.chat_id,
    ):
        save_settings(changed)
    return changed


def _token_from_config(path: str | None) -> str:
    """On the server's own machine, the first token in ``platforms.iris.tokens`` just works."""
    from iris.config import load_config

    try:
        config = load_config(path, write_template=False)
    except ConfigError:
        if path is not None:
            raise  # an explicit --config that is broken is worth saying
        return ""
    tokens = config.platforms.iris.tokens
    return tokens[0] if tokens else ""


def run_app(args: argparse.Namespace) -> int:
    from iris.app.app import IrisApp

    IrisApp(resolve_settings(args)).run()
    return 0
