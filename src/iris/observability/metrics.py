"""The Prometheus registry: every series Iris exports, and the small calls that record them.

The series are defined once, here, at import; the rest of Iris records through the functions
below (one or two lines at each choke point) and never touches ``prometheus_client`` itself.
Nothing is recorded until ``enable()`` (``server.metrics.enabled``), so a server without
metrics pays one flag test per call.

Labels are bounded: ``surface`` (api, iris, chat, cli, other), ``platform`` (telegram, discord,
slack, whatsapp, or empty), ``model`` (a configured model name, else ``other``: an API client may send any
name), ``tool`` (a registered tool, else ``other``), frame kinds of the protocol. A chat or user
id is never a label.

Several processes (``iris serve --workers N``): ``prometheus_client``'s multiprocess mode. The
parent sets ``PROMETHEUS_MULTIPROC_DIR`` (an empty folder) before it starts the workers; each
worker's values live in mmapped files there, and one scrape of any worker reads them all
(counters summed, gauges of live processes summed). The mode is chosen when
``prometheus_client`` is imported, so the variable must be set before that (``iris.server.workers``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY = CollectorRegistry()

# Seconds: a first token within 50 ms (a local fake) up to a minute (a cold embedded model).
_LATENCY = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
_DURATION = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_RATE = (1.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)


# Every series is in ``REGISTRY``. A gauge of several workers (``livesum``) sums the processes
# alive: a worker that is gone took its running turns and connections with it.
def _counter(name: str, doc: str, labels: Sequence[str] = ()) -> Counter:
    return Counter(name, doc, labels, registry=REGISTRY)


def _gauge(name: str, doc: str, labels: Sequence[str] = ()) -> Gauge:
    return Gauge(name, doc, labels, registry=REGISTRY, multiprocess_mode="livesum")


def _histogram(name: str, doc: str, labels: Sequence[str], buckets: Sequence[float]) -> Histogram:
    return Histogram(name, doc, labels, buckets=buckets, registry=REGISTRY)


TURNS_STARTED = _counter(
    "iris_turns_started", "Agent turns started.", ["surface", "platform", "model"]
)
TURNS_ENDED = _counter(
    "iris_turns_ended",
    "Agent turns ended, by outcome: complete, interrupted, failed:<code>.",
    ["surface", "platform", "model", "outcome"],
)
TURNS_RUNNING = _gauge("iris_turns_running", "Agent turns running now.", ["surface", "platform"])
FIRST_TOKEN = _histogram(
    "iris_time_to_first_token_seconds",
    "Seconds from a turn's start to its first visible text (gen_ai.server.time_to_first_token).",
    ["surface", "model"],
    _LATENCY,
)
TURN_DURATION = _histogram(
    "iris_turn_duration_seconds",
    "Seconds from a turn's start to its end (gen_ai.client.operation.duration).",
    ["surface", "model"],
    _DURATION,
)
TOKENS = _counter(
    "iris_tokens",
    "Tokens the provider reported, by type: input, output (gen_ai.client.token.usage).",
    ["surface", "model", "type"],
)
TOKENS_PER_SECOND = _histogram(
    "iris_output_tokens_per_second",
    "Output tokens per second of a turn, from its first token to its end.",
    ["model"],
    _RATE,
)
PROVIDER_REQUESTS = _counter(
    "iris_provider_requests",
    "Requests to a provider, by status: ok, an HTTP status, timeout, error, stream_rejected.",
    ["provider", "model", "status"],
)
PROVIDER_RETRIES = _counter(
    "iris_provider_retries",
    "A model asked again: without streaming (no_stream) or after a rejected stream.",
    ["model", "reason"],
)
PROVIDER_FALLBACKS = _counter(
    "iris_provider_fallbacks",
    "A model that failed and handed the round to the next of model.fallback.",
    ["model"],
)
TOOL_CALLS = _counter(
    "iris_tool_calls", "Agent tool calls, by outcome: ok, error.", ["tool", "outcome"]
)
TOOL_DURATION = _histogram(
    "iris_tool_duration_seconds",
    "Seconds an agent tool ran (gen_ai.execute_tool.duration).",
    ["tool"],
    _DURATION,
)
SCHEDULE_RUNS = _counter(
    "iris_schedule_runs",
    "Scheduled runs (/remind, /every), by outcome: delivered, undelivered, failed, skipped, "
    "refused, lost.",
    ["outcome"],
)
APPROVALS_PENDING = _gauge("iris_approvals_pending", "Tool calls waiting for a person's approval.")
APPROVALS = _counter(
    "iris_approvals",
    "Approval requests answered, by decision: once, chat, deny, timeout.",
    ["decision"],
)
MCP_CONNECTED = _gauge("iris_mcp_servers_connected", "MCP servers connected now.")
CHAT_CALLS = _counter(
    "iris_chat_platform_calls",
    "Calls to a chat platform's API, by method and status: ok, rate_limited, refused, error.",
    ["platform", "method", "status"],
)
CHAT_RATE_LIMITED = _counter(
    "iris_chat_rate_limited",
    "429s (flood control) from a chat platform, by scope: chat, bot, workspace; local: "
    "Iris held the call itself because the platform's headers said the bucket was dry.",
    ["platform", "scope"],
)
CHAT_QUEUED = _counter(
    "iris_chat_messages_overtaken",
    "Chat messages that arrived while their chat's turn was still being set up, so only the "
    "newest ran.",
    ["platform"],
)
CHAT_WAITED = _counter(
    "iris_chat_messages_waited",
    "Chat messages that waited in their platform's line for a turn slot (over server.max_turns"
    " or max_turns_per_user) instead of being told busy.",
    ["platform"],
)
SOCKET_CONNECTIONS = _gauge("iris_socket_connections", "Devices connected to the iris socket now.")
SOCKET_FRAMES = _counter(
    "iris_socket_frames_sent", "Frames sent to devices on the iris socket, by frame type.", ["kind"]
)
SOCKET_BYTES = _counter(
    "iris_socket_bytes_sent", "UTF-8 bytes of the frames sent to devices, by frame type.", ["kind"]
)
SOCKET_OVER_BOUND = _counter(
    "iris_socket_devices_over_bound",
    "A device's queue passed its bound: it re-read the log (catchup) or was closed (closed).",
    ["action"],
)
SOCKET_RESUMES = _counter(
    "iris_socket_resumes",
    "Devices that resumed from a seq, by how: replay, live (nothing missed), sync.",
    ["how"],
)
API_STREAMS = _gauge("iris_api_streams_open", "Streamed API responses open now.")
API_DISCONNECTS = _counter(
    "iris_api_client_disconnects",
    "API clients that left before their turn ended (the turn was cancelled).",
)
FRAME_APPENDS = _counter(
    "iris_store_frame_appends",
    "Frames appended to the per-chat frame log, by backend: sqlite, redis.",
    ["backend"],
)
STORE_ERRORS = _counter(
    "iris_store_errors", "Failed calls to the shared store (Redis).", ["backend"]
)

_state = {"on": False}
_CODE = re.compile(r"^[a-z0-9_]{1,40}$")
SURFACES = frozenset({"api", "iris", "chat", "cli"})
PLATFORMS = frozenset({"telegram", "discord", "slack", "whatsapp", "matrix", "homeassistant"})


def enable(on: bool = True) -> None:
    """Record from now on (``server.metrics.enabled``), or stop recording."""
    _state["on"] = on


def enabled() -> bool:
    return _state["on"]


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or os.environ.get(MULTIPROC_ENV.lower()) or None


def render() -> bytes:
    """The Prometheus text of every series: this process's, or every worker's."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry)
    return generate_latest(REGISTRY) + generate_latest(_PROCESS)


