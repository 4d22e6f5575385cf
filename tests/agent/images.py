"""A vision model's config, for the attachment tests."""

from __future__ import annotations

from typing import Any

from iris.config import Config
from tests.conftest import MakeConfig


def vision(make_config: MakeConfig, **attachments: Any) -> Config:
    return make_config("http://127.0.0.1:9/v1", model={"vision": True}, attachments=attachments)
