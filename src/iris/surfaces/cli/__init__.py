"""surfaces/cli."""
