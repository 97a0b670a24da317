"""`PostgresSink` against a real PostgreSQL server the tests start (`postgres` in conftest).

Rows written in Spark's tasks, upserts, the batch markers that make a
replayed micro-batch write nothing, and the errors: bad rows, constraint
violations, lost connections, a database and a recovery directory that
disagree.  Killing and resuming a run: `tests/recovery/test_kill_resume.py`.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from support.partitions import where_am_i
from support.ports import free_port
from support.postgres_server import pg_query, pg_table

pytest.importorskip("psycopg")

import flowspark.operators as op
from flowspark.connectors.postgres import PostgresSink, Row, _PostgresPartition
from flowspark.dataflow import Dataflow
from flowspark.engine.sinks.batch_id import SinkBatch, writing
from flowspark.errors import FlowsparkRuntimeError
from flowspark.testing import TestingSource, cluster_main, run_main

pytestmark = pytest.mark.postgres

USERS = "id bigint PRIMARY KEY, name text NOT NULL, visits int"


class WhereSink(PostgresSink):
    """A `PostgresSink` that notes where each partition is built (`where_am_i`) in `where`."""

    def __init__(self, where: Path, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.where = where.absolute()

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _PostgresPartition:
        with open(self.where, "a") as f:
            f.write(f"{where_am_i()}\n")
        return super().build_part(step_id, for_part, resume_state)


def _flow(items: List[Tuple[str, Any]], sink: PostgresSink, flow_id: str = "pg", batch_size: int = 5) -> Dataflow:
    flow = Dataflow(flow_id)
    op.output("out", op.input("inp", flow, TestingSource(items, batch_size=batch_size)), sink)
    return flow


def _rows(conninfo: str, table: str) -> List[Tuple[Any, ...]]:
    return pg_query(conninfo, f"SELECT * FROM {table} ORDER BY 1")


def test_rows_are_written_in_spark_tasks_with_a_marker_per_partition(postgres: str, tmp_path: Path) -> None:
    table = pg_table(postgres, USERS)
    items: List[Tuple[str, Row]] = [(f"k{i}", {"id": i, "name": f"u{i}", "visits": i % 4}) for i in range(30)]
    items += [(f"k{i}", (i, f"t{i}", None)) for i in range(30, 40)]
    sink = WhereSink(tmp_path / "where.txt", postgres, table, ["id", "name", "visits"], partitions=3)
    cluster_main(_flow(items, sink), [], 0, worker_count_per_proc=2)

    assert _rows(postgres, table) == [(i, f"u{i}", i % 4) for i in range(30)] + [
        (i, f"t{i}", None) for i in range(30, 40)
    ]
    builds = [line.split() for line in (tmp_path / "where.txt").read_text().splitlines()]
    assert builds and all(in_task == "True" and int(pid) != os.getpid() for pid, in_task, _ in builds)
    markers = pg_query(postgres, "SELECT step_id, part, batch_id FROM flowspark_sink_progress WHERE step_id = 'pg.out'")
    assert sorted(part for _, part, _ in markers) == ["part_0", "part_1", "part_2"]
    assert all(batch >= 0 for _, _, batch in markers)


def test_upserts_replace_rows_by_key_and_the_last_write_wins(postgres: str) -> None:
    table = pg_table(postgres, USERS)
    pg_query(postgres, f"INSERT INTO {table} VALUES (1, 'old', 1), (2, 'kept', 2)")
    items: List[Tuple[str, Row]] = [
        ("1", {"id": 1, "name": "ann", "visits": 5}),
        ("3", {"id": 3, "name": "bo"}),
        ("1", {"id": 1, "name": "ann", "visits": 6}),
        ("3", (3, "bo", 9)),
    ]
    sink = PostgresSink(postgres, table, ["id", "name", "visits"], upsert_on=["id"], partitions=2)
    run_main(_flow(items, sink, batch_size=1))
    assert _rows(postgres, table) == [(1, "ann", 6), (2, "kept", 2), (3, "bo", 9)]

    names_only = PostgresSink(postgres, table, ["id", "name"], upsert_on=["id"])
    run_main(_flow([("4", {"id": 4, "name": "cy"}), ("1", {"id": 1, "name": "al"})], names_only, flow_id="pg2"))
    assert _rows(postgres, table) == [(1, "al", 6), (2, "kept", 2), (3, "bo", 9), (4, "cy", None)]

    ids = pg_table(postgres, "id bigint PRIMARY KEY")
    pg_query(postgres, f"INSERT INTO {ids} VALUES (1)")
    run_main(_flow([("1", (1,)), ("2", (2,))], PostgresSink(postgres, ids, ["id"], upsert_on=["id"]), flow_id="pg3"))
    assert _rows(postgres, ids) == [(1,), (2,)]


def _write(
    sink: PostgresSink, batch: SinkBatch, rows: List[Row], resume: Optional[int] = None, step_id: str = "flow.out"
) -> Optional[int]:
    """Write `rows` as micro-batch `batch` through a partition built from `resume`, as a sink task does; its snapshot."""
    part = sink.build_part(step_id, "part_0", resume)
    try:
        with writing(batch):
            part.write_batch(rows)
            return part.snapshot()
    finally:
        part.close()


def test_a_replayed_micro_batch_writes_nothing_and_a_new_run_writes_again(postgres: str) -> None:
    run = uuid.uuid4().hex
    table = pg_table(postgres, "n int")
    sink = PostgresSink(postgres, table, ["n"])
    assert _write(sink, SinkBatch(run + "a", 0), [(1,), (2,)]) == 0
    # Spark replays batch 0 (the crash came after the commit, before the ledger's): the ledger has no snapshot yet.
    assert _write(sink, SinkBatch(run + "a", 0), [(1,), (2,)]) == 0
    assert _write(sink, SinkBatch(run + "a", 3), [(3,)], resume=0) == 3
    assert _write(sink, SinkBatch(run + "a", 3), [(3,)], resume=0) == 3
    # Another recovery directory is another run: its batch 0 is written.
    assert _write(sink, SinkBatch(run + "b", 0), [(1,)]) == 0
    assert sorted(pg_query(postgres, f"SELECT n FROM {table}")) == [(1,), (1,), (2,), (3,)]


@pytest.mark.parametrize("upsert_on", [[], ["id"]], ids=["copy", "upsert"])
def test_values_are_adapted_as_psycopg_adapts_them(postgres: str, upsert_on: List[str]) -> None:
    from psycopg.types.json import Jsonb

    table = pg_table(
        postgres,
        "id uuid PRIMARY KEY, at timestamptz, amount numeric(9, 2), tags text[], doc jsonb, "
        "note text DEFAULT 'default'",
    )
    row = (
        uuid.UUID(int=7),
        datetime(2024, 5, 1, 12, tzinfo=timezone.utc),
        Decimal("12.50"),
        ["a", "b"],
        Jsonb({"n": [1, 2]}),
    )
    sink = PostgresSink(postgres, table, ["id", "at", "amount", "tags", "doc", "note"], upsert_on=upsert_on)
    _write(sink, SinkBatch(uuid.uuid4().hex, 0), [(*row, 'it\'s \\ "quoted"\ttabbed\n'), {"id": uuid.UUID(int=8)}])
    assert _rows(postgres, table) == [
        (*row[:4], {"n": [1, 2]}, 'it\'s \\ "quoted"\ttabbed\n'),
        (uuid.UUID(int=8), None, None, None, None, None),
    ]


def test_rows_of_a_batch_cut_short_are_rolled_back(postgres: str) -> None:
    run = uuid.uuid4().hex
    table = pg_table(postgres, "n int")
    part = PostgresSink(postgres, table, ["n"]).build_part("flow.out", "part_0", None)
    with writing(SinkBatch(run, 0)):
        part.write_batch([(1,)])
        assert part.snapshot() == 0
    with writing(SinkBatch(run, 1)):
        part.write_batch([(2,)])  # the epoch is aborted: no snapshot
    with writing(SinkBatch(run, 2)):
        part.write_batch([(3,)])
        assert part.snapshot() == 2
    with writing(SinkBatch(run, 3)):
        part.write_batch([(4,)])
    part.close()
    assert sorted(pg_query(postgres, f"SELECT n FROM {table}")) == [(1,), (3,)]


def test_a_database_and_a_recovery_directory_that_disagree_are_refused(postgres: str) -> None:
    run = uuid.uuid4().hex
    table = pg_table(postgres, "n int")
    sink = PostgresSink(postgres, table, ["n"])
    with pytest.raises(
        RuntimeError, match=f"step 'flow.out', table '{table}': .*wrote micro-batch 4, the database .* only none"
    ):
        _write(sink, SinkBatch(run, 5), [(1,)], resume=4)
    _write(sink, SinkBatch(run, 7), [(1,)])
    with pytest.raises(
        RuntimeError, match="already wrote micro-batch 7, later than 6: the recovery directory is older"
    ):
        _write(sink, SinkBatch(run, 6), [(2,)], resume=None)
    assert pg_query(postgres, f"SELECT n FROM {table}") == [(1,)]


def test_a_constraint_violation_fails_the_run_naming_the_step_and_table(postgres: str) -> None:
    table = pg_table(postgres, USERS)
    items: List[Tuple[str, Row]] = [("a", (1, "ann", 1)), ("a", (2, "bo", 1)), ("a", (1, "again", 1))]
    with pytest.raises(FlowsparkRuntimeError, match="step 'pg.out'") as info:
        cluster_main(
            _flow(items, PostgresSink(postgres, table, ["id", "name", "visits"]), batch_size=3),
            [],
            0,
            worker_count_per_proc=2,
        )
    cause = info.value.__cause__
    assert isinstance(cause, RuntimeError)
    assert f"step 'pg.out', table '{table}': a row of micro-batch 0 violates a constraint" in str(cause)
    assert "duplicate key value violates unique constraint" in str(cause)
    assert _rows(postgres, table) == []


@pytest.mark.parametrize(
    ("row", "error"),
    [
        ({"id": 1, "nmae": "x"}, "has keys that are not among its `columns` \\['id', 'name'\\]: \\['nmae'\\]"),
        ((1, "x", 3), "has 3 values for its 2 `columns`"),
        ("1,x", "must be a mapping or a sequence of 2 values; got str"),
    ],
)
def test_a_bad_row_names_the_step_and_table(postgres: str, row: Any, error: str) -> None:
    table = pg_table(postgres, USERS)
    with pytest.raises(FlowsparkRuntimeError) as info:
        cluster_main(_flow([("a", row)], PostgresSink(postgres, table, ["id", "name"])), [], 0, worker_count_per_proc=2)
    assert "error calling `write_batch` in step 'pg.out'" in str(info.value)
    assert f"step 'pg.out': a row for table '{table}'" in str(info.value.__cause__)
    assert re.search(error, str(info.value.__cause__))


def test_a_lost_connection_is_made_again_and_the_batch_written_once(postgres: str) -> None:
    run = uuid.uuid4().hex
    table = pg_table(postgres, "n int")
    part = PostgresSink(postgres, table, ["n"]).build_part("flow.lost", "part_0", None)
    with writing(SinkBatch(run, 0)):
        part.write_batch([(1,)])
        part.snapshot()
    with writing(SinkBatch(run, 1)):
        part.write_batch([(2,), (3,)])
        ended = pg_query(
            postgres,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = 'flowspark flow.lost part_0'",
        )
        assert ended == [(True,)]
        assert part.snapshot() == 1
    part.close()
    assert sorted(pg_query(postgres, f"SELECT n FROM {table}")) == [(1,), (2,), (3,)]


def test_a_server_that_is_gone_fails_after_the_retries_naming_the_step_and_table(postgres: str) -> None:
    run = uuid.uuid4().hex
    gone = f"host=127.0.0.1 port={free_port()} user=flowspark dbname=postgres connect_timeout=2"
    sink = PostgresSink(gone, "users", ["n"], retries=2)
    started = time.monotonic()
    with pytest.raises(
        RuntimeError,
        match="step 'flow.out', table 'users': writing micro-batch 0 failed after 3 "
        "tries \\(could not connect\\): .*refused",
    ) as info:
        _write(sink, SinkBatch(run, 0), [(1,)])
    assert time.monotonic() - started >= 1.5  # waited 0.5 s, then 1 s
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"columns": []}, "columns must name each column once"),
        ({"columns": ["a", "a"]}, "columns must name each column once"),
        ({"columns": "ab"}, "not a string"),
        ({"columns": ["a"], "upsert_on": ["b"]}, "upsert_on must be among columns"),
        ({"columns": ["a"], "partitions": 0}, "partitions must be 1 or more"),
        ({"columns": ["a"], "conninfo": "nonsense"}, 'missing "="'),
    ],
)
def test_bad_arguments_fail_where_the_sink_is_made(kwargs: Dict[str, Any], error: str) -> None:
    args = {"conninfo": "host=127.0.0.1", "table": "t", **kwargs}
    with pytest.raises(Exception, match=error):
        PostgresSink(**args)
