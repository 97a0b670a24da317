"""`SparkSink` into Delta Lake and Apache Iceberg tables, on real Spark with those projects' own builds.

Each test runs its Spark in a process of its own, started with the
format's settings (`support.table_formats`), and skips on a PySpark that
the format has no build for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from support.table_formats import delta_settings, delta_table_rows, iceberg_settings

pytestmark = pytest.mark.table_formats

REPLAY = """
import json, os, sys
from flowspark.connectors.spark import SparkSink
from flowspark.engine.run_context import RunContext, running
from flowspark.engine.spark.session import get_session

settings, format, options, table = json.loads(sys.argv[1])
spark = get_session(conf=settings)
events = [{"user": f"u{i % 3}", "n": i} for i in range(5)]
with running(RunContext(spark, os.environ["STATE"])):
    first = SparkSink(format, options, "user string, n long", table=table)
    first.write_micro_batch("s.out", 0, "run1", events[0:2])
    first.write_micro_batch("s.out", 1, "run1", events[2:4])
    # A resumed run's process: Spark replays batch 1, which the table has.
    resumed = SparkSink(format, options, "user string, n long", table=table)
    resumed.write_micro_batch("s.out", 1, "run1", events[2:4])
    resumed.write_micro_batch("s.out", 2, "run1", events[4:5])
    if table is not None:
        rows = [row.asDict() for row in spark.table(table).collect()]
        print(json.dumps(sorted(rows, key=lambda row: row["n"])))
"""


def _replayed(tmp_path: Path, settings: Dict[str, str], format: str, options: Dict[str, str], table: Any) -> str:  # noqa: A002 - Spark's option name
    """Run `REPLAY` with Spark `settings` for a sink of `format`, `options` and `table`; what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", REPLAY, json.dumps([settings, format, options, table])],
        env=dict(os.environ, STATE=str(tmp_path / "state")),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _events(count: int) -> List[Dict[str, Any]]:
    return [{"user": f"u{i % 3}", "n": i} for i in range(count)]


def test_a_delta_table_by_path_commits_each_batch_once(tmp_path: Path) -> None:
    table = tmp_path / "events"
    _replayed(tmp_path, delta_settings(), "delta", {"path": str(table)}, None)
    assert sorted(delta_table_rows(table), key=lambda row: row["n"]) == _events(5)
    # The replay was skipped by Delta: three transactions, one per batch.
    assert len(list((table / "_delta_log").glob("*.json"))) == 3


def test_a_delta_catalog_table_holds_each_batch_once(tmp_path: Path) -> None:
    settings = dict(delta_settings(), **{"spark.sql.warehouse.dir": str(tmp_path / "warehouse")})
    rows = json.loads(_replayed(tmp_path, settings, "delta", {}, "events"))
    assert [{"user": row["user"], "n": row["n"]} for row in rows] == _events(5)
    assert [row["flowspark_batch"] for row in rows] == [f"run1-{batch:010d}" for batch in (0, 0, 1, 1, 2)]


def test_an_iceberg_catalog_table_holds_each_batch_once(tmp_path: Path) -> None:
    settings = iceberg_settings("lake", tmp_path / "warehouse")
    rows = json.loads(_replayed(tmp_path, settings, "iceberg", {}, "lake.db.events"))
    assert [{"user": row["user"], "n": row["n"]} for row in rows] == _events(5)
    assert [row["flowspark_batch"] for row in rows] == [f"run1-{batch:010d}" for batch in (0, 0, 1, 1, 2)]
