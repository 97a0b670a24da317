"""flowspark's own one-line notices, such as a Kafka broker that can't be reached and then answers again.

A notice is written to the run's standard error wherever the code that
notices runs.  In a Spark task that is a Python worker, whose standard
error on a cluster goes to its executor's log; while a task runs, the
engine points notices at the driver (`forwarded_to`), so the line shows
where the run's user looks.

    >>> say("flowspark: a notice")
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

_forward = threading.local()


def say(line: str) -> None:
    """Write `line` to the run's standard error: by the driver, in a task that forwards notices, else here."""
    forward: Optional[Callable[[str], None]] = getattr(_forward, "to", None)
    if forward is not None:
        try:
            forward(line + "\n")
            return
        except Exception:  # the driver is gone: the worker's own log still shows it
            pass
    print(line, file=sys.stderr, flush=True)


@contextmanager
def forwarded_to(forward: Callable[[str], None]) -> Iterator[None]:
    """While the block runs in this thread, notices go to `forward` (which writes them where the user sees them)."""
    saved = getattr(_forward, "to", None)
    _forward.to = forward
    try:
        yield
    finally:
        _forward.to = saved
