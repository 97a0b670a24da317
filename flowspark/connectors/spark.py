"""Spark's own sources and sinks in a flow, with rows as Python dicts.

Not in Bytewax.  `SparkSource` reads any Spark streaming source the session
has (parquet, json, csv, text, orc, and table formats where installed) and
emits one `dict` per row; `SparkSink` writes `dict` items with any Spark
batch writer.

A `SparkSource` runs Spark's own streaming query beside the flow's: that
query keeps Spark's file log and offsets in the run's recovery directory and
hands each of its micro-batches over as an Arrow file in a spool directory
next to it; the flow's source partition reads the spool in order, and its
snapshot is the spool position (batch id, rows taken).  So a resumed run
continues where the flow's last committed batch stood, even if the inner
query had run ahead, and spool files go once the flow has committed past
them.  By default the source is bounded, like a file: it reads what is
there when the run starts (Spark's `availableNow`) and then ends;
`tail=True` keeps polling for new data.

A `SparkSink` with a `path` option writes each micro-batch as one file
named after the run and the batch id, through a staging directory, so a
batch replayed after a crash replaces its own file: exactly once.  Without
a path (a JDBC table, the console, ...) it appends, at least once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Mapping, Optional, Union

import pyarrow as pa
import pyarrow.ipc as ipc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType
from typing_extensions import override

from flowspark.engine.run_context import current_run
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition
from flowspark.outputs import MicroBatchSink

__all__ = ["SparkSink", "SparkSource", "SpoolPosition"]

Row = Dict[str, Any]
"""One row of a Spark source or sink, by column name."""

Schema = Union[str, StructType, None]
"""A Spark schema as a DDL string (`"name string, n long"`), a `StructType`, or none."""

_SPOOL_SUFFIX = ".arrow"
_IDLE_POLL = timedelta(milliseconds=100)


def _first_line(ex: BaseException) -> str:
    return str(ex).strip().splitlines()[0] if str(ex).strip() else type(ex).__name__


def _struct(schema: Schema) -> Optional[StructType]:
    if not isinstance(schema, str):
        return schema
    parsed = StructType.fromDDL(schema)
    if not isinstance(parsed, StructType):
        msg = f"a schema must describe columns, as in 'name string, n long'; got {schema!r}"
        raise ValueError(msg)
    return parsed


def _state_dir(step_id: str) -> str:
    """Where a Spark source keeps its inner query and spool, under the run's state directory."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", step_id)
    state_dir = current_run(step_id).state_dir
    if "://" in state_dir:
        msg = (
            f"step {step_id!r}: a SparkSource spools its input as local files in the recovery directory, so it needs "
            f"a local one (a path or file:// URI that every node mounts), not {state_dir!r}"
        )
        raise ValueError(msg)
    return os.path.join(state_dir, "spark-sources", safe)


@dataclass(frozen=True)
class SpoolPosition:
    """A `SparkSource` partition's snapshot: the inner batch being read and the rows already emitted."""

    batch: int
    row: int


