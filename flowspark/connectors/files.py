"""Local text files: line and CSV sources, line sinks.

Files are read with Python's default encoding, as Bytewax does.  Line
sources read blocks of bytes and cut them into lines themselves (`_Lines`),
with text mode's universal newlines; their snapshot is the byte offset
after the last emitted line.  The CSV source reads in text mode (the csv
module handles line ends inside quotes), and its snapshot is the file's
`tell()` position after the last emitted row: the byte offset, except
right after a line that ended in a lone `\\r`, where Python packs its
newline-decoder state into a larger (still plain `int`) position.  A sink partition's snapshot is
the length of its file after the last write; when a sink partition is built
again (on resume, or on a fresh run with no snapshot, which means length 0)
it first cuts its file back to that length, so whatever was written after
the last completed batch is not written twice.
"""

from __future__ import annotations

import codecs
import io
import os
import re
from csv import DictReader
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable, Dict, Iterator, List, Optional, TextIO, TypeVar, Union
from zlib import adler32

from typing_extensions import override

from flowspark.engine.plan.encoded_lines import LineFormat
from flowspark.engine.plan.line_blocks import LineBlock
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition, batch
from flowspark.outputs import FixedPartitionedSink, StatefulSinkPartition

__all__ = ["CSVSource", "DirSink", "DirSource", "FileSink", "FileSource"]

X = TypeVar("X")
"""Type of the items a file partition emits."""


def _get_path_dev(path: Path) -> str:
    """Name the filesystem holding `path` by its device number."""
    return hex(path.stat().st_dev)


def _check_fs_id(fs_id: str) -> str:
    if "::" in fs_id:
        msg = f"result of `get_fs_id` must not contain `::`; got {fs_id!r}"
        raise ValueError(msg)
    return fs_id


def _named(err: UnicodeDecodeError, path: Path) -> UnicodeDecodeError:
    """The same decoding error, with the file it came from in its message."""
    reason = f"{err.reason} (input file {str(path)!r})"
    return UnicodeDecodeError(err.encoding, err.object, err.start, err.end, reason)


def _lines(f: IO[str]) -> Iterator[str]:
    """Read `f` a line at a time with `readline`, which keeps `f.tell()` usable."""
    line = f.readline()
    while line:
        yield line
        line = f.readline()


class _FilePartition(StatefulSourcePartition[X, int]):
    """A partition reading one open file (`f`, whose bytes `raw` reads); it tells how much of the file it read."""

    def __init__(self, path: Path, f: IO[Any], raw: BinaryIO) -> None:
        self._path = path
        self._f = f
        self._raw = raw
        self._size = os.path.getsize(path)

    def fraction_done(self) -> float:
        """How much of the file has been read, for progress bars (a flowspark addition)."""
        return min(1.0, self._raw.tell() / self._size) if self._size else 1.0

    @override
    def close(self) -> None:
        self._f.close()


class _TextPartition(_FilePartition[X]):
    """Emit `items` (parsed from the open file `f`) in batches; snapshot `f.tell()`."""

    def __init__(self, path: Path, f: TextIO, items: Iterator[X], batch_size: int) -> None:
        super().__init__(path, f, f.buffer)
        self._batches = batch(items, batch_size)

    @override
    def next_batch(self) -> List[X]:
        try:
            return next(self._batches)
        except UnicodeDecodeError as err:
            raise _named(err, self._path) from err

    @override
    def snapshot(self) -> int:
        return self._f.tell()


_BLOCK = 1 << 20
"""Bytes `_Lines` reads at a time."""

_ENDED_LINE = re.compile(rb"([^\r\n]*)(?:\r\n|\r|\n)")
"""A line and its ending, as universal newlines end lines."""

_LINE_END_BYTES_ONLY_END_LINES = frozenset({"utf-8", "ascii", "iso8859-1", "iso8859-15", "cp1252"})
"""Encodings (as `codecs` names them) in which the bytes of `\\n` and `\\r` never occur inside another character."""


