"""A day's mixed runs on one warm server (`benchmarks.warm_day`, a few rounds): every run's output is right, the
server's processes and memory level off after the first round, and its open files grow only by what Spark keeps of
each streaming query (`server_usage.outgrown` bounds that)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from benchmarks.warm_day import KINDS, Day

ROUNDS = 2
"""Rounds of every kind of run after the first, which starts the server and its Python worker pools."""
IDLE_WORKERS = 2
"""Python workers a pool may hold beyond the first round's, until Spark ends them after a minute idle."""
STREAMING_KINDS = ("live", "sigterm", "sigkill")
"""The kinds of run that start a streaming query (the others are one batch query each)."""
FILES_PER_STREAMING_QUERY = 16
"""Open files Spark 4.3 keeps of each streaming query with a Python data source and `foreachBatch` after it stops
(about 11 measured: the selectors and sockets of its per-query Python runners), until the JVM ends."""


def test_mixed_runs_from_several_projects_leave_the_server_its_size() -> None:
    # A short path of `/tmp`, not pytest's: the server's fork server listens on a Unix socket in its folder.
    folder = Path(tempfile.mkdtemp(prefix="warm-day-"))
    day = Day(folder, projects=3)
    try:
        day.round(0)
        first = day.row()
        for number in range(1, ROUNDS + 1):
            day.round(number)
        last = day.row()
    finally:
        day.stop()
        shutil.rmtree(folder, ignore_errors=True)
    assert last.runs == (ROUNDS + 1) * (len(KINDS) + 1)  # a pair is two runs
    assert last.usage.processes <= first.usage.processes + IDLE_WORKERS, (first, last)
    assert last.usage.pss_bytes <= first.usage.pss_bytes * 1.1, (first, last)
    streaming_queries = ROUNDS * len(STREAMING_KINDS)
    assert last.usage.open_files <= first.usage.open_files * 1.1 + streaming_queries * FILES_PER_STREAMING_QUERY, (
        first,
        last,
    )
