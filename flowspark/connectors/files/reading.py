"""Reading a text file: lines cut from blocks of bytes with universal newlines, and CSV rows, each partition with its
snapshot (see the package doc)."""

from __future__ import annotations

import codecs
import io
import os
import re
from csv import DictReader
from pathlib import Path
from typing import IO, Any, BinaryIO, Dict, Iterator, List, Optional, TextIO, TypeVar

from typing_extensions import override

from flowspark.engine.plan.line_blocks import LineBlock
from flowspark.inputs import StatefulSourcePartition, batch

X = TypeVar("X")
"""Type of the items a file partition emits."""


def get_path_dev(path: Path) -> str:
    """Name the filesystem holding `path` by its device number."""
    return hex(path.stat().st_dev)


def check_fs_id(fs_id: str) -> str:
    """`fs_id` itself, refused if it holds `::` (which separates it from the path in a partition's name)."""
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


class TextPartition(_FilePartition[X]):
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
    r"""A file's lines, cut from blocks of bytes, and the byte offset after the last one taken.

    Text mode's `readline` costs a Python call per line (and `for line in f`
    disables `tell()`); a block cut with `bytes.split` and decoded a batch
    at a time is several times cheaper, and its position is a plain byte
    offset.  Lines end as in text mode with universal newlines: `\n`,
    `\r\n` and a lone `\r` each end one, and are dropped; a last line
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
        r"""Up to `most` next lines, undecoded (`LineBlock`); `None` at the end of the file.

        No line holds a `\n` any more, so one join (here), decode and
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
            msg = f"batch_size must be 0 or more; got {batch_size}"
            raise ValueError(msg)
        f = open(path, "rb")
        super().__init__(path, f, f)
        if resume_state is not None:
            f.seek(resume_state)
        self._lines = _Lines(f, default_encoding())
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


def default_encoding() -> str:
    """The encoding `open()` reads text with here."""
    return io.TextIOWrapper(io.BytesIO()).encoding


def line_partition(path: Path, batch_size: int, resume_state: Optional[int]) -> StatefulSourcePartition[str, int]:
    """A partition reading `path`'s lines, without their line ends, from position `resume_state` on."""
    if codecs.lookup(default_encoding()).name in _LINE_END_BYTES_ONLY_END_LINES:
        return _LinePartition(path, resume_state, batch_size)
    # Universal newlines: `\n`, `\r\n` and a lone `\r` all end a line and
    # all arrive here as a single `\n`, which is then dropped.
    f = open(path)
    if resume_state is not None:
        f.seek(resume_state)
    lines = (line.rstrip("\n") for line in _lines(f))
    return TextPartition(path, f, lines, batch_size)


class FileLinePartition(StatefulSourcePartition[str, int]):
    r"""A file's lines, without their line ends, from byte offset `resume_state` on, `batch_size` at a time: what
    `FileSource` reads, as a class a source of the user's can build or extend (Bytewax's `_FileSourcePartition`).

        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        ...     _ = f.write("a\nb\n")
        >>> part = FileLinePartition(Path(f.name), 10, None)
        >>> part.next_batch(), part.snapshot()
        (['a', 'b'], 4)
        >>> part.close()
        >>> os.remove(f.name)
    """

    def __init__(self, path: Path, batch_size: int, resume_state: Optional[int]) -> None:
        self._lines = line_partition(path, batch_size, resume_state)

    @override
    def next_batch(self) -> List[str]:
        return list(self._lines.next_batch())

    @override
    def snapshot(self) -> int:
        return self._lines.snapshot()

    @override
    def close(self) -> None:
        self._lines.close()


def csv_partition(
    path: Path, batch_size: int, resume_state: Optional[int], fmtparams: Dict[str, Any]
) -> TextPartition[Dict[str, str]]:
    # The csv module does its own newline handling, so the file must not.
    """A partition reading `path`'s CSV rows as dicts (`csv.DictReader` with `fmtparams`), from position `resume_state` on."""
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
    return TextPartition(path, f, rows, batch_size)
