"""Stop a run on SIGTERM at a micro-batch boundary, and at once on a second SIGTERM.

SIGTERM is how Kubernetes, YARN, `docker stop` and service managers ask a
process to end.  On the first one the run lets the micro-batch being
written finish and Spark log it as committed, starts no other, stops the
query and raises `RunStopped` (exit status 143 from the command line, as
for a process ended by SIGTERM, so that a supervisor restarts it and a
Kubernetes Job does not count it as done).  A second SIGTERM, or Ctrl-C,
stops at once: the micro-batch it cuts is not committed and a resumed run
reads it again, as after a kill.

The handler is installed only while a run lasts, only in the main thread,
and only over Python's default disposition: a program that handles
SIGTERM itself keeps its handler.

While the run waits for its query, Ctrl-C is raised where the wait loop
checks for it (`ctrl_c_between_calls`), never inside a call to Spark: a
`KeyboardInterrupt` raised in a Spark Connect call is lost in its gRPC
channel, and the run would go on.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Iterator, Optional

from flowspark.errors import RunStopped

__all__ = [
    "STOPPED_STATUS",
    "StopAtBoundary",
    "ctrl_c_between_calls",
    "jvm_ignores_sigterm",
    "stop_on_sigterm",
    "stop_requested",
    "stopped",
]

_log = logging.getLogger(__name__)

STOPPED_STATUS = 128 + signal.SIGTERM
"""The command line's exit status after a stop on SIGTERM (143), as for a process SIGTERM ended."""


class StopAtBoundary(Exception):
    """Raised by the sinks' writer for a micro-batch Spark starts after a stop was asked for: it is not written."""


HARD_STOP_SECONDS = 10.0
"""How long a second SIGTERM leaves the run to unwind before the process exits regardless (as SIGTERM's default
action would have ended it): a thread of Spark's may hold the main thread in a call that does not return."""

SECOND_STOP = (
    "the run stopped at once on a second SIGTERM; started again with the same recovery directory, "
    "it reads the micro-batch this cut short again"
)


class _Request:
    """Whether a stop was asked for in this process, by which signal."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.hard_stop: Optional[threading.Timer] = None
        """The exit a second SIGTERM arranged, cancelled once the run has unwound."""


def _exit_now() -> None:
    sys.stderr.write(f"flowspark: {SECOND_STOP}\n")
    sys.stderr.flush()
    os._exit(STOPPED_STATUS)


_REQUEST = _Request()


def stop_requested() -> bool:
    """Whether a SIGTERM asked the running flow to stop."""
    return _REQUEST.asked.is_set()


def _handle(signum: int, frame: Optional[FrameType]) -> None:
    if _REQUEST.asked.is_set():
        if _REQUEST.hard_stop is None:
            _REQUEST.hard_stop = threading.Timer(HARD_STOP_SECONDS, _exit_now)
            _REQUEST.hard_stop.daemon = True
            _REQUEST.hard_stop.start()
        raise RunStopped(SECOND_STOP, STOPPED_STATUS)
    _REQUEST.asked.set()
    _log.warning(
        "SIGTERM: stopping once the micro-batch being written is committed (a second SIGTERM or Ctrl-C stops at once)"
    )


@contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """While the run lasts, a SIGTERM stops it at a micro-batch boundary (see the module doc).

    Does nothing outside the main thread or when SIGTERM already has a
    handler other than Python's default.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    _REQUEST.asked.clear()
    signal.signal(signal.SIGTERM, _handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _REQUEST.asked.clear()
        if _REQUEST.hard_stop is not None:
            _REQUEST.hard_stop.cancel()
            _REQUEST.hard_stop = None


@contextmanager
def ctrl_c_between_calls() -> Iterator[Callable[[], None]]:
    """Within the block, Ctrl-C (SIGINT) raises `KeyboardInterrupt` from the check the block is given, not wherever
    the main thread is; a second Ctrl-C before a check raises it at once.

    For a loop that calls Spark between its checks (see the module doc).
    Does nothing outside the main thread or when SIGINT has a handler other
    than Python's own; the check then does nothing either.
    """
    pressed = threading.Event()

    def check() -> None:
        if pressed.is_set():
            pressed.clear()
            raise KeyboardInterrupt

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield check
        return

    def handle(signum: int, frame: Optional[FrameType]) -> None:
        check()  # a second Ctrl-C before the check: at once
        pressed.set()

    signal.signal(signal.SIGINT, handle)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    check()


def stopped(flow_id: str, last_batch: int, resumable: bool) -> RunStopped:
    """The error that ends a run stopped on SIGTERM after micro-batch `last_batch` was committed."""
    done = (
        f"after micro-batch {last_batch} (epoch {last_batch + 1}) was written and committed"
        if last_batch >= 0
        else "before it wrote any micro-batch"
    )
    then = (
        "start it again with the same recovery directory to resume"
        if resumable
        else "it has no recovery directory, so a new run starts over"
    )
    return RunStopped(f"flow {flow_id!r} stopped on SIGTERM {done}; {then}", STOPPED_STATUS)


@contextmanager
def jvm_ignores_sigterm() -> Iterator[None]:
    """While PySpark starts the driver's JVM: the JVM starts with SIGTERM ignored.

    systemd (by default), `kill -TERM -PGID` and init processes that
    forward to the group send SIGTERM to every process of the driver, its
    JVM included, whose own handler would stop Spark under the run.  A
    JVM that starts with SIGTERM ignored keeps it ignored, as PySpark
    already has it do for Ctrl-C; it ends when this process does (its stdin
    closes).  PySpark starts the JVM with `subprocess.Popen`, which this
    wraps for the duration; where PySpark does it otherwise, nothing
    changes.
    """
    from pyspark import java_gateway

    original: Any = getattr(java_gateway, "Popen", None)
    if original is None:
        yield
        return

    def popen(*args: Any, **kwargs: Any) -> Any:
        before: Optional[Callable[[], None]] = kwargs.get("preexec_fn")

        def in_child() -> None:
            if before is not None:
                before()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = in_child
        return original(*args, **kwargs)

    setattr(java_gateway, "Popen", popen)  # noqa: B010 (mypy: the module does not export Popen)
    try:
        yield
    finally:
        setattr(java_gateway, "Popen", original)  # noqa: B010
