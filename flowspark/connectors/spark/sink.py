"""`SparkSink`: each micro-batch written with Spark's own writer, into files, a catalog table or any data source.

Where the items go decides how a micro-batch that Spark replays after a
crash is kept from being written twice:

- a folder of plain files (`path` with parquet, orc, json, csv, text, xml
  or avro) in append mode: a per-batch commit (`file_commit`);
- a table of the session's catalog (`table`) in append mode: a batch-id
  column (`table_commit`);
- either one in an overwrite mode: a replay replaces what it wrote, as the
  first attempt did;
- a Delta Lake table by path (format `delta`): Delta's idempotent writes,
  each batch a transaction of the run's and step's application id with the
  batch id as its version, which Delta skips when its log has it;
- anything else (JDBC, the console...): Spark's writer in append mode, at
  least once.

A table of any format in the session's catalog (Delta, Iceberg with their
catalogs set up) goes the catalog table's way.
"""

from __future__ import annotations

import functools
import inspect
import re
from contextlib import contextmanager
from enum import Enum
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType
from typing_extensions import override

from flowspark.connectors.spark import table_commit
from flowspark.connectors.spark.file_commit import FolderCommits
from flowspark.connectors.spark.rows import Schema, first_line, struct
from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location, parse_location
from flowspark.engine.run_context import current_run
from flowspark.errors import FlowsparkRuntimeError
from flowspark.outputs import MicroBatchSink

__all__ = ["FILE_FORMATS", "SaveMode", "SparkSink"]