class _SpoolReader(StatefulSourcePartition[Row, SpoolPosition]):
    """Runs the inner Spark query and emits the rows it spools, in batch order."""

    def __init__(self, step_id: str, source: SparkSource, resume: Optional[SpoolPosition]) -> None:
        self._step_id = step_id
        self._batch_size = source.batch_size
        base = _state_dir(step_id)
        self._spool = os.path.join(base, "spool")
        os.makedirs(self._spool, exist_ok=True)
        self._position = resume or SpoolPosition(0, 0)
        self.committed(self._position)
        self._table: Optional[pa.Table] = None
        self._wake_at: Optional[datetime] = None
        self._query = source.start_query(step_id, os.path.join(base, "query"), self._spool)

    def _spooled(self) -> List[int]:
        """Ids of the spooled inner batches not yet passed, in order."""
        ids = (int(name[: -len(_SPOOL_SUFFIX)]) for name in os.listdir(self._spool) if name.endswith(_SPOOL_SUFFIX))
        return sorted(i for i in ids if i >= self._position.batch)

    def _load_next(self) -> bool:
        """Open the next spooled batch, if the inner query has written one."""
        ids = self._spooled()
        if not ids:
            return False
        batch = ids[0]
        if batch != self._position.batch:
            self._position = SpoolPosition(batch, 0)
        with ipc.open_file(os.path.join(self._spool, f"{batch:012d}{_SPOOL_SUFFIX}")) as reader:
            self._table = reader.read_all()
        return True

    def _check_query(self) -> bool:
        """Whether the inner query still runs; its failure becomes this step's error."""
        failure = self._query.exception()
        if failure is not None:
            msg = f"step {self._step_id!r}: the Spark source failed: {_first_line(failure)}"
            raise RuntimeError(msg)
        return bool(self._query.isActive)

    @override
    def next_batch(self) -> List[Row]:
        if self._table is None:
            active = self._check_query()
            if not self._load_next():
                if not active:
                    raise StopIteration
                self._wake_at = datetime.now(timezone.utc) + _IDLE_POLL
                return []
        assert self._table is not None
        start = self._position.row
        rows: List[Row] = self._table.slice(start, self._batch_size).to_pylist()
        if start + len(rows) >= self._table.num_rows:
            self._position = SpoolPosition(self._position.batch + 1, 0)
            self._table = None
        else:
            self._position = SpoolPosition(self._position.batch, start + len(rows))
        return rows

    @override
    def next_awake(self) -> Optional[datetime]:
        return None if self._table is not None else self._wake_at

    @override
    def snapshot(self) -> SpoolPosition:
        return self._position

    def committed(self, position: SpoolPosition) -> None:
        """The flow committed `position`: spooled batches before it are never read again."""
        for name in os.listdir(self._spool):
            if name.endswith(_SPOOL_SUFFIX) and int(name[: -len(_SPOOL_SUFFIX)]) < position.batch:
                os.remove(os.path.join(self._spool, name))

    @override
    def close(self) -> None:
        self._query.stop()


class SparkSource(FixedPartitionedSource[Row, SpoolPosition]):
    """Read any Spark streaming source; emit each row as a `dict` of column name to value.

    `format` and `options` are those of `spark.readStream.format(...)
    .options(...)` (file sources take the directory as the `path` option);
    `schema` (DDL string or `StructType`) is required by Spark's file
    sources.  Values come as Arrow converts them: timestamps as UTC-aware
    `datetime`s, structs as dicts, arrays as lists.  Bounded by default:
    the run reads what is there when it starts, and a resumed run picks up
    what arrived since; `tail=True` keeps watching, checking every
    `interval`.  One partition: Spark spreads the reading over its
    executors, the flow receives rows in Spark's batch order.
    """

    uses_spark_session = True

    def __init__(
        self,
        format: str,
        options: Optional[Mapping[str, str]] = None,
        schema: Schema = None,
        *,
        tail: bool = False,
        interval: timedelta = timedelta(seconds=1),
        batch_size: int = 1000,
    ) -> None:
        self.format = format
        self.options = dict(options or {})
        self.schema = schema
        self.tail = tail
        self.interval = interval
        self.batch_size = batch_size

    @override
    def list_parts(self) -> List[str]:
        return ["spark"]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[SpoolPosition]) -> _SpoolReader:
        return _SpoolReader(step_id, self, resume_state)

    def start_query(self, step_id: str, checkpoint: str, spool: str) -> Any:
        """Start the inner query that spools this source's micro-batches as Arrow files."""
        spark = current_run(step_id).spark
        try:
            reader = spark.readStream.format(self.format).options(**self.options)
            if self.schema is not None:
                reader = reader.schema(_struct(self.schema))
            writer = reader.load().writeStream.foreachBatch(_Spooler(spool))
            if self.tail:
                writer = writer.trigger(processingTime=f"{self.interval.total_seconds()} seconds")
            else:
                writer = writer.trigger(availableNow=True)
            return writer.option("checkpointLocation", checkpoint).queryName(f"flowspark source {step_id}").start()
        except Exception as ex:
            msg = f"step {step_id!r}: Spark cannot read a {self.format!r} source with options {self.options!r}: {_first_line(ex)}"
            raise ValueError(msg) from None


