"""`FileSink` and `DirSink`: lines appended to files, each cut back to its snapshot's length when built again."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List, Optional, Union
from zlib import adler32

from typing_extensions import override

from flowspark.connectors.files.reading import default_encoding
from flowspark.engine.plan.encoded_lines import LineFormat
from flowspark.outputs import FixedPartitionedSink, StatefulSinkPartition


def _line_format(end: str) -> Optional[LineFormat]:
    """How `FileSinkPartition` writes values; `None` where text files translate line ends (not on POSIX systems)."""
    return LineFormat(end, default_encoding()) if os.linesep == "\n" else None


class FileSinkPartition(StatefulSinkPartition[str, int]):
    """Append `value + end` per value to one file, synced to disk at each snapshot.

    The snapshot is the length a resumed run cuts the file back to, so the
    bytes before it must be on disk when it is taken; syncing every
    `write_batch` as well would only add a disk flush per few thousand items.
    """

    def __init__(self, path: Path, resume_state: Optional[int], end: str) -> None:
        self._end = end
        self._f = open(path, "a")
        # Cut back to the snapshot (a missing snapshot means a fresh run, so
        # the file starts empty).  A snapshot past the end pads with NULs.
        self._f.seek(0 if resume_state is None else resume_state)
        self._f.truncate()

    @override
    def write_batch(self, values: List[str]) -> None:
        if values:
            # The bytes of a write per value and per `end`, in one write.
            self._f.write(self._end.join(values) + self._end)

    def write_lines(self, data: bytes) -> None:
        """Append values the workers already encoded with the sink's `line_format()`."""
        self._f.flush()
        self._f.buffer.write(data)

    @override
    def snapshot(self) -> int:
        self._f.flush()
        os.fsync(self._f.fileno())
        return self._f.tell()

    @override
    def close(self) -> None:
        self._f.close()


class FileSink(FixedPartitionedSink[str, int]):
    r"""Write each value, followed by `end`, to one file.

    Upstream items must be `(key, value)` with a `str` value; the key is
    ignored.  There is a single partition, named `str(path)`.  A fresh run
    empties the file when it first writes to it (as in Bytewax, a run that
    writes nothing leaves it as it was); a resumed run cuts it back to its
    length after the last completed batch, so no value is written twice.  The directory must
    exist.  It is written in Spark's tasks (`lives_in_driver` is false), to
    its absolute path as of the sink's creation.

    :arg path: the file.
    :arg end: written after every value.

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import FileSink

    flow = Dataflow("file_sink_eg")
    lines = op.input("inp", flow, TestingSource([("k", "one"), ("k", "two")]))
    op.output("out", lines, FileSink(folder / "out.txt"))
    run_main(flow)
    assert (folder / "out.txt").read_text() == "one\ntwo\n"
    ```
    """

    lives_in_driver = False

    def __init__(self, path: Union[Path, str], end: str = "\n") -> None:
        self._path = Path(path)
        self._absolute_path = self._path.absolute()
        self._end = end

    @override
    def list_parts(self) -> List[str]:
        return [str(self._path)]

    @override
    def part_fn(self, item_key: str) -> int:
        return 0

    def line_format(self) -> Optional[LineFormat]:
        """How a partition writes values, so that Spark's workers can encode them where they are made.

        `None` for a subclass that builds partitions of its own: they may write otherwise.
        """
        return _line_format(self._end) if type(self).build_part is FileSink.build_part else None

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> FileSinkPartition:
        if for_part != str(self._path):
            msg = f"partition {for_part!r} is not this sink's file {str(self._path)!r}"
            raise ValueError(msg)
        return FileSinkPartition(self._absolute_path, resume_state, self._end)


def _part_name(index: int, _count: int) -> str:
    return f"part_{index}"


def _adler32_key(key: str) -> int:
    return adler32(key.encode())


class DirSink(FixedPartitionedSink[str, int]):
    """Write values to `file_count` files in a directory, chosen by key.

    Upstream items must be `(key, value)` with a `str` value.  Each file is
    a partition, named `file_namer(index, file_count)`; a value goes to file
    `assign_file(key) % file_count`.  Each file behaves as a `FileSink`
    (written in Spark's tasks, by its absolute path).  The directory must
    exist.

    :arg dir_path: the directory.
    :arg file_count: how many files.
    :arg file_namer: file name for `(index, file_count)`; defaults to
        `"part_{index}"`.
    :arg assign_file: file index for a key (wrapped to `file_count`);
        defaults to `zlib.adler32` of the UTF-8 key.
    :arg end: written after every value.

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import DirSink

    flow = Dataflow("dir_sink_eg")
    lines = op.input("inp", flow, TestingSource([("a", "a1"), ("b", "b1"), ("a", "a2")]))
    op.output("out", lines, DirSink(folder, file_count=2))
    run_main(flow)
    written = [line for part in sorted(folder.iterdir()) for line in part.read_text().splitlines()]
    assert sorted(written) == ["a1", "a2", "b1"]
    ```
    """

    lives_in_driver = False

    def __init__(
        self,
        dir_path: Union[Path, str],
        file_count: int,
        file_namer: Callable[[int, int], str] = _part_name,
        assign_file: Callable[[str], int] = _adler32_key,
        end: str = "\n",
    ) -> None:
        self._dir_path = Path(dir_path)
        self._absolute_dir = self._dir_path.absolute()
        self._file_count = file_count
        self._file_namer = file_namer
        self._assign_file = assign_file
        self._end = end

    @override
    def list_parts(self) -> List[str]:
        return [self._file_namer(i, self._file_count) for i in range(self._file_count)]

    @override
    def part_fn(self, item_key: str) -> int:
        return self._assign_file(item_key)

    def line_format(self) -> Optional[LineFormat]:
        """How a partition writes values (as `FileSink.line_format`)."""
        return _line_format(self._end) if type(self).build_part is DirSink.build_part else None

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> FileSinkPartition:
        return FileSinkPartition(self._absolute_dir / for_part, resume_state, self._end)
