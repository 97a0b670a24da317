"""Fixed-partitioned sources and sinks that engine tests build flows of, and where a partition was built.

`OnePartSource` is a one-partition source made by a function of its
resume state; `LineSink` writes one file per partition and records each
build (which process, in a Spark task or not), so tests can see where a
sink's partitions live.  Both travel to Spark's workers by value, as a
user's own classes do (`support` is a package of the user's, to
flowspark's shipping).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition
from flowspark.outputs import FixedPartitionedSink, StatefulSinkPartition


class OnePartSource(FixedPartitionedSource[Any, Any]):
    """A source of one partition, `p0`, which `build(resume_state)` makes."""

    def __init__(self, build: Callable[[Any], StatefulSourcePartition[Any, Any]]) -> None:
        self._build = build

    def list_parts(self) -> List[str]:
        return ["p0"]

    def build_part(self, step_id: str, for_part: str, resume_state: Any) -> StatefulSourcePartition[Any, Any]:
        return self._build(resume_state)


_BROKEN_WAIT = 10.0
"""How long a broken `_LinePart` waits for a healthy one's write before it fails."""


class _LinePart(StatefulSinkPartition[str, int]):
    """Appends values as lines to its file, cut back to its snapshot when built (as `FileSink`).

    A broken one fails its first write, once a healthy partition (its
    concurrent task's) wrote since it was built, or after `_BROKEN_WAIT`: the
    healthy partitions' writes of the batch it fails in come first, whichever
    task Spark starts first.
    """

    def __init__(self, path: Path, resume: Optional[int], broken: bool) -> None:
        self._f = open(path, "a")
        self._f.seek(resume or 0)
        self._f.truncate()
        self._broken = broken
        self._writes = path.parent / "writes.txt"
        self._writes_at_build = self._count_writes()

    def _count_writes(self) -> int:
        return len(self._writes.read_text().splitlines()) if self._writes.exists() else 0

    def write_batch(self, values: List[str]) -> None:
        if self._broken:
            deadline = time.monotonic() + _BROKEN_WAIT
            while self._count_writes() <= self._writes_at_build and time.monotonic() < deadline:
                time.sleep(0.05)
            raise OSError("disk full")  # noqa: EM101 - a test finds this line in the traceback
        self._f.write("".join(f"{v}\n" for v in values))
        self._f.flush()
        with open(self._writes, "a") as f:
            f.write(f"{os.getpid()}\n")

    def snapshot(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()


def where_am_i() -> str:
    """`pid in_task task_partition` of the calling process: where a sink partition was built."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return f"{os.getpid()} {context is not None} {context.partitionId() if context is not None else -1}"


class LineSink(FixedPartitionedSink[str, int]):
    """Partitions `p0`, `p1`, ... of one file each in `directory`; key `kN` goes to partition N.

    Written in Spark's tasks.  Every build appends `name pid in_task task_partition` to
    `directory/where.txt`; partitions named in `broken` fail to write.
    """

    lives_in_driver = False

    def __init__(self, directory: Path, count: int = 2, broken: Sequence[str] = ()) -> None:
        self.directory = directory.absolute()
        self.names = [f"p{i}" for i in range(count)]
        self.broken = list(broken)

    def list_parts(self) -> List[str]:
        return self.names

    def part_fn(self, item_key: str) -> int:
        return int(item_key[1:])

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _LinePart:
        with open(self.directory / "where.txt", "a") as f:
            f.write(f"{for_part} {where_am_i()}\n")
        return _LinePart(self.directory / for_part, resume_state, for_part in self.broken)

    def builds(self) -> List[Tuple[str, int, bool, int]]:
        """Every build so far: `(partition, pid, in a task, task partition)`."""
        path = self.directory / "where.txt"
        if not path.exists():
            return []
        rows = [line.split() for line in path.read_text().splitlines()]
        return [(name, int(pid), task == "True", int(part)) for name, pid, task, part in rows]

    def lines(self, name: str) -> List[str]:
        return (self.directory / name).read_text().splitlines()
