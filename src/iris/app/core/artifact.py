"""Finds the HTML artifact in a reply: a ```html fenced block, or a whole HTML document."""

from __future__ import annotations

import re

_FENCE = re.compile(
    r"^ {0,3}(`{3,}|~{3,})[ \t]*html\b[^\n]*\n(.*?)^ {0,3}\1[ \t]*$", re.M | re.S | re.I
)
_DOCUMENT = re.compile(r"(<!doctype html.*?</html>|<html[\s>].*?</html>)", re.S | re.I)


def find_html(text: str) -> str | None:
    """The HTML a reply carries, if any; the card offers to open or save it."""
    fenced = _FENCE.search(text)
    if fenced:
        return fenced.group(2)
    document = _DOCUMENT.search(text)
    return document.group(1) if document else None
