"""One partition of a driver-resident input: built from its resume state, polled, asked when it wakes, snapshotted.

`driver_inputs` keeps one per partition of the inputs that live in the user's
process (see its doc); this module holds what it does with each.
"""

from __future__ import annotations

import base64
import logging
import pickle
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

import cloudpickle

from flowspark.engine.plan import chunks
from flowspark.engine.plan.line_blocks import GivesLineBlocks, LineBlock
from flowspark.engine.reports.failures import StepFailure, aware_or_none, built, partition_call

if TYPE_CHECKING:
    from flowspark._step_config import InputConfig
    from flowspark.engine.plan.plan import CoreStep

_log = logging.getLogger(__name__)

Batch = Tuple[int, Union[bytes, LineBlock]]
"""One batch a partition produced: its item count and the items, pickled as soon as read (or its lines' bytes)."""
PartData = Tuple[int, int, List[Batch]]
"""A partition's input step index, its global index, and the batches it produced."""


@dataclass
class Polled:
    """What one poll of every partition read."""

    data: List[PartData]
    counts: Dict[str, int]
    aborted_at: Optional[int]
    """How many batches the partition that raised `AbortExecution` read before it in this poll (`None`: none raised).

    Each source batch is an epoch of Bytewax's with `epoch_interval=0`, so
    that many epochs of it were closed before the abort.
    """
    backlog: bool
    """Some partition stopped at the item limit: more is waiting."""


def split_batches(batches: List[Batch], pieces: int) -> List[List[Batch]]:
    """Cut a run of batches into at most `pieces` runs of similar item counts."""
    total = sum(count for count, _ in batches)
    target = max(1, -(-total // max(1, pieces)))
    runs: List[List[Batch]] = [[]]
    size = 0
    for batch in batches:
        if size >= target:
            runs.append([])
            size = 0
        runs[-1].append(batch)
        size += batch[0]
    return [r for r in runs if r]


def encode_snapshot(value: Any) -> str:
    return base64.b64encode(cloudpickle.dumps(value)).decode()


def decode_snapshot(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


class DriverPartition:
    """One live source partition and where it stands."""

    def __init__(
        self, input_index: int, step: CoreStep[InputConfig], name: str, resume: Any, fixed: bool, workers: int = 1
    ) -> None:
        self.input_index = input_index
        self.workers = workers
        """For a dynamic source's partition (named `*<worker index>`): how many workers build one."""
        self.name = name
        self.step_id = step.step_id
        self.source: Any = step.config.source
        self.fixed = fixed
        self.done = False
        self.final: Any = None
        self.partition = self._build(resume)
        self._gives_lines = isinstance(self.partition, GivesLineBlocks)
        self.wakes_at: Optional[datetime] = None
        """The partition's last `next_awake` answer: it is not polled before then (`None`: right away)."""
        self.ask_awake()

    def _build(self, resume: Any) -> Any:
        try:
            if self.fixed:
                return built(self.source.build_part, self.step_id, self.name, resume)
            return built(self.source.build, self.step_id, int(self.name[1:]), self.workers)
        except Exception as ex:
            msg = f"error building partition {self.name!r} of step {self.step_id!r}"
            raise StepFailure(msg, ex) from ex

    def call(self, what: str, func: Callable[[], Any]) -> Any:
        """Call a method of the partition; on failure raise a `StepFailure` naming the step and partition."""
        return partition_call(self.step_id, self.name, what, func)

    def read(self) -> Batch:
        """The next batch, pickled, or as its lines' bytes if the partition can hand them over (`line_blocks`)."""
        if self._gives_lines:
            block = self.partition.next_line_block()
            return block.count, block
        items = list(self.partition.next_batch())
        return len(items), chunks.dumps_items(self.step_id, items) if items else b""

    def ask_awake(self) -> None:
        """Ask when to poll the partition next, as Bytewax does once it is built and after each batch."""
        self.wakes_at = self.call("next_awake", lambda: aware_or_none(self.partition.next_awake()))

    def awake(self, now: datetime) -> bool:
        return self.wakes_at is None or self.wakes_at <= now

    def snapshot(self) -> Any:
        if self.done or not self.fixed:
            return self.final
        return self.call("snapshot", self.partition.snapshot)

    def encoded_snapshot(self) -> str:
        """The snapshot as the offset carries it: it must pickle, as Spark checkpoints every offset."""
        snapshot = self.snapshot()
        try:
            return encode_snapshot(snapshot)
        except Exception as ex:
            ex.add_note(
                "flowspark keeps each source partition's snapshot in Spark's offsets after every micro-batch, "
                "so it must pickle even without recovery"
            )
            msg = f"error pickling the snapshot of partition {self.name!r} of step {self.step_id!r}"
            raise StepFailure(msg, ex) from ex

    def finish(self) -> None:
        """The partition ended: keep its last snapshot, then close it."""
        self.final = self.call("snapshot", self.partition.snapshot) if self.fixed else None
        self.done = True
        self.close()

    def close(self) -> None:
        """Close the partition; as in Bytewax, a failing `close` is logged and the run goes on."""
        try:
            self.partition.close()
        except Exception as ex:
            _log.warning("error calling `close` in step %r for partition %r: %r", self.step_id, self.name, ex)
