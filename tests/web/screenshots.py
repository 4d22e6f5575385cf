"""Regenerates the screenshots in docs/web.md: a finished tool turn at phone size, light and
dark, through the real ``iris serve`` on the scripted upstream.

    PYTHONPATH=src python -m tests.web.screenshots
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from tests.fakes.upstream import reasoning, tool_call

from .conftest import CHROMIUM, TOKEN, send, served_app, settled, wait_online

DOCS = Path(__file__).resolve().parents[2] / "docs"
ANSWER = """The project has **two** files:

1. `notes.txt`, a short note
2. `app.py`, the entry point

```python
def main() -> None:
    print("hello from iris")
```

Run it with `python app.py`."""


def main() -> None:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "work").mkdir()
        (tmp / "work" / "app.py").write_text("print('hello from iris')\n")
        with served_app(tmp) as running:
            running.upstream.script(
                tool_call("terminal", ['{"command": "ls"}'], content="Let me look at the files."),
                reasoning(["Two files; ", "describe both."], [ANSWER]),
            )
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
                for scheme in ("light", "dark"):
                    context = browser.new_context(
                        viewport={"width": 390, "height": 844},
                        device_scale_factor=2,
                        color_scheme=scheme,
                        service_workers="block",
                    )
                    page = context.new_page()
                    page.goto(f"{running.url}/#token={TOKEN}")
                    wait_online(page)
                    if scheme == "light":
                        send(page, "what is in this project?")
                    settled(page, 3)
                    page.screenshot(path=str(DOCS / f"web-phone-{scheme}.png"))
                    context.close()
                browser.close()


if __name__ == "__main__":
    main()
