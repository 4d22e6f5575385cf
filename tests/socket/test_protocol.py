"""The typed iris frames: the shipped schema is the one generated from them, and every frame the
encoder and the hub make parses through them."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from iris.protocol import types as protocol
from iris.protocol.appends import AppendWriter
from iris.protocol.frames import EncoderSettings, FrameEncoder
from tests.socket.conftest import SERVER_FRAME
from tests.strategies import ScriptedTurn, turns


def test_the_shipped_schema_is_the_generated_one() -> None:
    # Regenerate with: python -m iris.protocol.types
    assert protocol.SCHEMA_FILE.read_text() == protocol.schema_text()


def test_the_browsers_reading_rule_is_the_generated_one() -> None:
    # src/iris/web/js/reading.js: what the browser's frames.js reads frames by. Regenerate with:
    # python -m iris.protocol.types
    assert protocol.READING_FILE.read_text() == protocol.reading_text()


@settings(max_examples=100, deadline=None)
@given(turns(), st.integers(1, 30), st.booleans())
def test_every_frame_the_server_makes_is_one_of_the_types(
    turn: ScriptedTurn, threshold: int, streaming: bool
) -> None:
    # The encoder builds plain dicts (no validation on the hot path): the types must hold them,
    # as the hub stamps them and as the append writer rewrites them.
    encoder = FrameEncoder(EncoderSettings(streaming=streaming, buffer_threshold=threshold))
    bodies = encoder.begin()
    for n, event in enumerate(turn.events):
        bodies += encoder.tick(n * 0.3) + encoder.feed(event, n * 0.3)
    writer = AppendWriter()
    for seq, body in enumerate(bodies, start=1):
        frame = {**body, "chat_id": "main", "seq": seq}
        for sent in (frame, writer.convert(frame) or frame):
            protocol.SERVER.validate_python(sent)
            SERVER_FRAME.validate(sent)


def test_a_frame_outside_the_types_is_refused_by_both_the_adapter_and_the_schema() -> None:
    bad = [
        {"type": "message.update", "chat_id": "main", "seq": 1, "message_id": "m"},
        {"type": "message.start", "chat_id": "main", "seq": 1, "message_id": "m", "role": "user"},
        {
            "type": "tool.start",
            "chat_id": "main",
            "seq": 1,
            "index": 0,
            "name": "t",
            "preview": "",
            "args": {},
        },
        {"type": "message.stop", "chat_id": "main", "seq": 1, "message_id": "m"},
        {"type": "nope", "chat_id": "main", "seq": 1},
    ]
    for frame in bad:
        with pytest.raises(ValidationError):
            protocol.SERVER.validate_python(frame)
        with pytest.raises(jsonschema.ValidationError):
            SERVER_FRAME.validate(frame)
