"""OpenTelemetry traces: a span per turn with GenAI semantic-convention attributes, a child per
provider answer and per tool call; and a real OTLP/HTTP export from ``iris serve`` to a receiver
on loopback that decodes the protobuf, with the trace id in the turn's log line."""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from iris.agent.core import Agent, TurnRequest
from iris.config import config_from_dict
from iris.events import TurnEnded
from iris.observability import tracing
from tests.fakes.served import serve
from tests.fakes.upstream import FakeUpstream, error, text, tool_call
from tests.observability.helpers import log_lines
from tests.scale.workers import ask

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.start(exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.stop()


async def test_a_turn_is_a_span_with_a_child_per_provider_answer_and_tool_call(
    spans: InMemorySpanExporter, upstream: FakeUpstream, tmp_path: Path
) -> None:
    with FakeUpstream(model="backup") as backup:
        config = config_from_dict(
            {
                "model": {
                    "base_url": upstream.base_url,
                    "name": "fake-model",
                    "api_key": "k",
                    "fallback": [{"base_url": backup.base_url, "name": "backup", "api_key": "k"}],
                },
                "tools": {"enabled": ["read_file"], "read_file": {"roots": [str(tmp_path)]}},
                "store": {"path": str(tmp_path / "iris.db")},
            },
            env={},
        )
        (tmp_path / "a.txt").write_text("A")
        arguments = f'{{"path": "{tmp_path / "a.txt"}"}}'
        upstream.script(tool_call("read_file", [arguments]), error(503, "overloaded"))
        backup.script(text("done", usage=(7, 3)))
        agent = Agent(config)
        request = TurnRequest(
            messages=[{"role": "user", "content": "read"}],
            metadata={"surface": "chat", "platform": "telegram", "chat_id": "99"},
        )
        async with agent.run(request) as turn:
            events = [event async for event in turn]
        await agent.aclose()
    assert isinstance(events[-1], TurnEnded)
    tracing.flush()
    finished = {span.name: span for span in spans.get_finished_spans()}
    names = [span.name for span in spans.get_finished_spans()]
    assert sorted(names) == sorted(
        ["chat fake-model", "execute_tool read_file", "chat fake-model", "chat backup"]
        + ["invoke_agent iris"]
    )
    root = finished["invoke_agent iris"]
    assert root.parent is None
    attrs = dict(root.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.request.model"] == "fake-model"
    assert attrs["gen_ai.response.model"] == "backup"
    assert attrs["gen_ai.usage.output_tokens"] == 5 + 3  # both answered rounds
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("stop",)  # type: ignore[arg-type]
    assert attrs["iris.surface"] == "chat" and attrs["iris.platform"] == "telegram"
    assert "99" not in {str(v) for v in attrs.values()}
    children = [span for span in spans.get_finished_spans() if span is not root]
    assert all(span.parent is not None for span in children)
    assert {span.parent.span_id for span in children if span.parent} == {root.context.span_id}
    assert {span.context.trace_id for span in children} == {root.context.trace_id}
    failed = [s for s in children if s.name == "chat fake-model" and s.status.is_ok is False]
    (overloaded,) = failed
    assert dict(overloaded.attributes or {})["error.type"] == "503"
    tool = dict(finished["execute_tool read_file"].attributes or {})
    assert (
        tool["gen_ai.operation.name"] == "execute_tool" and tool["gen_ai.tool.name"] == "read_file"
    )
    backup_round = dict(finished["chat backup"].attributes or {})
    assert backup_round["gen_ai.usage.input_tokens"] == 7
    assert backup_round["gen_ai.usage.output_tokens"] == 3
    assert turn.watch.trace_id == format(root.context.trace_id, "032x")


class _Receiver:
    """An OTLP/HTTP traces endpoint on loopback: decodes each protobuf export it gets."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.got = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                assert self.headers["content-type"] == "application/x-protobuf"
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                receiver.paths.append(self.path)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                receiver.got.set()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_iris_serve_exports_the_turn_by_otlp_http_with_its_trace_id_in_the_log(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    receiver = _Receiver()
    try:
        server, url = await asyncio.to_thread(
            serve, tmp_path, upstream.base_url, telemetry={"otlp_endpoint": receiver.url}
        )
        try:
            upstream.script(text("traced"))
            assert await asyncio.to_thread(ask, url, "hi") == "traced"
            # The SDK sends its batch within a second, from its own thread.
            assert await asyncio.to_thread(receiver.got.wait, 10)
            await asyncio.to_thread(server.wait_for, '"event": "turn.end"')
        finally:
            server.stop()
        spans = receiver.spans()
    finally:
        receiver.close()
    assert receiver.paths[0] == "/v1/traces"
    resource = receiver.requests[0].resource_spans[0].resource
    service = {a.key: a.value.string_value for a in resource.attributes}
    assert service["service.name"] == "iris"
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"invoke_agent iris", "chat fake-model"}
    root, round_ = by_name["invoke_agent iris"], by_name["chat fake-model"]
    assert round_.parent_span_id == root.span_id and round_.trace_id == root.trace_id
    attrs = {a.key: a.value for a in root.attributes}
    assert attrs["gen_ai.request.model"].string_value == "fake-model"
    assert attrs["gen_ai.usage.output_tokens"].int_value == 5
    assert attrs["iris.surface"].string_value == "api"
    (line,) = log_lines(server, "turn.end")
    assert line["trace_id"] == root.trace_id.hex()
