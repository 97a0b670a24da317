"""What a running flow is doing, reported once per micro-batch.

In a terminal, one line is redrawn in place: the epoch, items read and
written, the last micro-batch's duration, the state rows Spark holds, the
wall-clock time of the batch and, when every source can tell how far it
got (`fraction_done()`), a bar to completion.  Elsewhere (a log file, a
pipe) the same facts go out as one plain line every `log_every` seconds and
at the end, so logs stay quiet.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Optional, TextIO


@dataclass
class BatchReport:
    """The facts of one written micro-batch."""

    epoch: int
    """The micro-batch id + 1: epochs count from 1, as in Bytewax."""
    items_in: int
    items_out: int
    seconds: float
    state_rows: Optional[int]
    fraction: Optional[float]


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
    """Writes progress lines to `out` (stderr by default)."""

    def __init__(self, out: Optional[TextIO] = None, log_every: float = 10.0) -> None:
        self._out = out if out is not None else sys.stderr
        self._terminal = self._out.isatty()
        self._log_every = log_every
        self._last_log: Optional[float] = None
        self._last: Optional[BatchReport] = None

    def announce(self, text: str) -> None:
        """A line of its own, such as the Spark UI's address."""
        print(f"flowspark: {text}", file=self._out, flush=True)

    def batch(self, report: BatchReport) -> None:
        self._last = report
        if self._terminal:
            self._out.write("\r\033[K" + render(report))
            self._out.flush()
            return
        now = time.monotonic()
        # The first batch always gets a line (the monotonic clock may start near 0).
        if self._last_log is None or now - self._last_log >= self._log_every:
            self._last_log = now
            print(f"flowspark: {render(report)}", file=self._out, flush=True)

    def finish(self) -> None:
        """The final line, always shown."""
        if self._last is None:
            return
        if self._terminal:
            self._out.write("\r\033[K")
        print(f"flowspark: done: {render(self._last)}", file=self._out, flush=True)
