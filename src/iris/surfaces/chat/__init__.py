"""surfaces/chat."""
