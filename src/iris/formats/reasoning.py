"""Reasoning laid out in front of an answer (doc 05 §5.2): the writer and its reader. Pure.

Doc 05's three ``reasoning_style`` layouts, in its exact form::

    code        💭 **Reasoning:**\\n```\\n<reasoning>\\n```\\n\\n<answer>
    blockquote  > 💭 **Reasoning:**\\n> <line>\\n> <line>\\n\\n<answer>
    subtext     -# 💭 Reasoning\\n-# <line>\\n\\n<answer>

``with_reasoning`` writes them (a chat platform prepends reasoning to the final message);
``split_reasoning`` reads them back (text from another gateway that inlines its thinking). The
reader is a best-effort parse of a stable format: anything it does not recognise falls back to
"no reasoning, the full text", so the whole answer is still shown.
"""

from __future__ import annotations

import re
from typing import assert_never

from iris.config import ReasoningStyle

_HEADER = "💭 **Reasoning:**"
_QUOTE_HEADER = "> " + _HEADER
_SUBTEXT_HEADER = "-# 💭 Reasoning"
# The fence may be longer than three backticks when the reasoning itself holds backticks.
_CODE = re.compile(
    r"💭 \*\*Reasoning:\*\*\n(?P<fence>`{3,})\n(?P<body>.*?)\n(?P=fence)(?:\n\n|$)", re.S
)
# Headers other gateways have been seen to write for the subtext layout, read but never written.
_SUBTEXT_HEADERS = (_SUBTEXT_HEADER, "-# 💭 Reasoning:", "-# 💭 **Reasoning:**")


def with_reasoning(answer: str, reasoning: str, style: ReasoningStyle) -> str:
    """``answer`` with ``reasoning`` laid out in front of it; the answer alone without reasoning.

    The subtext layout drops blank reasoning lines: Discord's ``-# `` small text works per line
    and an empty one would show the marker itself."""
    reasoning = reasoning.strip()
    if not reasoning:
        return answer
    match style:
        case "code":
            # A fence longer than any backtick run inside keeps the block closed where it should.
            longest = max((len(run) for run in re.findall(r"`+", reasoning)), default=0)
            fence = "`" * max(3, longest + 1)
            block = f"{_HEADER}\n{fence}\n{reasoning}\n{fence}"
        case "blockquote":
            quoted = (f"> {line}" if line else ">" for line in reasoning.split("\n"))
            block = "\n".join([_QUOTE_HEADER, *quoted])
        case "subtext":
            lines = (f"-# {line}" for line in reasoning.split("\n") if line)
            block = "\n".join([_SUBTEXT_HEADER, *lines])
        case _:
            assert_never(style)
    return f"{block}\n\n{answer}" if answer else block


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)``; ``(None, text)`` when the text carries no laid-out reasoning."""
    if text.startswith(_HEADER + "\n`"):
        match = _CODE.match(text)
        if match is None:
            return None, text
        return match.group("body"), text[match.end() :]
    if text.startswith(_QUOTE_HEADER):
        return _split_lines(text, _QUOTE_HEADER, ">")
    for header in _SUBTEXT_HEADERS:
        if text.startswith(header + "\n"):
            return _split_lines(text, header, "-#")
    return None, text


def _split_lines(text: str, header: str, marker: str) -> tuple[str | None, str]:
    lines = text.split("\n")
    if lines[0] != header:
        return None, text
    reasoning: list[str] = []
    i = 1
    while i < len(lines) and lines[i].startswith(marker):
        reasoning.append(lines[i][len(marker) :].removeprefix(" "))
        i += 1
    if not reasoning or (i < len(lines) and lines[i] != ""):
        # The block must end with a blank line (or the text): otherwise it is not our layout.
        return None, text
    return "\n".join(reasoning), "\n".join(lines[i + 1 :])
