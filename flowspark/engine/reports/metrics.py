"""Per-step item counts and call timings, with Bytewax's metric names.

Steps run in Spark's Python workers and on the driver.  Each place that
runs steps keeps a `Meter`: it counts items per batch (the length of the
batch's list, never item by item) and times user calls, and hands what it
gathered to the driver at the end of each Spark task and at least every
`FLUSH_SECONDS` while one runs (`Meter.flush`), over the driver link, so
a long task's counters move as it goes.  The driver's `FlowMetrics` sums those readings by step and
worker (`flowspark._dataflow_api` serves them to Prometheus).  A worker's
`worker_index` is the Spark task's partition id; steps run on the driver
(the sources and sinks that live there) report as worker 0.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Dict, List, Optional, Tuple

from flowspark.engine.reports.progress import state_rows

BOUNDS = (0.0, 0.0005, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
"""Histogram bucket bounds in seconds, as Bytewax's exporter uses."""


class Count(Enum):
    """Item counters, by Bytewax's name (Prometheus adds `_total`)."""

    ITEMS_IN = "item_inp_count"
    ITEMS_OUT = "item_out_count"


COUNT_HELP = {
    Count.ITEMS_IN: "number of items this step has ingested",
    Count.ITEMS_OUT: "number of items this step has emitted",
}


class Timing(Enum):
    """Duration histograms of user calls, by Bytewax's name."""

    NEXT_BATCH = "inp_part_next_batch_duration_seconds"
    MAPPER = "flat_map_batch_duration_seconds"
    ON_BATCH = "stateful_batch_on_batch_duration_seconds"
    ON_NOTIFY = "stateful_batch_on_notify_duration_seconds"
    ON_EOF = "stateful_batch_on_eof_duration_seconds"
    NOTIFY_AT = "stateful_batch_notify_at_duration_seconds"
    WRITE_BATCH = "out_part_write_batch_duration_seconds"


TIMING_HELP = {
    Timing.NEXT_BATCH: "`next_batch` duration in seconds",
    Timing.MAPPER: "`flat_map_batch` `mapper` duration in seconds",
    Timing.ON_BATCH: "`StatefulBatchLogic.on_batch` duration in seconds",
    Timing.ON_NOTIFY: "`StatefulBatchLogic.on_notify` duration in seconds",
    Timing.ON_EOF: "`StatefulBatchLogic.on_eof` duration in seconds",
    Timing.NOTIFY_AT: "`StatefulBatchLogic.notify_at` duration in seconds",
    Timing.WRITE_BATCH: "`write_batch` duration in seconds",
}

LOGIC_TIMINGS = {"on_batch": Timing.ON_BATCH, "on_notify": Timing.ON_NOTIFY, "on_eof": Timing.ON_EOF}
"""The timing of each `StatefulBatchLogic` method that emits items."""


@dataclass
class Durations:
    """One histogram's observations: a count per bucket (the last one unbounded), their sum and number."""

    per_bucket: List[int] = field(default_factory=lambda: [0] * (len(BOUNDS) + 1))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        self.per_bucket[bisect.bisect_left(BOUNDS, seconds)] += 1
        self.total += seconds
        self.count += 1

    def absorb(self, other: Durations) -> None:
        self.per_bucket = [a + b for a, b in zip(self.per_bucket, other.per_bucket)]
        self.total += other.total
        self.count += other.count


@dataclass
class Reading:
    """What one meter gathered since its last flush, by `(metric, step_id)`."""

    counts: Dict[Tuple[Count, str], int] = field(default_factory=dict)
    timings: Dict[Tuple[Timing, str], Durations] = field(default_factory=dict)


FLUSH_SECONDS = 1.0
"""How long a meter keeps what it gathered before handing it on, at most, while its task runs."""


