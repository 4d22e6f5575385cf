"""How shown reasoning is laid out in front of the final answer on a chat platform. Pure.

Reasoning is never streamed into the answer: it is prepended once, to the final message, when
``display.show_reasoning`` is on for the platform.
"""

from __future__ import annotations

import re
from typing import assert_never

from iris.config import ReasoningStyle

_HEADER = "💭 **Reasoning:**"


def with_reasoning(answer: str, reasoning: str, style: ReasoningStyle) -> str:
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
            quoted = "\n".join(f"> {line}" if line else ">" for line in reasoning.split("\n"))
            block = f"{_HEADER}\n{quoted}"
        case "subtext":
            # Discord's "-# " small-text prefix works per line.
            lines = reasoning.split("\n")
            block = "\n".join(["-# 💭 Reasoning:", *(f"-# {line}" for line in lines if line)])
        case _:
            assert_never(style)
    return f"{block}\n\n{answer}" if answer else block
