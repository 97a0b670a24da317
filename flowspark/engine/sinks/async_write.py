"""A micro-batch's driver-side writing, overlapped with Spark's work on the next one.

Spark runs micro-batches one after another, and a batch's `foreachBatch`
call holds the next one back until it returns.  The driver's share of a
batch (decoding the rows, calling the sinks, syncing files) would leave the
executors idle meanwhile.  Without a recovery directory nothing can resume
a killed run, so the write may finish after Spark has logged the batch as
done: `WriteBehind` runs it in a thread while the next batch is computed.
With a recovery directory the write must end before Spark logs the batch,
or a kill in between would lose it on resume, so writes stay in line.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional


class WriteBehind:
    """Runs each submitted write in a thread of its own, one at a time, in the order submitted.

    A write's error is raised by every later `join` (and so by `submit`):
    nothing is written after a failed write.
    """

    def __init__(self) -> None:
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    def submit(self, write: Callable[[], None]) -> None:
        """Wait for the previous write, then start `write`."""
        self.join()

        def run() -> None:
            try:
                write()
            except BaseException as ex:
                self._error = ex

        self._thread = threading.Thread(target=run, name="flowspark-write-behind", daemon=True)
        self._thread.start()

    def join(self) -> None:
        """Wait for the last write; raise its error, or an earlier one's."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
