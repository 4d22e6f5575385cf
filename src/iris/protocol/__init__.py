"""The iris wire protocol: what the socket surface, the Textual app and the schema generator share.

- ``types``: every frame, both directions, as types; ``frames.schema.json`` is generated from it
  (``python -m iris.protocol.types``);
- ``frames``: the pure encoder, agent events in, server frames out;
- ``inbound``: parsing a client's frames into requests, and their error codes;
- ``appends``: ``message.append`` — a streaming message's text as appends, in UTF-16 offsets.
"""
