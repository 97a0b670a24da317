"""The user's warm local Spark: a Spark Connect server that runs start to end on demand.

Starting Spark (the JVM, its classes, Python workers) takes seconds, and a
run of a small flow needs a fraction of one.  So runs on this machine share
one Spark Connect server per user and installation (`warm_session`),
started by the first run that needs it and stopped once no run has used it
for `FLOWSPARK_WARM_SPARK_IDLE` seconds (600 by default).

The server is a supervisor process (`python -m
flowspark.engine.connect.connect_server DIR`) and the JVM it starts.  Everything
about it lives in `DIR`, which only the user can enter (`server_dir`):

- `server.json`, the record runs read: port, authentication token, session
  id, pids;
- `lock`, which a run holds while it reads the record or starts a server,
  and the supervisor while it decides to stop;
- `lease`, which every process using the server holds shared (`flock`) for
  as long as it lives; the supervisor counts idle time while nobody does;
- `server.log`, the JVM's output and the supervisor's (why it stopped).

The server listens on loopback only and takes only clients that present
the token, which other users can't read; Spark's own RPC needs a secret too
(`session.spark_settings`).  The JVM dies with its supervisor
(`PR_SET_PDEATHSIG`), and a supervisor whose JVM dies removes the record,
so the next run starts a new server.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from typing import IO, List, Optional, Tuple

import pyspark

import flowspark
from flowspark import _settings as settings
from flowspark.engine.connect.server_usage import SETTLED_RUNS, ServerUsage, outgrown, usage_of
from flowspark.engine.spark import fork_server
from flowspark.engine.util.private_files import make_dirs, write_private

RECORD = "server.json"
LOCK = "lock"
LEASE = "lease"
LOG = "server.log"
LOG_LIMIT = 8 << 20
"""Bytes `server.log` may reach before the supervisor cuts it to its last `LOG_KEPT` (`cap_log`)."""
LOG_KEPT = 1 << 20
RUNS = "runs"
"""A byte per run the server took, from runs of every process (`count_run`): what `python -m flowspark.warm` counts."""

DEFAULT_IDLE_SECONDS = 600.0
READY_SECONDS = 180.0
"""How long a new server may take to listen before its start counts as failed."""

_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_LOWEST_PORT = 10000
_START_ATTEMPTS = 3
"""How often a JVM that exits before it listens is started again, on new ports."""


@dataclass(frozen=True)
class ServerRecord:
    """How runs reach a warm server, as its supervisor records it."""

    port: int
    token: str
    session_id: str
    """The Spark Connect session every run of the server's own parallelism uses, so that they share its warm Python
    workers."""
    parallelism: int
    """The server's local cores: `local[parallelism]`."""
    supervisor: int
    jvm: int
    ui_port: int
    """The port of the server's Spark UI, on loopback."""

    @property
    def url(self) -> str:
        """The Spark Connect URL of the server's own parallelism's session, token included (`localhost`, which the
        client reaches without TLS)."""
        return self.session_url(self.parallelism)

    @property
    def server_url(self) -> str:
        """The server's Spark Connect URL without a session: the start of every session's URL."""
        return f"sc://localhost:{self.port}/;token={self.token}"

    def session_url(self, parallelism: int) -> str:
        """The Spark Connect URL of the one session all runs of `parallelism` use, from every process.

        A query's state records its shuffle partitions, so each parallelism
        has a session of its own; one session per parallelism, not per
        process, keeps Spark's Python worker pools (one per session on a
        Spark Connect server, kept until the server stops) as few as the
        parallelisms runs ask for.

        >>> record = ServerRecord(1, "t", "5b9c6f6e-0d2a-4c8e-9a57-2f1d3b4a6c7e", 2, 0, 0, 0)
        >>> record.session_url(2) == record.url, record.session_url(1) == record.session_url(1) != record.url
        (True, True)
        """
        session = self.session_id
        if parallelism != self.parallelism:
            session = str(uuid.uuid5(uuid.UUID(self.session_id), f"parallelism {parallelism}"))
        return f"{self.server_url};session_id={session}"