class _Lines:
    """A file's lines, cut from blocks of bytes, and the byte offset after the last one taken.

    Text mode's `readline` costs a Python call per line (and `for line in f`
    disables `tell()`); a block cut with `bytes.split` and decoded a batch
    at a time is several times cheaper, and its position is a plain byte
    offset.  Lines end as in text mode with universal newlines: `\\n`,
    `\\r\\n` and a lone `\\r` each end one, and are dropped; a last line
    without an ending still counts.
    """

    def __init__(self, f: BinaryIO, encoding: str, block: int = _BLOCK) -> None:
        self._f = f
        self._encoding = encoding
        self._block = block
        self._lines: List[bytes] = []
        self._sizes: Optional[List[int]] = None
        """Each line's bytes with its ending, where that is not `len(line) + 1`."""
        self._taken = 0
        self._counted = 0
        self._position = f.tell()
        """The byte offset after the first `_counted` lines."""
        self._unended: List[bytes] = []
        """Blocks read since the last line ending."""
        self._at_end = False

    def take(self, most: int) -> Optional[LineBlock]:
        """Up to `most` next lines, undecoded (`LineBlock`); `None` at the end of the file.

        No line holds a `\\n` any more, so one join (here), decode and
        split (`LineBlock.lines`) is exact.
        """
        raw: List[bytes] = []
        while len(raw) < most and (self._taken < len(self._lines) or self._refill()):
            upto = min(len(self._lines), self._taken + most - len(raw))
            raw.extend(self._lines[self._taken : upto])
            self._taken = upto
        return LineBlock(len(raw), b"\n".join(raw), self._encoding) if raw else None

    def position(self) -> int:
        """The byte offset after the last line taken: where a resumed read starts."""
        if self._sizes is None:
            counted = self._lines[self._counted : self._taken]
            self._position += sum(map(len, counted)) + len(counted)
        else:
            self._position += sum(self._sizes[self._counted : self._taken])
        self._counted = self._taken
        return self._position

    def _refill(self) -> bool:
        """Read blocks until some lines end (or the file does); false once every line is taken."""
        self.position()
        self._lines, self._sizes, self._taken, self._counted = [], None, 0, 0
        while not self._lines and not self._at_end:
            block = self._f.read(self._block)
            if block:
                self._unended.append(block)
                if b"\n" in block or b"\r" in block:
                    self._cut(b"".join(self._unended), last=False)
            else:
                self._at_end = True
                self._cut(b"".join(self._unended), last=True)
        return bool(self._lines)

    def _cut(self, data: bytes, last: bool) -> None:
        """Cut `data` into its ended lines (all of them if it is the `last` of the file); keep the rest unended."""
        self._unended = []
        if b"\r" not in data:
            lines = data.split(b"\n")
            rest = lines.pop()
            if last and rest:
                self._sizes = [len(line) + 1 for line in lines] + [len(rest)]
                lines.append(rest)
            elif rest:
                self._unended = [rest]
            self._lines = lines
            return
        # A `\r` that ends the data may be half of a `\r\n`: only the end of the file says.
        stop = len(data) if last else max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1)) + 1
        lines, sizes, end = [], [], 0
        for ended in _ENDED_LINE.finditer(data, 0, stop):
            lines.append(ended.group(1))
            sizes.append(ended.end() - ended.start())
            end = ended.end()
        if last and end < len(data):
            lines.append(data[end:])
            sizes.append(len(data) - end)
        elif end < len(data):
            self._unended = [data[end:]]
        self._lines, self._sizes = lines, sizes


class _LinePartition(_FilePartition[str]):
    """Emit a file's lines in batches (`_Lines`); snapshot the byte offset after the last one."""

    def __init__(self, path: Path, resume_state: Optional[int], batch_size: int) -> None:
        if batch_size < 0:  # as `islice`, which Bytewax's batches go through, refuses it
            raise ValueError(f"batch_size must be 0 or more; got {batch_size}")
        f = open(path, "rb")
        super().__init__(path, f, f)
        if resume_state is not None:
            f.seek(resume_state)
        self._lines = _Lines(f, _default_encoding())
        self._batch_size = batch_size

    @override
    def next_batch(self) -> List[str]:
        block = self._take()
        try:
            return block.lines()
        except UnicodeDecodeError as err:
            raise _named(err, self._path) from err

    def next_line_block(self) -> LineBlock:
        """The next batch's lines as bytes, for the driver's hub to hand over undecoded (`line_blocks`).

        The block is decoded once here too, so that bad bytes fail in the
        driver, at the batch that holds them, as in `next_batch`.
        """
        block = self._take()
        try:
            block.text()
        except UnicodeDecodeError as err:
            raise _named(err, self._path) from err
        return block

    def _take(self) -> LineBlock:
        block = self._lines.take(self._batch_size)
        if block is None:
            raise StopIteration
        return block

    @override
    def snapshot(self) -> int:
        return self._lines.position()


