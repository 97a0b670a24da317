"""Sinks: where a flow's items go.

The classes have Bytewax's names and methods.  flowspark writes each sink
once per micro-batch, in the order the items were emitted within each
upstream partition: in the user's process (the driver), or, for sinks that
say they need not live there (`Sink.lives_in_driver`), in Spark's tasks.
"""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, List, Optional, TypeVar

__all__ = [
    "DynamicSink",
    "FixedPartitionedSink",
    "MicroBatchSink",
    "Sink",
    "StatefulSinkPartition",
    "StatelessSinkPartition",
    "WorkerPartitionedSink",
]

X = TypeVar("X")
"""Type of the items a sink writes."""

S = TypeVar("S")
"""Type of a sink partition's resume state."""


class Sink(ABC, Generic[X]):
    """Base of every sink; `op.output` accepts nothing else."""

    lives_in_driver: ClassVar[bool] = True
    """Whether the partitions must be built and written in the user's own process, as Bytewax does.

    True by default: a partition may share Python objects with the rest of
    the program (append to a list the program reads).  A
    `FixedPartitionedSink` or `DynamicSink` whose partitions depend only on
    the sink object and their resume state (the file and Kafka sinks) sets
    it to False, and each micro-batch's partitions are then written in
    Spark's tasks, on the executors.  A `FixedPartitionedSink`'s partition
    is built (from its last snapshot), written, snapshotted and closed by
    the one task that owns it in that micro-batch.  A `DynamicSink`'s is
    built, written and closed by each task that made items for it, once per
    micro-batch, so two tasks may hold partitions of the same
    `worker_index` at once: such a sink must not assume it is its index's
    only writer.  Its sink must pickle, and `build_part` (or
    `build`) must work wherever Spark runs the task, whose working
    directory is not the user's: resolve relative paths when the sink is
    made, as the file sinks do.
    A run that keeps one worker's order (`run_main`, `-w 1`) writes every
    sink in the user's process, as do `MicroBatchSink`s always.
    """

    uses_spark_session: ClassVar[bool] = False
    """Whether the sink drives Spark itself, through a classic session in the run's own process.

    A run with such a sink starts its Spark session in the user's process,
    before any of its partitions is built, as the sink needs it.
    """

    @property
    def uses_session_catalog(self) -> bool:
        """Whether the sink writes to a table of the Spark session's catalog.

        Spark's in-memory catalog is shared by every session of one Spark,
        so a run with such a sink starts a Spark of its own rather than
        use the warm local one, whose catalog outlives each run
        (docs/warm-spark.md).
        """
        return False


class StatelessSinkPartition(ABC, Generic[X]):
    """One worker's partition of a `DynamicSink`."""

    @abstractmethod
    def write_batch(self, items: List[X]) -> None:
        """Write a batch of items."""

    def close(self) -> None:
        """Release resources at the end of the run."""


class DynamicSink(Sink[X]):
    """A sink with one partition per worker, accepting any item."""

    @abstractmethod
    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSinkPartition[X]:
        """Build the partition of worker `worker_index` of `worker_count`."""

    def transactional(self) -> Optional[WorkerPartitionedSink[X, Any]]:
        """The sink flowspark writes instead of this one, whose partitions commit each micro-batch; `None`: this one.

        Not in Bytewax.  A sink that can commit a micro-batch's items
        atomically (Kafka's transactions: `KafkaSink(exactly_once=True)`)
        returns its `WorkerPartitionedSink` form here, and the run writes
        that one exactly once.
        """
        return None


class StatefulSinkPartition(ABC, Generic[X, S]):
    """One partition of a `FixedPartitionedSink`."""

    @abstractmethod
    def write_batch(self, values: List[X]) -> None:
        """Write a batch of values (keys already removed)."""

    @abstractmethod
    def snapshot(self) -> S:
        """State that resumes this partition right after the last write."""

    def close(self) -> None:
        """Release resources at the end of the run."""


class FixedPartitionedSink(Sink[tuple[str, X]], Generic[X, S]):
    """A sink with named partitions; `(key, value)` items go to `part_fn(key)`."""

    @abstractmethod
    def list_parts(self) -> List[str]:
        """The names of all partitions; they must stay the same across runs."""

    def part_fn(self, item_key: str) -> int:
        """Which partition (an index into `list_parts`, taken modulo) a key goes to."""
        return zlib.adler32(item_key.encode())

    @abstractmethod
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[S]) -> StatefulSinkPartition[X, S]:
        """Build partition `for_part`, resuming from `resume_state` if given."""


class WorkerPartitionedSink(Sink[X], Generic[X, S]):
    """A sink with one partition per worker, each keeping a snapshot, accepting any item (not in Bytewax).

    A worker's items go to its own partition, named `str(worker_index)`,
    as a `DynamicSink`'s do; but each partition is a
    `StatefulSinkPartition`, as a `FixedPartitionedSink`'s is: in each
    micro-batch one task (or the driver) builds it from its last snapshot,
    writes the worker's items and calls `snapshot()`, so `snapshot()` is
    where a partition commits what the batch brought it.  Its writes can
    read which batch they belong to (`flowspark.engine.sinks.batch_id`):
    a batch that Spark replays after a crash has the same id, so a
    partition that committed it can skip it.  A `DynamicSink` offers one
    through `transactional()`.
    """

    @abstractmethod
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[S]) -> StatefulSinkPartition[X, S]:
        """Build partition `for_part` (a worker index, as a string), resuming from `resume_state` if given."""


class MicroBatchSink(Sink[X]):
    """A flowspark sink that takes all of a micro-batch's items in one call, with its id.

    Not in Bytewax.  Knowing the batch id lets a sink write idempotently: a
    batch Spark replays after a crash carries the same id, so writing it
    again can replace what the interrupted attempt left instead of adding
    to it.  `SparkSink` is one.
    """

    @abstractmethod
    def write_micro_batch(self, step_id: str, batch_id: int, run_id: str, items: List[X]) -> None:
        """Write the items of batch `batch_id` (possibly again, after a crash).

        `run_id` names the run's recovery state and stays the same when the
        run resumes, so names built from it and the batch id are stable.
        Called for batches with at least one item only.
        """

    def close(self) -> None:
        """The run is over; release what the sink holds."""
