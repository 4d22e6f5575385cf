"""The split of doc 05 §5.2: reasoning that arrives already laid out inside the answer text. Pure.

A model behind another gateway (or a provider that inlines its thinking) can hand us text that
starts with reasoning in one of the three ``reasoning_style`` layouts::

    code        💭 **Reasoning:**\\n```\\n<reasoning>\\n```\\n\\n<answer>
    blockquote  > 💭 **Reasoning:**\\n> <line>\\n> <line>\\n\\n<answer>
    subtext     -# 💭 Reasoning\\n-# <line>\\n\\n<answer>

``split_reasoning`` returns ``(reasoning, answer)``. It is a best-effort parse of a stable
format: anything it does not recognise falls back to "no reasoning, the full text", so the app
still shows the whole answer.
"""

from __future__ import annotations

import re

_HEADER = "💭 **Reasoning:**"
# The fence may be longer than three backticks when the reasoning itself holds backticks.
_CODE = re.compile(
    r"💭 \*\*Reasoning:\*\*\n(?P<fence>`{3,})\n(?P<body>.*?)\n(?P=fence)(?:\n\n|$)", re.S
)
_SUBTEXT_HEADERS = ("-# 💭 Reasoning", "-# 💭 Reasoning:", "-# 💭 **Reasoning:**")


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)``; ``(None, text)`` when the text carries no laid-out reasoning."""
    if text.startswith(_HEADER + "\n`"):
        match = _CODE.match(text)
        if match is None:
            return None, text
        return match.group("body"), text[match.end() :]
    if text.startswith("> " + _HEADER):
        return _split_lines(text, "> " + _HEADER, ">")
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
