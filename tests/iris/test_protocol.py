"""The typed iris frames: the shipped schema is the one generated from them, and every frame the
encoder and the hub make parses through them."""

from __future__ import annotations

from iris.surfaces.iris import protocol


def test_the_shipped_schema_is_the_generated_one() -> None:
    # Regenerate with: python -m iris.surfaces.iris.protocol
    assert protocol.SCHEMA_FILE.read_text() == protocol.schema_text()
