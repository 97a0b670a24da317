"""The many-keys flow as a Structured Streaming query of plain Spark SQL, in micro-batches: Spark's own cost of the shape.

    python -m benchmarks.native_stream

reads `FLOWBENCH_INPUT`, a directory of CSV files of `key,second,value`
(`benchmarks.data.ensure_split_input`), one file per micro-batch, and keeps
a running count and sum per key in Spark's RocksDB state store (a streaming
aggregation in update mode).  Each micro-batch writes `key,count,sum` for
the keys it updated whose count is a multiple of 10, as text part files
under `FLOWBENCH_OUTPUT`.  No Python runs per row: what it costs is Spark's
micro-batches, its shuffle and its state store.

Its output is not the flow's: `user_totals` writes every 10th event of a
key as it comes, the query writes a key's totals as each micro-batch
leaves them.  The work per micro-batch is the same: every key touched is
read from the state store and written back.  Spark's settings are
`benchmarks.native`'s plus the ones flowspark gives the Spark it starts
for a streaming query (the changelog state commits, the checkpoint file
manager, the JIT's first tier only), so that the two differ in what
runs, not in how Spark is set up.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Dict

from pyspark.sql import DataFrame
from pyspark.sql import functions as fn

from benchmarks.native import session
from flowspark.engine.spark.session import spark_settings

STREAMING_KEYS = (
    "spark.driver.defaultJavaOptions",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled",
    "spark.sql.streaming.checkpointFileManagerClass",
    "spark.sql.streaming.noDataMicroBatches.enabled",
)
"""The settings of flowspark's own Spark (`spark_settings`) that a streaming query's cost depends on."""


def streaming_settings() -> Dict[str, str]:
    """flowspark's values of `STREAMING_KEYS`, as it sets them on any Spark it starts."""
    chosen = spark_settings(local=False, java_options="", conf={})
    return {key: chosen[key] for key in STREAMING_KEYS}


def main() -> None:
    inp, out = os.environ["FLOWBENCH_INPUT"], os.environ["FLOWBENCH_OUTPUT"]
    spark = session("native-stream-user_totals", streaming_settings())
    events = spark.readStream.schema("key STRING, second INT, value INT").option("maxFilesPerTrigger", 1).csv(inp)
    totals = events.groupBy("key").agg(fn.count("*").alias("n"), fn.sum("value").alias("total"))
    lines = totals.where(fn.col("n") % 10 == 0).select(
        fn.concat_ws(",", "key", fn.col("n").cast("string"), fn.col("total").cast("string")).alias("value")
    )

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("append").text(out)

    with tempfile.TemporaryDirectory(prefix="native-stream-") as checkpoint:
        query = (
            lines.writeStream.outputMode("update")
            .foreachBatch(write)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 1:
        sys.exit("usage: python -m benchmarks.native_stream  (FLOWBENCH_INPUT: a directory, one file per micro-batch)")
    main()