def server_dir() -> str:
    """This installation's server directory: one per Python, PySpark, Java and flowspark code.

    A server runs the flowspark code it started with in its Python workers,
    so a changed flowspark (a new version, an edited checkout) gets a
    server of its own; the old one stops when idle.
    """
    parts = [os.path.realpath(sys.executable), pyspark.__version__, os.environ.get("JAVA_HOME", "")]
    root = os.path.dirname(os.path.abspath(flowspark.__file__))
    parts.append(root)
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            if name.endswith(".py"):
                facts = os.stat(os.path.join(folder, name))
                parts.append(f"{folder}/{name}:{facts.st_mtime_ns}:{facts.st_size}")
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    folder = settings.WARM_SPARK_DIR.get() or settings.cache_folder("spark-connect")
    return os.path.join(folder, digest)


def read_record(directory: str) -> Optional[ServerRecord]:
    """The record of the server in `directory`, if one is written and its supervisor lives."""
    try:
        with open(os.path.join(directory, RECORD)) as f:
            record = ServerRecord(**json.load(f))
    except (OSError, ValueError, TypeError):
        return None
    return record if _alive(record.supervisor) else None


def serving(record: ServerRecord) -> bool:
    """Whether the server `record` names still runs its JVM and listens."""
    return _alive(record.jvm) and _listening(record.port)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FileLock:
    """An exclusive `flock` on a file of the server directory, for a `with` block."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._file: Optional[IO[str]] = None

    def __enter__(self) -> FileLock:
        self._file = open_private(self._path)
        fcntl.flock(self._file, fcntl.LOCK_EX)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._file is not None
        self._file.close()


def open_private(path: str) -> IO[str]:
    """`path` opened for appending, created readable and writable by the user alone."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "a")


def count_run(directory: str) -> None:
    """Count a run on the server in `directory` (one byte appended: atomic, from any number of processes)."""
    with open_private(os.path.join(directory, RUNS)) as runs:
        runs.write(".")


def runs_counted(directory: str) -> int:
    """The runs counted since the server in `directory` started."""
    try:
        return os.stat(os.path.join(directory, RUNS)).st_size
    except OSError:
        return 0


def idle_seconds() -> float:
    try:
        return float(settings.WARM_SPARK_IDLE.get() or DEFAULT_IDLE_SECONDS)
    except ValueError:
        return DEFAULT_IDLE_SECONDS


