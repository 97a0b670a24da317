"""Sources: where a flow's items come from.

The classes have Bytewax's names and methods.  A `FixedPartitionedSource`
has named partitions that each resume from their own snapshot; flowspark
keeps those snapshots with Spark's checkpoint.  A `DynamicSource`
builds one stateless partition per worker and never resumes.
"""

from __future__ import annotations

import asyncio
import queue
from abc import ABC, abstractmethod
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import (
    AsyncIterable,
    Callable,
    ClassVar,
    Generic,
    Iterable,
    Iterator,
    List,
    Optional,
    Type,
    cast,
)

from typing_extensions import TypeVar, override

__all__ = [
    "AbortExecution",
    "DynamicSource",
    "FixedPartitionedSource",
    "SimplePollingSource",
    "Source",
    "StatefulSourcePartition",
    "StatelessSourcePartition",
    "batch",
    "batch_async",
    "batch_getter",
    "batch_getter_ex",
]

X = TypeVar("X")
"""Type of emitted items."""

S = TypeVar("S")
"""Type of a partition's resume state."""

Sn = TypeVar("Sn", default=None)
"""Type of a `SimplePollingSource`'s resume state; `None` (not resumable) unless given."""


class AbortExecution(RuntimeError):
    """Raised by a source partition to stop the run where it is (for tests)."""


class Source(ABC, Generic[X]):
    """Base of every source; `op.input` accepts nothing else."""

    lives_in_driver: ClassVar[bool] = True
    """Whether the partitions must be built and polled in the user's own process, as Bytewax does.

    True by default: a partition may share Python objects with the rest of
    the program.  A `FixedPartitionedSource` whose partitions depend only
    on the source object, their resume state and what they read (`DirSource`,
    `KafkaSource`) sets it to False, and each partition is then built, polled and
    snapshotted in the Spark task that reads it, on an executor.  Its
    source must pickle, its `build_part` must work wherever Spark runs the
    task, and reading from the same resume state should give the same
    items.  `DynamicSource`s always live in the user's process.
    """

    uses_spark_session: ClassVar[bool] = False
    """Whether the source drives Spark itself, through the run's own session (`flowspark.connectors.spark`).

    A run with such a source starts its Spark session in the user's process,
    before any of its partitions is built, as the source needs it.
    """


class StatefulSourcePartition(ABC, Generic[X, S]):
    """One partition of a `FixedPartitionedSource`."""

    @abstractmethod
    def next_batch(self) -> Iterable[X]:
        """Return the next items; raise `StopIteration` when the partition ends."""

    def next_awake(self) -> Optional[datetime]:
        """When to call `next_batch` next; `None` means as soon as possible."""
        return None

    @abstractmethod
    def snapshot(self) -> S:
        """State that resumes this partition right after the last emitted item."""

    def close(self) -> None:
        """Release resources; called when the partition ends or the run stops."""


class FixedPartitionedSource(Source[X], Generic[X, S]):
    """A source with a fixed set of named, resumable partitions."""

    @abstractmethod
    def list_parts(self) -> List[str]:
        """The names of all partitions; they must stay the same across runs."""

    @abstractmethod
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[S]) -> StatefulSourcePartition[X, S]:
        """Build partition `for_part`, resuming from `resume_state` if given."""


class StatelessSourcePartition(ABC, Generic[X]):
    """One worker's partition of a `DynamicSource`."""

    @abstractmethod
    def next_batch(self) -> Iterable[X]:
        """Return the next items; raise `StopIteration` when the partition ends."""

    def next_awake(self) -> Optional[datetime]:
        """When to call `next_batch` next; `None` means as soon as possible."""
        return None

    def close(self) -> None:
        """Release resources; called when the partition ends or the run stops."""


class DynamicSource(Source[X]):
    """A source that builds one non-resumable partition per worker."""

    @abstractmethod
    def build(self, step_id: str, worker_index: int, worker_count: int) -> StatelessSourcePartition[X]:
        """Build the partition of worker `worker_index` of `worker_count`."""