class _Spooler:
    """The inner query's `foreachBatch`: one Arrow file per batch, written atomically."""

    def __init__(self, spool: str) -> None:
        self._spool = spool

    def __call__(self, frame: Any, batch_id: int) -> None:
        table = frame.toArrow()
        if table.num_rows == 0:
            return
        final = os.path.join(self._spool, f"{batch_id:012d}{_SPOOL_SUFFIX}")
        with ipc.new_file(final + ".tmp", table.schema) as writer:
            writer.write_table(table)
        os.replace(final + ".tmp", final)


class SparkSink(MicroBatchSink[Mapping[str, Any]]):
    """Write `dict` items with Spark's writer: `format`, and `options` such as `path`.

    Each micro-batch becomes a DataFrame: with `schema` (DDL string or
    `StructType`) its columns and types are fixed, a missing key is null
    and an unknown key an error; without one, Arrow infers them from the
    batch's items.  With a `path` option every micro-batch is written as one
    file, `part-<run>-<batch>...`, exactly once (see the module notes);
    other sinks get `mode("append")` and may see a batch twice after a
    crash.
    """

    uses_spark_session = True

    def __init__(self, format: str, options: Optional[Mapping[str, str]] = None, schema: Schema = None) -> None:
        self.format = format
        self.options = dict(options or {})
        self.schema = schema

    def _table(self, step_id: str, items: List[Mapping[str, Any]]) -> pa.Table:
        for item in items:
            if not isinstance(item, Mapping):
                msg = f"step {step_id!r}: `SparkSink` writes `dict` items (column name to value); got {item!r}"
                raise TypeError(msg)
        struct = _struct(self.schema)
        try:
            if struct is None:
                return pa.Table.from_pylist(list(items))
            unknown = set().union(*(item.keys() for item in items)) - set(struct.fieldNames())
            if unknown:
                msg = f"keys {sorted(unknown)!r} are not columns of the schema {struct.simpleString()!r}"
                raise ValueError(msg)
            return pa.Table.from_pylist(list(items), schema=to_arrow_schema(struct, timezone="UTC"))
        except (pa.ArrowException, ValueError) as ex:
            msg = f"step {step_id!r}: items do not fit a table for `SparkSink`: {_first_line(ex)}"
            raise TypeError(msg) from None

    @override
    def write_micro_batch(self, step_id: str, batch_id: int, run_id: str, items: List[Mapping[str, Any]]) -> None:
        spark = current_run(step_id).spark
        frame = spark.createDataFrame(self._table(step_id, items))
        path = self.options.get("path")
        if path is None:
            frame.write.format(self.format).options(**self.options).mode("append").save()
            return
        options = {k: v for k, v in self.options.items() if k != "path"}
        staging = f"{path.rstrip('/')}/_flowspark_staging/{run_id}-{batch_id}"
        frame.coalesce(1).write.format(self.format).options(**options).mode("overwrite").save(staging)
        _publish(spark, staging, path, f"part-{run_id}-{batch_id:010d}")


def _publish(spark: Any, staging: str, path: str, stem: str) -> None:
    """Move the data files Spark wrote under `staging` into `path` as `stem[-n]<suffix>`.

    A file of the same name (from an interrupted attempt at the same batch)
    is replaced; the staging directory is removed.
    """
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    source = jvm.org.apache.hadoop.fs.Path(staging)
    fs = source.getFileSystem(conf)
    written = sorted(
        (status.getPath() for status in fs.listStatus(source)),
        key=lambda file: str(file.getName()),
    )
    written = [file for file in written if not file.getName().startswith(("_", "."))]
    for index, file in enumerate(written):
        name = file.getName()
        suffix = name[name.index(".") :] if "." in name else ""
        target = jvm.org.apache.hadoop.fs.Path(path, f"{stem}-{index}{suffix}")
        fs.delete(target, False)
        fs.rename(file, target)
    fs.delete(source, True)
