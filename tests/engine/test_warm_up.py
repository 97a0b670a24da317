"""Spark's Python workers start while a run sets up its query: one warm-up job per Spark context."""

from __future__ import annotations

import time
import weakref
from typing import Set

import pytest

from flowspark.engine import warm_up
from flowspark.engine.session import get_session


def test_one_job_per_context_starts_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    spark = get_session()
    tracker = spark.sparkContext.statusTracker()
    earlier = set(tracker.getJobIdsForGroup(warm_up.JOB_GROUP))
    monkeypatch.setattr(warm_up, "_warmed", weakref.WeakSet())
    warm_up.warm_python_workers(spark)
    warm_up.warm_python_workers(spark)
    new: Set[int] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = set(tracker.getJobIdsForGroup(warm_up.JOB_GROUP)) - earlier
        if new and all(tracker.getJobInfo(job).status == "SUCCEEDED" for job in new):
            break
        time.sleep(0.1)
    assert [tracker.getJobInfo(job).status for job in new] == ["SUCCEEDED"]
