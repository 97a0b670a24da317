"""Dynamic sinks written in the Spark task that made their items (`plan.SinkPlace.MAKING_TASK`).

A `DynamicSink` that need not live in the user's process keeps no snapshot
and is written at least once, so none of its partitions needs a single
owner per micro-batch.  The fused pass (`route`) hands each batch bound for
it here, in the task that runs the pass (a source's `read()` or a stateful
layer's task), and no row carries the items anywhere: no shuffle pickles
and moves them, and the driver never sees them.  A pass's items go to the
partition of worker `origin_worker(origin, workers)`, the worker the driver
would pick for them (`sink_writer`).  A partition is built the first time its
task writes to it, written a few thousand items at a time, and closed when
the task's work ends, so partitions are built once per task and
micro-batch, and two tasks of one stage may hold partitions of the same
worker index at once.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import origin_worker
from flowspark.engine.plan.plan import Plan
from flowspark.engine.reports.failures import StepFailure, built
from flowspark.engine.reports.metrics import Count, Meter, Timing
from flowspark.outputs import DynamicSink, StatelessSinkPartition

_Slot = Tuple[int, int]
"""An output's index and a worker index: one partition of a dynamic sink."""


class TaskSinks:
    """The partitions one task writes of the outputs placed in the task that makes their items.

    Use it as a context manager around the task's passes, or call `close`
    (after the task's last pass) and `abandon` (when the task fails).
    With a `meter`, each output's items and `write_batch` calls are
    counted and timed.
    """

    def __init__(self, plan: Plan, meter: Optional[Meter] = None) -> None:
        self._plan = plan
        self._meter = meter
        self._built: Dict[_Slot, StatelessSinkPartition[Any]] = {}
        self._pending: Dict[_Slot, List[Any]] = {}

    def write(self, index: int, origin: str, items: List[Any]) -> None:
        """Items that the pass named `origin` made for output `index`; written once a few thousand are pending."""
        slot = (index, origin_worker(origin, self._plan.workers))
        pending = self._pending.setdefault(slot, [])
        pending.extend(items)
        if len(pending) >= chunks.PIECE_ITEMS:
            self._flush(slot)

    def _flush(self, slot: _Slot) -> None:
        items = self._pending.pop(slot, None)
        if not items:
            return
        index, worker = slot
        step_id = self._plan.outputs[index].step_id
        partition = self._built.get(slot)
        if partition is None:
            sink = self._plan.outputs[index].config.sink
            assert isinstance(sink, DynamicSink), f"step {step_id!r} lost its sink on its way to the workers"
            partition = self._built[slot] = self._call(
                step_id, "build", built, sink.build, step_id, worker, self._plan.workers
            )
        started = time.perf_counter()
        self._call(step_id, "write_batch", partition.write_batch, items)
        if self._meter is not None:
            self._meter.time(Timing.WRITE_BATCH, step_id, time.perf_counter() - started)
            self._meter.count(Count.ITEMS_IN, step_id, len(items))

    @staticmethod
    def _call(step_id: str, what: str, func: Callable[..., Any], *args: Any) -> Any:
        try:
            return func(*args)
        except Exception as ex:
            msg = f"error calling `{what}` in step {step_id!r}"
            raise StepFailure(msg, ex) from ex

    def close(self) -> None:
        """Write what is pending and close every partition built; raises the first failure, naming its step."""
        try:
            for slot in list(self._pending):
                self._flush(slot)
        except BaseException as error:
            self.abandon(error)
            raise
        built, self._built = self._built, {}
        failure: Optional[StepFailure] = None
        for (index, _), partition in built.items():
            try:
                self._call(self._plan.outputs[index].step_id, "close", partition.close)
            except StepFailure as ex:
                failure = failure or ex
        if failure is not None:
            raise failure

    def abandon(self, error: BaseException) -> None:
        """The task failed with `error`: close every partition built, noting on `error` any close that fails too."""
        self._pending.clear()
        built, self._built = self._built, {}
        for partition in built.values():
            try:
                partition.close()
            except Exception as also:
                error.add_note(f"closing a sink partition afterwards also failed: {also!r}")

    def __enter__(self) -> TaskSinks:
        return self

    def __exit__(
        self, kind: Optional[Type[BaseException]], error: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if error is None:
            self.close()
        else:
            self.abandon(error)
