"""Spark's Python workers start while a run sets up its query: one warm-up job per Spark context."""

from __future__ import annotations

import os
import time
import weakref
from typing import List, Optional, Set, Tuple

import pytest
from pyspark.sql import SparkSession
from support.processes import children, descendants

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.engine import warm_up
from flowspark.engine.run_config import RunConfig
from flowspark.engine.runner import run_flow
from flowspark.engine.spark.session import get_session
from flowspark.testing import TestingSink, TestingSource


def _warm_up_jobs(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, calls: int, stateful: bool, jobs: int = 1
) -> List[str]:
    """Warm the context's workers `calls` times as if for the first time; the status of each job that started.

    Waits for `jobs` jobs to succeed (the jobs start from threads, not all at once).
    """
    tracker = spark.sparkContext.statusTracker()
    earlier = set(tracker.getJobIdsForGroup(warm_up.JOB_GROUP))
    monkeypatch.setattr(warm_up, "_warmed", {kind: weakref.WeakSet() for kind in warm_up.WorkerKind})
    for _ in range(calls):
        warm_up.warm_python_workers(spark, stateful)
    statuses: List[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        infos = [tracker.getJobInfo(job) for job in set(tracker.getJobIdsForGroup(warm_up.JOB_GROUP)) - earlier]
        statuses = [info.status if info is not None else "UNKNOWN" for info in infos]
        if len(statuses) >= jobs and all(status == "SUCCEEDED" for status in statuses):
            break
        time.sleep(0.1)
    return statuses


def test_one_job_per_context_starts_the_one_pool_of_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    spark = get_session()
    assert warm_up.kinds_used(spark, stateful=True) == [warm_up.WorkerKind.RDD]
    assert _warm_up_jobs(spark, monkeypatch, calls=2, stateful=False) == ["SUCCEEDED"]
    assert _warm_up_jobs(spark, monkeypatch, calls=2, stateful=True) == ["SUCCEEDED"]


def test_with_simplified_tracebacks_each_kind_the_query_uses_gets_a_job(monkeypatch: pytest.MonkeyPatch) -> None:
    spark = get_session()
    spark.conf.set(warm_up.SIMPLIFIED_TRACEBACK, "true")
    try:
        assert warm_up.kinds_used(spark, stateful=False) == [warm_up.WorkerKind.SQL]
        assert _warm_up_jobs(spark, monkeypatch, calls=2, stateful=True, jobs=2) == ["SUCCEEDED"] * 2
    finally:
        spark.conf.set(warm_up.SIMPLIFIED_TRACEBACK, "false")


def _python_daemons() -> Set[int]:
    """The processes below this one running PySpark's daemon (each forks the Python workers of one kind).

    A local Spark's Pythons are forked from its fork server
    (`fork_server`), whose children keep its command line: those count
    as well as any process started as PySpark's daemon.
    """

    def command(pid: int) -> bytes:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    below = descendants(os.getpid())
    forked = {child for pid in below if b"fork_server" in command(pid) for child in children(pid)}
    return {pid for pid in below if b"pyspark.daemon" in command(pid)} | forked


def _source_worker_parent(item: int) -> Tuple[str, int]:
    return "k", os.getppid()


def _stateful_worker_parent(state: Optional[int], item: int) -> Tuple[int, Tuple[int, int]]:
    return 0, (item, os.getppid())


def test_the_querys_tasks_run_in_the_warmed_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    spark = get_session()
    assert _warm_up_jobs(spark, monkeypatch, calls=1, stateful=True) == ["SUCCEEDED"]
    warmed = _python_daemons()

    out: List[Tuple[str, Tuple[int, int]]] = []
    flow = Dataflow("warm")
    keyed = op.map("source_parent", op.input("inp", flow, TestingSource([1, 2, 3])), _source_worker_parent)
    op.output("out", op.stateful_map("stateful_parent", keyed, _stateful_worker_parent), TestingSink(out))
    run_flow(flow, RunConfig())
    # Spark keeps one daemon per worker environment: a warm-up in another
    # environment would leave its workers idle beside the query's daemon.
    # The source's tasks and the stateful ones share one.
    parents = {parent for _, pair in out for parent in pair}
    assert len(out) == 3 and len(parents) == 1 and parents <= warmed
