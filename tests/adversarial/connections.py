"""Raw connections to a real iris serve, for the adversarial HTTP tests."""

from __future__ import annotations

import socket


def closed(sock: socket.socket) -> bool:
    """Has the server closed this socket (EOF or reset)? Never blocks."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
