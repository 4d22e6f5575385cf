"""Finding 11 of the third hardening pass, "any malformed body a 400, never a 500": every API
route that takes a JSON body is fed bodies built to break a parser or a handler — nesting
100 000 levels deep, numbers past any float or past Python's digit limit, ``NaN``, and every
known field given a value of the wrong type — against the real ``iris serve``. Whatever comes
in, the answer is a clear error (or a normal answer), never a 500 and never a traceback in the
server's log, and ``/health`` still answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.served import Served, serve
from tests.fakes.upstream import FakeUpstream

pytestmark = pytest.mark.timeout(300)

CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}
RESPONSES = {"model": "fake-model", "input": "hi"}

# Each route, the body a client would send, and the fields it knows (each may get any value).
ROUTES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "/v1/chat/completions": (
        CHAT,
        [
            "model",
            "messages",
            "stream",
            "max_tokens",
            "max_completion_tokens",
            "temperature",
            "top_p",
            "n",
            "stop",
            "tools",
            "tool_choice",
            "response_format",
            "stream_options",
            "user",
            "metadata",
            "seed",
            "logit_bias",
            "parallel_tool_calls",
            "reasoning_effort",
        ],
    ),
    "/v1/responses": (
        RESPONSES,
        [
            "model",
            "input",
            "instructions",
            "previous_response_id",
            "conversation",
            "store",
            "background",
            "stream",
            "tools",
            "tool_choice",
            "max_output_tokens",
            "include",
            "reasoning",
            "text",
            "metadata",
            "truncation",
            "temperature",
            "top_p",
        ],
    ),
    "/v1/conversations": ({"items": [], "metadata": {}}, ["items", "metadata"]),
    "/v1/conversations/{conversation}": ({"metadata": {"a": "b"}}, ["metadata"]),
    "/v1/conversations/{conversation}/items": (
        {"items": [{"type": "message", "role": "user", "content": "hi"}]},
        ["items", "include"],
    ),
    "/v1/responses/resp_unknown/cancel": ({}, ["anything"]),
}

DEEP = 100_000
RAW = [
    b"[" * DEEP + b"]" * DEEP,
    b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    b'{"model": 1e999999, "messages": -1e999999, "input": NaN, "max_tokens": Infinity}',
    b'{"max_tokens": ' + b"9" * 5000 + b"}",  # past Python's int digit limit
    b'{"model": "fake-model", "messages": [{"role": "user", "content": "\\ud800"}]}',
    b"\xff\xfe{}",
    b"null",
    b"[]",
    b'"a string"',
    b"",
]

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, str, str]]:
    """``iris serve`` (an upstream that answers nothing it was not told: a 500 of its own) and
    one stored conversation's id."""
    with FakeUpstream() as upstream:
        server, url = serve(tmp_path_factory.mktemp("fuzz"), upstream.base_url)
        try:
            made = httpx.post(f"{url}/v1/conversations", json={}, timeout=10)
            assert made.status_code == 200, made.text
            yield server, url, made.json()["id"]
        finally:
            server.stop()


def post(url: str, path: str, conversation: str, body: bytes) -> httpx.Response:
    target = url + path.format(conversation=conversation)
    headers = {"content-type": "application/json"}
    return httpx.post(target, content=body, headers=headers, timeout=30)


def assert_no_failure(served: tuple[Served, str, str], answer: httpx.Response, body: bytes) -> None:
    server, url, _ = served
    assert answer.status_code != 500, (answer.text[:300], body[:300])
    assert answer.status_code < 500 or answer.status_code in (502, 503, 504), answer.text[:300]
    logged = "".join(server.drain())
    assert "Traceback" not in logged, logged[-3000:]


@pytest.mark.parametrize("path", list(ROUTES))
@pytest.mark.parametrize("raw", RAW, ids=range(len(RAW)))
def test_a_malformed_body_is_a_4xx(served: tuple[Served, str, str], path: str, raw: bytes) -> None:
    answer = post(served[1], path, served[2], raw)
    assert_no_failure(served, answer, raw)
    assert httpx.get(served[1] + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("path", list(ROUTES))
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_field_of_any_type_is_never_a_500(
    served: tuple[Served, str, str], path: str, data: st.DataObject
) -> None:
    base, fields = ROUTES[path]
    chosen = data.draw(st.lists(st.sampled_from(fields), min_size=1, max_size=3, unique=True))
    body = {**base, **{name: data.draw(VALUES) for name in chosen}}
    raw = json.dumps(body).encode()
    answer = post(served[1], path, served[2], raw)
    assert_no_failure(served, answer, raw)
