"""Benchmarks: the same flows on flowspark, Bytewax 0.21.1 and native Spark SQL (see README.md)."""
