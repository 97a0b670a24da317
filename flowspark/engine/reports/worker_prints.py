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
error the same way (`errors_to_driver`): warnings included.  Log records
of the user's loggers travel with the prints, in the order they were made
(`worker_logs`): one `Outbox` per task gathers all three.
"""

from __future__ import annotations

import codecs
import io
import sys
import threading
from contextlib import contextmanager
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, TextIO, Tuple

from flowspark.engine.reports.worker_logs import LogEntry, deliver_record, logs_to_driver, warnings_placed

if TYPE_CHECKING:
    from flowspark.engine.reports.driver_link import DriverLink

ERROR_PRINT_CALL = "print_error"
"""The driver call that writes what a worker wrote to its standard error."""

OUTPUT_CALL = "worker_output"
"""The driver call that takes a task's gathered prints, standard error and log records, in order (`deliver`)."""


class EntryKind(IntEnum):
    """What an `Outbox` entry holds."""

    PRINT = 0
    ERROR = 1
    LOG = 2


_GATHER = 1 << 16
"""About how many characters of prints a worker gathers before it hands them over."""

_GATHER_RECORDS = 256
"""How many log records a worker gathers before it hands them over."""


class Outbox:
    """A task's prints, standard error and log records, in the order they came, for the driver (`deliver`).

    Handed over when a print asks to flush, when a good amount has
    gathered, and when the task's user code is done; if the driver can't
    take them, the worker's own streams (`fallback`, `fallback_errors`) do.
    """

    def __init__(self, link: DriverLink, fallback: TextIO, fallback_errors: TextIO) -> None:
        self._link = link
        self._fallback = fallback
        self._fallback_errors = fallback_errors
        self._entries: List[Tuple[EntryKind, Any]] = []
        self._size = 0
        self._records = 0

    def write(self, kind: EntryKind, text: str) -> None:
        if self._entries and self._entries[-1][0] is kind:
            self._entries[-1] = (kind, self._entries[-1][1] + text)
        else:
            self._entries.append((kind, text))
        self._size += len(text)
        if self._size >= _GATHER:
            self.flush()

    def log(self, entry: LogEntry) -> None:
        self._entries.append((EntryKind.LOG, entry))
        self._records += 1
        if self._records >= _GATHER_RECORDS:
            self.flush()

    def flush(self) -> None:
        if not self._entries:
            return
        entries, self._entries = self._entries, []
        self._size = self._records = 0
        try:
            self._link.call(OUTPUT_CALL, entries)
        except Exception:  # the driver is gone: the worker's own streams still show it
            _write_entries(entries, self._fallback, self._fallback_errors, self._fallback_record)

    def _fallback_record(self, entry: LogEntry) -> None:
        self._fallback_errors.write(f"{entry.get('levelname')}:{entry.get('name')}:{entry.get('msg')}\n")


class _DriverStdout(io.TextIOBase):
    """A text stream whose writes go into an `Outbox` as entries of one `kind`; `fallback` is the worker's own."""

    encoding = "utf-8"

    def __init__(self, outbox: Outbox, fallback: TextIO, kind: EntryKind = EntryKind.PRINT) -> None:
        super().__init__()
        self._outbox = outbox
        self._kind = kind
        self._fallback = fallback
        self.buffer = _DriverStdoutBytes(self)
        """Bytes written to `sys.stdout.buffer` take the same way, as UTF-8."""

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        """The descriptor of the worker's own output: a child process given `sys.stdout` writes there, as before."""
        return self._fallback.fileno()

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            msg = f"write() argument must be str, not {type(text).__name__}"
            raise TypeError(msg)
        self._outbox.write(self._kind, text)
        return len(text)

    def flush(self) -> None:
        self._outbox.flush()


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


_outbox = threading.local()
"""The outbox of the user code running in this thread, if any (`prints_to_driver`)."""


@contextmanager
def prints_to_driver(link: DriverLink) -> Iterator[None]:
    """In a Spark worker, while user code runs: what it prints, and what the user's loggers log, go to the driver."""
    saved = sys.stdout
    outbox = Outbox(link, saved, sys.stderr)
    sys.stdout = _DriverStdout(outbox, saved)
    _outbox.current = outbox
    try:
        with logs_to_driver(link.logging, outbox.log, echo=not link.on_loopback), warnings_placed():
            yield
    finally:
        _outbox.current = None
        sys.stdout = saved
        outbox.flush()


@contextmanager
def errors_to_driver(link: DriverLink) -> Iterator[None]:
    """In a Spark worker whose standard error the run does not see: what user code writes there goes to the driver's,
    in order with its prints (when they go there too)."""
    saved = sys.stderr
    outbox: Optional[Outbox] = getattr(_outbox, "current", None)
    own = outbox is None
    if outbox is None:
        outbox = Outbox(link, sys.stdout, saved)
    sys.stderr = _DriverStdout(outbox, saved, EntryKind.ERROR)
    try:
        yield
    finally:
        sys.stderr = saved
        if own:
            outbox.flush()


def _write_entries(
    entries: List[Tuple[EntryKind, Any]], out: TextIO, errors: TextIO, record: Callable[[LogEntry], None]
) -> None:
    """Write an outbox's prints to `out`, its standard error to `errors`, and hand its records to `record`, in order."""
    for kind, value in entries:
        if kind is EntryKind.PRINT:
            out.write(value)
        elif kind is EntryKind.ERROR:
            errors.write(value)
        else:
            out.flush()
            errors.flush()
            record(value)
    out.flush()
    errors.flush()


def deliver(entries: List[Tuple[EntryKind, Any]]) -> None:
    """On the driver: write a task's prints and standard error to ours, and hand its log records to our loggers, in
    the order the task made them."""
    _write_entries(entries, sys.stdout, sys.stderr, deliver_record)


def write_error_prints(text: str) -> None:
    """On the driver: write what a worker wrote to its standard error to ours."""
    sys.stderr.write(text)
    sys.stderr.flush()
