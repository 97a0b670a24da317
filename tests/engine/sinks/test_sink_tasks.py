"""Partitioned sinks written in Spark's tasks: routing, where the writes run, errors (dynamic sinks: `test_task_sinks`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List, Tuple

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - PySpark's idiom
from support.partitions import LineSink

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine.sinks.sink_tasks import route_keys, spark_int_hash
from flowspark.engine.spark.session import get_session
from flowspark.errors import FlowsparkRuntimeError
from flowspark.testing import TestingSource, cluster_main

ITEMS = [(f"k{n % 2}", f"v{n}") for n in range(40)]


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    return get_session()


def test_the_route_hash_is_sparks(spark: SparkSession) -> None:
    values = list(range(-40, 300))
    rows = spark.createDataFrame([(v,) for v in values], "v int").select(F.hash("v").alias("h")).collect()
    assert [row.h for row in rows] == [spark_int_hash(v) for v in values]


@pytest.mark.parametrize("tasks", [1, 2, 3, 8])
def test_each_route_key_lands_in_its_task(spark: SparkSession, tasks: int) -> None:
    keys = route_keys(tasks)
    frame = spark.createDataFrame([(k,) for k in keys], "route int").repartition(tasks, "route")
    placed = frame.select("route", F.spark_partition_id().alias("task")).collect()
    assert sorted((row.route, row.task) for row in placed) == sorted(zip(keys, range(tasks)))


def _run(sink: Any, items: List[Tuple[str, str]] = ITEMS, flow_id: str = "x") -> None:
    """Write `items` to `sink` in a run of two workers (not one worker's order: sinks may leave the driver)."""
    flow = Dataflow(flow_id)
    op.output("out", op.input("inp", flow, TestingSource(items, batch_size=5)), sink)
    cluster_main(flow, [], 0, worker_count_per_proc=2)


class InDriverLineSink(LineSink):
    lives_in_driver = True


def test_a_sink_that_need_not_live_in_the_driver_is_written_in_one_task_per_partition(tmp_path: Path) -> None:
    sink = LineSink(tmp_path)
    _run(sink)
    assert sink.lines("p0") == [f"v{n}" for n in range(0, 40, 2)]
    assert sink.lines("p1") == [f"v{n}" for n in range(1, 40, 2)]
    builds = sink.builds()
    assert builds and all(in_task and pid != os.getpid() for _, pid, in_task, _ in builds)
    # Each partition has its own task of the micro-batch's job: they are spread, not merged.
    assert {(name, task) for name, _, _, task in builds} == {("p0", 0), ("p1", 1)}


def test_a_sink_that_lives_in_the_driver_is_written_there(tmp_path: Path) -> None:
    sink = InDriverLineSink(tmp_path)
    _run(sink)
    assert sink.lines("p1") == [f"v{n}" for n in range(1, 40, 2)]
    assert sink.builds() == [("p0", os.getpid(), False, -1), ("p1", os.getpid(), False, -1)]


def test_a_partition_no_item_reaches_is_never_built_as_in_bytewax(tmp_path: Path) -> None:
    sink = LineSink(tmp_path, count=3)
    (tmp_path / "p2").write_text("left from an earlier run\n")
    _run(sink)
    assert sink.lines("p2") == ["left from an earlier run"]
    assert "p2" not in [name for name, *_ in sink.builds()]


def test_a_failing_write_in_a_task_names_the_step_and_partition_and_shows_the_users_line(tmp_path: Path) -> None:
    with pytest.raises(
        FlowsparkRuntimeError, match="error calling `write_batch` in step 'x.out' for partition 'p1'"
    ) as info:
        _run(LineSink(tmp_path, broken=["p1"]))
    cause = info.value.__cause__
    assert isinstance(cause, OSError) and str(cause) == "disk full"
    notes = "\n".join(getattr(cause, "__notes__", []))
    assert 'raise OSError("disk full")' in notes and "partitions.py" in notes


def test_a_bad_key_for_a_partitioned_sink_in_the_workers_names_the_step(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="step 'x.out' requires `\\(key, value\\)` 2-tuple"):
        _run(LineSink(tmp_path), items=["bare"])  # type: ignore[list-item]
