"""What step functions log in Spark's Python workers reaches the user's logging handlers, in the driver.

On Bytewax a step's `logging.getLogger(__name__).info(...)` runs in the
user's process, so the levels and handlers the user configured (a
`basicConfig`, a file handler, a JSON formatter) apply to it.  In a
Spark worker none of that configuration exists.  So the driver takes a
snapshot of its loggers' levels when the run starts (`LogLevels`, carried
by the driver link); while user code runs in a worker those levels apply
there, and a record that passes them goes to the driver (`DriverLogHandler`),
in order with the task's prints, where the logger of the same name hands
it to the user's handlers (`deliver_record`).  The record keeps its
worker's time, file, line and function; an exception's traceback travels
as text.  Handlers the worker's own import of the user's modules set up
on the root logger are set aside meanwhile: the record is written once,
by the driver.  On a cluster each record is also written to the worker's
standard error, so the executors' logs keep it.

    >>> import logging
    >>> levels = LogLevels.of_this_process()
    >>> levels.root == logging.getLogger().level
    True
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

LogEntry = Dict[str, Any]
"""A record's attributes as plain values: what travels to the driver."""

_PLAIN = (str, int, float, bool, type(None))

_SKIPPED = frozenset({"args", "msg", "exc_info", "exc_text", "stack_info"})
"""Record attributes that travel another way (the message and traceback as text) or not at all."""


@dataclass(frozen=True)
class LogLevels:
    """The levels of the driver's loggers when the run started: the root's, and every named logger's own."""

    root: int
    named: Tuple[Tuple[str, int], ...] = ()

    @classmethod
    def of_this_process(cls) -> LogLevels:
        loggers = logging.root.manager.loggerDict.items()
        named = tuple(
            (name, logger.level)
            for name, logger in sorted(loggers)
            if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET
        )
        return cls(logging.getLogger().level, named)

    def apply(self) -> None:
        logging.getLogger().setLevel(self.root)
        for name, level in self.named:
            logging.getLogger(name).setLevel(level)


BY_VALUE_FILE = "<dynamic-code>"
"""The file name cloudpickle gives the code of functions it pickles by value (the user's modules)."""


def _real_file(frame: FrameType) -> Optional[str]:
    """The file a by-value function's code came from: its module's `__file__`, which cloudpickle carries along."""
    found = frame.f_globals.get("__file__")
    return found if isinstance(found, str) else None


def _frame_at(filename: str, lineno: int, name: Optional[str] = None) -> Optional[FrameType]:
    """The innermost frame of by-value code at `lineno` (in function `name`, if given) on this thread's stack."""
    if filename != BY_VALUE_FILE:
        return None
    frame: Optional[FrameType] = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_filename == BY_VALUE_FILE and frame.f_lineno == lineno and name in (None, code.co_name):
            return frame
        frame = frame.f_back
    return None


def _placed(record: logging.LogRecord) -> None:
    """Give a record logged from by-value code the file of the module it came from, as on the driver."""
    frame = _frame_at(record.pathname, record.lineno, record.funcName)
    real = None if frame is None else _real_file(frame)
    if real is not None:
        record.pathname = real
        record.filename = os.path.basename(real)
        record.module = os.path.splitext(record.filename)[0]


def traceback_text(error: BaseException) -> str:
    """An exception's traceback as `logging` formats it, with the real files of by-value code."""
    shown = traceback.TracebackException.from_exception(error, lookup_lines=False)
    for summary, (frame, _) in zip(shown.stack, traceback.walk_tb(error.__traceback__)):
        if summary.filename == BY_VALUE_FILE:
            real = _real_file(frame)
            if real is not None:
                summary.filename = real
    text = "".join(shown.format())
    return text[:-1] if text.endswith("\n") else text


def entry_of(record: logging.LogRecord) -> LogEntry:
    """A record as plain values, its message and any traceback formatted here (their objects stay in the worker)."""
    _placed(record)
    entry: LogEntry = {
        name: value for name, value in record.__dict__.items() if name not in _SKIPPED and isinstance(value, _PLAIN)
    }
    entry["msg"] = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        entry["exc_text"] = traceback_text(record.exc_info[1])
    elif record.exc_text:
        entry["exc_text"] = record.exc_text
    if record.stack_info:
        entry["stack_info"] = record.stack_info
    return entry


def deliver_record(entry: LogEntry) -> None:
    """On the driver: hand a worker's record to the handlers of the logger of its name, as if logged here."""
    record = logging.makeLogRecord(entry)
    logging.getLogger(record.name).handle(record)


class DriverLogHandler(logging.Handler):
    """Sends each record to the driver through `put`, in order with the task's prints; also writes it to the
    worker's standard error when `echo` (on a cluster, for the executor's log)."""

    def __init__(self, put: Callable[[LogEntry], None], echo: bool) -> None:
        super().__init__()
        self._put = put
        self._echo = echo

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._put(entry_of(record))
            if self._echo and sys.__stderr__ is not None:
                sys.__stderr__.write(logging.Formatter(logging.BASIC_FORMAT).format(record) + "\n")
        except Exception:
            self.handleError(record)


@contextmanager
def warnings_placed() -> Iterator[None]:
    """While user code runs in a worker: a warning raised by by-value code names its real file and shows its line,
    as on the driver."""
    shown = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        frame = _frame_at(filename, lineno)
        real = None if frame is None else _real_file(frame)
        shown(message, category, real or filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = shown


@contextmanager
def logs_to_driver(levels: LogLevels, put: Callable[[LogEntry], None], echo: bool) -> Iterator[None]:
    """While user code runs in a worker: the driver's levels apply, and the root logger's only handler sends records
    to the driver (`DriverLogHandler`)."""
    root = logging.getLogger()
    saved: List[logging.Handler] = root.handlers[:]
    levels.apply()
    root.handlers = [DriverLogHandler(put, echo)]
    try:
        yield
    finally:
        root.handlers = saved
