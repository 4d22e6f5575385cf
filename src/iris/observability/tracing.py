"""OpenTelemetry traces, off unless ``telemetry.otlp_endpoint`` is set: one span per turn.

A turn is an ``invoke_agent`` span; each provider answer a ``chat {model}`` child and each tool
call an ``execute_tool {name}`` child, with the OpenTelemetry GenAI semantic-convention
attributes (``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.usage.*``,
``gen_ai.response.finish_reasons``, ``gen_ai.tool.name``). Spans go out in batches by
OTLP/HTTP (protobuf) to ``{otlp_endpoint}/v1/traces``, from a background thread of the SDK: a
collector that is slow or away never slows a turn, and spans it misses are dropped.

The SDK is imported only when tracing is on; ``tracer()`` is None otherwise, and every caller
checks that first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from iris import __version__
from iris.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer


class _Tracing:
    provider: TracerProvider | None = None
    tracer: Tracer | None = None


_state = _Tracing()


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL (as ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


def start(endpoint: str | None = None, *, exporter: SpanExporter | None = None) -> None:
    """Export spans to ``endpoint`` (or to ``exporter``, for tests) from now on."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:  # pragma: no cover - the packages are dependencies of iris[telemetry]
        raise ConfigError(
            "telemetry.otlp_endpoint needs opentelemetry-sdk and "
            "opentelemetry-exporter-otlp-proto-http (pip install 'iris-gateway[telemetry]')"
        ) from None
    stop()
    resource = Resource.create({"service.name": "iris", "service.version": __version__})
    provider = TracerProvider(resource=resource)
    if exporter is None:
        assert endpoint is not None
        exporter = OTLPSpanExporter(endpoint=traces_url(endpoint), timeout=5)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1000))
    _state.provider = provider
    _state.tracer = provider.get_tracer("iris", __version__)


def stop() -> None:
    """Send what is left and stop exporting."""
    provider, _state.provider, _state.tracer = _state.provider, None, None
    if provider is not None:
        provider.shutdown()


def flush() -> None:
    if _state.provider is not None:
        _state.provider.force_flush()


def tracer() -> Tracer | None:
    return _state.tracer
