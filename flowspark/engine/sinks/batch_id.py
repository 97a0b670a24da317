"""Which micro-batch a sink partition is being written for, wherever it is written.

Bytewax's sink partitions learn nothing of batches: they are built from a
snapshot, written, and asked for the next snapshot.  A sink that writes
to a database can't cut back what an interrupted batch committed there,
as `FileSink` cuts back its file; it must instead record, in the same
transaction as its rows, which batch it wrote, and skip that batch when
Spark replays it.  The driver's writer and the sink tasks
(`sink_writer`, `sink_tasks`) set the batch around the `write_batch` and
`snapshot` calls they make for it; `flowspark.connectors.postgres` reads it.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator, Optional

__all__ = ["SinkBatch", "current_sink_batch", "writing"]


@dataclass(frozen=True)
class SinkBatch:
    """A micro-batch being written: its id, and the id of the run's recovery state."""

    run_id: str
    """Stays the same when the run resumes from its recovery directory; a new directory gets a new one."""
    batch_id: int
    """Spark's micro-batch id: a batch Spark replays after a crash has the same one."""


_batch: ContextVar[Optional[SinkBatch]] = ContextVar("flowspark_sink_batch", default=None)


@contextmanager
def writing(batch: SinkBatch) -> Iterator[None]:
    """Sink partitions written within the block write `batch`."""
    token = _batch.set(batch)
    try:
        yield
    finally:
        _batch.reset(token)


def current_sink_batch() -> Optional[SinkBatch]:
    """The micro-batch being written, or `None` outside a flowspark sink write."""
    return _batch.get()
