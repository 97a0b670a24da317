"""What user code prints in Spark's Python workers reaches the driver's standard output.

Bytewax runs a flow's functions in the user's process, so their prints
land on its standard output, in between the items a `StdOutSink` writes.
PySpark points a worker's standard output at its standard error, which the
JVM gathers with its own; flowspark's functions run there.  While user code
runs in a worker, `sys.stdout` collects what it prints and hands it to the
driver, which writes it to its own standard output: when a task's work
ends, when a print asks to flush, and whenever a good amount has gathered.

The JVM of a Spark the run started passes its workers' standard error on
to the run's; the warm server's (`connect_server`) keeps it in its log.  So
for tasks on the warm server `sys.stderr` goes to the driver's standard
error the same way (`errors_to_driver`): logging and warnings included.
"""

from __future__ import annotations

import codecs
import io
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, List, TextIO

if TYPE_CHECKING:
    from flowspark.engine.reports.driver_link import DriverLink

PRINT_CALL = "print"
"""The driver call that writes a worker's prints."""

ERROR_PRINT_CALL = "print_error"
"""The driver call that writes what a worker wrote to its standard error."""

_GATHER = 1 << 16
"""About how many characters of prints a worker gathers before it hands them over."""


class _DriverStdout(io.TextIOBase):
    """A text stream whose writes reach one of the driver's output streams (its `call`); `fallback` takes what the
    driver can't."""

    encoding = "utf-8"

    def __init__(self, link: DriverLink, fallback: TextIO, call: str = PRINT_CALL) -> None:
        super().__init__()
        self._link = link
        self._call = call
        self._fallback = fallback
        self._parts: List[str] = []
        self._size = 0
        self.buffer = _DriverStdoutBytes(self)
        """Bytes written to `sys.stdout.buffer` take the same way, as UTF-8."""

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        """The descriptor of the worker's own output: a child process given `sys.stdout` writes there, as before."""
        return self._fallback.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._parts.append(text)
        self._size += len(text)
        if self._size >= _GATHER:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if not self._parts:
            return
        text = "".join(self._parts)
        self._parts.clear()
        self._size = 0
        try:
            self._link.call(self._call, text)
        except Exception:  # the driver is gone: the worker's own output still shows it
            self._fallback.write(text)


class _DriverStdoutBytes(io.RawIOBase):
    """`sys.stdout.buffer` of a `_DriverStdout`: UTF-8 bytes decoded onto it (a character split across writes included)."""

    def __init__(self, text: _DriverStdout) -> None:
        super().__init__()
        self._text = text
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        size = len(memoryview(data).cast("B"))
        self._text.write(self._decoder.decode(bytes(data)))
        return size

    def flush(self) -> None:
        self._text.flush()


@contextmanager
def prints_to_driver(link: DriverLink) -> Iterator[None]:
    """In a Spark worker, while user code runs: what it prints goes to the driver's standard output."""
    saved = sys.stdout
    stream = _DriverStdout(link, saved)
    sys.stdout = stream
    try:
        yield
    finally:
        sys.stdout = saved
        stream.flush()


@contextmanager
def errors_to_driver(link: DriverLink) -> Iterator[None]:
    """In a Spark worker whose standard error the run does not see: what user code writes there goes to the driver's."""
    saved = sys.stderr
    stream = _DriverStdout(link, saved, ERROR_PRINT_CALL)
    sys.stderr = stream
    try:
        yield
    finally:
        sys.stderr = saved
        stream.flush()


def write_prints(text: str) -> None:
    """On the driver: write a worker's prints to standard output."""
    sys.stdout.write(text)
    sys.stdout.flush()


def write_error_prints(text: str) -> None:
    """On the driver: write what a worker wrote to its standard error to ours."""
    sys.stderr.write(text)
    sys.stderr.flush()
