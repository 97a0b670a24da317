"""Where source partitions read in Spark's tasks keep their snapshots.

A partition that lives in the executors (`executor_source`) is built,
polled and snapshotted inside the task that reads it for a micro-batch, so
its snapshot can't ride in Spark's offsets: the task writes it here, under
the run's checkpoint, one file per micro-batch and partition.  The next
micro-batch's task resumes from it, and the planner (Spark's source runner
process) reads it back to learn whether the input ended.  Neither process
has a JVM gateway, so this goes through flowspark's own `storage` layer
(a path every node mounts, or S3 or HDFS).

A record is written once: a task that finds its micro-batch's record
already there is a replay (after a crash, or a retried task) and must stop
where the first reading stopped, so the items downstream and the snapshot
agree whichever attempt Spark keeps.  Local files are private to the user
and refused if others could have changed them, since they are unpickled.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, List, Optional, Tuple, Union

import cloudpickle

from flowspark.engine.recovery import storage
from flowspark.engine.recovery.storage import Location

FOLDER = "flowspark-inputs"
"""The store's folder inside Spark's checkpoint (`query/`), so a backup of the checkpoint carries it."""


@dataclass(frozen=True)
class PartRecord:
    """What one task's reading of a partition left for the next micro-batch."""

    state: Any
    """The partition's snapshot after the last item it emitted (its resume state)."""
    items: int
    """Items it emitted in this micro-batch: a replay stops there."""
    batches: int
    """Non-empty batches it emitted: the rounds it took (`order`)."""
    eof: bool = False
    """It raised `StopIteration`: it has no more input."""
    abort: bool = False
    """It raised `AbortExecution`: `state` is the one before this micro-batch, and the run ends."""
    awake: Optional[datetime] = None
    """Its last `next_awake` answer: not to be polled before then (`None`: right away)."""
    caught_up: bool = False
    """It stopped because it had nothing more to read for now (an empty batch, and no `next_awake`)."""
    run: str = ""
    """The run that read it (`ExecutorInputs.run`): `awake` holds only in that run."""


def part_folder(input_index: int, name: str) -> str:
    """A partition's folder name: its input and a digest of its name (which may hold any character)."""
    return f"i{input_index}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


class SnapshotStore:
    """Per-partition records by micro-batch number, below `root` (a location, path or URI)."""

    def __init__(self, root: Union[str, Location]) -> None:
        self.root = storage.as_location(root)

    def batches(self, part: str) -> List[int]:
        """The micro-batch numbers `part` has records for, in order."""
        return sorted(int(n) for n in storage.list_names(self.root.join(part)) if n.isdigit())

    def read(self, part: str, batch: int) -> Optional[PartRecord]:
        """The record of `part` for micro-batch `batch`, if written."""
        place = self.root.join(part, str(batch))
        if not storage.exists(place):
            return None
        record: PartRecord = cloudpickle.loads(storage.read_trusted(place))
        return record

    def latest(self, part: str, at_most: int) -> Optional[Tuple[int, PartRecord]]:
        """The newest record of `part` no later than micro-batch `at_most`, with its number."""
        found = [n for n in self.batches(part) if n <= at_most]
        if not found:
            return None
        record = self.read(part, found[-1])
        return None if record is None else (found[-1], record)

    def write_once(self, part: str, batch: int, record: PartRecord) -> bool:
        """Keep `record` unless the micro-batch has one already; whether it was kept (`storage.write_once`)."""
        folder = self.root.join(part)
        storage.make_dirs(folder)
        return storage.write_once(folder.join(str(batch)), cloudpickle.dumps(record))

    def prune(self, part: str, committed: int) -> None:
        """Drop the records of `part` no run can resume from once micro-batch `committed` is done.

        The newest record up to `committed` stays (a partition that stopped
        reading keeps its last one), and all later ones; so do temporary
        files of micro-batches after it (a task killed mid-write leaves one).
        """
        folder = self.root.join(part)
        names = storage.list_names(folder)
        older = [str(n) for n in sorted(int(n) for n in names if n.isdigit()) if n <= committed][:-1]
        older += [n for n in names if n.endswith(".tmp") and int(n.split(".")[1]) <= committed]
        for name in older:
            storage.remove(folder.join(name))
