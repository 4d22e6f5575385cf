"""A2A (Agent2Agent): Iris as an A2A server (``/a2a``) and remote A2A agents as its tools."""
