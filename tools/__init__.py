"""Scripts the Makefile runs (`python -m tools.NAME` from the repository root)."""
