"""flowspark: Bytewax's dataflow API, executed by Apache Spark."""

__version__ = "0.1.0"
