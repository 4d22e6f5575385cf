"""surfaces/iris."""
