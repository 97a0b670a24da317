"""Where a chunk row goes: the `grp` column that Spark groups rows by.

Every group name is written and read here.  A row goes to one bucket of a
stateful step (`S<step>/<bucket>`, with a balancing suffix `.<salt>`
where `groups` chose one), to an output or a tap on the driver
(`O<output>@<origin>`, `T<tap>@<origin>`, where `origin` names the pass
that made the row), to one partition of an output written in Spark's
tasks (`P<output>/<partition>@<origin>`, the partition's index among the
sink's partitions or a dynamic sink's worker index), or it is the control
row that ends the run (`C`).  The tasks that write sink partitions send
the driver what they wrote in rows of group `W`.
Spark keeps a stateful step's group names with its state, so their text
must stay as it is for recovery directories to resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional


class DestinationKind(Enum):
    """What a row is bound for, valued by its group name's first letter."""

    STATEFUL = "S"
    OUTPUT = "O"
    TAP = "T"
    SINK_PART = "P"
    WRITTEN = "W"
    CONTROL = "C"


CONTROL_GROUP = DestinationKind.CONTROL.value
"""The group of the control row that ends the run (`spark_source`)."""

WRITTEN_GROUP = DestinationKind.WRITTEN.value
"""The group of the rows in which sink tasks report a written partition to the driver (`sink_tasks`)."""


@dataclass(frozen=True)
class Destination:
    """A group name, read."""

    kind: DestinationKind
    index: int
    """The plan's number of the stateful step, output or tap (0 for the control row)."""
    origin: str = ""
    """For an output, a sink partition or a tap: the pass that made the row (a source piece's name or a stateful group)."""
    part: int = 0
    """For a sink partition: its index among the sink's partitions, or a dynamic sink's worker index."""

    def without_origin(self) -> Destination:
        """The output or tap itself, whichever pass the row came from."""
        return Destination(self.kind, self.index)


def stateful_group(step: int, bucket: int, salt: Optional[int] = None) -> str:
    """The group of one bucket of keys of stateful step `step`; `salt` balances it (`groups`)."""
    plain = f"{DestinationKind.STATEFUL.value}{step}/{bucket}"
    return plain if salt is None else f"{plain}.{salt}"


def source_origin(input_index: int, partition: int, piece: int) -> str:
    """The origin of the pass over one piece of a source partition; origins sort by input, partition and piece."""
    return f"{input_index:03d}.{partition:05d}.{piece:03d}"


def origin_worker(origin: str, workers: int) -> int:
    """The worker whose partition of a dynamic sink writes what pass `origin` made (of `workers`).

    Source partitions, and the pieces a driver-read partition is cut into,
    take the workers in turn: `(partition + piece) % workers`.  A stateful
    bucket goes to worker `bucket % workers`, as it goes to Spark's task
    `bucket % P` (`groups`).  So every worker gets its share, as each of
    Bytewax's workers writes what it processed.  Items merged from every
    pass (a run that keeps one worker's order) have no origin: worker 0.
    """
    if not origin:
        return 0
    if origin.startswith(DestinationKind.STATEFUL.value):
        return int(origin[origin.index("/") + 1 :].partition(".")[0]) % workers
    _, partition, piece = origin.split(".")
    return (int(partition) + int(piece)) % workers


def output_group(output: int, origin: str) -> str:
    """The group of the items pass `origin` made for output `output`."""
    return f"{DestinationKind.OUTPUT.value}{output}@{origin}"


def sink_part_group(output: int, part: int, origin: str) -> str:
    """The group of the items pass `origin` made for partition `part` of output `output`, written in a task."""
    return f"{sink_part_prefix(output, part)}@{origin}"


def sink_parts_pattern(output: int, origin: str) -> str:
    """How every group of output `output`'s partitions looks, with `<part>` for the partition (for `visualize`)."""
    return f"{DestinationKind.SINK_PART.value}{output}/<part>@{origin}"


def sink_part_prefix(output: int, part: int) -> str:
    """What every group of partition `part` of output `output` begins with, up to the `@`."""
    return f"{DestinationKind.SINK_PART.value}{output}/{part}"


def tap_group(tap: int, origin: str) -> str:
    """The group of the items pass `origin` made for `inspect_debug` tap `tap`."""
    return f"{DestinationKind.TAP.value}{tap}@{origin}"


def parse(grp: str) -> Destination:
    """Read a group name; `ValueError` for text no function of this module wrote."""
    kind = DestinationKind(grp[:1])
    if kind in (DestinationKind.CONTROL, DestinationKind.WRITTEN):
        if grp != kind.value:
            msg = f"not a group name: {grp!r}"
            raise ValueError(msg)
        return Destination(kind, 0)
    if kind is DestinationKind.STATEFUL:
        return Destination(kind, int(grp[1 : grp.index("/")]))
    target, at, origin = grp[1:].partition("@")
    if kind is DestinationKind.SINK_PART:
        index, slash, part = target.partition("/")
        if not slash or not at:
            msg = f"not a group name: {grp!r}"
            raise ValueError(msg)
        return Destination(kind, int(index), origin, int(part))
    return Destination(kind, int(target), origin)
