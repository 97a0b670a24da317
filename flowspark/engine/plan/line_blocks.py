r"""Input lines that travel from a driver-read partition to the tasks as the file's bytes.

The driver's hub reads the partitions that live in the user's process and
hands their batches to Spark's tasks.  A batch of items is pickled there
and unpickled in the task; a batch of lines of text (`FileSource`'s) needs
neither: the partition hands over the lines' bytes, joined by `\n`
(`LineBlock`), and the task decodes and splits them.  The partition still
decodes each block once as it reads it, so that a file that is not valid
text fails in the driver, at the batch that holds the bad bytes, as
`next_batch` would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Protocol, Union, runtime_checkable

from flowspark.engine.plan import chunks


@dataclass(frozen=True)
class LineBlock:
    r"""A batch of lines: their bytes joined by `\n`, none holding a `\n`, and how they decode."""

    count: int
    data: bytes
    encoding: str

    def text(self) -> str:
        r"""The batch's lines, decoded, joined by `\n`."""
        return self.data.decode(self.encoding)

    def lines(self) -> List[str]:
        """The batch's lines, as `next_batch` would have returned them."""
        return self.text().split("\n")


def batch_items(blob: Union[bytes, LineBlock]) -> List[Any]:
    """The items of a batch the driver's hub read: a block's lines, or the pickled items (`chunks.dumps_items`)."""
    return blob.lines() if isinstance(blob, LineBlock) else chunks.loads(blob)


@runtime_checkable
class GivesLineBlocks(Protocol):
    """A source partition whose batches are lines of text, which it can hand over undecoded.

    `next_line_block` stands for `next_batch` (same lines, same batches,
    same errors, `StopIteration` at the end); the partition's other
    methods are used as for any partition.
    """

    def next_line_block(self) -> LineBlock: ...
