"""The look of the terminal chat: what each style class of the renderer and prompt shows as.

The renderer and ``markdown.py`` only name classes (``class:md.code``); colours live here, in
prompt_toolkit's style syntax, so a theme change touches one file.
"""

from __future__ import annotations

from prompt_toolkit.styles import Style, default_pygments_style, merge_styles

THEME: dict[str, str] = {
    "prompt": "ansicyan bold",
    "info": "fg:ansibrightblack",
    "box": "ansicyan",
    "box.commentary": "ansicyan",
    "commentary": "italic fg:ansibrightblack",
    "reasoning": "fg:ansibrightblack",
    "reasoning.box": "fg:ansibrightblack",
    "reset": "ansiyellow",
    "tool": "fg:ansibrightblack",
    "tool.running": "fg:ansibrightblack",
    "tool.ok": "ansigreen",
    "tool.fail": "ansired",
    "tool.detail": "fg:ansibrightblack",
    "approval": "ansiyellow bold",
    "approval.prompt": "ansiyellow",
    "footer": "fg:ansibrightblack",
    "interrupted": "ansiyellow",
    "error": "ansired bold",
    "md.heading": "bold underline",
    "md.strong": "bold",
    "md.em": "italic",
    "md.strike": "strike",
    "md.code": "ansiyellow",
    "md.fence": "fg:ansibrightblack",
    "md.link": "underline ansiblue",
    "md.url": "fg:ansibrightblack",
    "md.quote": "italic",
    "md.bullet": "ansicyan",
    "md.rule": "fg:ansibrightblack",
}

# Code in fences is coloured by Pygments token classes (``class:pygments.keyword``).
STYLE = merge_styles([default_pygments_style(), Style.from_dict(THEME)])
