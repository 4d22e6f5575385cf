"""The shared store: one Redis database that several ``iris serve`` processes and hosts share.

With ``store.url: redis://…`` the state one process used to keep for itself lives here:

- ``connection``: the clients (one blocking, one asyncio), key names under ``store.prefix``, the
  startup check and what a failure means (``StoreUnavailable``: 503 / an ``error`` frame);
- ``lease``: a named lease one process holds at a time (a chat's running turn, a bot's poller),
  renewed while held, so a process that dies (kill -9) loses it within ``store.lease``.

Every key starts with ``store.prefix`` (``iris`` by default), so deployments can share a server.
"""