def _default_encoding() -> str:
    """The encoding `open()` reads text with here."""
    return io.TextIOWrapper(io.BytesIO()).encoding


def _line_partition(path: Path, batch_size: int, resume_state: Optional[int]) -> StatefulSourcePartition[str, int]:
    if codecs.lookup(_default_encoding()).name in _LINE_END_BYTES_ONLY_END_LINES:
        return _LinePartition(path, resume_state, batch_size)
    # Universal newlines: `\n`, `\r\n` and a lone `\r` all end a line and
    # all arrive here as a single `\n`, which is then dropped.
    f = open(path)
    if resume_state is not None:
        f.seek(resume_state)
    lines = (line.rstrip("\n") for line in _lines(f))
    return _TextPartition(path, f, lines, batch_size)


def _csv_partition(
    path: Path, batch_size: int, resume_state: Optional[int], fmtparams: Dict[str, Any]
) -> _TextPartition[Dict[str, str]]:
    # The csv module does its own newline handling, so the file must not.
    f = open(path, newline="")
    rows: DictReader[str] = DictReader(_lines(f), **fmtparams)
    try:
        # Reading `fieldnames` consumes the header row (unless `fieldnames`
        # was given), so it must happen before seeking to a resume position.
        _ = rows.fieldnames
    except UnicodeDecodeError as err:
        f.close()
        raise _named(err, path) from err
    if resume_state is not None:
        f.seek(resume_state)
    return _TextPartition(path, f, rows, batch_size)


class _OneFileSource(FixedPartitionedSource[X, int]):
    """One partition, named `"{fs_id}::{path}"`, for one file; none if it is missing.

    Read in the driver (`lives_in_driver`): one partition would be read by
    one Spark task, and so would the steps fused after it, while the
    driver's hub splits each micro-batch of the file over all the tasks.
    The file is still opened by its absolute path as of the source's
    creation, as `DirSource`'s files are in the tasks that read them.
    """

    lives_in_driver = True

    def __init__(self, path: Union[Path, str], batch_size: int, get_fs_id: Callable[[Path], str]) -> None:
        self._path = Path(path)
        self._absolute = self._path.absolute()
        self._batch_size = batch_size
        self._fs_id = _check_fs_id(get_fs_id(self._path.parent))

    @override
    def list_parts(self) -> List[str]:
        return [f"{self._fs_id}::{self._path}"] if self._path.exists() else []

    def _own_path(self, for_part: str) -> Path:
        _fs_id, path = for_part.split("::", 1)
        if path != str(self._path):
            msg = f"partition {for_part!r} is not this source's file {str(self._path)!r}"
            raise ValueError(msg)
        return self._absolute


class FileSource(_OneFileSource[str]):
    """Read one file line by line, each line without its line ending.

    `\\n`, `\\r\\n` and a lone `\\r` all end a line; a last line without an
    ending is still emitted.  A missing file gives no partitions (so nothing
    is read), but its directory must exist.  Resumes after the last emitted
    line.

    :arg path: the file.
    :arg batch_size: most lines per batch.
    :arg get_fs_id: called with the file's directory; returns a name for its
        filesystem that stays the same across runs and must not contain
        `::`.  Defaults to the device number.

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import FileSource

    (folder / "in.txt").write_text("one\\ntwo\\n")
    flow = Dataflow("file_source_eg")
    out = []
    op.output("out", op.input("inp", flow, FileSource(folder / "in.txt")), TestingSink(out))
    run_main(flow)
    assert out == ["one", "two"]
    ```
    """

    def __init__(
        self,
        path: Union[Path, str],
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _get_path_dev,
    ) -> None:
        super().__init__(path, batch_size, get_fs_id)

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> StatefulSourcePartition[str, int]:
        return _line_partition(self._own_path(for_part), self._batch_size, resume_state)


