"""The warm local Spark: started by the first run, reused by later ones, gone when idle or crashed, closed to others."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest
from support.processes import children, command_line

from flowspark._settings import WARM_SPARK_DIR, WARM_SPARK_IDLE
from flowspark.engine.connect.connect_server import LEASE, RECORD, ServerRecord, read_record, server_dir, serving

FLOW = """
import os
import flowspark.operators as op
from flowspark.connectors.stdio import StdOutSink
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource

flow = Dataflow("warm")
words = op.input("inp", flow, TestingSource(["a", "b", "a"]))
counts = op.count_final("count", words, lambda word: word)
op.output("out", counts, StdOutSink())

seen = Dataflow("seen")
where = op.input("inp", seen, TestingSource(["x"]))
op.output("out", op.map("look", where, lambda _: (os.getcwd(), os.environ.get("FLOWSPARK_TEST_VALUE"))), StdOutSink())

def warn(item):
    import logging, warnings
    logging.getLogger("user").warning("logged %s", item)
    warnings.warn(f"warned {item}")
    return item

noisy = Dataflow("noisy")
op.output("out", op.map("warn", op.input("inp", noisy, TestingSource(["x"])), warn), StdOutSink())

def nap(item):
    import time
    time.sleep(6)
    return item

slow = Dataflow("slow")
op.output("out", op.map("nap", op.input("inp", slow, TestingSource(["x"])), nap), StdOutSink())
"""


@contextlib.contextmanager
def _servers_folder() -> Iterator[Path]:
    """A new folder for warm servers, every server in it stopped and the folder removed afterwards.

    A short path of `/tmp`, not pytest's: a server's fork server listens on a
    Unix socket in its folder, whose path Linux limits to 107 bytes.
    """
    folder = Path(tempfile.mkdtemp(prefix="warm-"))
    try:
        yield folder
    finally:
        _stop_servers(folder)
        shutil.rmtree(folder, ignore_errors=True)


def _stop_servers(folder: Path) -> None:
    """Ask the supervisor of every server in `folder` that still runs to stop, and wait until each has.

    A supervisor stops its JVM before it exits; one that takes longer than a
    minute is killed, its JVM with it.  A record left by a supervisor that
    was killed names no process to wait for (`read_record`).
    """
    supervisors = [
        record.supervisor
        for record in (read_record(str(found.parent)) for found in folder.glob(f"*/{RECORD}"))
        if record is not None
    ]
    for pid in supervisors:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    if not _wait_for(lambda: all(_gone(pid) for pid in supervisors), 60):
        for pid in supervisors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def warm_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder of its own for the test's warm servers (a test that stops, kills or fakes one)."""
    with _servers_folder() as folder:
        monkeypatch.setenv(WARM_SPARK_DIR.name, str(folder))
        yield folder


@dataclass(frozen=True)
class SharedServer:
    """The module's warm server, which tests that only run flows on it and look at it share."""

    folder: Path
    """The folder of its server directory (`FLOWSPARK_WARM_SPARK_DIR`)."""
    directory: str
    """Its server directory: the one the first run made in the new folder.

    An edit of flowspark's code while the module runs gives later runs a
    directory (and server) of their own (`server_dir`); this one stays.
    """
    first: subprocess.CompletedProcess[str]
    """The run that started it."""
    record: ServerRecord
    """Its record right after that run."""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """A warm server started by a run, for the tests that leave it running; stopped after the module.

    Each start of a server costs tens of seconds on a loaded machine; these
    tests need a server that runs, not one of their own.
    """
    with _servers_folder() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setenv(WARM_SPARK_DIR.name, str(folder))
        first = _run(tmp_path_factory.mktemp("first"))
        assert first.returncode == 0, first.stderr
        (directory,) = [str(made.parent) for made in folder.glob(f"*/{RECORD}")]
        record = read_record(directory)
        assert record is not None
        yield SharedServer(folder, directory, first, record)


