"""Where source partitions read in Spark's tasks keep their snapshots.

A partition that lives in the executors (`executor_source`) is built,
polled and snapshotted inside the task that reads it for a micro-batch, so
its snapshot can't ride in Spark's offsets: the task writes it here, under
the run's checkpoint, one file per micro-batch and partition.  The next
micro-batch's task resumes from it, and the planner (Spark's source runner
process) reads it back to learn whether the input ended.  Neither process
has a JVM gateway, so this is plain file I/O on a path every node mounts.

A record is written once: a task that finds its micro-batch's record
already there is a replay (after a crash, or a retried task) and must stop
where the first reading stopped, so the items downstream and the snapshot
agree whichever attempt Spark keeps.  Files are private to the user and
refused if others could have changed them, since they are unpickled.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, List, Optional, Tuple

import cloudpickle

from flowspark.engine.private_files import DIR_MODE, FILE_MODE, read_trusted

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
    """It stopped because it was asleep until then (`next_awake`)."""
    caught_up: bool = False
    """It stopped because it had nothing more to read for now (an empty batch, and no `next_awake`)."""


def part_folder(input_index: int, name: str) -> str:
    """A partition's folder name: its input and a digest of its name (which may hold any character)."""
    return f"i{input_index}-{hashlib.sha256(name.encode()).hexdigest()[:16]}"


def _make_private_dir(path: str) -> None:
    if not os.path.isdir(path):
        os.makedirs(path, mode=DIR_MODE, exist_ok=True)
        os.chmod(path, DIR_MODE)


class SnapshotStore:
    """Per-partition records by micro-batch number, below `root`."""

    def __init__(self, root: str) -> None:
        self.root = root

    def _folder(self, part: str) -> str:
        return os.path.join(self.root, part)

    def batches(self, part: str) -> List[int]:
        """The micro-batch numbers `part` has records for, in order."""
        folder = self._folder(part)
        if not os.path.isdir(folder):
            return []
        return sorted(int(n) for n in os.listdir(folder) if n.isdigit())

    def read(self, part: str, batch: int) -> Optional[PartRecord]:
        """The record of `part` for micro-batch `batch`, if written."""
        path = os.path.join(self._folder(part), str(batch))
        if not os.path.exists(path):
            return None
        record: PartRecord = cloudpickle.loads(read_trusted(path))
        return record

    def latest(self, part: str, at_most: int) -> Optional[Tuple[int, PartRecord]]:
        """The newest record of `part` no later than micro-batch `at_most`, with its number."""
        found = [n for n in self.batches(part) if n <= at_most]
        if not found:
            return None
        record = self.read(part, found[-1])
        return None if record is None else (found[-1], record)

    def write_once(self, part: str, batch: int, record: PartRecord) -> bool:
        """Keep `record` unless the micro-batch has one already; whether it was kept.

        Written to a private temporary file, synced, then linked to its name,
        which fails if another attempt got there first.
        """
        folder = self._folder(part)
        _make_private_dir(self.root)
        _make_private_dir(folder)
        tmp = os.path.join(folder, f".{batch}.{uuid.uuid4().hex}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(cloudpickle.dumps(record))
                f.flush()
                os.fsync(f.fileno())
            os.link(tmp, os.path.join(folder, str(batch)))
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def prune(self, part: str, committed: int) -> None:
        """Drop the records of `part` no run can resume from once micro-batch `committed` is done.

        The newest record up to `committed` stays (a partition that stopped
        reading keeps its last one), and all later ones; so do temporary
        files of micro-batches after it (a task killed mid-write leaves one).
        """
        folder = self._folder(part)
        older = [str(n) for n in self.batches(part) if n <= committed][:-1]
        if os.path.isdir(folder):
            older += [n for n in os.listdir(folder) if n.endswith(".tmp") and int(n.split(".")[1]) <= committed]
        for name in older:
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass
