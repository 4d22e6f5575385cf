"""The chat platforms: one adapter per platform over its real client library, and their base."""