def _free_port(besides: int = 0) -> int:
    """A port free on loopback now (not `besides`), below the kernel's ephemeral range where it can be.

    The JVM binds ports of its own (Spark's RPC, the block manager) to
    whatever the kernel hands out, which could be a port picked from that
    range and let go; Spark Connect then fails to bind its own and exits.
    """
    low = _ephemeral_low()
    for _ in range(100):
        port = secrets.randbelow(low - _LOWEST_PORT) + _LOWEST_PORT if low > _LOWEST_PORT else 0
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            if probe.getsockname()[1] != besides:
                return int(probe.getsockname()[1])
    msg = f"no free port on loopback below {low} for the warm local Spark"
    raise OSError(msg)


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default where it can't be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class Supervisor:
    """Starts the JVM of the server in `directory`, records it, and stops it when idle or asked to."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._jvm: Optional[subprocess.Popen[bytes]] = None
        self._forks: Optional[subprocess.Popen[bytes]] = None
        self._forked_python = ""
        self._stopping = False

    def _path(self, name: str) -> str:
        return os.path.join(self._directory, name)

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._asked_to_stop)
        signal.signal(signal.SIGINT, self._asked_to_stop)
        token, cores = secrets.token_urlsafe(32), os.cpu_count() or 2
        try:
            for _ in range(_START_ATTEMPTS):
                port = _free_port()
                ui_port = _free_port(besides=port)
                self._jvm = self._start_jvm(port, ui_port, token, cores)
                if self._wait_ready(port):
                    break
                if self._stopping or self._jvm.poll() is None:  # asked to stop, or never listened
                    return 1
                self._say(f"the JVM exited ({self._jvm.returncode}) before it listened on port {port}")
            else:
                return 1
            record = ServerRecord(port, token, str(uuid.uuid4()), cores, os.getpid(), self._jvm.pid, ui_port)
            write_private(self._path(RUNS), b"")
            write_private(self._path(RECORD), json.dumps(asdict(record)).encode())
            self._say(f"listening on 127.0.0.1:{port}")
            try:
                self._watch()
                if self._stopping:
                    self._say("asked to stop")
                elif self._jvm.poll() is not None:
                    self._say(f"the JVM exited ({self._jvm.returncode}); the next run starts a new server")
            finally:
                with FileLock(self._path(LOCK)):
                    self._forget()
        finally:
            self._stop_jvm()
            if self._forks is not None:
                self._forks.kill()
                self._forks.wait()
        return 0

    def _say(self, line: str) -> None:
        """Add `line` to the server's log, stamped."""
        with open_private(self._path(LOG)) as log:
            log.write(f"{time.strftime('%H:%M:%S')} flowspark supervisor: {line}\n")

    def _asked_to_stop(self, signum: int, frame: object) -> None:
        self._stopping = True

    def _start_jvm(self, port: int, ui_port: int, token: str, cores: int) -> subprocess.Popen[bytes]:
        from flowspark.engine.spark.session import jvm_environment, spark_home, spark_settings

        settings = spark_settings(True, "", {})
        settings.update(
            {
                "spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port),
                # The UI of every run's queries, on loopback (`jvm_environment`), without its kill buttons.
                "spark.ui.enabled": "true",
                "spark.ui.port": str(ui_port),
                # Each run's queries are small and the server stays up: every
                # Python worker it starts is worth keeping for the next run.
                "spark.sql.adaptive.enabled": "false",
                # Runs share a session per parallelism (`ServerRecord.session_url`) for the server's
                # whole life: one that expired would be refused from then on, and its replacement
                # would start Python worker pools of its own.
                "spark.connect.session.manager.defaultSessionTimeout": "-1",
                # What the UI keeps of past runs lives in the JVM's heap, which grows with it up to
                # these counts: the server's recent runs, not a day's.
                "spark.ui.retainedJobs": "200",
                "spark.ui.retainedStages": "200",
                "spark.ui.retainedTasks": "10000",
                "spark.sql.ui.retainedExecutions": "100",
                "spark.sql.streaming.ui.retainedQueries": "20",
            }
        )
        properties = self._path("spark.properties")
        write_private(properties, "".join(f"{k}={_escaped(v)}\n" for k, v in settings.items()).encode())
        home = spark_home()
        command = [
            os.path.join(home, "bin", "spark-submit"),
            "--class",
            _SERVER_CLASS,
            "--name",
            "flowspark local Spark",
            "--master",
            f"local[{cores}]",
            "--properties-file",
            properties,
        ]
        env = dict(
            os.environ,
            SPARK_HOME=home,
            SPARK_CONNECT_MODE="0",
            SPARK_CONNECT_AUTHENTICATE_TOKEN=token,
            PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
            **jvm_environment(local=True),
        )
        env["PYSPARK_PYTHON"] = self._start_forks(env["PYSPARK_PYTHON"])
        log = open(self._path(LOG), "ab")
        os.fchmod(log.fileno(), 0o600)
        with log:
            return subprocess.Popen(
                command,
                env=env,
                cwd=self._directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=fork_server.die_with_parent,
            )

    def _start_forks(self, python: str) -> str:
        """Start the fork server (`fork_server`); the Python Spark is to run: the program that uses it, or `python`."""
        if self._forks is None:
            log = open(self._path(LOG), "ab")
            with log:
                started = fork_server.start(self._directory, python, connect=True, output=log.fileno())
            if started is None:
                return python
            self._forks, self._forked_python = started
        return self._forked_python

    def _wait_ready(self, port: int) -> bool:
        deadline = time.monotonic() + READY_SECONDS
        assert self._jvm is not None
        while time.monotonic() < deadline and not self._stopping:
            if self._jvm.poll() is not None:
                return False
            if _listening(port):
                return True
            time.sleep(0.1)
        return False

    def _watch(self) -> None:
        """Wait until the JVM exits, the supervisor is asked to stop, or nobody has held a lease for the idle time."""
        assert self._jvm is not None
        idle_since: Optional[float] = None
        limit = idle_seconds()
        level: Optional[ServerUsage] = None
        capped = time.monotonic()
        while not self._stopping and self._jvm.poll() is None:
            if time.monotonic() - capped > _LOG_CHECK_SECONDS:
                cap_log(self._path(LOG))
                capped = time.monotonic()
            if self._leased():
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
                level, why = self._measured(level)
                if why and self._stopped_idle(why):
                    return
            elif time.monotonic() - idle_since > limit:
                if self._stopped_idle(f"no run has used the server for {limit:g} s: stopping"):
                    return
                idle_since = None  # a run took the lease just now
            time.sleep(0.5)

    def _measured(self, level: Optional[ServerUsage]) -> Tuple[Optional[ServerUsage], str]:
        """The server's level (its usage once it served `SETTLED_RUNS` runs), and why it should stop if it outgrew it."""
        if runs_counted(self._directory) < SETTLED_RUNS:
            return level, ""
        now = usage_of(os.getpid(), self._directory)
        if level is None:
            return now, ""
        if not outgrown(level, now):
            return level, ""
        return level, (
            f"it holds {now.open_files} open files and {now.threads} threads, against {level.open_files} and "
            f"{level.threads} after its first runs (Spark keeps some of every streaming query): "
            "stopping while no run uses it; the next run starts a new server"
        )

    def _stopped_idle(self, why: str) -> bool:
        """Stop (forget the server) for `why` if still no run holds the lease."""
        with FileLock(self._path(LOCK)):
            if self._leased():
                return False
            self._forget()
            self._say(why)
            return True

    def _leased(self) -> bool:
        """Whether some process holds the lease (a shared `flock` on it)."""
        with open_private(self._path(LEASE)) as lease:
            try:
                fcntl.flock(lease, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False

    def _forget(self) -> None:
        try:
            os.remove(self._path(RECORD))
        except FileNotFoundError:
            pass

    def _stop_jvm(self) -> None:
        if self._jvm is None or self._jvm.poll() is not None:
            return
        self._jvm.terminate()
        try:
            self._jvm.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._jvm.kill()
            self._jvm.wait()


_LOG_CHECK_SECONDS = 30.0


def cap_log(path: str, limit: int = LOG_LIMIT, kept: int = LOG_KEPT) -> None:
    r"""Cut the log at `path` to its last `kept` bytes (from a line's start) once it is over `limit`.

    Spark's Python workers write a few lines per streaming query to the
    server's log, which the JVM holds open for appending: so a server that
    lasts a day keeps only its recent lines.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "server.log")
    >>> _ = open(path, "w").write("".join(f"line {n}\n" for n in range(1000)))
    >>> cap_log(path, limit=1000, kept=20)
    >>> open(path).read()
    'line 998\nline 999\n'
    """
    try:
        with open(path, "r+b") as log:
            size = log.seek(0, os.SEEK_END)
            if size <= limit:
                return
            log.seek(size - kept)
            tail = log.read()
            start = tail.find(b"\n") + 1
            log.seek(0)
            log.write(tail[start:])
            log.truncate()
    except OSError:
        pass


def _escaped(value: str) -> str:
    """`value` as a Java properties file holds it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def start_supervisor(directory: str) -> subprocess.Popen[bytes]:
    """Start the supervisor of a new server in `directory`, detached from this process and its terminal.

    Its output goes nowhere: a run's own output streams must not stay open
    (a caller that waits for them would wait for the server), and the
    JVM's output goes to its log.
    """
    make_dirs(directory)
    return subprocess.Popen(
        [sys.executable, "-m", __name__, directory],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=directory,
    )


def stop(directory: str) -> Optional[ServerRecord]:
    """Stop the server recorded in `directory` (its supervisor stops its JVM); the record of the one stopped, if any."""
    record = read_record(directory)
    if record is not None:
        os.kill(record.supervisor, signal.SIGTERM)
    return record


USAGE = f"""usage: python -m {__name__} DIR

The supervisor of a new warm server in DIR (a run starts it); `python -m flowspark.warm` looks at it and stops it.
"""


def main(argv: List[str]) -> int:
    """The supervisor of the server in the directory given (a run that needs a server starts it)."""
    if len(argv) != 1 or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr, end="")
        return 2
    with open_private(os.path.join(argv[0], LOG)) as log:
        os.dup2(log.fileno(), sys.stderr.fileno())  # a failure of the supervisor itself, told where the JVM's are
    return Supervisor(argv[0]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
