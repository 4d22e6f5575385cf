"""The shipped JSON Schema: valid, documented, and it holds the app's frames too.

(Every frame the server sends is validated against it by the devices in conftest.)"""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from tests.socket.conftest import SCHEMA

CLIENT = jsonschema.Draft202012Validator({**SCHEMA, "$ref": "#/$defs/ClientFrame"})
DOC = Path(__file__).resolve().parents[2] / "docs" / "iris-protocol.md"


def test_the_schema_is_valid_draft_2020_12() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_the_protocol_doc_points_at_the_shipped_schema() -> None:
    doc = DOC.read_text()
    assert "src/iris/protocol/frames.schema.json" in doc
    for name in SCHEMA["$defs"]:
        if name.startswith(("server.", "client.")):
            assert f"`{name.split('.', 1)[1]}`" in doc, name


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "hello", "token": "t", "chat_id": "main", "after_seq": 3},
        {"type": "hello", "token": "t", "features": ["append"]},
        {"type": "message.send", "text": "hi"},
        {"type": "turn.cancel"},
        {"type": "resume", "after_seq": 0},
        {"type": "ping"},
    ],
)
def test_app_frames_validate(frame: dict[str, object]) -> None:
    CLIENT.validate(frame)


def test_unknown_fields_are_not_part_of_the_contract() -> None:
    with pytest.raises(jsonschema.ValidationError):
        CLIENT.validate({"type": "ping", "extra": 1})
