"""How a flow's input ends, wherever the end is recorded or passed on.

The offset that ends the input records it in Spark's offset log (its `end`
field holds the value, `""` while input goes on), the task that reads the
last range learns it from its partition, each stateful bucket gets its
marker row, and the control row tells the driver's writer.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

from flowspark.engine.plan import chunks


class InputEnd(Enum):
    """Why the input ended, valued by what the offset log records."""

    EOF = "eof"
    """Every partition finished: each key's logic gets `on_eof`, and the run ends."""
    ABORT = "abort"
    """A partition raised `AbortExecution`: the micro-batch's state and sink snapshots are not kept, and the run ends."""

    @property
    def marker(self) -> int:
        """The kind of the row each stateful bucket gets (`chunks`)."""
        return chunks.EOF if self is InputEnd.EOF else chunks.ABORT


def recorded_end(offset_end: str) -> Optional[InputEnd]:
    """The end an offset's `end` field records; None while input goes on."""
    return InputEnd(offset_end) if offset_end else None
