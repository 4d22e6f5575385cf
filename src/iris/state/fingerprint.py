"""One deployment per Redis prefix: the settings every process on a prefix must agree on.

Processes with different configs on one Redis used to share everything unchecked (finding 6 of
the second hardening pass): a response stored through a key-protected process was read and
continued through one with no key; one's device tokens read the other's chats; one's
``log_max_age`` trimmed the other's chats; a ``/model`` set through one made the other ask its
provider for a model it does not have.

At start each process writes the fingerprint of those settings under ``<prefix>:deployment``
(a hash, one field per setting, each set only if absent: two processes starting at once agree
on the first), then reads it back; a process whose fingerprint differs refuses to start, naming
the settings that differ. Secrets go in as SHA-256 digests, never as they are. To change one of
these settings, stop every process on the prefix, ``DEL <prefix>:deployment``, start them with
the new config.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

from iris.config import Config
from iris.errors import ConfigError
from iris.state.redis_store import RedisStore, translated


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:32]


def fingerprint(config: Config) -> dict[str, str]:
    """The settings that must agree, by config key: digests for secrets, else the value."""
    platforms = config.platforms
    model = config.model
    models = [
        {"provider": e.provider, "base_url": e.base_url, "name": e.name}
        for e in (model, *model.fallback)
    ]
    return {
        "platforms.api_server.api_key": _digest(platforms.api_server.api_key or ""),
        "platforms.iris.tokens": _digest(sorted(platforms.iris.tokens)),
        "platforms.iris.log_max_frames": str(platforms.iris.log_max_frames),
        "platforms.iris.log_max_age": repr(float(platforms.iris.log_max_age)),
        "model (providers and models)": _digest(models),
    }


def check_fingerprint(store: RedisStore, config: Config) -> None:
    """Write this process's fingerprint under the prefix, or refuse to start (``ConfigError``,
    one line naming what differs) when the deployment there has other settings."""
    mine = fingerprint(config)
    key = store.key("deployment")
    with translated(store.url, "cannot check the deployment's settings"):
        pipe = store.sync.pipeline(transaction=True)
        for field, value in mine.items():
            pipe.hsetnx(key, field, value)
        pipe.hgetall(key)
        stored = cast("dict[str, str]", pipe.execute()[-1])
    differ = [field for field, value in mine.items() if stored.get(field) != value]
    if differ:
        raise ConfigError(
            f"another deployment uses the store prefix '{store.prefix}' with other settings: "
            f"{', '.join(differ)} differ; give this one its own store.prefix, or the same "
            f"settings (after changing them on every process, DEL {key})"
        )


def shared_store(config: Config) -> RedisStore | None:
    """The Redis every process shares (``store.url`` / ``store.mode``), checked; None
    without one."""
    if not config.store.shared:
        return None
    shared = None
    try:
        shared = RedisStore.configured(config.store)
        shared.check()  # unusable: one line and a non-zero exit, before serving anything
        check_fingerprint(shared, config)  # one deployment per prefix
    except BaseException:
        if shared is not None:
            shared.close()
        raise
    return shared
