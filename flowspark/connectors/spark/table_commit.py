"""Micro-batches into a table of the session's catalog, with a batch-id column that makes a replay write nothing.

Spark's `insertInto` commits a batch's files when the job ends, after
which the rows are in the table; the run records the batch a moment later.
A crash between the two makes Spark replay a batch the table already
holds.  So every row carries the batch it came from, `<run>-<batch>`, in a
column of the table (`flowspark_batch` by default), and the first batch a
sink writes in a process (the only one that can be a replay: batches are
written one after another, and a failed write ends the run) first counts
the table's rows of that batch:

- none: the batch is new, or its first attempt never reached the table;
  it is written;
- all of them: it was committed before the crash; nothing is written;
- some: the crash hit Spark's job commit itself, which moves a batch's
  files into place one after another (one file per partition value); a
  table without a log can't undo that, so the run stops and says which
  rows to delete before resuming.

The count reads the table's batch column, once per run start.  Columns
are given as SQL text, which a classic and a Spark Connect session read
alike (`pyspark.sql.functions` builds classic columns unless the process
was set up for Spark Connect).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List

from pyspark.sql.types import StructField, StructType

from flowspark.errors import FlowsparkRuntimeError

__all__ = ["aligned", "batch_tag", "create_table", "replayed", "tagged"]


def batch_tag(run_id: str, batch_id: int) -> str:
    """The batch column's value for the rows of micro-batch `batch_id` of run `run_id`."""
    return f"{run_id}-{batch_id:010d}"


def _name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _null_of(field: StructField) -> str:
    """SQL for a null of `field`'s type."""
    return f"CAST(NULL AS {field.dataType.simpleString()})"


def _text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def create_table(
    spark: Any,
    table: str,
    columns: StructType,
    format: str,  # noqa: A002 - Spark's option name
    options: Dict[str, str],
    partition_by: List[str],
    has_files: bool,
) -> None:
    """Create `table` with `columns` and no rows, so that every batch is then an `insertInto` alike.

    A `CREATE TABLE` rather than `saveAsTable`: with a `path` option that
    already holds the table's files (a catalog that forgets its tables when
    the session ends, as Spark's default in-memory one does, and a run that
    resumes), the table is made over them, partitions included, where
    Spark's create-as-select refuses a folder that is not empty.
    `has_files` says whether the `path` folder of a partitioned table exists already.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.]+", format):
        msg = f"a table's format is a data source name, as in 'parquet' or 'org.apache.spark.sql.avro'; got {format!r}"
        raise ValueError(msg)
    ddl = ", ".join(f"{_name(field.name)} {field.dataType.simpleString()}" for field in columns.fields)
    query = f"CREATE TABLE IF NOT EXISTS {table} ({ddl}) USING {format}"
    if partition_by:
        query += f" PARTITIONED BY ({', '.join(_name(column) for column in partition_by)})"
    if options:
        query += f" OPTIONS ({', '.join(f'{_text(key)} = {_text(value)}' for key, value in options.items())})"
    spark.sql(query)
    if partition_by and has_files:
        spark.catalog.recoverPartitions(table)


def aligned(step_id: str, frame: Any, table: str, columns: StructType) -> Any:
    """`frame`'s columns in the table's order (`insertInto` goes by position), a column it lacks as nulls.

    Names match as Spark's default resolution does, whatever their case;
    a column the table lacks is an error naming the step.
    """
    mine = {name.lower(): name for name in frame.columns}
    unknown = sorted(set(mine) - {field.name.lower() for field in columns.fields})
    if unknown:
        msg = f"step {step_id!r}: table {table!r} has no column {unknown!r} (its columns: {columns.simpleString()})"
        raise TypeError(msg)
    return frame.selectExpr(
        *(
            f"{_name(mine[field.name.lower()]) if field.name.lower() in mine else _null_of(field)} AS {_name(field.name)}"
            for field in columns.fields
        )
    )


def tagged(frame: Any, column: str, tag: str) -> Any:
    """`frame` with the batch column, holding `tag` in every row."""
    return frame.selectExpr("*", f"{_text(tag)} AS {_name(column)}")


def replayed(step_id: str, spark: Any, table: str, column: str, tag: str, rows: int) -> bool:
    """Whether `table` holds every one of the `rows` rows of the batch `tag` already; an error if it holds some."""
    found = spark.table(table).where(f"{_name(column)} = {_text(tag)}").count()
    if found in (0, rows):
        return bool(found)
    msg = (
        f"step {step_id!r}: table {table!r} holds {found} of the {rows} rows of the micro-batch with {column} = "
        f"{tag!r}: the run stopped in the middle of Spark's commit of that batch, which a table without a log "
        f"can't undo. Remove those rows (rewrite the partitions that hold them without them, or DELETE where the "
        f"table format allows it), then resume the run: it writes the batch whole"
    )
    raise FlowsparkRuntimeError(msg)
