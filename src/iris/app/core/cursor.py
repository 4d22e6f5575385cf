"""The streaming cursor ▉, added to the last text leaf of the parsed tail — never to the text.

Putting the cursor into the parse input would break the append-only diff and could change the
parse itself (``**bold▉`` is no longer bold). Inside code and tables it is left out: there it
would read as content.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

CURSOR = "▉"
_HIDDEN_IN = ("fence", "code_block", "table_close", "html_block")


def cursor_plugin(md: MarkdownIt) -> None:
    md.core.ruler.push("iris_cursor", _add_cursor)


def _add_cursor(state: StateCore) -> None:
    tokens = state.tokens
    last_block = next((t for t in reversed(tokens) if t.level == 0), None)
    if last_block is None or last_block.type in _HIDDEN_IN:
        return
    for token in reversed(tokens):
        if token.type == "inline" and token.children is not None:
            leaf = token.children[-1] if token.children else None
            if leaf is not None and leaf.type == "text":
                leaf.content += CURSOR
            else:
                token.children.append(Token("text", "", 0, content=CURSOR))
            return
