"""``iris.llm.sse_lines``: a streamed body's lines and events, however the network cut it up."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from iris.llm.sse_lines import Lines, SseData

# Text an SSE body carries, line ends of every kind among it, and characters that are line
# breaks to ``str.splitlines`` but not to SSE (a model's text holds them raw in its JSON).
_TEXT = st.lists(st.sampled_from([*'ab{}":é\u2028\x85\x0c\r\n', "\r\n"]), max_size=60).map("".join)


def _lines(body: bytes) -> list[str]:
    lines = Lines()
    read: list[str] = []
    for at in range(len(body)):
        read += lines.split(body[at : at + 1])  # the worst network: one byte a read
    return read + lines.end()


@given(_TEXT)
def test_lines_are_the_same_however_the_body_is_cut(text: str) -> None:
    body = text.encode()
    whole = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    expected = [line.decode() for line in whole]
    if expected and expected[-1] == "":
        expected.pop()  # a body that ends with a line end has no last, unended line
    assert _lines(body) == expected


def test_a_model_text_with_a_unicode_line_separator_stays_one_line() -> None:
    body = 'data: {"content":"a\u2028b\x85c"}\n\n'.encode()
    assert _lines(body) == ['data: {"content":"a\u2028b\x85c"}', ""]


def test_events_span_reads_and_skip_comments() -> None:
    events = SseData()
    assert events.feed(b": keep-alive\n\nevent: x\ndata: 1\n") == []
    assert events.feed(b"data: 2\n\nid: 7\n") == ["1\n2"]
    assert events.end() == [] and events.events == 1
