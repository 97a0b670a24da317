"""Helpers for testing flows, with Bytewax's names: sources, sinks and runners.

`run_main` and `cluster_main` run the flow on the embedded local Spark (one
session per process, reused across calls) and return when the input ends.
`python -m flowspark.testing IMPORT_STR -p N -w W` is Bytewax's testing
launcher: one run with the workers of `N` processes of `W` each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import Any, Callable, Iterable, Iterator, List, Optional, TypeVar, Union

from typing_extensions import override

from flowspark import _settings as settings
from flowspark.dataflow import Dataflow
from flowspark.engine.reports.progress import BatchReport
from flowspark.inputs import (
    AbortExecution,
    FixedPartitionedSource,
    StatefulSourcePartition,
    StatelessSourcePartition,
)
from flowspark.outputs import DynamicSink, StatelessSinkPartition
from flowspark.recovery import RecoveryConfig

__all__ = [
    "BatchReport",
    "TestingSink",
    "TestingSource",
    "TimeTestingGetter",
    "cluster_main",
    "ffwd_iter",
    "poll_next_batch",
    "run_main",
]

X = TypeVar("X")


@dataclass
class TimeTestingGetter:
    """A clock for tests that only moves when told to."""

    now: datetime

    def advance(self, td: timedelta) -> None:
        """Move the clock forward by `td`."""
        self.now += td

    def get(self) -> datetime:
        """The current test time; pass `getter.get` as a `now_getter`."""
        return self.now


def ffwd_iter(it: Iterator[Any], n: int) -> None:
    """Skip `n` items of an iterator."""
    next(islice(it, n, n), None)


class _IterPartition(StatefulSourcePartition[X, int]):
    """Reads the iterable; its snapshot is the index of the next item."""

    def __init__(self, ib: Iterable[Any], batch_size: int, resume_state: Optional[int]) -> None:
        self._index = 0 if resume_state is None else resume_state
        self._batch_size = batch_size
        self._it = iter(ib)
        ffwd_iter(self._it, self._index)
        self._awake: Optional[datetime] = None
        self._pending: Optional[BaseException] = None

    @override
    def next_batch(self) -> List[X]:
        if self._pending is not None:
            raise self._pending
        self._awake = None
        batch: List[X] = []
        for item in self._it:
            if isinstance(item, TestingSource.EOF):
                self._pending = StopIteration()
                self._index += 1
                break
            if isinstance(item, TestingSource.ABORT):
                self._index += 1
                if not item._triggered:
                    item._triggered = True
                    self._pending = AbortExecution()
                    break
                continue
            if isinstance(item, TestingSource.PAUSE):
                self._index += 1
                self._awake = datetime.now(timezone.utc) + item.for_duration
                break
            batch.append(item)
            if len(batch) >= self._batch_size:
                break
        if batch or self._pending is not None or self._awake is not None:
            self._index += len(batch)
            return batch
        raise StopIteration()

    @override
    def next_awake(self) -> Optional[datetime]:
        return self._awake

    @override
    def snapshot(self) -> int:
        return self._index


class TestingSource(FixedPartitionedSource[X, int]):
    """Items from a Python iterable, in one partition named `"iterable"`.

    Put `TestingSource.EOF()` in the iterable to end a run there (a resumed
    run continues after it), `TestingSource.ABORT()` to stop the run once as
    if it crashed, and `TestingSource.PAUSE(duration)` to emit nothing for a
    while.  The iterable is read in the driver process, so it may be any
    iterable, a generator included.
    """

    __test__ = False

    @dataclass
    class EOF:
        """End the input here; a resumed run continues after this marker."""

    @dataclass
    class ABORT:
        """Stop the run here once, as a crash would; later runs skip it."""

        _triggered: bool = False

    @dataclass
    class PAUSE:
        """Emit nothing for `for_duration`."""

        for_duration: timedelta

    def __init__(
        self,
        ib: Iterable[Union[X, "TestingSource.EOF", "TestingSource.ABORT", "TestingSource.PAUSE"]],
        batch_size: int = 1,
    ) -> None:
        self._ib = ib
        self._batch_size = batch_size

    @override
    def list_parts(self) -> List[str]:
        return ["iterable"]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _IterPartition[X]:
        return _IterPartition(self._ib, self._batch_size, resume_state)


class _ListPartition(StatelessSinkPartition[X]):
    def __init__(self, ls: List[X]) -> None:
        self._ls = ls

    @override
    def write_batch(self, items: List[X]) -> None:
        self._ls.extend(items)


class TestingSink(DynamicSink[X]):
    """Append every item to the list `ls` of the calling process.

    Sinks are written on the driver, so the list fills in place; it is not
    cleared between runs.
    """

    __test__ = False

    def __init__(self, ls: List[X]) -> None:
        self._ls = ls

    @override
    def build(self, step_id: str, worker_index: int, worker_count: int) -> _ListPartition[X]:
        return _ListPartition(self._ls)


def poll_next_batch(
    part: Union[StatefulSourcePartition[X, Any], StatelessSourcePartition[X]], timeout: timedelta = timedelta(seconds=5)
) -> List[X]:
    """Call `part.next_batch()` until it returns items; `TimeoutError` after `timeout`."""
    start = datetime.now(timezone.utc)
    batch: List[X] = []
    while not batch:
        if datetime.now(timezone.utc) - start > timeout:
            raise TimeoutError()
        batch = list(part.next_batch())
    return batch


def run_main(
    flow: Dataflow,
    *,
    epoch_interval: Optional[timedelta] = None,
    recovery_config: Optional[RecoveryConfig] = None,
    on_progress: Optional[Callable[[BatchReport], None]] = None,
) -> None:
    """Run `flow` on the embedded local Spark until its input ends.

    Like Bytewax's single worker, it keeps one worker's order: sources are
    read round by round (one batch of each partition), and outputs come in
    that order, whatever parallelism Spark uses underneath.

    `on_progress`, if given, gets a `BatchReport` for every written
    micro-batch, on the thread that writes the outputs.
    """
    from flowspark._launch import RunOptions, launch
    from flowspark.engine.reports.progress import Progress

    recovery_dir = None if recovery_config is None else recovery_config.location
    options = RunOptions(
        interval=epoch_interval, recovery_dir=recovery_dir, progress=Progress(on_progress), remote=settings.REMOTE.get()
    )
    launch(flow, options.config())


def cluster_main(
    flow: Dataflow,
    addresses: List[str],
    proc_id: int,
    *,
    epoch_interval: Optional[timedelta] = None,
    recovery_config: Optional[RecoveryConfig] = None,
    worker_count_per_proc: int = 1,
    on_progress: Optional[Callable[[BatchReport], None]] = None,
) -> None:
    """Run `flow` once for a whole Bytewax cluster of processes, in process 0.

    Spark schedules the work itself: process 0 runs the flow on local
    Spark with `worker_count_per_proc * max(1, len(addresses))`
    parallelism, and every other process returns at once (each running the
    whole flow would write its output again).  `on_progress` is as for
    `run_main`.
    """
    from flowspark._launch import RunOptions, launch_process
    from flowspark.engine.reports.progress import Progress

    recovery_dir = None if recovery_config is None else recovery_config.location
    options = RunOptions(interval=epoch_interval, recovery_dir=recovery_dir, progress=Progress(on_progress))
    launch_process(flow, addresses, proc_id, worker_count_per_proc, options)


if __name__ == "__main__":
    import sys

    from flowspark.run import main

    sys.exit(main(testing=True))
