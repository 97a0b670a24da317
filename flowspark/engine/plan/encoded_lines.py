"""Output values that a sink writes as lines, encoded by the workers that make them.

A sink whose partitions write each value as one line of text (`FileSink`)
says how with a `LineFormat`.  The workers then send each output chunk as
the bytes the sink would write (`LineChunk`), and the driver's writer hands
them to the partition's `write_lines` in one call: the values are never
pickled, unpickled or joined again.  The plan (`plan.sink_layout`) lets
the workers encode for a sink of one partition (every value goes to the
one file, so no key is needed) and for a sink whose partitions Spark's
tasks write (the workers route each value to its partition), and only
when the run keeps no worker's order, since that order is made by sorting
runs of items in the driver.  The partition that takes the lines is the
driver's or the sink task's (`write_lines`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, List, Optional, Protocol, runtime_checkable

from flowspark.engine.reports.failures import StepFailure

_PREFIX = b"FSL"
"""Prefix of an encoded chunk (a pickle never starts with it)."""

_COUNT = struct.Struct(">Q")


@dataclass(frozen=True)
class LineFormat:
    """Each value written as `value + end`, encoded with `encoding`."""

    end: str
    encoding: str

    def encode(self, step_id: str, values: List[Any]) -> bytes:
        """The bytes the sink writes for `values`; a value that is no `str` fails as the sink's `write_batch` would."""
        if not values:
            return b""
        try:
            return (self.end.join(values) + self.end).encode(self.encoding)
        except (TypeError, UnicodeEncodeError) as ex:
            msg = f"error calling `write_batch` in step {step_id!r}"
            raise StepFailure(msg, ex) from ex


@runtime_checkable
class WritesLines(Protocol):
    """A sink that can tell how its partitions write values (`None`: they can't take encoded lines)."""

    def line_format(self) -> Optional[LineFormat]: ...


@runtime_checkable
class TakesLines(Protocol):
    """A sink partition that appends bytes encoded by its sink's `LineFormat`."""

    def write_lines(self, data: bytes) -> None: ...


def write_lines(step_id: str, partition: Any, data: bytes) -> None:
    """Hand encoded lines to a sink partition; one without `write_lines` is a `TypeError` that names the step.

    Only a sink that offers a `LineFormat` and builds partitions that
    can't take encoded lines gets there: a mistake in the sink's class.
    """
    if not isinstance(partition, TakesLines):
        msg = (
            f"step {step_id!r}: its sink offers a line format, but its partition has no `write_lines`; "
            "give the partition a `write_lines(data: bytes)` method, or have the sink's `line_format()` return None"
        )
        raise TypeError(msg)
    partition.write_lines(data)


def line_format(sink: Any) -> Optional[LineFormat]:
    """The sink's `LineFormat`, if it offers one."""
    return sink.line_format() if isinstance(sink, WritesLines) else None


@dataclass(frozen=True)
class EncodedLines:
    """A chunk's values as the bytes to write, and how many values they are."""

    count: int
    data: bytes


class LineChunk:
    """The values one pass sends to a sink that takes lines, encoded a batch at a time as they come."""

    def __init__(self, step_id: str, line_format: LineFormat) -> None:
        self.step_id = step_id
        self._format = line_format
        self._parts: List[bytes] = []
        self._count = 0

    def extend(self, values: List[Any]) -> None:
        self._parts.append(self._format.encode(self.step_id, values))
        self._count += len(values)

    def dumps(self) -> bytes:
        return _PREFIX + _COUNT.pack(self._count) + b"".join(self._parts)


def encoded(payload: bytes) -> Optional[EncodedLines]:
    """The encoded lines a chunk holds, or `None` for a chunk of pickled items."""
    if not payload.startswith(_PREFIX):
        return None
    start = len(_PREFIX) + _COUNT.size
    (count,) = _COUNT.unpack(payload[len(_PREFIX) : start])
    return EncodedLines(count, payload[start:])
