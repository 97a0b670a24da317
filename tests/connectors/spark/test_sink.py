"""`SparkSink`: micro-batches through Spark's own writers into folders of files and catalog tables, on real Spark."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pyarrow.parquet as pq
import pytest
from support.processes import run_module

import flowspark.operators as op
from flowspark.connectors.spark import SaveMode, SparkSink
from flowspark.dataflow import Dataflow
from flowspark.engine.connect.connect_server import read_record, start_supervisor
from flowspark.engine.run_context import RunContext, running
from flowspark.engine.spark.session import get_session
from flowspark.errors import FlowsparkRuntimeError
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSource, run_main

SCHEMA = "user string, n long"


def _flow(items: List[Any], sink: SparkSink) -> Dataflow:
    flow = Dataflow("spark_out")
    op.output("out", op.input("inp", flow, TestingSource(items, 3)), sink)
    return flow


def _run(flow: Dataflow, recovery: Optional[Path] = None) -> None:
    run_main(flow, recovery_config=RecoveryConfig(str(recovery)) if recovery else None)


def _events(first: int, count: int) -> List[Dict[str, Any]]:
    return [{"user": f"u{i % 3}", "n": i} for i in range(first, first + count)]


def _read(fmt: str, path: Path, schema: str = SCHEMA) -> List[Dict[str, Any]]:
    """The rows Spark reads back from a folder, sorted by `n`."""
    rows = get_session().read.format(fmt).schema(schema).load(str(path)).collect()
    return sorted((row.asDict() for row in rows), key=lambda row: row["n"])


def _data_files(path: Path) -> List[str]:
    """The data files below a folder (relative), what Spark's and pyarrow's readers see."""
    found = []
    for folder, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        found += [os.path.relpath(os.path.join(folder, n), path) for n in names if not n.startswith(("_", "."))]
    return sorted(found)


@pytest.fixture
def run_context(tmp_path: Path) -> Iterator[RunContext]:
    """A run's context, for calling a sink's `write_micro_batch` as the engine does."""
    context = RunContext(get_session(), str(tmp_path / "state"))
    with running(context):
        yield context


@pytest.mark.parametrize("fmt", ["parquet", "orc", "json"])
def test_each_file_format_holds_every_item_once(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    _run(_flow(_events(0, 20), SparkSink(fmt, {"path": str(out)}, SCHEMA)))
    assert _read(fmt, out) == _events(0, 20)
    files = _data_files(out)
    assert files and all(name.startswith("part-") for name in files)
    assert (out / "_flowspark").is_dir()


def test_sink_writes_parquet_with_the_schema(tmp_path: Path) -> None:
    items = [{"user": f"u{i % 2}", "n": i} for i in range(10)] + [{"user": "only_user"}]
    out = tmp_path / "out"
    _run(_flow(items, SparkSink("parquet", {"path": str(out)}, SCHEMA)))
    table = pq.read_table(out)
    assert table.schema.field("n").type == "int64"
    got = sorted(table.to_pylist(), key=lambda row: (row["n"] is None, row["n"]))
    assert got == [{"user": f"u{i % 2}", "n": i} for i in range(10)] + [{"user": "only_user", "n": None}]


def test_sink_infers_columns_without_a_schema(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(_flow([{"word": "a", "count": 2, "ratio": 0.5}], SparkSink("parquet", {"path": str(out)})))
    assert pq.read_table(out).to_pylist() == [{"word": "a", "count": 2, "ratio": 0.5}]


@pytest.mark.parametrize(
    ("item", "cause"),
    [("not a dict", "writes `dict` items"), ({"user": "u", "typo": 1}, "['typo']"), ({"user": 5}, "do not fit")],
)
def test_sink_refuses_bad_items_naming_the_step(tmp_path: Path, item: Any, cause: str) -> None:
    with pytest.raises(FlowsparkRuntimeError) as raised:
        _run(_flow([{"user": "ok", "n": 1}, item], SparkSink("parquet", {"path": str(tmp_path / "out")}, SCHEMA)))
    message = str(raised.value.__cause__)
    assert "spark_out.out" in message
    assert cause in message


def test_partition_by_puts_rows_in_partition_folders(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _run(_flow(_events(0, 30), SparkSink("parquet", {"path": str(out)}, SCHEMA, partition_by=["user"])))
    assert {name.split("/")[0] for name in _data_files(out)} == {"user=u0", "user=u1", "user=u2"}
    assert _read("parquet", out) == _events(0, 30)


def test_a_batch_committed_before_a_crash_is_not_written_again(tmp_path: Path, run_context: RunContext) -> None:
    out = tmp_path / "out"
    first = SparkSink("json", {"path": str(out)}, SCHEMA)
    first.write_micro_batch("s.out", 0, "run1", _events(0, 2))
    first.write_micro_batch("s.out", 1, "run1", _events(2, 2))
    # A resumed run's process: Spark replays batch 1, which the folder has.
    resumed = SparkSink("json", {"path": str(out)}, SCHEMA)
    resumed.write_micro_batch("s.out", 1, "run1", _events(2, 2))
    resumed.write_micro_batch("s.out", 2, "run1", _events(4, 1))
    assert _read("json", out) == _events(0, 5)
    assert _data_files(out) == [f"part-run1-{batch:010d}-00000.json" for batch in range(3)]


def test_a_new_run_adds_to_the_folder(tmp_path: Path, run_context: RunContext) -> None:
    out = tmp_path / "out"
    SparkSink("json", {"path": str(out)}, SCHEMA).write_micro_batch("s.out", 0, "run1", _events(0, 2))
    SparkSink("json", {"path": str(out)}, SCHEMA).write_micro_batch("s.out", 0, "run2", _events(2, 2))
    assert _read("json", out) == _events(0, 4)


def test_compaction_leaves_one_file_per_partition_folder_every_n_batches(
    tmp_path: Path, run_context: RunContext
) -> None:
    out = tmp_path / "out"
    sink = SparkSink("parquet", {"path": str(out)}, SCHEMA, partition_by=["user"], compact_every=3)
    for batch in range(7):
        sink.write_micro_batch("s.out", batch, "run1", _events(batch * 6, 6))
    assert _read("parquet", out) == _events(0, 42)
    for user in ("u0", "u1", "u2"):
        names = sorted(os.listdir(out / f"user={user}"))
        stems = [name.split(".")[0].rsplit("-", 1)[0] for name in names]
        assert stems == ["part-run1-0000000002-compacted", "part-run1-0000000005-compacted", "part-run1-0000000006"]


def test_csv_with_a_header_is_compacted_with_it(tmp_path: Path, run_context: RunContext) -> None:
    out = tmp_path / "out"
    sink = SparkSink("csv", {"path": str(out), "header": "true"}, SCHEMA, compact_every=2)
    for batch in range(2):
        sink.write_micro_batch("s.out", batch, "run1", _events(batch * 3, 3))
    (only,) = _data_files(out)
    assert (out / only).read_text().splitlines() == ["user,n"] + [f"u{i % 3},{i}" for i in range(6)]


def test_overwrite_keeps_the_last_batch(tmp_path: Path, run_context: RunContext) -> None:
    out = tmp_path / "out"
    sink = SparkSink("parquet", {"path": str(out)}, SCHEMA, mode="overwrite")
    sink.write_micro_batch("s.out", 0, "run1", _events(0, 3))
    sink.write_micro_batch("s.out", 1, "run1", _events(3, 2))
    assert _read("parquet", out) == _events(3, 2)


def test_overwrite_partitions_replaces_the_partitions_a_batch_has_rows_for(
    tmp_path: Path, run_context: RunContext
) -> None:
    out = tmp_path / "out"
    sink = SparkSink("parquet", {"path": str(out)}, SCHEMA, partition_by=["user"], mode=SaveMode.OVERWRITE_PARTITIONS)
    sink.write_micro_batch("s.out", 0, "run1", _events(0, 3))
    sink.write_micro_batch("s.out", 1, "run1", [{"user": "u1", "n": 100}])
    assert _read("parquet", out) == [{"user": "u0", "n": 0}, {"user": "u2", "n": 2}, {"user": "u1", "n": 100}]


def _table_rows(table: str) -> List[Dict[str, Any]]:
    rows = get_session().table(table).collect()
    return sorted((row.asDict() for row in rows), key=lambda row: row["n"])


def _tagged(events: List[Dict[str, Any]], run_id: str, batch: int) -> List[Dict[str, Any]]:
    return [dict(event, flowspark_batch=f"{run_id}-{batch:010d}") for event in events]


def test_a_catalog_table_is_created_partitioned_and_holds_every_item_once(tmp_path: Path) -> None:
    table = f"events_{tmp_path.name}"
    sink = SparkSink("parquet", {"path": str(tmp_path / "table")}, SCHEMA, table=table, partition_by=["user"])
    _run(_flow(_events(0, 20), sink), tmp_path / "recovery")
    rows = _table_rows(table)
    assert [{"user": row["user"], "n": row["n"]} for row in rows] == _events(0, 20)
    assert all(row["flowspark_batch"].startswith(rows[0]["flowspark_batch"][:12]) for row in rows)
    assert {name.split("/")[0] for name in _data_files(tmp_path / "table")} == {"user=u0", "user=u1", "user=u2"}
    columns = {c.name: c.isPartition for c in get_session().catalog.listColumns(table)}
    assert columns == {"user": True, "n": False, "flowspark_batch": False}


def test_a_table_skips_a_replayed_batch_and_is_made_again_over_its_files(
    tmp_path: Path, run_context: RunContext
) -> None:
    table = f"replay_{tmp_path.name}"
    options = {"path": str(tmp_path / "table")}
    sink = SparkSink("json", options, SCHEMA, table=table, partition_by=["user"])
    sink.write_micro_batch("s.out", 0, "run1", _events(0, 3))
    sink.write_micro_batch("s.out", 1, "run1", _events(3, 3))
    # A resumed run's process, whose catalog forgot the table (Spark's in-memory one does).
    get_session().sql(f"DROP TABLE {table}")
    resumed = SparkSink("json", options, SCHEMA, table=table, partition_by=["user"])
    resumed.write_micro_batch("s.out", 1, "run1", _events(3, 3))
    resumed.write_micro_batch("s.out", 2, "run1", _events(6, 1))
    assert _table_rows(table) == _tagged(_events(0, 3), "run1", 0) + _tagged(_events(3, 3), "run1", 1) + _tagged(
        _events(6, 1), "run1", 2
    )


def test_a_table_holding_part_of_a_batch_stops_the_run_naming_the_rows(tmp_path: Path, run_context: RunContext) -> None:
    table = f"partial_{tmp_path.name}"
    spark = get_session()
    spark.sql(
        f"CREATE TABLE {table} (user string, n long, flowspark_batch string) USING parquet "
        f"LOCATION '{tmp_path / 'table'}'"
    )
    spark.createDataFrame([("u0", 0, "run1-0000000004")], f"{SCHEMA}, flowspark_batch string").write.insertInto(table)
    with pytest.raises(FlowsparkRuntimeError) as raised:
        SparkSink(table=table, schema=SCHEMA).write_micro_batch("s.out", 4, "run1", _events(0, 3))
    message = str(raised.value)
    assert "'s.out'" in message
    assert "holds 1 of the 3 rows" in message
    assert "flowspark_batch = 'run1-0000000004'" in message


def test_a_table_is_written_by_column_name_whatever_its_order(tmp_path: Path, run_context: RunContext) -> None:
    table = f"ordered_{tmp_path.name}"
    spark = get_session()
    spark.sql(
        f"CREATE TABLE {table} (flowspark_batch string, extra string, n long, user string) USING parquet "
        f"LOCATION '{tmp_path / 'table'}'"
    )
    SparkSink(table=table, schema=SCHEMA).write_micro_batch("s.out", 0, "r", _events(0, 2))
    assert _table_rows(table) == [dict(e, extra=None, flowspark_batch="r-0000000000") for e in _events(0, 2)]


def test_a_table_without_the_batch_column_is_refused_or_appended_at_least_once(
    tmp_path: Path, run_context: RunContext
) -> None:
    table = f"plain_{tmp_path.name}"
    get_session().sql(f"CREATE TABLE {table} (user string, n long) USING parquet LOCATION '{tmp_path / 'table'}'")
    with pytest.raises(FlowsparkRuntimeError, match=r"'s.out'.*has no column 'flowspark_batch'.*batch_column=None"):
        SparkSink(table=table, schema=SCHEMA).write_micro_batch("s.out", 0, "r", _events(0, 2))
    SparkSink(table=table, schema=SCHEMA, batch_column=None).write_micro_batch("s.out", 0, "r", _events(0, 2))
    assert _table_rows(table) == _events(0, 2)


def test_a_table_overwritten_by_partition(tmp_path: Path, run_context: RunContext) -> None:
    table = f"overwrite_{tmp_path.name}"
    sink = SparkSink(
        "parquet",
        {"path": str(tmp_path / "table")},
        SCHEMA,
        table=table,
        partition_by=["user"],
        mode="overwrite_partitions",
    )
    sink.write_micro_batch("s.out", 0, "r", _events(0, 3))
    sink.write_micro_batch("s.out", 1, "r", [{"user": "u1", "n": 100}])
    assert _table_rows(table) == [{"n": 0, "user": "u0"}, {"n": 2, "user": "u2"}, {"n": 100, "user": "u1"}]


def test_an_unknown_column_for_a_table_names_the_step(tmp_path: Path, run_context: RunContext) -> None:
    table = f"unknown_{tmp_path.name}"
    get_session().sql(f"CREATE TABLE {table} (user string) USING parquet LOCATION '{tmp_path / 'table'}'")
    with pytest.raises(TypeError, match=r"'s.out'.*has no column \['n'\]"):
        SparkSink(table=table, schema=SCHEMA, batch_column=None).write_micro_batch("s.out", 0, "r", _events(0, 1))


def test_a_spark_error_names_the_step_and_the_output(tmp_path: Path, run_context: RunContext) -> None:
    with pytest.raises(RuntimeError, match=r"step 's.out': Spark could not write micro-batch 0 to 'no-such-format'"):
        SparkSink("no-such-format", {"path": str(tmp_path)}).write_micro_batch("s.out", 0, "r", [{"n": 1}])


@pytest.mark.parametrize(
    ("kwargs", "cause"),
    [
        ({}, "needs a `format`"),
        ({"format": "json", "mode": "error"}, "'error' and 'ignore'"),
        ({"format": "json", "options": {"path": "out"}, "compact_every": 3}, "a `schema`"),
        ({"format": "json", "options": {"path": "out"}, "schema": SCHEMA, "compact_every": 1}, "at least 2"),
        ({"table": "t", "schema": SCHEMA, "compact_every": 3}, "compacts a folder of files"),
        ({"table": "t", "batch_column": "my batch"}, "plain column name"),
    ],
)
def test_bad_arguments_are_refused_when_the_sink_is_made(kwargs: Dict[str, Any], cause: str) -> None:
    with pytest.raises(ValueError, match=cause):
        SparkSink(**kwargs)


CONNECT_FLOW = """
import os
import flowspark.operators as op
from flowspark.connectors.spark import SparkSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