_UTC_TIMESTAMPS: Dict[str, Any] = (
    {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {"timestamp_utc": True}
)
"""`to_arrow_schema`'s argument for timestamps in UTC: PySpark 4.2 on names the zone, 4.1 takes a flag."""

FILE_FORMATS = frozenset({"parquet", "orc", "json", "csv", "text", "xml", "avro"})
"""Spark's formats whose output folder holds data files and nothing else, which `SparkSink` commits batch by batch."""

_PARTITION_OVERWRITE = "spark.sql.sources.partitionOverwriteMode"
_S3_SETTINGS = (
    "spark.hadoop.fs.s3a.endpoint",
    "spark.hadoop.fs.s3a.endpoint.region",
    "spark.hadoop.fs.s3a.connection.ssl.enabled",
)


class SaveMode(Enum):
    """What each micro-batch does to what the path or table holds."""

    APPEND = "append"
    """Add the batch's rows."""
    OVERWRITE = "overwrite"
    """Replace everything with the batch's rows: the output holds the last micro-batch."""
    OVERWRITE_PARTITIONS = "overwrite_partitions"
    """Replace the partitions the batch has rows for (Spark's dynamic partition overwrite), keep the others."""


def _save_mode(mode: Union[SaveMode, str]) -> SaveMode:
    if isinstance(mode, SaveMode):
        return mode
    try:
        return SaveMode(mode.lower())
    except ValueError:
        msg = (
            f"SparkSink writes every micro-batch, so its mode is one of {[m.value for m in SaveMode]}; got {mode!r} "
            "(Spark's 'error' and 'ignore' would stop or skip every batch after the first)"
        )
        raise ValueError(msg) from None


class SparkSink(MicroBatchSink[Mapping[str, Any]]):
    """Write `dict` items, a micro-batch at a time, with Spark's writer for a format or a catalog table.

    `format` and `options` are those of `DataFrame.write.format(...)
    .options(...)`; a folder is the `path` option.  `table` names a table
    of the session's catalog (`name`, `db.name`): it is created on the
    first batch (with `format`, `options` and `partition_by`) if missing,
    and written with `insertInto` after.  `partition_by` is Spark's
    `partitionBy`, `mode` a `SaveMode`.

    Each micro-batch becomes a DataFrame: with `schema` (DDL string or
    `StructType`) its columns and types are fixed, a missing key is null
    and an unknown key an error; without one, Arrow infers them from the
    batch's items.

    Exactly once per micro-batch where the output allows it (see the
    module notes): a table appended to gets the column `batch_column`
    (`None` leaves it out, and the table is then written at least once).
    Every `compact_every` micro-batches, a folder of files has the files
    of those batches rewritten as one file per partition folder
    (compaction reads them back, so it needs `schema`).

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.spark import SparkSink

    flow = Dataflow("spark_sink_eg")
    rows = op.input("inp", flow, TestingSource([{"user": "ada", "n": 3}, {"user": "alan", "n": 5}]))
    op.output("out", rows, SparkSink("parquet", {"path": str(folder / "counts")}, "user string, n long"))
    run_main(flow)
    assert list((folder / "counts").glob("*.parquet"))
    ```
    """

    def __init__(
        self,
        format: Optional[str] = None,  # noqa: A002 - Spark's option name
        options: Optional[Mapping[str, str]] = None,
        schema: Schema = None,
        *,
        table: Optional[str] = None,
        partition_by: Sequence[str] = (),
        mode: Union[SaveMode, str] = SaveMode.APPEND,
        batch_column: Optional[str] = "flowspark_batch",
        compact_every: Optional[int] = None,
    ) -> None:
        self.format = format
        self.options = dict(options or {})
        self.schema = schema
        self.table = table
        self.partition_by = [partition_by] if isinstance(partition_by, str) else list(partition_by)
        self.mode = _save_mode(mode)
        self.batch_column = batch_column
        self.compact_every = compact_every
        if table is None and format is None:
            msg = "SparkSink needs a `format` (as in SparkSink('parquet', {'path': 'out/'})) or a catalog `table`"
            raise ValueError(msg)
        if batch_column is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", batch_column):
            msg = f"SparkSink's batch_column must be a plain column name (letters, digits, _); got {batch_column!r}"
            raise ValueError(msg)
        if compact_every is not None and not self._commits_files():
            msg = (
                "SparkSink compacts a folder of files (a `path` in a file format, in append mode); "
                f"compact_every can't go with format={format!r}, table={table!r}, mode={self.mode.value!r}"
            )
            raise ValueError(msg)
        if compact_every is not None and (compact_every < 2 or schema is None):
            msg = (
                f"SparkSink's compact_every needs a count of at least 2 and a `schema` to read the files "
                f"back; got {compact_every!r}"
            )
            raise ValueError(msg)
        self._parsed: Optional[StructType] = None
        self._commits: Dict[Tuple[str, str], FolderCommits] = {}
        self._checked: Dict[Tuple[str, str], bool] = {}
        """Which runs and steps have had their table checked for a replayed batch in this process (`table_commit`)."""

    @property
    def uses_session_catalog(self) -> bool:
        """Whether batches go to a `table` of the session's catalog (see `Sink.uses_session_catalog`)."""
        return self.table is not None

    def _commits_files(self) -> bool:
        """Whether batches are committed into a folder of plain files (`file_commit`)."""
        return (
            self.table is None
            and self.mode is SaveMode.APPEND
            and "path" in self.options
            and (self.format or "").lower() in FILE_FORMATS
        )

    def _columns(self, spark: Any) -> Optional[StructType]:
        """The `schema` as a `StructType`, parsed by the session once."""
        if self._parsed is None:
            self._parsed = struct(self.schema, spark)
        return self._parsed

    def _arrow(self, step_id: str, items: List[Mapping[str, Any]], fixed: Optional[StructType]) -> pa.Table:
        for item in items:
            if not isinstance(item, Mapping):
                msg = f"step {step_id!r}: `SparkSink` writes `dict` items (column name to value); got {item!r}"
                raise TypeError(msg)
        try:
            if fixed is None:
                return pa.Table.from_pylist(list(items))
            unknown = set().union(*(item.keys() for item in items)) - set(fixed.fieldNames())
            if unknown:
                msg = f"keys {sorted(unknown)!r} are not columns of the schema {fixed.simpleString()!r}"
                raise ValueError(msg)
            return pa.Table.from_pylist(list(items), schema=to_arrow_schema(fixed, **_UTC_TIMESTAMPS))
        except (pa.ArrowException, ValueError) as ex:
            msg = f"step {step_id!r}: items do not fit a table for `SparkSink`: {first_line(ex)}"
            raise TypeError(msg) from None

    @override
    def write_micro_batch(self, step_id: str, batch_id: int, run_id: str, items: List[Mapping[str, Any]]) -> None:
        spark = current_run(step_id).spark
        # One task writes the batch: one file per partition value, and into an
        # unpartitioned table a commit that is a single file's rename.
        fixed = self._columns(spark)
        frame = spark.createDataFrame(self._arrow(step_id, items, fixed), schema=fixed).coalesce(1)
        try:
            if self.table is not None:
                self._write_table(spark, step_id, batch_id, run_id, frame, len(items))
            elif self._commits_files():
                commits = self._folder(spark, step_id, run_id)
                read = functools.partial(self._read_files, spark)
                commits.write(frame, batch_id, self._write_files, read, self.compact_every)
            else:
                writer = self._writer(frame).mode("append" if self.mode is SaveMode.APPEND else "overwrite")
                if (self.format or "").lower() == "delta":
                    writer = writer.options(**_delta_transaction(run_id, step_id, batch_id))
                writer.save()
        except (FlowsparkRuntimeError, TypeError):
            raise
        except Exception as ex:
            where = (
                f"table {self.table!r}"
                if self.table is not None
                else f"{self.format!r} output {self.options.get('path', '')!r}"
            )
            msg = f"step {step_id!r}: Spark could not write micro-batch {batch_id} to {where}: {first_line(ex)}"
            raise RuntimeError(msg) from ex

    def _writer(self, frame: Any, path: bool = True) -> Any:
        """Spark's writer of `frame` for the sink's format, options (the `path` one left out if not `path`) and partitioning."""
        writer = frame.write.options(**{k: v for k, v in self.options.items() if path or k != "path"})
        if self.format is not None:
            writer = writer.format(self.format)
        if self.partition_by:
            writer = writer.partitionBy(*self.partition_by)
        if self.mode is SaveMode.OVERWRITE_PARTITIONS:
            writer = writer.option("partitionOverwriteMode", "dynamic")
        return writer

    def _write_files(self, frame: Any, folder: str) -> None:
        self._writer(frame, path=False).mode("overwrite").save(folder)

    def _read_files(self, spark: Any, files: List[str], base: str) -> Any:
        options = {k: v for k, v in self.options.items() if k != "path"}
        reader = spark.read.format(self.format).options(**options).option("basePath", base).schema(self._columns(spark))
        return reader.load(files)

    def _folder(self, spark: Any, step_id: str, run_id: str) -> FolderCommits:
        """The commits of this run's batches into the `path` folder."""
        key = (run_id, step_id)
        if key not in self._commits:
            self._commits[key] = FolderCommits(step_id, self._location(spark), run_id)
        return self._commits[key]

    def _location(self, spark: Any) -> Location:
        """Where the `path` option points, for flowspark's own look at the folder."""
        settings = {name: spark.conf.get(name, None) for name in _S3_SETTINGS}
        return parse_location(
            self.options["path"], {k: v for k, v in settings.items() if v is not None}, "SparkSink path"
        )

    def _write_table(self, spark: Any, step_id: str, batch_id: int, run_id: str, frame: Any, rows: int) -> None:
        name = self.table
        assert name is not None
        column = self.batch_column if self.mode is SaveMode.APPEND else None
        tag = table_commit.batch_tag(run_id, batch_id)
        if column is not None:
            frame = table_commit.tagged(frame, column, tag)
        if not spark.catalog.tableExists(name):
            format = self.format or spark.conf.get("spark.sql.sources.default")  # noqa: A001 - Spark's option name
            has_files = bool(self.partition_by) and "path" in self.options and storage.is_dir(self._location(spark))
            table_commit.create_table(spark, name, frame.schema, format, self.options, self.partition_by, has_files)
        columns = spark.table(name).schema
        if column is not None and column.lower() not in {field.name.lower() for field in columns.fields}:
            msg = (
                f"step {step_id!r}: table {name!r} has no column {column!r}, which SparkSink fills with each "
                f"row's micro-batch to write it exactly once: add it (ALTER TABLE {name} ADD COLUMNS "
                f"({column} string)), or pass batch_column=None to append at least once"
            )
            raise FlowsparkRuntimeError(msg)
        key = (run_id, step_id)
        if (
            column is not None
            and not self._checked.get(key)
            and table_commit.replayed(step_id, spark, name, column, tag, rows)
        ):
            self._checked[key] = True
            return
        # Until the insert returns, the next write checks again: a failed insert may have reached the table.
        self._checked[key] = False
        writer = table_commit.aligned(step_id, frame, name, columns).write
        if self.mode is SaveMode.OVERWRITE_PARTITIONS:
            # `insertInto` goes by the session's setting, not the writer's option.
            with _session_setting(spark, _PARTITION_OVERWRITE, "dynamic"):
                writer.insertInto(name, overwrite=True)
        else:
            writer.insertInto(name, overwrite=self.mode is SaveMode.OVERWRITE)
        self._checked[key] = True


def _delta_transaction(run_id: str, step_id: str, batch_id: int) -> Dict[str, str]:
    """Delta's writer options that make micro-batch `batch_id` of a step's run one idempotent transaction.

    Delta records the newest version written for each application id in
    its log, and skips a write whose version it has: a batch Spark replays
    after a crash that came once its write committed.

    >>> _delta_transaction("0f3c", "wordcount.out", 7)
    {'txnAppId': 'flowspark-0f3c-wordcount.out', 'txnVersion': '7'}
    """
    return {"txnAppId": f"flowspark-{run_id}-{step_id}", "txnVersion": str(batch_id)}


@contextmanager
def _session_setting(spark: Any, key: str, value: str) -> Iterator[None]:
    """The session's setting `key` is `value` within the block."""
    previous = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.set(key, previous)
