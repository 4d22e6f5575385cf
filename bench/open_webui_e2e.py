"""Open WebUI end to end: a real Open WebUI in headless chromium, Iris behind it, the scripted
fake upstream behind Iris.

Open WebUI is too heavy for the suite's budget (``pip install open-webui`` pulls a few GB onto
Python 3.11), so it lives in a venv of its own; the suite replays the request bodies it sends
(``tests/interop/test_open_webui.py``) and this script checks the same paths through the real
thing:

1. ``iris serve`` (a subprocess, an API key) against the fake upstream, whose model answers
   Open WebUI's task prompts with JSON and anything else with a sentence;
2. ``open-webui serve`` from ``--venv`` (created with ``--install``), single-user
   (``WEBUI_AUTH=False``), its only connection Iris (``OPENAI_API_BASE_URL``);
3. Debian's chromium through Playwright opens ``/?models=<model>&q=<prompt>`` — Open WebUI
   selects the model and sends the prompt — once with the provider's model and once with
   ``iris-agent``, and waits for the reply on the page.

Prints, per chat: the seconds until the reply's first words and its whole text showed in the
page, and for every request Open WebUI made through Iris: the kind (chat, or the title / tags /
follow-up task) and the tools that reached the model — Iris's own
(terminal, read_file) only for the chat on ``iris-agent``, never for a task.

    python bench/open_webui_e2e.py --install            # once: a venv with open-webui
    python bench/open_webui_e2e.py [--venv .venv-open-webui] [--keep]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.scenarios import Received, Scenario  # noqa: E402
from tests.fakes.served import free_port, serve  # noqa: E402
from tests.fakes.upstream import FakeUpstream, responder, text  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
KEY = "sk-bench-open-webui-0123456789abcdef"
ANSWER = "Mont Blanc is the tallest mountain in the Alps, at 4,806 metres."


def answers(request: Received) -> Scenario:
    content = str(request.body["messages"][-1].get("content") or "")
    if content.startswith("### Task:"):
        if "follow_ups" in content:
            return text('{ "follow_ups": ["How long is the climb?"] }')
        if '"tags"' in content:
            return text('{ "tags": ["Geography"] }')
        return text('{ "title": "Alps Summit" }')
    words = ANSWER.split(" ")
    return text(*(w + " " for w in words[:-1]), words[-1], delay=0.05)


def kind(body: dict[str, Any]) -> str:
    content = str(body["messages"][-1].get("content") or "")
    if not content.startswith("### Task:"):
        return "chat"
    for name, marker in (("follow-ups", "follow_ups"), ("tags", '"tags"'), ("title", "title")):
        if marker in content:
            return name
    return "task"


def install(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = venv / "bin" / "pip"
    subprocess.run([str(pip), "install", "--upgrade", "pip"], check=True)
    subprocess.run([str(pip), "install", "open-webui"], check=True)


def start_open_webui(venv: Path, iris: str, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        "DATA_DIR": str(data),
        "WEBUI_AUTH": "False",
        "WEBUI_SECRET_KEY": "bench-secret",
        "ENABLE_OLLAMA_API": "False",
        "OPENAI_API_BASE_URL": f"{iris}/v1",
        "OPENAI_API_KEY": KEY,
        "OFFLINE_MODE": "True",
        "RAG_EMBEDDING_MODEL_AUTO_UPDATE": "False",
        "ENABLE_TITLE_GENERATION": "True",
        "ENABLE_TAGS_GENERATION": "True",
        "ENABLE_FOLLOW_UP_GENERATION": "True",
    }
    process = subprocess.Popen(
        [str(venv / "bin" / "open-webui"), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(data / "open-webui.log").open("wb"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300  # its first start migrates a database and loads a lot
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"open-webui exited; see {data / 'open-webui.log'}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(1)
    process.kill()
    raise SystemExit("open-webui did not answer /health within 300 s")


def chat(page: Any, url: str, model: str, prompt: str) -> tuple[float, float, str]:
    """Open a chat with ``model``, send ``prompt``; seconds to the first words and to the whole
    answer on the page, and the text shown."""
    started = time.monotonic()
    page.goto(f"{url}/?models={model}&q={prompt}")
    first_words = ANSWER.split(" ")[0]
    page.get_by_text(first_words, exact=False).first.wait_for(timeout=60_000)
    first = time.monotonic() - started
    page.get_by_text(ANSWER.split(" ")[-1], exact=False).first.wait_for(timeout=60_000)
    whole = time.monotonic() - started
    shown = page.get_by_text(first_words, exact=False).first.inner_text()
    return first, whole, shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path(".venv-open-webui"))
    parser.add_argument("--install", action="store_true", help="create --venv with open-webui")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    args = parser.parse_args()
    if args.install:
        install(args.venv)
        return
    if not (args.venv / "bin" / "open-webui").exists():
        raise SystemExit(f"no open-webui in {args.venv}: run with --install first")
    from playwright.sync_api import sync_playwright

    data = Path(tempfile.mkdtemp(prefix="iris-owui-"))
    with FakeUpstream() as upstream:
        upstream.default = responder(answers)
        iris, iris_url = serve(data, upstream.base_url, platforms={"api_server": {"api_key": KEY}})
        owui = None
        try:
            owui, owui_url = start_open_webui(args.venv, iris_url, data)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM)
                for model in ("fake-model", "iris-agent"):
                    page = browser.new_page()
                    first, whole, shown = chat(page, owui_url, model, "tallest Alps mountain?")
                    print(f"{model:>11}: first words {first:.2f} s, whole {whole:.2f} s")
                    print(f"             shown: {shown[:70]!r}")
                    page.close()
                # The tasks follow the reply; give them a moment to land.
                time.sleep(5)
                browser.close()
        finally:
            if owui is not None:
                owui.terminate()
                owui.wait(10)
            iris.stop()
        print("\nrequests through Iris (kind, tools the model was offered):")
        for request in upstream.requests:
            if request.path != "/v1/chat/completions":
                continue
            tools = [t["function"]["name"] for t in request.body.get("tools") or []]
            print(f"  {kind(request.body):>10}  {tools or '-'}")
    if not args.keep:
        import shutil

        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
