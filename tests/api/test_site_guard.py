"""Browser-shaped requests: a web page (any site, or a rebound DNS name pointing at 127.0.0.1)
must not reach the agent. The API refuses a body that is not JSON (415), a foreign ``Origin``
and a ``Host`` that is not the server's (403) before any work; CORS answers only listed
origins; without an API key the agent's own tools are not offered."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from openai import NotFoundError, OpenAI

from iris.config import config_from_dict
from iris.server.asgi import build_app
from tests.api.conftest import IrisServer, StartIris
from tests.fakes.upstream import FakeUpstream, text

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]
BODY = json.dumps({"model": "fake-model", "messages": USER})


def post(server: IrisServer, headers: dict[str, str], body: str = BODY) -> httpx.Response:
    with httpx.Client(timeout=10) as http:
        return http.post(f"{server.base_url}/chat/completions", content=body, headers=headers)


def error_code(response: httpx.Response) -> str:
    return response.json()["error"]["code"]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""],
)
def test_a_body_that_is_not_json_is_415_and_reaches_nobody(
    iris_server: StartIris, upstream: FakeUpstream, content_type: str
) -> None:
    server = iris_server()
    response = post(server, {"content-type": content_type} if content_type else {})
    assert response.status_code == 415
    assert error_code(response) == "unsupported_media_type"
    assert upstream.requests == []


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/vnd.iris+json"]
)
def test_json_media_types_with_parameters_pass(
    iris_server: StartIris, upstream: FakeUpstream, content_type: str
) -> None:
    server = iris_server()
    upstream.script(text("ok"))
    response = post(server, {"content-type": content_type})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},
        {"origin": "null"},
        {"host": "evil.example:{port}"},  # DNS rebinding: the attacker's name, our address
        {"host": "127.0.0.1:1"},  # another port of this machine
    ],
    ids=["foreign-origin", "null-origin", "rebound-host", "other-port"],
)
def test_a_foreign_origin_or_host_is_403_before_the_body_is_read(
    iris_server: StartIris, upstream: FakeUpstream, headers: dict[str, str]
) -> None:
    server = iris_server()
    headers = {k: v.format(port=server.port) for k, v in headers.items()}
    # text/plain too: the 403 comes first, whatever else is wrong.
    response = post(server, {"content-type": "text/plain", **headers})
    assert response.status_code == 403
    assert error_code(response) in {"origin_not_allowed", "host_not_allowed"}
    assert "access-control-allow-origin" not in response.headers
    assert upstream.requests == []


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]"])
def test_loopback_names_of_the_bound_port_pass(
    iris_server: StartIris, upstream: FakeUpstream, host: str
) -> None:
    server = iris_server()
    upstream.script(text("ok"))
    response = post(server, {"content-type": "application/json", "host": f"{host}:{server.port}"})
    assert response.status_code == 200, response.text


def test_an_allowed_host_and_a_listed_origin_get_cors_headers(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(
        server={"allowed_hosts": ["iris.example"], "cors_origins": ["https://app.example"]}
    )
    upstream.script(text("ok"))
    headers = {
        "content-type": "application/json",
        "host": "iris.example",
        "origin": "https://app.example",
    }
    response = post(server, headers)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == "https://app.example"
    assert "origin" in response.headers["vary"].lower()
    # Another origin is still refused.
    other = post(server, {**headers, "origin": "https://evil.example"})
    assert other.status_code == 403


@pytest.mark.parametrize("path", ["/chat/completions", "/responses"])
def test_a_streamed_answer_has_the_head_every_answer_has(
    iris_server: StartIris, upstream: FakeUpstream, path: str
) -> None:
    """Issue 45: a stream's chunks go straight to the server, past the app's wrappers; its
    head still passes each of them: the listed origin's CORS headers and ``nosniff``, and
    every chunk follows it."""
    server = iris_server(server={"cors_origins": ["https://app.example"]})
    upstream.script(text("Hel", "lo", " there"))
    key = "messages" if path == "/chat/completions" else "input"
    ask = USER if key == "messages" else "hi"
    headers = {"content-type": "application/json", "origin": "https://app.example"}
    with (
        httpx.Client(timeout=10) as http,
        http.stream(
            "POST",
            f"{server.base_url}{path}",
            json={"model": "fake-model", key: ask, "stream": True},
            headers=headers,
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "https://app.example"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    if key == "messages":
        deltas = [e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"]]
    else:
        deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(deltas) == "Hello there"


def test_a_preflight_is_answered_for_listed_origins_only(iris_server: StartIris) -> None:
    server = iris_server(server={"cors_origins": ["https://app.example"]})
    ask = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type, x-stainless-os",
    }
    url = f"{server.base_url}/chat/completions"
    with httpx.Client(timeout=10) as http:
        listed = http.options(url, headers={"origin": "https://app.example", **ask})
        foreign = http.options(url, headers={"origin": "https://evil.example", **ask})
    assert listed.status_code == 204
    assert listed.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in listed.headers["access-control-allow-methods"]
    assert "x-stainless-os" in listed.headers["access-control-allow-headers"]
    assert foreign.status_code == 403
    assert "access-control-allow-origin" not in foreign.headers


def test_without_cors_origins_no_cors_headers_are_sent(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    upstream.script(text("ok"))
    port_origin = f"http://127.0.0.1:{server.port}"  # the page Iris serves itself
    response = post(server, {"content-type": "application/json", "origin": port_origin})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


def tools_offered(upstream: FakeUpstream) -> list[str]:
    body: dict[str, Any] = upstream.requests[-1].body
    return [t["function"]["name"] for t in body.get("tools") or []]


def test_without_an_api_key_the_agent_tools_are_not_offered(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    upstream.script(text("ok"), text("ok"))
    open_server = iris_server()
    with OpenAI(base_url=open_server.base_url, api_key="x", max_retries=0) as client:
        client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": "hi"}]
        )
        # The agent is not even listed; asking for it says what it needs.
        assert [m.id for m in client.models.list()] == ["fake-model", "iris-voice"]
        with pytest.raises(NotFoundError, match="api_key"):
            client.chat.completions.create(
                model="iris-agent", messages=[{"role": "user", "content": "hi"}]
            )
    assert tools_offered(upstream) == []
    keyed = iris_server(platforms={"api_server": {"api_key": "s3cret"}})
    with OpenAI(base_url=keyed.base_url, api_key="s3cret", max_retries=0) as client:
        client.chat.completions.create(
            model="iris-agent", messages=[{"role": "user", "content": "hi"}]
        )
    assert "terminal" in tools_offered(upstream)


def test_json_nested_too_deep_is_a_400_json_error(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server()
    deep = '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = post(server, {"content-type": "application/json"}, deep)
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"
    assert "Traceback" not in response.text
    assert upstream.requests == []


async def test_a_crash_in_a_handler_is_a_json_500_without_traceback(
    make_config: Any, upstream: FakeUpstream
) -> None:
    from starlette.requests import Request
    from starlette.routing import Route

    app = build_app(config_from_dict({"store": make_config().store.model_dump()}, env={}))

    async def boom(_: Request) -> Any:
        raise RuntimeError("secret internals")

    app.router.routes.append(Route("/boom", boom))
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        crashed = await http.get("/boom")
        missing = await http.get("/nowhere")
    assert crashed.status_code == 500
    assert crashed.json()["error"]["code"] == "internal"
    assert "secret internals" not in crashed.text and "Traceback" not in crashed.text
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "http_404"


def test_health_answers_any_host(iris_server: StartIris) -> None:
    # Documented: /health shows only the version and model; monitors call it by any name.
    server = iris_server()
    with httpx.Client(timeout=10) as http:
        response = http.get(f"{server.url}/health", headers={"host": "evil.example"})
    assert response.status_code == 200


def test_a_host_port_in_non_ascii_digits_is_403_not_a_crash(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    # "²" is a digit to str.isdigit() but not to int(): the check must refuse, not raise.
    server = iris_server()
    with httpx.Client(timeout=10) as http:
        response = http.post(
            f"{server.base_url}/chat/completions",
            content=BODY,
            headers={"host": b"127.0.0.1:\xb2", "content-type": b"application/json"},
        )
    assert response.status_code == 403
    assert error_code(response) == "host_not_allowed"
    assert upstream.requests == []
