"""The compile benchmark: ``python -m benchmarks run compile`` (``run.py`` says what and how)."""
