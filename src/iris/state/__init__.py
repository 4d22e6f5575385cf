"""Everything Iris keeps: one module per kind of state, its Protocol and its implementations side
by side, and one factory per kind that ``store.url`` decides.

- ``sqlite``: the embedded SQLite store (one file, one connection on one worker thread);
- ``redis_store``: the shared Redis store (single node, Cluster or Sentinel) several processes use;
- ``sessions``, ``responses``, ``conversations``, ``devices``, ``controls``, ``framelog``: a
  Protocol (``Sessions``, ``Responses``, ...), its SQLite or memory implementation and its Redis
  twin (``SqliteSessions``/``RedisSessions``, ...), and ``<kind>_for(...)`` choosing one;
- ``approvals``: the approvals broker (``MemoryApprovals``/``RedisApprovals``,
  ``approvals_for``): tool calls waiting for a person's yes, the answers, the allowances;
- ``background``: background responses copied to Redis; ``lease``: a lease one process holds at
  a time; ``fingerprint``: the config a shared store was started with.

Every key in Redis starts with ``store.prefix`` (``iris`` by default), so deployments can share a
server; a chat's keys share the hash tag ``{chat:<id>}`` (one cluster slot).
"""