class CSVSource(_OneFileSource[Dict[str, str]]):
    """Read one CSV file as one `dict` per row, keyed by the header row.

    Rows are parsed by `csv.DictReader`, so its rules hold: blank rows are
    skipped, missing fields are `None` and extra fields are listed under the
    key `None`.  An empty file emits nothing.  Otherwise as `FileSource`.

    :arg path: the file.
    :arg batch_size: most rows per batch.
    :arg get_fs_id: as for `FileSource`.
    :arg fmtparams: passed on to `csv.DictReader` (for example `delimiter`,
        or `fieldnames` for a file without a header row).

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import CSVSource

    (folder / "users.csv").write_text("id,name\\n7,ada\\n8,alan\\n")
    flow = Dataflow("csv_source_eg")
    out = []
    op.output("out", op.input("inp", flow, CSVSource(folder / "users.csv")), TestingSink(out))
    run_main(flow)
    assert out == [{"id": "7", "name": "ada"}, {"id": "8", "name": "alan"}]
    ```
    """

    def __init__(
        self,
        path: Union[Path, str],
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _get_path_dev,
        **fmtparams: Any,
    ) -> None:
        super().__init__(path, batch_size, get_fs_id)
        self._fmtparams = fmtparams

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _TextPartition[Dict[str, str]]:
        return _csv_partition(self._own_path(for_part), self._batch_size, resume_state, self._fmtparams)


class DirSource(FixedPartitionedSource[str, int]):
    """Read every file in a directory matching a glob, line by line.

    Each file is a partition named `"{fs_id}::{path relative to the
    directory}"`, read line by line as `FileSource` reads, but in the
    Spark task that owns it (`lives_in_driver` is false), by its absolute
    path as of the source's creation.  Files are listed when
    the run starts, in sorted order; directories matching the pattern are
    left out (Bytewax lists them too and then fails to open them).

    :arg dir_path: the directory; it must exist when the source is created.
    :arg glob_pat: `pathlib` glob, relative to `dir_path`; `"**/*"` recurses.
    :arg batch_size: most lines per batch.
    :arg get_fs_id: called with `dir_path`; as for `FileSource`.

    ```python
    import tempfile
    from pathlib import Path

    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, run_main

    folder = Path(tempfile.mkdtemp())
    from flowspark.connectors.files import DirSource

    (folder / "a.txt").write_text("a1\\na2\\n")
    (folder / "b.txt").write_text("b1\\n")
    flow = Dataflow("dir_source_eg")
    out = []
    op.output("out", op.input("inp", flow, DirSource(folder, glob_pat="*.txt")), TestingSink(out))
    run_main(flow)
    assert sorted(out) == ["a1", "a2", "b1"]
    ```
    """

    lives_in_driver = False

    def __init__(
        self,
        dir_path: Union[Path, str],
        glob_pat: str = "*",
        batch_size: int = 1000,
        get_fs_id: Callable[[Path], str] = _get_path_dev,
    ) -> None:
        self._dir_path = Path(dir_path)
        self._absolute_dir = self._dir_path.absolute()
        if not self._dir_path.exists():
            msg = f"input directory `{self._dir_path}` does not exist"
            raise ValueError(msg)
        if not self._dir_path.is_dir():
            msg = f"input directory `{self._dir_path}` is not a directory"
            raise ValueError(msg)
        self._glob_pat = glob_pat
        self._batch_size = batch_size
        self._fs_id = _check_fs_id(get_fs_id(self._dir_path))

    @override
    def list_parts(self) -> List[str]:
        files = sorted(p for p in self._dir_path.glob(self._glob_pat) if p.is_file())
        return [f"{self._fs_id}::{p.relative_to(self._dir_path)}" for p in files]

    @override
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> StatefulSourcePartition[str, int]:
        _fs_id, rel_path = for_part.split("::", 1)
        return _line_partition(self._absolute_dir / rel_path, self._batch_size, resume_state)


def _line_format(end: str) -> Optional[LineFormat]:
    """How `_FileSinkPartition` writes values; `None` where text files translate line ends (not on POSIX systems)."""
    return LineFormat(end, _default_encoding()) if os.linesep == "\n" else None


class _FileSinkPartition(StatefulSinkPartition[str, int]):
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
    """Write each value, followed by `end`, to one file.

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
    assert (folder / "out.txt").read_text() == "one\\ntwo\\n"
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
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _FileSinkPartition:
        if for_part != str(self._path):
            msg = f"partition {for_part!r} is not this sink's file {str(self._path)!r}"
            raise ValueError(msg)
        return _FileSinkPartition(self._absolute_path, resume_state, self._end)


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
    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _FileSinkPartition:
        return _FileSinkPartition(self._absolute_dir / for_part, resume_state, self._end)
