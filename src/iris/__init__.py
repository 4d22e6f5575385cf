"""Iris: a streaming-first AI agent gateway."""

__version__ = "0.1.0"
