"""The iris socket surface: ``/iris/ws`` (WebSocket) and ``/iris/chats`` for the iris apps."""
