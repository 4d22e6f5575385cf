"""What the attachment tests of every surface send and look for in the model's request."""

from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image


def photo(width: int = 800, height: int = 600, fmt: str = "JPEG") -> bytes:
    """A real image of ``width`` x ``height`` (two colours, so it is not trivially empty)."""
    image = Image.new("RGB", (width, height), (200, 40, 40))
    image.paste((20, 20, 220), (0, 0, width // 2, height))
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def user_content(body: dict[str, Any]) -> Any:
    """The content of the last user message of a Chat Completions request body."""
    users = [m for m in body["messages"] if m["role"] == "user"]
    return users[-1]["content"]


def images_in(content: Any) -> list[Image.Image]:
    """The images of a message's ``image_url`` parts, decoded from their ``data:`` URLs."""
    found: list[Image.Image] = []
    for part in content if isinstance(content, list) else []:
        if part.get("type") != "image_url":
            continue
        url: str = part["image_url"]["url"]
        assert url.startswith("data:image/"), url[:40]  # inline, never a platform's file URL
        found.append(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    return found


def texts_in(content: Any) -> str:
    """The text of a message's content, parts joined."""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
