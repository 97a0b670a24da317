"""Flows the kill-and-resume tests run in a subprocess, reading paths from the environment."""

import os
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional, Tuple

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.connectors.files import DirSink, FileSink, FileSource
from flowspark.connectors.postgres import PostgresSink
from flowspark.connectors.spark import SparkSink, SparkSource
from flowspark.dataflow import Dataflow
from flowspark.operators import StatefulBatchLogic

IN_PATH = os.environ.get("KILL_IN", "in.txt")
OUT_PATH = os.environ.get("KILL_OUT", "out.txt")


class RunningSum(StatefulBatchLogic[int, str, Tuple[int, int]]):
    """Sums a key's values; asks to be woken an hour later (a timer that never fires here)."""

    def __init__(self, resume: Optional[Tuple[int, int]]) -> None:
        self.total, self.seen = resume or (0, 0)

    def on_batch(self, values: List[int]) -> Tuple[List[str], bool]:
        out = []
        for v in values:
            self.total += v
            self.seen += 1
            out.append(f"{self.seen}:{self.total}")
        return out, StatefulBatchLogic.RETAIN

    def on_notify(self) -> Tuple[List[str], bool]:
        return ["notified"], StatefulBatchLogic.RETAIN

    def on_eof(self) -> Tuple[List[str], bool]:
        # Discarding at the end makes a finished run's resume emit nothing: a
        # run killed while shutting down after its last batch must not count twice.
        return [f"eof:{self.total}"], StatefulBatchLogic.DISCARD

    def notify_at(self) -> datetime:
        return datetime(2100, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=self.seen)

    def snapshot(self) -> Tuple[int, int]:
        return (self.total, self.seen)


def parse(line: str) -> Tuple[str, int]:
    key, _, value = line.split(",")
    return key, int(value)


def as_line(item: Tuple[str, str]) -> Tuple[str, str]:
    key, value = item
    return ("all", f"{key},{value}")


flow = Dataflow("kill_notify")
sums = op.stateful_batch(
    "sum", op.map("parse", op.input("inp", flow, FileSource(IN_PATH, batch_size=500)), parse), RunningSum
)
op.output("out", op.map("line", sums, as_line), FileSink(OUT_PATH))


def as_keyed_line(item: Tuple[str, str]) -> Tuple[str, str]:
    key, value = item
    return (key, f"{key},{value}")


# The same running sums to three files chosen by key, written in Spark's tasks.
to_dir = Dataflow("kill_dir")
dir_sums = op.stateful_batch(
    "sum", op.map("parse", op.input("inp", to_dir, FileSource(IN_PATH, batch_size=500)), parse), RunningSum
)
op.output("out", op.map("line", dir_sums, as_keyed_line), DirSink(OUT_PATH, 3))


def as_table_row(item: Tuple[str, str]) -> Tuple[str, Dict[str, str]]:
    key, value = item
    return (key, {"key": key, "line": f"{key},{value}"})


# The same running sums as rows of a PostgreSQL table (`KILL_PG`, `KILL_TABLE`), written in Spark's tasks.
to_postgres = Dataflow("kill_postgres")
pg_sums = op.stateful_batch(
    "sum", op.map("parse", op.input("inp", to_postgres, FileSource(IN_PATH, batch_size=500)), parse), RunningSum
)
op.output(
    "out",
    op.map("row", pg_sums, as_table_row),
    PostgresSink(os.environ.get("KILL_PG", ""), os.environ.get("KILL_TABLE", "kill"), ["key", "line"], partitions=3),
)


def parse_event(line: str) -> Tuple[str, Tuple[int, int]]:
    key, second, value = line.split(",")
    return key, (int(second), int(value))


def event_time(event: Tuple[int, int]) -> datetime:
    return START + timedelta(seconds=event[0])


def window_line(item: Tuple[str, Tuple[int, int]]) -> Tuple[str, str]:
    key, (window_id, total) = item
    return ("all", f"{key},{window_id},{total}")


START = datetime(2024, 1, 1, tzinfo=timezone.utc)
# In-order timestamps and an hour's wait: no value is ever late, however long
# a killed run stays down, so every run must produce the same windows.
windowed = Dataflow("kill_windowed")
events = op.map("parse", op.input("inp", windowed, FileSource(IN_PATH, batch_size=500)), parse_event)
sums = win.fold_window(
    "sum",
    events,
    win.EventClock(event_time, wait_for_system_duration=timedelta(hours=1)),
    win.TumblingWindower(length=timedelta(seconds=60), align_to=START),
    lambda: 0,
    lambda total, event: total + event[1],
    lambda a, b: a + b,
)
op.output("out", op.map("line", sums.down, window_line), FileSink(OUT_PATH))


def parse_row(row: Dict[str, str]) -> Tuple[str, int]:
    return parse(row["value"])


def as_row(item: Tuple[str, str]) -> Dict[str, str]:
    key, value = item
    return {"line": f"{key},{value}"}


# The same running sums, read by Spark's text source and written by Spark's
# json writer: the inner source query and the sink's files must survive kills.
spark_io = Dataflow("kill_spark_io")
lines = op.input(
    "inp",
    spark_io,
    SparkSource(
        "text", {"path": os.path.dirname(IN_PATH), "pathGlobFilter": os.path.basename(IN_PATH)}, batch_size=500
    ),
)
spark_sums = op.stateful_batch("sum", op.map("parse", lines, parse_row), RunningSum)
op.output("out", op.map("row", spark_sums, as_row), SparkSink("json", {"path": OUT_PATH}, "line string"))


def as_keyed_row(item: Tuple[str, str]) -> Dict[str, str]:
    key, value = item
    return {"key": key, "line": f"{key},{value}"}


# The same running sums in partition folders by key (json), compacted every 5 micro-batches.
spark_parts = Dataflow("kill_spark_parts")
parts_sums = op.stateful_batch(
    "sum", op.map("parse", op.input("inp", spark_parts, FileSource(IN_PATH, batch_size=500)), parse), RunningSum
)
op.output(
    "out",
    op.map("row", parts_sums, as_keyed_row),
    SparkSink("json", {"path": OUT_PATH}, "key string, line string", partition_by=["key"], compact_every=5),
)


# The same running sums appended to a table of the session's (in-memory) catalog, its json files at `KILL_OUT`:
# each process makes the table again over them.
spark_table = Dataflow("kill_spark_table")
table_sums = op.stateful_batch(
    "sum", op.map("parse", op.input("inp", spark_table, FileSource(IN_PATH, batch_size=500)), parse), RunningSum
)
op.output(
    "out", op.map("row", table_sums, as_row), SparkSink("json", {"path": OUT_PATH}, "line string", table="kill_sums")
)


# The same running sums appended to a Delta Lake table at `KILL_OUT` (the run is given Delta's settings).
spark_delta = Dataflow("kill_spark_delta")
delta_sums = op.stateful_batch(
    "sum", op.map("parse", op.input("inp", spark_delta, FileSource(IN_PATH, batch_size=500)), parse), RunningSum
)
op.output("out", op.map("row", delta_sums, as_row), SparkSink("delta", {"path": OUT_PATH}, "line string"))
