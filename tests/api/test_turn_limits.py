"""``server.max_turns`` on the API: over it a request is a 429 at once, nothing queued."""

from __future__ import annotations

import pytest
from openai import OpenAI, RateLimitError

from tests.api.conftest import StartIris
from tests.fakes.upstream import FakeUpstream, hold, text

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]


def test_over_max_turns_is_429_too_many_turns(
    iris_server: StartIris, upstream: FakeUpstream
) -> None:
    server = iris_server(server={"max_turns": 1})
    upstream.script(hold("Hel"), text("next"))
    with OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10) as client:
        stream = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
        chunks = iter(stream)
        next(chunks)
        assert next(chunks).choices[0].delta.content == "Hel"
        with pytest.raises(RateLimitError) as caught:
            client.responses.create(model="fake-model", input="hi")
        assert caught.value.code == "too_many_turns"
        assert caught.value.response.headers["retry-after"] == "1"
        upstream.release()
        list(chunks)
        stream.close()
        answer = client.chat.completions.create(model="fake-model", messages=USER)
        assert answer.choices[0].message.content == "next"
