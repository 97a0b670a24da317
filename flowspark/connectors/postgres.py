"""PostgreSQL tables as sinks, exactly once per micro-batch (not in Bytewax; needs `psycopg` 3).

`PostgresSink` inserts (or upserts) each item as one row.  It is a
`FixedPartitionedSink` written in Spark's tasks: a partition's rows of a
micro-batch are gathered while it is written, and at its `snapshot()`
they are committed in one transaction together with a marker, a row of
the progress table keyed by the run, the output step and the partition,
that holds the id of the micro-batch written.  A micro-batch that Spark
replays after a crash finds its marker and writes nothing, so no row is
written twice; a crash before the commit leaves nothing behind, and the
replay writes the batch.  (A file sink cuts its file back to its last
snapshot instead; a table can't be cut back, so the marker lives in the
database, where the rows are.)

The run's id comes from its recovery directory, so a resumed run finds
its own markers, and a run with a new directory (or without one) starts
afresh; old markers are a few bytes each and can be deleted at will once
their run is over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from typing_extensions import override

from flowspark.engine.sinks.batch_id import SinkBatch, current_sink_batch
from flowspark.outputs import FixedPartitionedSink, StatefulSinkPartition

__all__ = ["PostgresSink", "Row"]

Row = Union[Mapping[str, Any], Sequence[Any]]
"""A row: a mapping from column names (a missing column is NULL), or a sequence of values in the order of `columns`."""

_CONNECTION_DEFAULTS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "60000",
}
"""Settings unless the conninfo gives its own: a server that stops answering fails the write instead of stalling it."""

_FIRST_WAIT = 0.5
"""Seconds before the first retry after a lost connection; each later one waits twice as long."""


def _identifier(name: str) -> sql.Identifier:
    """`table` or `schema.table` as a quoted SQL name."""
    return sql.Identifier(*name.split("."))


@dataclass(frozen=True)
class _Table:
    """Where and how rows are written; what a partition needs of its sink."""

    conninfo: str
    table: str
    columns: Tuple[str, ...]
    upsert_on: Tuple[str, ...]
    progress_table: str
    retries: int

    def write_rows(self) -> Union[sql.Composed, sql.SQL]:
        """The statement that writes the rows: a `COPY` for inserts, an `INSERT ... ON CONFLICT` for upserts."""
        names = sql.SQL(", ").join(map(sql.Identifier, self.columns))
        if not self.upsert_on:
            return sql.SQL("COPY {} ({}) FROM STDIN").format(_identifier(self.table), names)
        keys = sql.SQL(", ").join(map(sql.Identifier, self.upsert_on))
        others = [c for c in self.columns if c not in self.upsert_on]
        action = (
            sql.SQL("DO UPDATE SET {}").format(
                sql.SQL(", ").join(
                    sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in others
                )
            )
            if others
            else sql.SQL("DO NOTHING")
        )
        return sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT ({}) {}").format(
            _identifier(self.table), names, sql.SQL(", ").join([sql.Placeholder()] * len(self.columns)), keys, action
        )

    def row(self, step_id: str, value: Any) -> Tuple[Any, ...]:
        """`value` as the values of `columns`, in order."""
        if isinstance(value, Mapping):
            unknown = value.keys() - set(self.columns)
            if unknown:
                msg = (
                    f"step {step_id!r}: a row for table {self.table!r} has keys that are not among its "
                    f"`columns` {list(self.columns)}: {sorted(map(str, unknown))}"
                )
                raise ValueError(msg)
            return tuple(map(value.get, self.columns))
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            msg = (
                f"step {step_id!r}: a row for table {self.table!r} must be a mapping or a sequence of "
                f"{len(self.columns)} values; got {type(value).__name__}: {value!r}"
            )
            raise TypeError(msg)
        if len(value) != len(self.columns):
            msg = (
                f"step {step_id!r}: a row for table {self.table!r} has {len(value)} values for its "
                f"{len(self.columns)} `columns` {list(self.columns)}: {value!r}"
            )
            raise ValueError(msg)
        return tuple(value)


def _retryable(ex: psycopg.Error, conn: Optional[psycopg.Connection[Any]]) -> bool:
    """Whether the transaction may be tried again: the connection was lost or never made, or a deadlock or
    serialization failure."""
    if isinstance(ex, psycopg.errors.TransactionRollback):
        return True
    return isinstance(ex, psycopg.OperationalError) and (conn is None or conn.broken or conn.closed)


class _PostgresPartition(StatefulSinkPartition[Row, Optional[int]]):
    """Gathers a micro-batch's rows and commits them at `snapshot()` with the batch's marker.

    Its snapshot is the id of the last micro-batch it committed (or found
    committed); a resumed run's markers are checked against it.
    """

    def __init__(self, table: _Table, step_id: str, part: str, resume_state: Optional[int]) -> None:
        self._table = table
        self._step_id = step_id
        self._part = part
        self._last = resume_state
        self._batch: Optional[SinkBatch] = None
        self._rows: List[Tuple[Any, ...]] = []
        self._conn: Optional[psycopg.Connection[Any]] = None

    def _where(self) -> str:
        return f"step {self._step_id!r}, table {self._table.table!r}"

    @override
    def write_batch(self, values: List[Row]) -> None:
        batch = current_sink_batch()
        if batch is None:
            msg = f"{self._where()}: a PostgresSink partition is written only by a flowspark run"
            raise RuntimeError(msg)
        if batch != self._batch:
            # Rows of a batch that never reached its snapshot (an aborted epoch) are not kept.
            self._batch, self._rows = batch, []
        self._rows.extend(self._table.row(self._step_id, value) for value in values)

    @override
    def snapshot(self) -> Optional[int]:
        if self._batch is not None:
            batch, rows = self._batch, self._rows
            self._commit(batch, rows)
            self._batch, self._rows = None, []
            self._last = batch.batch_id
        return self._last

    def _commit(self, batch: SinkBatch, rows: List[Tuple[Any, ...]]) -> None:
        """Write `rows` and the batch's marker in one transaction, unless the marker says they are there; retried on
        a lost connection."""
        for attempt in range(self._table.retries + 1):
            try:
                conn = self._connection()
                with conn.transaction(), conn.cursor() as cur:
                    if self._already_written(cur, batch):
                        return
                    self._write(cur, rows)
                    cur.execute(
                        sql.SQL(
                            "UPDATE {} SET batch_id = %s, updated_at = now() "
                            "WHERE run_id = %s AND step_id = %s AND part = %s"
                        ).format(_identifier(self._table.progress_table)),
                        (batch.batch_id, batch.run_id, self._step_id, self._part),
                    )
                return
            except psycopg.errors.IntegrityError as ex:
                msg = f"{self._where()}: a row of micro-batch {batch.batch_id} violates a constraint: {ex}"
                raise RuntimeError(msg) from ex
            except psycopg.Error as ex:
                retry = _retryable(ex, self._conn)
                if not retry or attempt == self._table.retries:
                    why = (
                        ""
                        if not retry
                        else " (could not connect)"
                        if self._conn is None
                        else " (connection lost)"
                        if self._conn.broken or self._conn.closed
                        else ""
                    )
                    tries = f" after {attempt + 1} tries" if attempt else ""
                    msg = f"{self._where()}: writing micro-batch {batch.batch_id} failed{tries}{why}: {ex}"
                    raise RuntimeError(msg) from ex
                self._disconnect()
                time.sleep(_FIRST_WAIT * 2**attempt)

    def _already_written(self, cur: psycopg.Cursor[Any], batch: SinkBatch) -> bool:
        """Lock the partition's marker (made if missing); whether it already holds `batch`."""
        progress = _identifier(self._table.progress_table)
        key = (batch.run_id, self._step_id, self._part)
        cur.execute(
            sql.SQL(
                "INSERT INTO {} (run_id, step_id, part, batch_id) VALUES (%s, %s, %s, -1) ON CONFLICT DO NOTHING"
            ).format(progress),
            key,
        )
        cur.execute(
            sql.SQL("SELECT batch_id FROM {} WHERE run_id = %s AND step_id = %s AND part = %s FOR UPDATE").format(
                progress
            ),
            key,
        )
        found = cur.fetchone()
        assert found is not None, "the marker was just made"
        written = int(found[0])
        if written > batch.batch_id:
            msg = (
                f"{self._where()}: partition {self._part!r} of this run already wrote micro-batch {written}, "
                f"later than {batch.batch_id}: the recovery directory is older than the database "
                f"(table {self._table.progress_table!r})"
            )
            raise RuntimeError(msg)
        if self._last is not None and written < self._last:
            msg = (
                f"{self._where()}: the recovery directory says partition {self._part!r} wrote micro-batch "
                f"{self._last}, the database (table {self._table.progress_table!r}) only "
                f"{'none' if written < 0 else written}: the database is older than the recovery directory"
            )
            raise RuntimeError(msg)
        return written == batch.batch_id

    def _write(self, cur: psycopg.Cursor[Any], rows: List[Tuple[Any, ...]]) -> None:
        if not rows:
            return
        statement = self._table.write_rows()
        if self._table.upsert_on:
            cur.executemany(statement, rows)
            return
        with cur.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None:
            given = conninfo_to_dict(self._table.conninfo)
            settings: Dict[str, Any] = {k: v for k, v in _CONNECTION_DEFAULTS.items() if k not in given}
            settings.setdefault("application_name", f"flowspark {self._step_id} {self._part}"[:63])
            conn = psycopg.connect(make_conninfo(self._table.conninfo, **settings))
            self._conn = conn
            self._make_progress_table(conn)
        return self._conn

    def _make_progress_table(self, conn: psycopg.Connection[Any]) -> None:
        """Create the progress table if it does not exist (one task at a time: concurrent `CREATE`s can collide)."""
        name = self._table.progress_table
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (str(_identifier(name).as_string(conn)),))
            found = cur.fetchone()
            if found is not None and found[0] is not None:
                return
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"flowspark {name}",))
            cur.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (run_id text NOT NULL, step_id text NOT NULL, part text NOT NULL, "
                    "batch_id bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (run_id, step_id, part))"
                ).format(_identifier(name))
            )

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass  # a connection that is already lost

    @override
    def close(self) -> None:
        # Rows not committed by a snapshot (an aborted epoch) roll back with the connection.
        self._disconnect()