out = os.environ["CONNECT_OUT"]
flow = Dataflow("connect")
rows = op.input("inp", flow, TestingSource([{"user": f"u{i % 3}", "n": i} for i in range(50)], int(os.environ["BATCH"])))
op.output("files", rows, SparkSink("parquet", {"path": f"{out}/files"}, "user string, n long", partition_by=["user"],
                                   compact_every=2))
op.output("table", rows, SparkSink("json", {"path": f"{out}/table"}, "user string, n long", table=os.environ["TABLE"]))
"""


def _json_rows(path: Path) -> List[Dict[str, Any]]:
    rows = [json.loads(line) for name in _data_files(path) for line in (path / name).read_text().splitlines()]
    return sorted(rows, key=lambda row: row["n"])


def test_flows_write_files_and_tables_through_a_spark_connect_server(tmp_path: Path) -> None:
    """Streaming and bounded runs through `--remote`: Spark's writers run in the server, the commits in the run."""
    (tmp_path / "connect_flow.py").write_text(CONNECT_FLOW)
    supervisor = start_supervisor(str(tmp_path / "server"))
    try:
        deadline = time.monotonic() + 180
        record = read_record(str(tmp_path / "server"))
        while record is None and time.monotonic() < deadline and supervisor.poll() is None:
            time.sleep(0.2)
            record = read_record(str(tmp_path / "server"))
        assert record is not None, "the Spark Connect server did not start"
        runs = {"streaming": (["-r", str(tmp_path / "recovery")], "7"), "bounded": ([], "50")}
        for name, (args, batch) in runs.items():
            done = run_module(
                "flowspark.run",
                f"{tmp_path / 'connect_flow.py'}:flow",
                "--remote",
                record.server_url,
                *args,
                cwd=tmp_path,
                timeout=300,
                env=dict(os.environ, CONNECT_OUT=str(tmp_path / name), TABLE=f"events_{name}", BATCH=batch),
            )
            assert done.returncode == 0, done.stderr
            expected = _events(0, 50)
            assert _read("parquet", tmp_path / name / "files") == expected
            assert [{"user": r["user"], "n": r["n"]} for r in _json_rows(tmp_path / name / "table")] == expected
    finally:
        supervisor.terminate()
        supervisor.wait(60)


def test_sink_outside_a_run_is_refused() -> None:
    with pytest.raises(RuntimeError, match="only works inside a flowspark run"):
        SparkSink("json", {"path": "/nonexistent"}).write_micro_batch("s.out", 0, "r", [{"n": 1}])
