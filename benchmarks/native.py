"""The benchmark flows as native Spark SQL batch queries on `local[2]`.

`python -m benchmarks.native FLOW` reads `FLOWBENCH_INPUT` (a CSV file of
`key,second,value`) and writes the same lines the dataflow version writes,
as a directory of text part files at `FLOWBENCH_OUTPUT`.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional

from pyspark.sql import SparkSession

QUERIES = {
    # fold_window sum over 60 s tumbling windows aligned to second 0: window id = second div 60.
    "windowed": """
        SELECT concat_ws(',', key, CAST(second DIV 60 AS STRING), CAST(sum(value) AS STRING))
        FROM events
        GROUP BY key, second DIV 60
    """,
    # map(parse) -> filter(value % 10 != 0) -> flat_map(odd values twice: value, -value) -> map(format)
    "stateless": """
        SELECT concat_ws(',', key, CAST(second AS STRING), CAST(v AS STRING))
        FROM events
        LATERAL VIEW explode(IF(value % 2 = 1, array(value, -value), array(value))) x AS v
        WHERE value % 10 != 0
    """,
    # stateful_map running count per key, in input order (the file's partitions are read in
    # order, so monotonically_increasing_id grows with the line position).
    "running_count": """
        SELECT concat_ws(',', key, CAST(second AS STRING), CAST(value AS STRING),
                         CAST(row_number() OVER (PARTITION BY key ORDER BY pos) AS STRING))
        FROM (SELECT *, monotonically_increasing_id() AS pos FROM events)
    """,
    # stateful_map running count and sum per key; every 10th count written.
    "user_totals": """
        SELECT concat_ws(',', key, CAST(n AS STRING), CAST(total AS STRING))
        FROM (SELECT key,
                     row_number() OVER (PARTITION BY key ORDER BY pos) AS n,
                     sum(value) OVER (PARTITION BY key ORDER BY pos ROWS UNBOUNDED PRECEDING) AS total
              FROM (SELECT *, monotonically_increasing_id() AS pos FROM events))
        WHERE n % 10 = 0
    """,
}


def session(name: str, settings: Optional[Dict[str, str]] = None) -> SparkSession:
    """A Spark of this process's own, as a Spark user starts one on this machine: `local[2]`, two shuffle partitions,
    the UI off, UTC, listening on loopback only, the RocksDB state store (for streaming queries' state); then
    `settings`."""
    builder = (
        SparkSession.builder.appName(name)
        .master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Spark listens on every interface by default; a benchmark on one
        # machine needs loopback only.
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
    )
    for key, value in (settings or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(flow: str) -> None:
    inp, out = os.environ["FLOWBENCH_INPUT"], os.environ["FLOWBENCH_OUTPUT"]
    spark = session(f"native-{flow}")
    events = spark.read.csv(inp, schema="key STRING, second INT, value INT")
    events.createOrReplaceTempView("events")
    spark.sql(QUERIES[flow]).write.mode("overwrite").text(out)
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in QUERIES:
        sys.exit(f"usage: python -m benchmarks.native {{{','.join(QUERIES)}}}")
    main(sys.argv[1])
