"""Benchmarks: run from the repository root as `.venv/bin/python -m bench.NAME` (see the README)."""
