"""The text formats Iris writes and reads back: each writer beside its reader, in one module."""
