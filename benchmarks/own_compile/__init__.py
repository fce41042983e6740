"""Measure your own model's compile: ``python -m benchmarks run own-compile MODULE:FUNCTION``."""
