"""What the benchmarks measured, read for the docs and the README: results, tables, sizing."""
