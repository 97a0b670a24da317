"""A Spark Connect session on the user's warm local server (`connect_server`), started if need be.

The first run on a machine (or after the server went idle) starts the
server and waits for it; every later run, from any of the user's
processes, connects in a fraction of a second.  The process then holds the
server's lease for the rest of its life, so the server is not stopped under
it, and keeps one session for all its runs.

`FLOWSPARK_WARM_SPARK=0` turns this off: runs then start Spark in their own
process, as runs with Spark settings of their own (`--conf`) or a master
(`--master`) always do.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from typing import IO, Any, Optional

from flowspark.engine.connect_server import LEASE, LOCK, LOG, READY_SECONDS, FileLock, ServerRecord, open_private, read_record, server_dir, start_supervisor
from flowspark.engine.private_files import make_dirs, others_can_write
from flowspark.errors import FlowsparkRuntimeError

SWITCH_ENV = "FLOWSPARK_WARM_SPARK"
"""Set to 0 to run on a Spark started in the run's own process."""


@dataclass(frozen=True)
class WarmSpark:
    """A session on the warm server, and what the server's record says of it."""

    session: Any
    record: ServerRecord
    directory: str

    @property
    def log(self) -> str:
        """Where the server's JVM writes its log."""
        return os.path.join(self.directory, LOG)


_lease: Optional[IO[str]] = None
"""This process's lease on the server it uses, held until the process exits."""

_current: Optional[WarmSpark] = None


def enabled() -> bool:
    """Whether runs may use the warm server (`FLOWSPARK_WARM_SPARK`)."""
    return os.environ.get(SWITCH_ENV, "1") != "0"


def warm_spark() -> WarmSpark:
    """This process's session on the warm server; the server is started first if none runs."""
    global _current
    if _current is not None and read_record(_current.directory) == _current.record:
        return _current
    directory = server_dir()
    make_dirs(directory)
    if others_can_write(directory):
        msg = f"the warm Spark's directory {directory!r} can be changed by other users; make it yours alone (chmod 700)"
        raise FlowsparkRuntimeError(msg)
    with FileLock(os.path.join(directory, LOCK)):
        record = read_record(directory) or _started(directory)
        _take_lease(directory)
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    session = ConnectSession.builder.remote(record.url).create()
    _current = WarmSpark(session, record, directory)
    return _current


def _started(directory: str) -> ServerRecord:
    """Start a server in `directory` and wait for its record (the caller holds the directory's lock)."""
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
    log = os.path.join(directory, LOG)
    msg = f"the warm local Spark did not start; its log is {log!r} (set {SWITCH_ENV}=0 to run Spark in this process)"
    raise FlowsparkRuntimeError(msg)


def _take_lease(directory: str) -> None:
    """Hold the server's lease (shared) from now on; one taken on an earlier server is let go."""
    global _lease
    lease = open_private(os.path.join(directory, LEASE))
    fcntl.flock(lease, fcntl.LOCK_SH)
    if _lease is not None:
        _lease.close()
    _lease = lease
