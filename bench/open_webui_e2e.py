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
3. Debian's chromium through Playwright: the page signs in by itself, the user's Advanced Params
   are saved (``ADVANCED``, as Settings → General → Advanced Parameters stores them), then
   ``/?models=<model>&q=<prompt>`` fills the chat and the send button sends it — once with the
   provider's model and once with ``iris-agent`` — and the reply is awaited on the page.

Prints, per chat: the seconds from the send until the reply's first words and its whole text
showed in the page, and for every request Open WebUI made through Iris: the kind (chat, or the
title / tags / follow-up task), the tools that reached the model — Iris's own (terminal,
read_file) never for a task; Open WebUI's native function calling sends its own with every
chat, so then not Iris's either — and how many of the Advanced Params arrived as set.

    python bench/open_webui_e2e.py --install --venv /work/owui-venv    # once, a few GB
    python bench/open_webui_e2e.py --venv /work/owui-venv [--keep]

``--install`` pins open-webui 0.12.4 and the CPU build of torch; the default ``--venv``
(``.venv-open-webui``) is git-ignored. Open WebUI's first start migrates its database and takes
a few minutes on a loaded machine.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.scenarios import Received, Scenario  # noqa: E402
from tests.fakes.served import free_port, serve  # noqa: E402
from tests.fakes.upstream import FakeUpstream, responder, text  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
# Chromium's own background connections (updates, sync, safe browsing) are refused on a closed
# network, many at a time; none of them is part of the chat.
CHROMIUM_ARGS = [
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
IRIS_TOOLS = {"terminal", "read_file"}
# (label, model, Advanced Params beyond ``ADVANCED``): Open WebUI's default native function
# calling sends its own tools, so only the legacy chat on iris-agent leaves the tools to Iris.
CHATS = (
    ("fake-model", "fake-model", {}),
    ("iris-agent", "iris-agent", {}),
    ("iris-agent (legacy)", "iris-agent", {"function_calling": "legacy"}),
)
KEY = "sk-bench-open-webui-0123456789abcdef"
# Settings → General → Advanced Parameters, as its form stores them (``stop`` and ``logit_bias``
# as typed); and each as it should reach the model.
ADVANCED = {
    "temperature": 0.6,
    "top_p": 0.9,
    "top_k": 40,
    "min_p": 0.05,
    "seed": 42,
    "max_tokens": 2048,
    "frequency_penalty": 0.2,
    "presence_penalty": 0.1,
    "reasoning_effort": "medium",
    "repeat_penalty": 1.1,
    "num_ctx": 8192,
    "num_gpu": 99,
    "keep_alive": "5m",
    "stop": "\\n\\nUSER:",
    "logit_bias": "5432:100, 413:-100",
}
SENT = {**ADVANCED, "stop": ["\n\nUSER:"], "logit_bias": {"5432": 100, "413": -100}}
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


OPEN_WEBUI = "open-webui==0.12.4"
# Open WebUI takes any torch; a plain ``torch`` is a CUDA build of several GB, so the CPU build
# pinned here goes in first (on these machines pip takes it from a local file) and stays pinned.
TORCH = "torch==2.13.0"


def install(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = str(venv / "bin" / "pip")
    subprocess.run([pip, "install", TORCH], check=True)
    subprocess.run([pip, "install", OPEN_WEBUI, TORCH], check=True)


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
        # Its own log lines (loguru) go to stdout, uvicorn's to stderr: both, to see why a chat
        # did not reach Iris.
        stdout=(data / "open-webui.log").open("wb"),
        stderr=subprocess.STDOUT,
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


def chat(page: Any, url: str, model: str, prompt: str, shots: Path) -> tuple[float, float, str]:
    """Open a chat with ``model`` and ``prompt`` in its input, send it; seconds from the send
    to the first words and to the whole answer on the page, and the text shown. On a timeout
    the page is saved as ``<shots>/<model>.png`` and its text printed."""
    # ``?q=`` only fills the input (Open WebUI 0.12): the send button sends it.
    page.goto(f"{url}/?models={model}&q={quote(prompt)}")
    first_words = " ".join(ANSWER.split(" ")[:2])
    try:
        send = page.locator("#send-message-button")
        send.wait_for(timeout=60_000)
        started = time.monotonic()
        send.click()
        page.get_by_text(first_words, exact=False).first.wait_for(timeout=60_000)
        first = time.monotonic() - started
        page.get_by_text(ANSWER.split(" ")[-1], exact=False).first.wait_for(timeout=60_000)
    except Exception:
        page.screenshot(path=str(shots / f"{model}.png"))
        print(f"{model}: no answer on the page; it shows:\n{page.inner_text('body')[:1500]}")
        raise
    whole = time.monotonic() - started
    shown = page.get_by_text(first_words, exact=False).first.inner_text()
    return first, whole, shown


def set_advanced_params(page: Any, url: str, extra: dict[str, Any]) -> None:
    """Save ``ADVANCED`` and ``extra`` as the user's Advanced Params, as the settings form
    does; every chat opened afterwards sends them. The version seen keeps the "What's New" dialog closed."""
    page.goto(url)  # with WEBUI_AUTH=False the page signs in by itself
    page.wait_for_function("() => localStorage.token", timeout=60_000)
    token = page.evaluate("() => localStorage.token")
    version = httpx.get(f"{url}/api/version", timeout=30).json()["version"]
    response = httpx.post(
        f"{url}/api/v1/users/user/settings/update",
        headers={"Authorization": f"Bearer {token}"},
        json={"ui": {"params": {**ADVANCED, **extra}, "version": version}},
        timeout=30,
    )
    response.raise_for_status()


def report(requests: list[Received], starts: list[tuple[str, int]]) -> None:
    print("\nrequests through Iris per chat (kind, tools offered to the model, Advanced Params):")
    bounds = [*(start for _, start in starts[1:]), len(requests)]
    for (label, start), end in zip(starts, bounds, strict=True):
        print(f"  {label}:")
        for request in requests[start:end]:
            if request.path == "/v1/chat/completions":
                line(request.body)


def line(body: dict[str, Any]) -> None:
    names = [t["function"]["name"] for t in body.get("tools") or []]
    # Open WebUI's native function calling sends its own tools (about 36) with every chat.
    ours = [name for name in names if name in IRIS_TOOLS]
    tools = f"{len(names)} tools" + (f" incl. Iris's {ours}" if ours else "")
    arrived = [name for name in SENT if name in body]
    if kind(body) == "chat":
        as_set = [name for name in arrived if body[name] == SENT[name]]
        params = f"{len(as_set)}/{len(SENT)} Advanced Params as set"
        missing = [name for name in SENT if name not in body]
        changed = [f"{name}={body[name]!r}" for name in arrived if name not in as_set]
        params += f", missing {missing}" if missing else ""
        params += f", changed {changed}" if changed else ""
    else:  # Open WebUI gives its tasks no Advanced Params, only its own limits
        params = ", ".join(f"{name}={body[name]!r}" for name in arrived) or "-"
    print(f"    {kind(body):>10}  {tools:<34}  {params}")


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
        starts: list[tuple[str, int]] = []
        try:
            owui, owui_url = start_open_webui(args.venv, iris_url, data)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                for label, model, extra in CHATS:
                    page = browser.new_page()
                    set_advanced_params(page, owui_url, extra)
                    starts.append((label, len(upstream.requests)))
                    first, whole, shown = chat(
                        page, owui_url, model, "tallest Alps mountain?", data
                    )
                    print(f"{label:>20}: first words {first:.2f} s, whole {whole:.2f} s")
                    print(f"{'':>20}  shown: {shown[:70]!r}")
                    # The title, follow-up and tags tasks follow the reply: let them land
                    # before the next chat, so each is counted with its own.
                    with contextlib.suppress(AssertionError):
                        upstream.wait_for_request(starts[-1][1] + 4, timeout=30)
                    page.close()
                browser.close()
        finally:
            if owui is not None:
                owui.terminate()
                owui.wait(10)
            iris.stop()
            report(upstream.requests, starts)
    if not args.keep:
        import shutil

        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
