"""The streaming cursor ▉, drawn after the last text of the tail — never fed to the parser.

Putting the cursor into the incremental parser's input would break its append-only diff. It
goes into the source handed to the renderer instead, right after the tail's last inline text
(found from the tail's tokens, so a rule or a setext underline after it keeps its meaning).
Inside code, tables and HTML it is left out: there it would read as content.
"""

from __future__ import annotations

from collections.abc import Sequence

from markdown_it.token import Token

CURSOR = "▉"
_HIDDEN_AFTER = ("fence", "code_block", "table_close", "html_block")


def with_cursor(source: str, tokens: Sequence[Token]) -> str:
    """``source`` (whose parse is ``tokens``) with the cursor after its last inline text.

    A lone cursor when nothing is parsed yet; the source as it is when the cursor would read
    as content."""
    if not tokens:
        return CURSOR
    last_block = next((t for t in reversed(tokens) if t.level == 0), None)
    if last_block is None or last_block.type in _HIDDEN_AFTER:
        return source
    inline = next((t for t in reversed(tokens) if t.type == "inline" and t.map), None)
    if inline is None or inline.map is None:
        return source
    lines = source.split("\n")
    last = inline.map[1] - 1
    if not 0 <= last < len(lines):
        return source
    # Before the trailing spaces of a hard break, so the break stays one.
    line = lines[last]
    text = line.rstrip(" ")
    lines[last] = text + CURSOR + line[len(text) :]
    return "\n".join(lines)
