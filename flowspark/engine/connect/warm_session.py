"""A Spark Connect session on the user's warm local server (`connect_server`), started if need be.

The first run on a machine (or after the server went idle) starts the
server and waits for it; every later run, from any of the user's
processes, connects in a fraction of a second.  The process then holds the
server's lease for the rest of its life, so the server is not stopped under
it, and keeps one session for all its runs.

`FLOWSPARK_WARM_SPARK` says which runs use it (`WarmMode`); runs with Spark
settings of their own (`--conf`) or a master (`--master`) never do.
"""

from __future__ import annotations

import fcntl
import os
import signal
import time
from dataclasses import dataclass
from enum import Enum
from typing import IO, Any, Dict, Optional

from flowspark import _settings as settings
from flowspark.engine.connect.connect_client import connect, forget
from flowspark.engine.connect.connect_server import (
    LEASE,
    LOCK,
    LOG,
    READY_SECONDS,
    FileLock,
    ServerRecord,
    count_run,
    open_private,
    read_record,
    server_dir,
    serving,
    start_supervisor,
)
from flowspark.engine.connect.server_folders import remove_stale
from flowspark.engine.spark.java_check import check_java
from flowspark.engine.util.private_files import make_dirs, others_can_write
from flowspark.errors import FlowsparkRuntimeError


class WarmMode(Enum):
    """Which runs use the warm server."""

    NONE = "0"
    """None: every run starts Spark in its own process."""
    AUTO = "auto"
    """Runs whose input ends within their first read (one batch query, `batch_query`), and every run of a process
    that runs one flow (the command line).

    A program that runs many streaming flows (a test suite) starts Spark
    in its process once and runs each on it, for less than a streaming
    query costs to start through Spark Connect (`run_spark`).
    """
    ALL = "all"
    """Every run that may: streaming queries of every process too."""


@dataclass(frozen=True)
class WarmSpark:
    """A session on the warm server, its parallelism, and what the server's record says of it."""

    session: Any
    parallelism: int
    """The session's shuffle partitions: the run's parallelism."""
    record: ServerRecord
    directory: str

    @property
    def log(self) -> str:
        """Where the server's JVM writes its log."""
        return os.path.join(self.directory, LOG)


_lease: Optional[IO[str]] = None
"""This process's lease on the server it uses, held until the process exits."""

_leased: Optional[ServerRecord] = None
"""The record of the server this process holds the lease of."""

_sessions: Dict[int, WarmSpark] = {}
"""This process's sessions on the warm server, by parallelism."""

FORGET_SECONDS = 5.0
"""How long the supervisor of a server that stopped listening may take to forget it once asked to stop."""


def warm_mode() -> WarmMode:
    """Which runs use the warm server (`FLOWSPARK_WARM_SPARK`); an unknown value is refused, naming the ones that work."""
    value = (settings.WARM_SPARK.get() or WarmMode.AUTO.value).strip().lower()
    try:
        return WarmMode(value)
    except ValueError:
        known = ", ".join(repr(mode.value) for mode in WarmMode)
        msg = f"{settings.WARM_SPARK.name}={value!r} is not one of {known}"
        raise FlowsparkRuntimeError(msg) from None


def warm_spark(parallelism: Optional[int] = None) -> WarmSpark:
    """A session on the warm server for runs of `parallelism` (the server's cores by default); the server is started if none runs.

    Runs of one parallelism, from every process, share one session and so
    its warm Python workers; each parallelism (which a query's state
    records in its checkpoint) has a session of its own
    (`ServerRecord.session_url`).
    """
    directory = server_dir()
    record = read_record(directory)
    if record is None or record != _leased:
        record = _reached(directory)
    want = parallelism or record.parallelism
    found = _sessions.get(want)
    if found is None:
        try:
            session = _session(record, want)
        except FlowsparkRuntimeError as ex:
            if serving(record):
                raise _failed(str(ex), directory) from None
            record = _replaced(directory, record)
            want = parallelism or record.parallelism
            try:
                session = _session(record, want)
            except FlowsparkRuntimeError as again:
                raise _failed(str(again), directory) from None
        found = _sessions[want] = WarmSpark(session, want, record, directory)
    count_run(directory)
    return found


def _failed(what: str, directory: str) -> FlowsparkRuntimeError:
    """The error `what` of the warm server in `directory`, with where its log is and how to run without it."""
    log = os.path.join(directory, LOG)
    return FlowsparkRuntimeError(
        f"{what}; the warm local Spark's log is {log!r} "
        f"(set {settings.WARM_SPARK.name}=0 to run Spark in the run's own process)"
    )


def _replaced(directory: str, gone: ServerRecord) -> ServerRecord:
    """A new server in place of `gone`, whose JVM died or stopped listening: its supervisor is stopped first.

    A supervisor forgets its server as soon as its JVM exits; this covers a
    run that read the record just before, and a supervisor that does not
    answer (it is killed).
    """
    for stop in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(gone.supervisor, stop)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + FORGET_SECONDS
        while read_record(directory) == gone and time.monotonic() < deadline:
            time.sleep(0.05)
        if read_record(directory) != gone:
            break
    return _reached(directory)


def _reached(directory: str) -> ServerRecord:
    """The record of the server in `directory`, started if need be; this process then holds its lease.

    The record is read again under the directory's lock, which the server's
    supervisor holds when it forgets an idle server: a lease taken here is
    on a server that is not being stopped.
    """
    global _leased
    for warm in _sessions.values():
        forget(warm.record.server_url)
    _sessions.clear()
    make_dirs(directory)
    if others_can_write(directory):
        msg = f"the warm Spark's directory {directory!r} can be changed by other users; make it yours alone (chmod 700)"
        raise FlowsparkRuntimeError(msg)
    with FileLock(os.path.join(directory, LOCK)):
        record = read_record(directory)
        if record is None:
            check_java()
            record = _started(directory)
        _take_lease(directory)
        _leased = record
    return record


def _session(record: ServerRecord, parallelism: int) -> Any:
    session = connect(record.session_url(parallelism), parallelism).session
    # Spark runs each streaming query in a copy of the session, whose artifacts (none: flowspark ships code in
    # pickles) Spark Connect would keep apart under an id of its own: and Spark keeps Python worker pools, each
    # with its daemon, per such id until the server stops. Without that, every query's Pythons come from the
    # server's shared pools.
    session.conf.set("spark.sql.artifact.isolation.enabled", "false")
    return session


def _started(directory: str) -> ServerRecord:
    """Start a server in `directory` and wait for its record (the caller holds the directory's lock).

    Other installations' server folders long unused go first (`server_folders`).
    """
    remove_stale(directory)
    supervisor = start_supervisor(directory)
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        record = read_record(directory)
        if record is not None and record.supervisor == supervisor.pid:
            return record
        if supervisor.poll() is not None:
            break
        time.sleep(0.05)
    else:
        supervisor.terminate()
    msg = "the warm local Spark did not start"
    raise _failed(msg, directory)


def _take_lease(directory: str) -> None:
    """Hold the server's lease (shared) from now on; one taken on an earlier server is let go."""
    global _lease
    lease = open_private(os.path.join(directory, LEASE))
    fcntl.flock(lease, fcntl.LOCK_SH)
    if _lease is not None:
        _lease.close()
    _lease = lease