class Meter:
    """Counts and timings of the steps one Spark task (or the driver's inputs or sink writer) runs.

    `report` receives each non-empty `Reading` at `flush`, which the
    meter also does itself when it counts `FLUSH_SECONDS` after the last.

    >>> readings = []
    >>> meter = Meter(readings.append)
    >>> meter.passed("flow.map", 3, 2)
    >>> meter.flush()
    >>> readings[0].counts[Count.ITEMS_OUT, "flow.map"]
    2
    """

    def __init__(self, report: Callable[[Reading], None]) -> None:
        self._report = report
        self._reading = Reading()
        self._due = time.monotonic() + FLUSH_SECONDS

    def count(self, metric: Count, step_id: str, items: int) -> None:
        counts = self._reading.counts
        counts[metric, step_id] = counts.get((metric, step_id), 0) + items
        self._flush_if_due()

    def passed(self, step_id: str, items_in: int, items_out: int) -> None:
        """A step took `items_in` items and emitted `items_out`."""
        self.count(Count.ITEMS_IN, step_id, items_in)
        self.count(Count.ITEMS_OUT, step_id, items_out)

    def time(self, metric: Timing, step_id: str, seconds: float) -> None:
        durations = self._reading.timings.get((metric, step_id))
        if durations is None:
            durations = self._reading.timings[metric, step_id] = Durations()
        durations.observe(seconds)
        self._flush_if_due()

    def flush(self) -> None:
        self._due = time.monotonic() + FLUSH_SECONDS
        reading, self._reading = self._reading, Reading()
        if reading.counts or reading.timings:
            self._report(reading)

    def _flush_if_due(self) -> None:
        if time.monotonic() >= self._due:
            self.flush()


def worker_index() -> int:
    """The running Spark task's partition id (0 outside a task)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else int(context.partitionId())


@dataclass(frozen=True)
class QueryWatch:
    """Where the driver reads the running query's state: its last progress, the sources' completion and lags."""

    last_progress: Callable[[], Any]
    fraction_done: Callable[[], Optional[float]]
    lags: Callable[[], Dict[Tuple[str, str], int]]


@dataclass(frozen=True)
class Gauge:
    """One flowspark gauge of the running query."""

    name: str
    help: str
    value: float
    labels: Tuple[Tuple[str, str], ...] = ()


class FlowMetrics:
    """The run's metrics on the driver: worker readings summed by step and worker, and the query's gauges."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Dict[Tuple[Count, str, int], int] = {}
        self._timings: Dict[Tuple[Timing, str, int], Durations] = {}
        self._watch: Optional[QueryWatch] = None

    def add(self, worker: int, reading: Reading) -> None:
        """Sum one meter's reading in (the driver link's `metrics` call)."""
        with self._lock:
            for (count, step_id), items in reading.counts.items():
                self._counts[count, step_id, worker] = self._counts.get((count, step_id, worker), 0) + items
            for (timing, step_id), durations in reading.timings.items():
                self._timings.setdefault((timing, step_id, worker), Durations()).absorb(durations)

    def driver_meter(self) -> Meter:
        """A meter for steps run on the driver, reporting as worker 0 (one per thread that uses it)."""
        return Meter(lambda reading: self.add(0, reading))

    def watch(self, watch: QueryWatch) -> None:
        """Read the gauges from this query from now on (each run attempt has its own)."""
        self._watch = watch

    def counts(self) -> Dict[Tuple[Count, str, int], int]:
        """Every item count so far, by `(counter, step_id, worker_index)`."""
        with self._lock:
            return dict(self._counts)

    def timings(self) -> Dict[Tuple[Timing, str, int], Durations]:
        """Every duration histogram so far, by `(timing, step_id, worker_index)`."""
        with self._lock:
            return {k: Durations(list(v.per_bucket), v.total, v.count) for k, v in self._timings.items()}

    def gauges(self) -> List[Gauge]:
        """The running query's last micro-batch and the sources' completion, as far as known.

        A scrape must not fail with the run: a query that is stopping or a
        source whose `fraction_done` raises leaves its gauges out.
        """
        watch = self._watch
        if watch is None:
            return []
        found: List[Gauge] = []
        try:
            progress = watch.last_progress()
        except Exception:
            progress = None
        if progress:
            found.append(
                Gauge(
                    "flowspark_micro_batch_id",
                    "id of the query's last completed micro-batch",
                    int(progress.get("batchId", 0)),
                )
            )
            millis = (progress.get("durationMs") or {}).get("triggerExecution")
            if millis is not None:
                found.append(
                    Gauge(
                        "flowspark_micro_batch_duration_seconds",
                        "duration of the query's last completed micro-batch",
                        millis / 1000,
                    )
                )
            rows = state_rows(progress)
            if rows is not None:
                found.append(
                    Gauge("flowspark_state_rows", "rows in Spark's state stores after the last micro-batch", rows)
                )
        try:
            fraction = watch.fraction_done()
        except Exception:
            fraction = None
        if fraction is not None:
            found.append(
                Gauge("flowspark_input_fraction_done", "how far the flow's sources got, from 0 to 1", fraction)
            )
        for (step_id, partition), lag in sorted(watch.lags().items()):
            found.append(
                Gauge(
                    "flowspark_input_lag_items",
                    "items a source partition had yet to read at its last poll",
                    lag,
                    (("step_id", step_id), ("partition", partition)),
                )
            )
        return found
