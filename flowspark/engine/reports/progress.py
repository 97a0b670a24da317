"""What a running flow is doing, reported once per micro-batch.

A run reports through the `flowspark.engine.reports.progress` logger: each written
micro-batch as a DEBUG record that carries its `BatchReport` (as the
record's `batch_report` attribute), the Spark UI's address and the final
summary as INFO records.  A library caller can also pass a callback that
gets each `BatchReport` itself.  `ProgressHandler`, which `python -m
flowspark.run` installs, shows these records as a progress line: in a
terminal, one line redrawn in place with the epoch, items read and written,
the last micro-batch's duration, the state rows Spark holds, the wall-clock
time of the batch and, when every source can tell how far it got
(`fraction_done()`), a bar to completion; elsewhere (a log file, a pipe)
the same facts as one plain line every `log_every` seconds and at the end,
so logs stay quiet.  It shows flowspark's other records as
`flowspark: message` lines.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Optional, TextIO

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchReport:
    """The facts of one written micro-batch."""

    epoch: int
    """The micro-batch id + 1: epochs count from 1, as in Bytewax."""
    items_in: int
    """Items read from the flow's sources so far."""
    items_out: int
    """Items written to the flow's sinks so far."""
    seconds: float
    """Time since the previous micro-batch was written."""
    state_rows: Optional[int]
    """Rows in Spark's state stores; `None` when the flow keeps no state."""
    fraction: Optional[float]
    """How far through its input the flow is, when every source can tell."""


def state_rows(progress: Any) -> Optional[int]:
    """Rows in Spark's state stores, from a query's last progress report."""
    if not progress:
        return None
    operators = progress.get("stateOperators") or []
    return sum(int(op.get("numRowsTotal", 0)) for op in operators) if operators else None


def render(report: BatchReport, width: int = 24) -> str:
    """One progress line."""
    parts = [
        f"epoch {report.epoch}",
        f"{report.items_in:,} in",
        f"{report.items_out:,} out",
        f"{report.seconds:.2f} s/batch",
    ]
    if report.state_rows is not None:
        parts.append(f"{report.state_rows:,} state rows")
    parts.append(datetime.now(timezone.utc).strftime("%H:%M:%S UTC"))
    line = " | ".join(parts)
    if report.fraction is not None:
        done = int(width * min(1.0, report.fraction))
        line = f"[{'#' * done}{'.' * (width - done)}] {report.fraction:6.1%} {line}"
    return line


class Progress:
    """Reports a run's micro-batches to the progress logger and to `on_batch`, if given.

    An exception from `on_batch` ends the run with that exception, as one
    from any other user function would.
    """

    def __init__(self, on_batch: Optional[Callable[[BatchReport], None]] = None) -> None:
        self._on_batch = on_batch
        self._last: Optional[BatchReport] = None

    def announce(self, text: str) -> None:
        """A line of its own, such as the Spark UI's address."""
        _log.info("%s", text)

    def batch(self, report: BatchReport) -> None:
        self._last = report
        if self._on_batch is not None:
            self._on_batch(report)
        self.running(report)

    @property
    def shown(self) -> bool:
        """Whether the progress line is shown (the command line shows it, unless `--no-progress`)."""
        return _log.isEnabledFor(logging.DEBUG)

    def running(self, report: BatchReport) -> None:
        """The progress line of a micro-batch still running (a batch run's, `batch_query.BatchProgress`): shown, but
        neither a written batch for `on_batch` nor the final summary."""
        if self.shown:
            _log.debug("%s", render(report), extra={"batch_report": report})

    def finish(self) -> None:
        """The final summary."""
        if self._last is not None:
            _log.info("done: %s", render(self._last))


class ProgressHandler(logging.Handler):
    """Shows flowspark's log records on `stream` (stderr by default), micro-batches as the progress line."""

    def __init__(self, stream: Optional[TextIO] = None, log_every: float = 10.0) -> None:
        super().__init__()
        self._stream = stream if stream is not None else sys.stderr
        self._terminal = self._stream.isatty()
        self._log_every = log_every
        self._last_log: Optional[float] = None
        self._drawn = False
        self.setFormatter(logging.Formatter("flowspark: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if isinstance(getattr(record, "batch_report", None), BatchReport):
                self._batch_line(record)
            else:
                self._line(self.format(record))
        except Exception:
            self.handleError(record)

    def _batch_line(self, record: logging.LogRecord) -> None:
        if self._terminal:
            self._stream.write("\r\033[K" + record.getMessage())
            self._stream.flush()
            self._drawn = True
            return
        now = time.monotonic()
        # The first batch always gets a line (the monotonic clock may start near 0).
        if self._last_log is None or now - self._last_log >= self._log_every:
            self._last_log = now
            self._line(self.format(record))

    def _line(self, text: str) -> None:
        if self._drawn:
            self._stream.write("\r\033[K")
            self._drawn = False
        self._stream.write(text + "\n")
        self._stream.flush()


def show_on_stderr(show_progress: bool, stream: Optional[TextIO] = None) -> ProgressHandler:
    """Show flowspark's messages on `stream` (stderr by default), and its progress unless `show_progress` is false.

    What `python -m flowspark.run` does.  The progress records stay out of
    any logging the flow sets up for itself (a record per micro-batch).
    """
    handler = ProgressHandler(stream)
    package = logging.getLogger("flowspark")
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    _log.propagate = False
    if show_progress:
        _log.addHandler(handler)
        _log.setLevel(logging.DEBUG)
    return handler
