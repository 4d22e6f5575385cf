"""Finds the HTML artifact in a reply: a ```html fenced block, or a whole HTML document."""

from __future__ import annotations

import re

from iris.formats.fences import code_blocks

_DOCUMENT = re.compile(r"(<!doctype html.*?</html>|<html[\s>].*?</html>)", re.S | re.I)


def find_html(text: str) -> str | None:
    """The HTML a reply carries, if any; the card offers to open or save it."""
    for block in code_blocks(text):
        if block.fence.language.lower() == "html":
            return block.code
    document = _DOCUMENT.search(text)
    return document.group(1) if document else None