_PROCESS = CollectorRegistry()
ProcessCollector(registry=_PROCESS)
PlatformCollector(registry=_PROCESS)


def clean_multiprocess_dir(path: str) -> None:
    """Remove the value files a previous run left (their counts are not this run's)."""
    for name in os.listdir(path):
        if name.endswith(".db"):
            os.remove(os.path.join(path, name))


def process_dead(pid: int) -> None:
    """A worker is gone: its live gauges stop counting (its counters stay in the sums)."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid)


# -- labels, bounded ------------------------------------------------------------------------------
def surface_label(value: object) -> str:
    return value if isinstance(value, str) and value in SURFACES else "other"


def platform_label(value: object) -> str:
    return value if isinstance(value, str) and value in PLATFORMS else ""


def bounded(value: str, known: Iterable[str]) -> str:
    return value if value in known else "other"


def outcome_label(ended: bool, reason_or_code: str) -> str:
    if ended:
        return "interrupted" if reason_or_code == "interrupted" else "complete"
    code = reason_or_code if _CODE.match(reason_or_code) else "other"
    return f"failed:{code}"


# -- what the surfaces call -----------------------------------------------------------------------
def chat_call(platform: str, method: str, status: str) -> None:
    if _state["on"]:
        CHAT_CALLS.labels(platform_label(platform), method, status).inc()


def chat_rate_limited(platform: str, scope: str) -> None:
    if _state["on"]:
        CHAT_RATE_LIMITED.labels(platform_label(platform), scope).inc()


def chat_overtaken(platform: str) -> None:
    if _state["on"]:
        CHAT_QUEUED.labels(platform_label(platform)).inc()


def chat_queued(platform: str) -> None:
    if _state["on"]:
        CHAT_WAITED.labels(platform_label(platform)).inc()


def socket_connected(delta: int) -> None:
    if _state["on"]:
        SOCKET_CONNECTIONS.inc(delta)


# Children cached by frame kind: a frame sent is the hottest call here (one per device per
# frame), and ``labels()`` takes a lock and builds a tuple each time.
_frames: dict[str, tuple[Counter, Counter]] = {}


def frame_sent(kind: str, text: str) -> None:
    if not _state["on"]:
        return
    pair = _frames.get(kind)
    if pair is None:
        pair = _frames[kind] = (SOCKET_FRAMES.labels(kind), SOCKET_BYTES.labels(kind))
    pair[0].inc()
    pair[1].inc(len(text) if text.isascii() else len(text.encode()))


def over_bound(action: str) -> None:
    if _state["on"]:
        SOCKET_OVER_BOUND.labels(action).inc()


def resumed(how: str) -> None:
    if _state["on"]:
        SOCKET_RESUMES.labels(how).inc()


def api_stream(delta: int) -> None:
    if _state["on"]:
        API_STREAMS.inc(delta)


def frame_appended(backend: str) -> None:
    if _state["on"]:
        FRAME_APPENDS.labels(backend).inc()


def store_failed(backend: str = "redis") -> None:
    if _state["on"]:
        STORE_ERRORS.labels(backend).inc()


SCHEDULE_OUTCOMES = ("delivered", "undelivered", "failed", "skipped", "refused", "lost")


def schedule_run(outcome: str) -> None:
    """For the scheduler: one scheduled run ended with ``outcome`` (``SCHEDULE_OUTCOMES``)."""
    if _state["on"]:
        SCHEDULE_RUNS.labels(bounded(outcome, SCHEDULE_OUTCOMES)).inc()


def approval_asked() -> None:
    """For the approvals flow: a tool call now waits for a person."""
    if _state["on"]:
        APPROVALS_PENDING.inc()


def approval_answered(decision: str) -> None:
    """For the approvals flow: ``decision`` is once, chat, deny or timeout."""
    if _state["on"]:
        APPROVALS_PENDING.dec()
        APPROVALS.labels(decision if _CODE.match(decision) else "other").inc()


def mcp_connected(delta: int) -> None:
    """For the MCP client: +1 when a server connects, -1 when it goes."""
    if _state["on"]:
        MCP_CONNECTED.inc(delta)
