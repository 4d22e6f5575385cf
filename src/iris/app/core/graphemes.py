"""Grapheme boundaries, so a reveal never shows half an emoji or a letter without its accent.

Unicode's extended grapheme clusters come from the ``regex`` module's ``\\X`` (Hangul jamo,
Indic conjuncts, spacing marks, emoji ZWJ sequences, flags, CRLF). Clusters are walked from a
nearby point where a boundary is certain, not from the start of the text, so a boundary costs
about the length of one cluster, not of the reply.
"""

from __future__ import annotations

import regex

_CLUSTER = regex.compile(r"\X")
# A character that never joins the one after it (Grapheme_Cluster_Break=Other) ...
_LONE = regex.compile(r"\p{Grapheme_Cluster_Break=Other}")
# ... is followed by a boundary unless the next one attaches to it.
_ATTACHES = regex.compile(
    r"[\p{Grapheme_Cluster_Break=Extend}\p{Grapheme_Cluster_Break=ZWJ}"
    r"\p{Grapheme_Cluster_Break=SpacingMark}]"
)


def _certain(text: str, i: int) -> bool:
    """Is there surely a boundary before index ``i``, whatever comes before ``i - 1``?"""
    if i <= 0 or i >= len(text):
        return True
    if text[i - 1] == "\n":
        return True  # a line feed is a cluster of its own
    return bool(_LONE.match(text, i - 1)) and not _ATTACHES.match(text, i)


def _around(text: str, i: int) -> tuple[int, int]:
    """The boundaries at or before ``i`` and after ``i`` (the same when ``i`` is one)."""
    start = i
    while not _certain(text, start):
        start -= 1
    before = start
    while start < i:
        before = start
        cluster = _CLUSTER.match(text, start)
        assert cluster is not None  # \X matches at any index inside the text
        start = cluster.end()
    return (i, i) if start == i else (before, start)


def is_boundary(text: str, i: int) -> bool:
    """May ``text`` be cut before index ``i``?"""
    return _around(text, i)[0] == i


def boundary_at_or_after(text: str, i: int) -> int:
    return _around(text, i)[1]


def boundary_at_or_before(text: str, i: int) -> int:
    return _around(text, i)[0]
