"""Where a chunk row goes: the `grp` column that Spark groups rows by.

Every group name is written and read here.  A row goes to one bucket of a
stateful step (`S<step>/<bucket>`, with a balancing suffix `.<salt>`
where `groups` chose one), to an output or a tap on the driver
(`O<output>@<origin>`, `T<tap>@<origin>`, where `origin` names the pass
that made the row), or it is the control row that ends the run (`C`).
Spark keeps a stateful step's group names with its state, so their text
must stay as it is for recovery directories to resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional, Tuple


class DestinationKind(Enum):
    """What a row is bound for, valued by its group name's first letter."""

    STATEFUL = "S"
    OUTPUT = "O"
    TAP = "T"
    CONTROL = "C"


CONTROL_GROUP = DestinationKind.CONTROL.value
"""The group of the control row that ends the run (`spark_source`)."""


@dataclass(frozen=True)
class Destination:
    """A group name, read."""

    kind: DestinationKind
    index: int
    """The plan's number of the stateful step, output or tap (0 for the control row)."""
    origin: str = ""
    """For an output or a tap: the pass that made the row (a source piece's name or a stateful group)."""

    def without_origin(self) -> Destination:
        """The output or tap itself, whichever pass the row came from."""
        return Destination(self.kind, self.index)

    def sort_key(self) -> Tuple[str, str]:
        """Sorts outputs and taps as their group names sort: by letter, then by number as text."""
        return self.kind.value, str(self.index)


def stateful_group(step: int, bucket: int, salt: Optional[int] = None) -> str:
    """The group of one bucket of keys of stateful step `step`; `salt` balances it (`groups`)."""
    plain = f"{DestinationKind.STATEFUL.value}{step}/{bucket}"
    return plain if salt is None else f"{plain}.{salt}"


def output_group(output: int, origin: str) -> str:
    """The group of the items pass `origin` made for output `output`."""
    return f"{DestinationKind.OUTPUT.value}{output}@{origin}"


def tap_group(tap: int, origin: str) -> str:
    """The group of the items pass `origin` made for `inspect_debug` tap `tap`."""
    return f"{DestinationKind.TAP.value}{tap}@{origin}"


def parse(grp: str) -> Destination:
    """Read a group name; `ValueError` for text no function of this module wrote."""
    kind = DestinationKind(grp[:1])
    if kind is DestinationKind.CONTROL:
        return Destination(kind, 0)
    if kind is DestinationKind.STATEFUL:
        return Destination(kind, int(grp[1 : grp.index("/")]))
    index, _, origin = grp[1:].partition("@")
    return Destination(kind, int(index), origin)
