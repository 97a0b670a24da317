"""A day's mixed runs on one warm server (`benchmarks.warm_day`, a few rounds): every run's output is right, and
the server's processes and memory level off after the first round."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from benchmarks.warm_day import KINDS, Day

ROUNDS = 2
"""Rounds of every kind of run after the first, which starts the server and its Python worker pools."""
IDLE_WORKERS = 2
"""Python workers a pool may hold beyond the first round's, until Spark ends them after a minute idle."""


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
    assert last.usage.open_files <= first.usage.open_files * 1.1, (first, last)
