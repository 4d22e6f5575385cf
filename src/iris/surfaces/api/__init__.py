"""surfaces/api."""
