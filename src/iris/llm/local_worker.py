"""The embedded model's own process: llama.cpp's server engine (``xllamacpp``) on a Unix socket.

Run by :mod:`iris.llm.local` as ``python -m iris.llm.local_worker``, never by hand. Its settings
arrive as one JSON line on stdin (the socket's key among them, so it is in no process listing);
it answers one line on stdout, ``{"ready": true}`` or ``{"error": "..."}``, then serves until its
stdin closes: the parent closed it or died. Native code that crashes here ends this process
only; the parent sees the signal and says so.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any


def serve(settings: dict[str, Any]) -> Any:
    # The compiled module (no stubs; the package re-exports it with ``*``).
    native: Any = importlib.import_module("xllamacpp.xllamacpp")

    params = native.CommonParams()
    params.model.path = settings["model"]
    params.hostnames = [settings["socket"]]  # a path ending in .sock: AF_UNIX, no TCP port
    params.api_keys = [settings["key"]]
    params.n_parallel = settings["parallel"]
    # Each slot gets its own window: llama.cpp splits n_ctx evenly between the slots.
    params.n_ctx = settings["window"] * settings["parallel"]
    params.cpuparams.n_threads = settings["threads"]
    params.cpuparams_batch.n_threads = settings["threads"]
    params.warmup = False
    params.ui = False
    params.endpoint_slots = True
    params.endpoint_metrics = True
    params.cache_ram_mib = 0  # no prompt cache in RAM beyond the slots' own
    params.verbosity = 2  # warnings and errors (0 output, 1 error, 2 warning, 3 info)
    return native.Server(params)


def main() -> None:
    out = sys.stdout
    try:
        settings = json.loads(sys.stdin.readline())
        server = serve(settings)
    except Exception as exc:
        out.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        out.flush()
        os._exit(1)
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    sys.stdin.read()  # until the parent closes the pipe (or dies)
    del server
    os._exit(0)  # the server's threads are done; skip interpreter teardown


if __name__ == "__main__":
    main()