class PostgresSink(FixedPartitionedSink[Row, Optional[int]]):
    """Insert or upsert rows into a PostgreSQL table, exactly once per micro-batch.

    Upstream items must be `(key, row)`: the key picks the partition
    (`partitions` of them, `part_0`, `part_1`, ...; each writes through
    one connection of its own per micro-batch, in the Spark task that owns
    it), and the row is a mapping from column names or a sequence of
    values in the order of `columns`.  Items with the same key keep their
    order; key them by what `upsert_on` names, so that the last write of a
    row wins.

    With `upsert_on` (the columns of a unique index or primary key), a row
    whose key is already there replaces the other columns (`INSERT ... ON
    CONFLICT DO UPDATE`); without, rows are appended with `COPY`.  Each
    partition's rows of a micro-batch are committed in one transaction
    with a marker in `progress_table` (made if missing, in the
    connection's default schema unless the name says `schema.table`), so a
    micro-batch replayed after a crash is not written twice.

    A row that breaks a constraint fails the run, naming the step, the
    table and the micro-batch; nothing of that micro-batch is written.  A
    lost connection (or a deadlock) is retried `retries` times, waiting
    0.5 s, then 1 s, 2 s, ... between tries, then fails the run the same
    way.  Connections time out after 10 s, and a server that stops
    answering is given up after about a minute, unless `conninfo` sets
    `connect_timeout`, `keepalives_*` or `tcp_user_timeout` itself.

    :arg conninfo: a libpq connection string or URI (`host=... dbname=...`
        or `postgresql://user@host/db`); passwords are better kept in
        `PGPASSWORD` or `~/.pgpass` on each executor.
    :arg table: the table, `name` or `schema.name`; it must exist.
    :arg columns: the columns each row fills.
    :arg upsert_on: the conflict columns of an upsert; empty to insert.
    :arg partitions: how many partitions (connections) write at once.
    :arg progress_table: the table of markers.
    :arg retries: how many times a lost connection is tried again.

    ```python
    import flowspark.operators as op
    from flowspark.connectors.postgres import PostgresSink
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSource

    flow = Dataflow("postgres_eg")
    visits = op.input("inp", flow, TestingSource([("ada", {"user_id": "ada", "count": 3})]))
    sink = PostgresSink("host=localhost dbname=app", "public.visits", ["user_id", "count"], upsert_on=["user_id"])
    op.output("out", visits, sink)
    ```
    """

    lives_in_driver = False

    def __init__(
        self,
        conninfo: str,
        table: str,
        columns: Iterable[str],
        *,
        upsert_on: Iterable[str] = (),
        partitions: int = 1,
        progress_table: str = "flowspark_sink_progress",
        retries: int = 3,
    ) -> None:
        conninfo_to_dict(conninfo)  # a malformed string fails here, not in the tasks
        names = tuple(columns)
        keys = tuple(upsert_on)
        if isinstance(columns, str) or isinstance(upsert_on, str):
            msg = "columns and upsert_on must be iterables of column names, not a string"
            raise TypeError(msg)
        if not names or len(set(names)) != len(names):
            msg = f"columns must name each column once; got {list(names)}"
            raise ValueError(msg)
        if not set(keys) <= set(names):
            msg = f"upsert_on must be among columns {list(names)}; got {list(keys)}"
            raise ValueError(msg)
        if partitions < 1 or retries < 0:
            msg = f"partitions must be 1 or more and retries 0 or more; got {partitions} and {retries}"
            raise ValueError(msg)
        self._table = _Table(conninfo, table, names, keys, progress_table, retries)
        self._partitions = partitions

    @override
    def list_parts(self) -> List[str]:
        return [f"part_{i}" for i in range(self._partitions)]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _PostgresPartition:
        return _PostgresPartition(self._table, step_id, for_part, resume_state)
