"""The warm local Spark: started by the first run, reused by later ones, gone when idle or crashed, closed to others."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

from conftest import children, command_line
from flowspark.engine.connect.connect_server import RECORD, ServerRecord, read_record, server_dir, serving
from flowspark.settings import WARM_SPARK_DIR, WARM_SPARK_IDLE

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


@pytest.fixture
def warm_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder of its own for the test's warm servers, every one of them stopped afterwards."""
    folder = tmp_path / "servers"
    monkeypatch.setenv(WARM_SPARK_DIR.name, str(folder))
    (tmp_path / "warm_flows.py").write_text(FLOW)
    yield folder
    for record in folder.glob(f"*/{RECORD}"):
        try:
            os.kill(json.loads(record.read_text())["supervisor"], signal.SIGTERM)
        except (OSError, ValueError, KeyError):
            pass
    _wait_for(lambda: not list(folder.glob(f"*/{RECORD}")), 60)


def _run(tmp_path: Path, target: str = "warm_flows:flow", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowspark.run", target, "--no-progress"],
        cwd=tmp_path,
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


def test_a_run_starts_a_private_server_that_a_later_run_reuses(warm_dir: Path, tmp_path: Path) -> None:
    first = _run(tmp_path)
    assert first.returncode == 0, first.stderr
    assert sorted(first.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    record = _record()
    assert record is not None
    again = _run(tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    assert _record() == record
    # Below the kernel's ephemeral ports, which the JVM's own sockets take and Spark Connect's port must not be.
    ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert record.port < ephemeral and record.ui_port < ephemeral
    directory = Path(server_dir())
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_a_run_lends_its_directory_and_variables_to_the_servers_tasks(warm_dir: Path, tmp_path: Path) -> None:
    done = _run(tmp_path, "warm_flows:seen", FLOWSPARK_TEST_VALUE="from the run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [repr((str(tmp_path), "from the run"))]


def test_what_a_step_writes_to_standard_error_reaches_the_runs(warm_dir: Path, tmp_path: Path) -> None:
    done = _run(tmp_path, "warm_flows:noisy")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["x"]
    assert "logged x" in done.stderr
    assert "warned x" in done.stderr


def test_the_server_stops_once_no_run_has_used_it_for_the_idle_time(warm_dir: Path, tmp_path: Path) -> None:
    done = _run(tmp_path, **{WARM_SPARK_IDLE.name: "2"})
    assert done.returncode == 0, done.stderr
    record = _record()
    assert record is not None
    assert _wait_for(lambda: _gone(record.supervisor) and _gone(record.jvm), 60)
    assert not (Path(server_dir()) / RECORD).exists()
    assert "flowspark supervisor: no run has used the server for 2 s: stopping" in _log()


def test_a_run_on_a_server_another_process_started_keeps_it_from_stopping_as_idle(
    warm_dir: Path, tmp_path: Path
) -> None:
    started = _run(tmp_path, **{WARM_SPARK_IDLE.name: "2"})
    assert started.returncode == 0, started.stderr
    record = _record()
    assert record is not None
    slow = _run(tmp_path, "warm_flows:slow")
    assert slow.returncode == 0, slow.stderr
    assert slow.stdout.splitlines() == ["x"]
    assert _record() == record


def test_a_server_whose_jvm_died_is_replaced_by_the_next_run(warm_dir: Path, tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 0
    crashed = _record()
    assert crashed is not None
    os.kill(crashed.jvm, signal.SIGKILL)
    assert _wait_for(lambda: _gone(crashed.supervisor), 30)
    assert _record() is None
    assert "flowspark supervisor: the JVM exited (-9); the next run starts a new server" in _log()
    again = _run(tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    replaced = _record()
    assert replaced is not None and replaced.supervisor != crashed.supervisor


def test_a_server_recorded_but_no_longer_listening_is_replaced_by_the_run_that_finds_it(
    warm_dir: Path, tmp_path: Path
) -> None:
    assert _run(tmp_path).returncode == 0
    stale = _record()
    assert stale is not None
    os.kill(stale.supervisor, signal.SIGSTOP)  # it can't forget its server, whose JVM now dies
    try:
        os.kill(stale.jvm, signal.SIGKILL)
        assert _wait_for(lambda: not serving(stale), 30)
        again = _run(tmp_path)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the run killed it
            os.kill(stale.supervisor, signal.SIGCONT)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == ["('a', 2)", "('b', 1)"]
    replaced = _record()
    assert replaced is not None and replaced.supervisor != stale.supervisor
    assert _gone(stale.supervisor)


def _fork_server(record: ServerRecord) -> int:
    (forks,) = [pid for pid in children(record.supervisor) if "python_forks" in command_line(pid)]
    return forks


def test_sparks_python_processes_are_forked_from_the_servers_warm_python(warm_dir: Path, tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    record = _record()
    assert record is not None
    assert children(_fork_server(record))  # Spark's worker daemon, at least, outlives the run


def test_the_jvm_and_the_fork_server_die_with_their_supervisor(warm_dir: Path, tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 0
    record = _record()
    assert record is not None
    forks = _fork_server(record)
    forked = children(forks)
    os.kill(record.supervisor, signal.SIGKILL)
    assert _wait_for(lambda: all(_gone(pid) for pid in [record.jvm, forks, *forked]), 30)
    assert _record() is None


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


def test_a_client_without_the_token_is_refused(warm_dir: Path, tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 0
    record = _record()
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
def test_another_user_cannot_read_the_servers_token(warm_dir: Path, tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o755)
    os.chmod(warm_dir.parent, 0o755)
    assert _run(tmp_path).returncode == 0
    record_file = Path(server_dir()) / RECORD
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(record_file)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert "Permission denied" in done.stderr
