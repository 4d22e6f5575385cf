"""What an operator sees of a running server: Prometheus metrics, OpenTelemetry traces, and one
log line per turn (see docs/observability.md).

- ``metrics``: the registry and the small recording calls the surfaces make;
- ``turns``: ``TurnWatch``, the observer of one turn (series, spans, its log line);
- ``tracing``: the OTLP exporter, when ``telemetry.otlp_endpoint`` is set;
- ``routes``: ``GET /metrics`` and the ``/status`` page.

``start(config)`` runs in the server's lifespan, ``stop()`` when it ends.
"""

from __future__ import annotations

import logging
import sys

from iris.config import Config
from iris.observability import metrics, tracing
from iris.observability.turns import TurnWatch, client_gone, use_hash_key

__all__ = ["TurnWatch", "client_gone", "metrics", "start", "stop"]


def start(config: Config) -> None:
    """Turn on what ``config`` asks for: metrics, traces; and the turns' log lines."""
    metrics.enable(config.server.metrics.enabled)
    use_hash_key(config.store.resolved_path().parent)
    if config.telemetry.otlp_endpoint is not None:
        tracing.start(config.telemetry.otlp_endpoint)
    _log_turns()


def stop() -> None:
    tracing.stop()


def _log_turns() -> None:
    """The turn lines go to stderr beside uvicorn's, when nothing else takes Iris's logs (a
    host application or a test that configured logging keeps its own handlers)."""
    turns = logging.getLogger("iris.turns")
    if turns.handlers or logging.getLogger().handlers:
        turns.setLevel(logging.INFO)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    turns.addHandler(handler)
    turns.setLevel(logging.INFO)
    turns.propagate = False
