"""When the next micro-batch is due for timers alone: the earliest wake-up any stateful bucket holds.

A key's `notify_at` is a processing-time timer of Spark's
`transformWithState`, which fires in the first micro-batch that runs once
it is due.  Spark would run a micro-batch without input at every trigger
to look for due timers: on a flow with stateful steps, a stream of
micro-batches (the whole query's tasks, a core's worth of work) even while
no input comes.  flowspark turns those off and runs one when a timer is
due instead: every bucket a micro-batch handles reports its earliest
wake-up in a control row to the driver (`stateful`), the driver keeps the
earliest of all (`WakeUps`), and the source asks for a micro-batch without
input (a *tick*) once it is due (`spark_source.Reader.latestOffset`).  The
first micro-batch of every run of the query asks every bucket to report
(`PING` rows), as the driver knows nothing of the state it resumed.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Dict, Optional

DUE_CALL = "wake_due"
"""The driver call that says whether a tick is due."""

Reports = Dict[str, Optional[int]]
"""Buckets' earliest wake-ups (epoch ms, None for none), by group name."""


@dataclass(frozen=True)
class Ping:
    """The source's task that gives every stateful bucket a `PING` row (the first micro-batch of a run)."""


class WakeUps:
    """The driver's view of every bucket's earliest wake-up."""

    def __init__(self) -> None:
        self._by_bucket: Reports = {}
        self._lock = threading.Lock()

    def note(self, reports: Reports) -> None:
        """Buckets' reports from a written micro-batch: each replaces what its bucket said before."""
        with self._lock:
            self._by_bucket.update(reports)

    def due(self, now_ms: int) -> bool:
        """Whether some bucket's earliest wake-up has come."""
        with self._lock:
            return any(at is not None and at <= now_ms for at in self._by_bucket.values())
