"""The streaming cursor ▉, added to the last text leaf of the parsed tail — never to the text.

Putting the cursor into the parse input would break the append-only diff and could change the
parse itself (``**bold▉`` is no longer bold). Inside code, tables and HTML it is left out: there
it would read as content.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it.token import Token

CURSOR = "▉"
_HIDDEN_AFTER = ("fence", "code_block", "table_close", "html_block")


def with_cursor(tokens: Sequence[Token]) -> list[Token]:
    """A copy of ``tokens`` whose last text leaf ends with the cursor (inputs are untouched)."""
    out = list(tokens)
    last_block = next((t for t in reversed(out) if t.level == 0), None)
    if last_block is None or last_block.type in _HIDDEN_AFTER:
        return out
    for at in range(len(out) - 1, -1, -1):
        inline = out[at]
        if inline.type == "inline" and inline.children is not None:
            children = list(inline.children)
            leaf = children[-1] if children else None
            if leaf is not None and leaf.type == "text":
                children[-1] = leaf.copy(content=leaf.content + CURSOR)
            else:
                children.append(Token("text", "", 0, content=CURSOR))
            out[at] = inline.copy(children=children)
            return out
    return out