def _run(cwd: Path, target: str = "warm_flows:flow", **env: str) -> subprocess.CompletedProcess[str]:
    """A run of `target` (of `FLOW`, written to `cwd`) from `cwd`, with `env` added to its environment."""
    (cwd / "warm_flows.py").write_text(FLOW)
    return subprocess.run(
        [sys.executable, "-m", "flowspark.run", target, "--no-progress"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )


def _record() -> Optional[ServerRecord]:
    return read_record(server_dir())


def _log() -> str:
    return (Path(server_dir()) / "server.log").read_text(errors="replace")


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_run_starts_a_private_server_that_a_later_run_reuses(shared: SharedServer, tmp_path: Path) -> None:
    assert shared.first.returncode == 0, shared.first.stderr
    assert sorted(shared.first.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    record = shared.record
    again = _run(tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    assert server_dir() == shared.directory, "flowspark's code changed: later runs get a server of their own"
    assert _record() == record
    # Below the kernel's ephemeral ports, which the JVM's own sockets take and Spark Connect's port must not be.
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert record.port < ephemeral and record.ui_port < ephemeral
    directory = Path(shared.directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_a_run_lends_its_directory_and_variables_to_the_servers_tasks(shared: SharedServer, tmp_path: Path) -> None:
    done = _run(tmp_path, "warm_flows:seen", FLOWSPARK_TEST_VALUE="from the run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [repr((str(tmp_path), "from the run"))]


def test_what_a_step_writes_to_standard_error_reaches_the_runs(shared: SharedServer, tmp_path: Path) -> None:
    done = _run(tmp_path, "warm_flows:noisy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["x"]
    assert "logged x" in done.stderr
    assert "warned x" in done.stderr


def test_a_server_stops_once_idle_for_the_idle_time_but_not_under_a_run_another_process_started(
    warm_dir: Path, tmp_path: Path
) -> None:
    """A server whose idle time is 2 s outlives a run of 6 s that did not start it, then stops on its own.

    The test holds a lease of its own from the end of the run that started
    the server until the slow run holds one: on a loaded machine a run can
    take longer than the idle time to get that far.
    """
    started = _run(tmp_path, **{WARM_SPARK_IDLE.name: "2"})
    assert started.returncode == 0, started.stderr
    record = _record()
    assert record is not None
    directory = server_dir()
    with _lease(directory):
        slow = subprocess.Popen(
            [sys.executable, "-m", "flowspark.run", "warm_flows:slow", "--no-progress"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(lambda: _holds_lease(slow.pid, directory) or slow.poll() is not None, 120)
        leased = _holds_lease(slow.pid, directory)
    out, err = slow.communicate(timeout=300)
    assert slow.returncode == 0, err
    assert out.splitlines() == ["x"]
    assert leased  # and so it alone kept the server for the rest of its nap, longer than the idle time
    assert _record() == record
    assert _wait_for(lambda: _gone(record.supervisor) and _gone(record.jvm), 60)
    assert not (Path(directory) / RECORD).exists()
    assert "flowspark supervisor: no run has used the server for 2 s: stopping" in _log()


@contextlib.contextmanager
def _lease(directory: str) -> Iterator[None]:
    """Hold the lease of the server in `directory` as a run does (a shared `flock`), for a `with` block."""
    with open(os.path.join(directory, LEASE), "a") as lease:
        fcntl.flock(lease, fcntl.LOCK_SH)
        yield


def _holds_lease(pid: int, directory: str) -> bool:
    """Whether process `pid` holds the lease of the server in `directory`, as `/proc/locks` lists it."""
    facts = os.stat(os.path.join(directory, LEASE))
    lease = f"{os.major(facts.st_dev):02x}:{os.minor(facts.st_dev):02x}:{facts.st_ino}"
    held = ["FLOCK", "ADVISORY", "READ", str(pid), lease]
    return any(line.split()[1:6] == held for line in Path("/proc/locks").read_text().splitlines())


def test_a_dead_jvm_or_a_server_no_longer_listening_is_replaced_and_a_dying_supervisor_takes_jvm_and_forks_along(
    warm_dir: Path, tmp_path: Path
) -> None:
    """Three servers in turn, each broken by a step, the second and third started by the run after the break.

    The first server's JVM dies (its supervisor forgets the server); the
    second's supervisor stops answering as its JVM dies (the run that finds
    its record kills it); the third's supervisor is killed (its JVM and fork
    server die with it).  One test, for three server starts instead of five.
    """
    assert _run(tmp_path).returncode == 0
    crashed = _record()
    assert crashed is not None
    os.kill(crashed.jvm, signal.SIGKILL)
    assert _wait_for(lambda: _gone(crashed.supervisor), 60)
    assert _record() is None
    assert "flowspark supervisor: the JVM exited (-9); the next run starts a new server" in _log()
    again = _run(tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    stale = _record()
    assert stale is not None and stale.supervisor != crashed.supervisor

    os.kill(stale.supervisor, signal.SIGSTOP)  # it can't forget its server, whose JVM now dies
    try:
        os.kill(stale.jvm, signal.SIGKILL)
        assert _wait_for(lambda: not serving(stale), 60)
        again = _run(tmp_path)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the run killed it
            os.kill(stale.supervisor, signal.SIGCONT)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    last = _record()
    assert last is not None and last.supervisor != stale.supervisor
    assert _gone(stale.supervisor)

    forks = _fork_server(last)
    forked = children(forks)
    os.kill(last.supervisor, signal.SIGKILL)
    assert _wait_for(lambda: all(_gone(pid) for pid in [last.jvm, forks, *forked]), 60)
    assert _record() is None


def _fork_server(record: ServerRecord) -> int:
    (forks,) = [pid for pid in children(record.supervisor) if "fork_server" in command_line(pid)]
    return forks


def test_sparks_python_processes_are_forked_from_the_servers_warm_python(shared: SharedServer) -> None:
    record = read_record(shared.directory)
    assert record is not None
    assert children(_fork_server(record))  # Spark's worker daemon, at least, outlives the run that started the server


def test_a_recorded_server_that_listens_but_does_not_answer_fails_the_run_naming_its_log(
    warm_dir: Path, tmp_path: Path
) -> None:
    directory = Path(server_dir())
    directory.mkdir(parents=True, mode=0o700)
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()
        threading.Thread(target=_hang_up_on_everyone, args=(mute,), daemon=True).start()
        stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        try:
            record = ServerRecord(mute.getsockname()[1], "token", str(uuid.uuid4()), 2, stand_in.pid, stand_in.pid, 0)
            (directory / RECORD).write_text(json.dumps(asdict(record)))
            done = _run(tmp_path)
        finally:
            stand_in.kill()
            stand_in.wait()
            (directory / RECORD).unlink()
    assert done.returncode != 0
    assert f"the warm local Spark's log is {str(directory / 'server.log')!r}" in done.stderr
    assert "Traceback" not in done.stderr


def _hang_up_on_everyone(listener: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while True:
            listener.accept()[0].close()


def test_a_client_without_the_token_is_refused(shared: SharedServer) -> None:
    record = read_record(shared.directory)
    assert record is not None
    probe = (
        "import sys\n"
        "from pyspark.sql.connect.session import SparkSession\n"
        "try:\n"
        "    SparkSession.builder.remote(sys.argv[1]).create().range(1).collect()\n"
        "except Exception as ex:\n"
        "    print(type(ex).__name__, str(ex)[:300])\n"
        "else:\n"
        "    print('served')\n"
    )
    for url in (f"sc://127.0.0.1:{record.port}", f"sc://localhost:{record.port}/;token=guess"):
        done = subprocess.run(
            [sys.executable, "-c", probe, url], capture_output=True, text=True, timeout=120, check=False
        )
        assert "served" not in done.stdout, url
        assert done.stdout.strip(), done.stderr


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to act as another user"
)
def test_another_user_cannot_read_the_servers_token(shared: SharedServer) -> None:
    os.chmod(shared.folder, 0o755)  # so that only the server's own directory and files keep the other user out
    record_file = Path(shared.directory) / RECORD
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(record_file)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert "Permission denied" in done.stderr