class _SimplePollingPartition(StatefulSourcePartition[X, Sn]):
    """Calls `getter` once per `interval`, from `now` or the next `align_to` mark; `Retry` postpones a call."""

    def __init__(
        self,
        now: datetime,
        interval: timedelta,
        align_to: Optional[datetime],
        getter: Callable[[], X],
        snapshot: Callable[[], Sn],
    ) -> None:
        self._interval = interval
        self._getter = getter
        self._snapshot = snapshot
        if align_to is None:
            self._next_awake = now
        else:
            passed = (now - align_to) % interval
            self._next_awake = now if passed == timedelta(0) else now + (interval - passed)

    def next_batch(self) -> List[X]:
        try:
            item = self._getter()
        except SimplePollingSource.Retry as retry:
            self._next_awake += retry.timeout
            return []
        self._next_awake += self._interval
        return [] if item is None else [item]

    def next_awake(self) -> Optional[datetime]:
        return self._next_awake

    def snapshot(self) -> Sn:
        return self._snapshot()


class SimplePollingSource(FixedPartitionedSource[X, Sn]):
    """Call `next_item` every `interval` from a single partition.

    Override `next_item`; to be resumable, also `snapshot` and `resume`.
    Raise `SimplePollingSource.Retry(timeout)` to be called again sooner.
    """

    class Retry(Exception):
        """Raised by `next_item` to be retried after `timeout`."""

        def __init__(self, timeout: timedelta) -> None:
            super().__init__(timeout)
            self.timeout = timeout

    def __init__(self, interval: timedelta, align_to: Optional[datetime] = None) -> None:
        self._interval = interval
        self._align_to = align_to

    @override
    def list_parts(self) -> List[str]:
        return ["singleton"]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[Sn]) -> _SimplePollingPartition[X, Sn]:
        now = datetime.now(timezone.utc)
        if resume_state is not None:
            self.resume(resume_state)
        return _SimplePollingPartition(now, self._interval, self._align_to, self.next_item, self.snapshot)

    @abstractmethod
    def next_item(self) -> X:
        """Return the next item, `None` for nothing this time; raise `StopIteration` at the end."""

    def snapshot(self) -> Sn:
        """State to resume from; `None` by default (not resumable)."""
        return cast(Sn, None)

    def resume(self, resume_state: Sn) -> None:
        """Restore the state `snapshot` returned."""


def batch(ib: Iterable[X], batch_size: int) -> Iterator[List[X]]:
    """Chunk an iterable into lists of at most `batch_size` items (none at all if `batch_size` is 0, as in Bytewax)."""
    it = iter(ib)
    while True:
        chunk = list(islice(it, batch_size))
        if not chunk:
            return
        yield chunk


def batch_getter(getter: Callable[[], X], batch_size: int, yield_on: Optional[X] = None) -> Iterator[List[X]]:
    """Call `getter` into lists of at most `batch_size`, cutting a list when it returns `yield_on`.

    A `StopIteration` from `getter` ends the iterator after a last list of
    what was gathered so far, as in Bytewax.
    """
    while True:
        chunk: List[X] = []
        while len(chunk) < batch_size:
            try:
                item = getter()
            except StopIteration:
                yield chunk
                return
            if item == yield_on:
                break
            chunk.append(item)
        yield chunk


def batch_getter_ex(
    getter: Callable[[], X], batch_size: int, yield_ex: Type[Exception] = queue.Empty
) -> Iterator[List[X]]:
    """Call `getter` into lists of at most `batch_size`, cutting a list when it raises `yield_ex`.

    A `StopIteration` from `getter` ends the iterator after a last list, as in Bytewax.
    """
    while True:
        chunk: List[X] = []
        while len(chunk) < batch_size:
            try:
                chunk.append(getter())
            except yield_ex:
                break
            except StopIteration:
                yield chunk
                return
        yield chunk


def batch_async(
    aib: AsyncIterable[X],
    timeout: timedelta,
    batch_size: int,
    loop: Optional[asyncio.AbstractEventLoop] = None,
) -> Iterator[List[X]]:
    """Drain an async iterable synchronously, one list per `timeout` or `batch_size` items."""
    run_loop = loop if loop is not None else asyncio.new_event_loop()
    ait = aib.__aiter__()

    async def next_chunk() -> List[X]:
        chunk: List[X] = []

        async def fill() -> None:
            while len(chunk) < batch_size:
                chunk.append(await ait.__anext__())

        try:
            await asyncio.wait_for(fill(), timeout.total_seconds())
        except asyncio.TimeoutError:
            pass
        except StopAsyncIteration:
            if not chunk:
                raise
        return chunk

    while True:
        try:
            yield run_loop.run_until_complete(next_chunk())
        except StopAsyncIteration:
            return
