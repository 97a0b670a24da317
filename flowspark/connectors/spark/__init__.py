"""Spark's own sources and sinks in a flow, with rows as Python dicts.

Not in Bytewax.  `SparkSource` reads any Spark streaming source the session
has (parquet, json, csv, text, orc, and table formats where installed) and
emits one `dict` per row (`source`); `SparkSink` writes `dict` items, a
micro-batch at a time, with Spark's writer for a format, a folder of files
or a table of the session's catalog, exactly once where the output allows
it (`sink`).
"""

from flowspark.connectors.spark.sink import SaveMode, SparkSink
from flowspark.connectors.spark.source import SparkSource, SpoolPosition

__all__ = ["SaveMode", "SparkSink", "SparkSource", "SpoolPosition"]
