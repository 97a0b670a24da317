"""`SparkSource`: any Spark streaming source the session has, one `dict` per row.

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
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, List, Mapping, Optional

import pyarrow as pa
import pyarrow.ipc as ipc
from typing_extensions import override

from flowspark.connectors.spark.rows import Row, Schema, first_line, struct
from flowspark.engine.run_context import current_run
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition

__all__ = ["SparkSource", "SpoolPosition"]

_SPOOL_SUFFIX = ".arrow"
_IDLE_POLL = timedelta(milliseconds=100)


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
            msg = f"step {self._step_id!r}: the Spark source failed: {first_line(failure)}"
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

    ```python
    import flowspark.operators as op
    from flowspark.connectors.spark import SparkSource
    from flowspark.connectors.stdio import StdOutSink
    from flowspark.dataflow import Dataflow

    # The rows of a folder of JSON files, as dicts; a resumed run reads the files added since.
    flow = Dataflow("spark_source_eg")
    rows = op.input("inp", flow, SparkSource("json", {"path": "/data/events"}, "user string, n long"))
    op.output("out", op.map("show", rows, str), StdOutSink())
    ```
    """

    uses_spark_session = True

    def __init__(
        self,
        format: str,  # noqa: A002 - Spark's option name
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
                reader = reader.schema(struct(self.schema, spark))
            writer = reader.load().writeStream.foreachBatch(_Spooler(spool))
            if self.tail:
                writer = writer.trigger(processingTime=f"{self.interval.total_seconds()} seconds")
            else:
                writer = writer.trigger(availableNow=True)
            return writer.option("checkpointLocation", checkpoint).queryName(f"flowspark source {step_id}").start()
        except Exception as ex:
            msg = f"step {step_id!r}: Spark cannot read a {self.format!r} source with options {self.options!r}: {first_line(ex)}"
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
