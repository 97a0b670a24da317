r"""Local text files: line and CSV sources, line sinks.

Files are read with Python's default encoding, as Bytewax does.  Line
sources read blocks of bytes and cut them into lines themselves (`reading`),
with text mode's universal newlines; their snapshot is the byte offset
after the last emitted line.  The CSV source reads in text mode (the csv
module handles line ends inside quotes), and its snapshot is the file's
`tell()` position after the last emitted row: the byte offset, except
right after a line that ended in a lone `\r`, where Python packs its
newline-decoder state into a larger (still plain `int`) position.  A sink partition's snapshot is
the length of its file after the last write; when a sink partition is built
again (on resume, or on a fresh run with no snapshot, which means length 0)
it first cuts its file back to that length, so whatever was written after
the last completed batch is not written twice.
"""

from __future__ import annotations

from flowspark.connectors.files.reading import FileLinePartition, get_path_dev
from flowspark.connectors.files.sinks import DirSink, FileSink, FileSinkPartition
from flowspark.connectors.files.sources import CSVSource, DirSource, FileSource
from flowspark.inputs import FixedPartitionedSource as FixedPartitionedSource  # importable from here, as in Bytewax
from flowspark.inputs import StatefulSourcePartition as StatefulSourcePartition
from flowspark.inputs import batch as batch
from flowspark.outputs import FixedPartitionedSink as FixedPartitionedSink
from flowspark.outputs import StatefulSinkPartition as StatefulSinkPartition

__all__ = ["CSVSource", "DirSink", "DirSource", "FileSink", "FileSource"]

# Bytewax 0.21.1's private names of the same things, for code that uses them.
_get_path_dev = get_path_dev
_FileSinkPartition = FileSinkPartition
_FileSourcePartition = FileLinePartition
