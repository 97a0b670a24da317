"""A run whose input ends within its first read, as one Spark batch query.

A run without a recovery directory whose inputs all live in the driver
and all end in the first read (`DriverInputs.prime`: a `TestingSource`, a file
read whole) is what the streaming query would run as one micro-batch that
also ends the input.  Started as a streaming query, it would pay for
Spark's offset and commit logs, the Python processes that a streaming data
source and `transformWithState` start on the driver, and the state store,
all for that one micro-batch.  This runs the same micro-batch as a batch
query: the pieces the hub read become a small local DataFrame, each task
reads its pieces as the streaming source's `read()` does
(`spark_source.Reader`), each stateful layer runs its processor
(`stateful.LayerProcessor`) over the buckets a shuffle by bucket gave its
task, with the state in the task's memory (`memory_state`), and the
writer takes the result as micro-batch 0.  Items, order, end of input and
errors are the streaming query's.  While it runs, `BatchProgress` keeps
the progress line moving from the steps' counters, which the tasks report
as they go (`metrics`).
"""

from __future__ import annotations

import pickle
import threading
import time
from types import TracebackType
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Type

import pyarrow as pa

from flowspark.engine.attempt import Attempt
from flowspark.engine.plan import chunks
from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.plan import Plan
from flowspark.engine.plan.shipped_plan import ShippedPlan
from flowspark.engine.reports.driver_link import DriverLink
from flowspark.engine.reports.metrics import Count, FlowMetrics
from flowspark.engine.reports.progress import BatchReport, Progress
from flowspark.engine.sources.data_source import SCHEMA_DDL
from flowspark.engine.sources.input_end import InputEnd
from flowspark.engine.sources.spark_source import Reader, ReadTask, encode_options
from flowspark.engine.state.memory_state import BatchTime, MemoryHandle
from flowspark.engine.state.stateful import LayerProcessor

_PIECE_COLUMN = "piece"


class SourcePass:
    """`mapInArrow`'s function over the pieces: each piece read and pushed through the fused steps, as the streaming
    source does."""

    def __init__(self, options: Dict[str, str]) -> None:
        self._options = options

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = Reader(self._options)
        for batch in batches:
            for blob in batch.column(_PIECE_COLUMN).to_pylist():
                yield from reader.read(ReadTask(pickle.loads(blob)))


class _ChunkRow(NamedTuple):
    """A row as `LayerProcessor` reads the ones Spark hands it."""

    seq: int
    kind: int
    payload: bytes


class LayerPass:
    """`mapInArrow`'s function over one task's buckets of a stateful layer: its processor handles each bucket once."""

    def __init__(
        self, shipped: ShippedPlan, layer: int, groups: Groups, link: DriverLink, metered: bool, last: bool
    ) -> None:
        self._processor = LayerProcessor(shipped, layer, groups, link, metered, hands_back=not last)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        buckets: Dict[str, List[_ChunkRow]] = {}
        for batch in batches:
            columns = [batch.column(name).to_pylist() for name in chunks.ARROW_SCHEMA.names]
            for grp, seq, kind, payload in zip(*columns):
                buckets.setdefault(grp, []).append(_ChunkRow(seq, kind, payload))
        if not buckets:  # a partition the shuffle left empty (a run that keeps one worker's order has one bucket)
            return
        handle = MemoryHandle()
        # The handle and the time stand in for the ones `transformWithState` gives.
        processor: Any = self._processor
        processor.init(handle)
        now = BatchTime(int(time.time() * 1000))
        rows: List[chunks.Row] = []
        for grp in sorted(buckets):
            handle.bucket = grp
            rows.extend(
                (row.grp, row.seq, row.kind, row.payload)
                for row in processor.handleInputRows((grp,), iter(buckets.pop(grp)), now)
            )
        processor.close()
        yield chunks.to_arrow(rows)


def run_batch(attempt: Attempt) -> None:
    """Run the micro-batch the hub read before Spark started (`DriverSide.first_read`) and the end of input as one
    batch query.

    The attempt's shipped plan is the one Spark's tasks get
    (`shipped_plan`); the writer gets the result as micro-batch 0 and
    finishes the run.
    """
    assert attempt.driver.first_read is not None
    start, end = attempt.driver.first_read
    plan, workers, link, groups, metered = attempt.plan, attempt.shipped, attempt.link, attempt.groups, attempt.metered
    hub, parallelism = attempt.driver.hub, attempt.spark.parallelism
    pieces: List[Any] = [*hub.partition_data(start, end), InputEnd.EOF]
    if workers.kept_by_driver:
        pieces = [pieces]  # one task reads them all, in turn, as one worker would
    table = pa.table({_PIECE_COLUMN: pa.array([pickle.dumps(p, pickle.HIGHEST_PROTOCOL) for p in pieces], pa.binary())})
    options = encode_options(link, workers, groups, attempt.inputs, driver_parts=True, metered=metered)
    frame = attempt.spark.session.createDataFrame(table).mapInArrow(SourcePass(options), SCHEMA_DDL)
    for layer in range(1, plan.depth + 1):
        frame = frame.repartition(parallelism, "grp").mapInArrow(
            LayerPass(workers, layer, groups, link, metered, last=layer == plan.depth), SCHEMA_DDL
        )
    attempt.writer(frame, 0)
    hub.commit(end)


TICK_SECONDS = 1.0
"""How often a batch run's progress line moves."""


class BatchProgress:
    """A batch run's progress line, every `TICK_SECONDS` while it runs: the items its first steps took in so far
    (of those its sources read, the bar), and those its outputs took.

    A streaming run's line moves with its micro-batches; a batch run is one,
    so this reads the steps' counters instead (`metrics`), which Spark's
    tasks report while they run.
    """

    def __init__(self, progress: Progress, plan: Plan, items_read: int, metrics: FlowMetrics) -> None:
        self._progress = progress
        self._metrics = metrics
        self._first = {
            consumer.step.step_id for step in plan.inputs for consumer in plan.consumers[step.config.downs[0]]
        }
        self._outputs = {step.step_id for step in plan.outputs}
        self._expected = items_read * len(self._first) if len(plan.inputs) == 1 else 0
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="flowspark-batch-progress", daemon=True)

    def __enter__(self) -> BatchProgress:
        self._thread.start()
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], trace: Optional[TracebackType]
    ) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            self._progress.running(self.report())

    def report(self) -> BatchReport:
        """The line's facts now."""
        taken = written = 0
        for (count, step_id, _), items in self._metrics.counts().items():
            if count is Count.ITEMS_IN and step_id in self._first:
                taken += items
            if count is Count.ITEMS_IN and step_id in self._outputs:
                written += items
        fraction = min(1.0, taken / self._expected) if self._expected else None
        return BatchReport(1, taken, written, time.monotonic() - self._start, None, fraction)
