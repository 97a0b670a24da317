"""The responsiveness rows' flows as plain PySpark: what Spark itself takes, with no flowspark in between.

    python -m benchmarks.native_live wordcount      (or map_flow, count_flow)

`wordcount` is the README example as a Spark user writes it: the same
sample text, lowercased, split with the same pattern, counted per word with
Spark SQL, each `(word, count)` printed as the example's `StdOutSink` does.

`map_flow` and `count_flow` are the paced latency flows of
`benchmarks/flows/paced.py` as Structured Streaming queries, Spark's own
latency floor for them.  The same items, pacing and samples as `benchmarks/flows/paced.py`, with
no flowspark in between: a Python streaming data source emits `(index,
stamp)` rows as they fall due (item `i` is due at `start + i / rate`, and
that is its stamp), and a `foreachBatch` sink in this process notes when
each item arrived.  `map_flow` selects the stamp; `count_flow` groups by
`index % 100` and keeps a running count per key with Python's
`transformWithState` on the RocksDB state store.  Spark settings are the
ones a Spark user starts with for such a query: `local[2]`, two shuffle
partitions, the UI off, a trigger as soon as the previous micro-batch ends.

The sink writes its samples to `FLOWBENCH_LATENCY_DIR` as the paced flow
does (`FIRST`, then one samples file); `FLOWBENCH_WARMUP` plus
`FLOWBENCH_SECONDS` after the first write, the query is stopped.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any, Iterator, List, Tuple

from pyspark.sql import DataFrame, Row
from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import LongType, StructField, StructType

from benchmarks.flows.samples import FIRST, KEYS, latency_dir, mark_first, stamped, write_samples
from benchmarks.native import session

FLOWS = ("wordcount", "map_flow", "count_flow")
WORD = r'[^\\s!,.?":;0-9]+'
"""The example's word pattern (`tokenize`), as a Java regular expression in a SQL string literal."""
SCHEMA = "index long, stamp double"


class _PacedReader(SimpleDataSourceStreamReader):
    """The items due by each read, from the reader's creation on."""

    def __init__(self, rate: float) -> None:
        self._rate = rate
        self._start = time.time()

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's name
        return {"sent": 0}

    def read(self, start: dict[str, int]) -> Tuple[Iterator[Tuple[int, float]], dict[str, int]]:
        due = int((time.time() - self._start) * self._rate) + 1
        sent = start["sent"]
        return iter(stamped(self._start, self._rate, sent, max(sent, due))), {"sent": max(sent, due)}

    def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Iterator[Tuple[int, float]]:  # noqa: N802 - Spark's name
        return iter(stamped(self._start, self._rate, start["sent"], end["sent"]))


class PacedSource(DataSource):
    """`spark.readStream.format("paced")`: one stream of paced, stamped items (option `rate`, items per second)."""

    @classmethod
    def name(cls) -> str:
        return "paced"

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:  # noqa: N802 - Spark's name
        return _PacedReader(float(self.options.get("rate", 1000)))


class RunningCount(StatefulProcessor):
    """Per key: the count of items so far, emitted with each item's stamp."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._count = handle.getValueState("count", StructType([StructField("n", LongType())]))

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802, N803 - Spark's names
        stored = self._count.get()
        seen = stored[0] if stored is not None else 0
        out = []
        for row in rows:
            seen += 1
            out.append(Row(count=seen, stamp=row.stamp))
        self._count.update((seen,))
        return iter(out)

    def close(self) -> None:
        pass


class Samples:
    """The `foreachBatch` sink: each item's stamp and the time its micro-batch reached this process."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.stamps = array("d")
        self.written = array("d")
        self.first = 0.0

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        stamps: List[float] = frame.select("stamp").toArrow().column(0).to_pylist()
        now = time.time()
        if stamps and not self.first:
            self.first = now
            mark_first(self.folder / FIRST, now)
        self.stamps.extend(stamps)
        self.written.extend([now] * len(stamps))

    def save(self) -> None:
        write_samples(self.folder / f"samples-{os.getpid()}-native.txt", self.stamps, self.written)


def wordcount() -> None:
    """Print each word's count in the README example's sample text."""
    spec = importlib.util.find_spec("flowspark")
    if spec is None or spec.origin is None:
        sys.exit("flowspark is not installed: the wordcount sample data comes with it")
    text = Path(spec.origin).parent / "examples" / "sample_data" / "wordcount.txt"
    spark = session("native-wordcount")
    lines = spark.read.text(str(text))
    words = lines.selectExpr(f"explode(regexp_extract_all(lower(value), '{WORD}', 0)) AS word")
    for row in words.groupBy("word").count().collect():
        print((row.word, row["count"]), flush=True)
    spark.stop()


def paced(flow: str) -> None:
    """Run a paced flow until `FLOWBENCH_WARMUP` plus `FLOWBENCH_SECONDS` after its first output."""
    rate = float(os.environ.get("FLOWBENCH_RATE", 1000))
    after_first = float(os.environ.get("FLOWBENCH_WARMUP", 5)) + float(os.environ.get("FLOWBENCH_SECONDS", 15))
    spark = session(f"native-{flow}")
    spark.dataSource.register(PacedSource)
    items = spark.readStream.format("paced").option("rate", str(rate)).load()
    if flow == "count_flow":
        keyed = items.selectExpr(f"index % {KEYS} AS key", "stamp")
        items = keyed.groupBy("key").transformWithState(RunningCount(), "count long, stamp double", "Append", "None")
    samples = Samples(latency_dir())
    with tempfile.TemporaryDirectory(prefix="native-paced-") as checkpoint:
        query = (
            items.select("stamp")
            .writeStream.foreachBatch(samples)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        while query.isActive and not (samples.first and time.time() >= samples.first + after_first):
            time.sleep(0.05)
        query.stop()
    samples.save()
    spark.stop()


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in FLOWS:
        sys.exit(f"usage: python -m benchmarks.native_live {{{','.join(FLOWS)}}}")
    if sys.argv[1] == "wordcount":
        wordcount()
    else:
        paced(sys.argv[1])
