"""What a run exposes to other local users: its ports, its files, its processes.

A real run is started as `python -m flowspark.run` while another process
prods every port the run's processes listen on; the run must finish with
the right output.  The recovery directory's files must be the user's alone.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Set, Tuple

import pytest

from flowspark._settings import WARM_SPARK_DIR
from flowspark.engine.connect.connect_server import RECORD
from flowspark.engine.util.private_files import private_dir, read_trusted, write_private
from flowspark.errors import FlowsparkRuntimeError

SLOW_FLOW = """
import time
from datetime import datetime, timedelta, timezone
import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.connectors.files import FileSink
from flowspark.dataflow import Dataflow
from flowspark.inputs import DynamicSource, StatelessSourcePartition

ALIGN = datetime(2024, 1, 1, tzinfo=timezone.utc)

class _Slow(StatelessSourcePartition):
    def __init__(self):
        self.n = 0
    def next_batch(self):
        if self.n >= 60:
            raise StopIteration()
        time.sleep(0.15)
        self.n += 1
        return [(f"k{self.n % 3}", self.n)]

class Slow(DynamicSource):
    def build(self, step_id, worker_index, worker_count):
        return _Slow()

flow = Dataflow("prodded")
keyed = op.input("inp", flow, Slow())
clock = win.EventClock(lambda v: ALIGN + timedelta(seconds=v), wait_for_system_duration=timedelta(hours=1))
windower = win.TumblingWindower(timedelta(seconds=10), ALIGN)
windows = win.fold_window("sum", keyed, clock, windower, lambda: 0, lambda a, v: a + v, lambda a, b: a + b)
lines = op.map("fmt", windows.down, lambda kv: (kv[0], f"{kv[0]} {kv[1][0]} {kv[1][1]}"))
op.output("out", lines, FileSink(OUT))
"""


def _tree(root: int) -> List[int]:
    """`root` and every process below it."""
    pids, index = [root], 0
    while index < len(pids):
        pid = pids[index]
        index += 1
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    pids.extend(int(child) for child in f.read().split())
        except OSError:
            pass
    return pids


def _listening(pids: List[int]) -> Set[Tuple[str, int]]:
    """`(address, port)` of every TCP socket the processes listen on, from `/proc`."""
    inodes: Set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found: Set[Tuple[str, int]] = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        with open(f"/proc/net/{table}") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                    continue
                address, port = fields[1].split(":")
                raw = bytes.fromhex(address)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add((socket.inet_ntop(family, words), int(port, 16)))
    return found


def _is_loopback(address: str) -> bool:
    return address.startswith(("127.", "::ffff:127.")) or address == "::1"


def _prod(port: int, keep: List[socket.socket]) -> None:
    """Junk frames, an oversized frame, a pickle and silent connections to one port."""
    junk = [
        struct.pack("!i", 1 << 30) + b"x" * 1024,
        b"GET / HTTP/1.0\r\n\r\n",
        os.urandom(2048),
        struct.pack("!i", 64) + pickle.dumps(("initial_offset", ())),
    ]
    for payload in junk:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as peer:
                peer.sendall(payload)
                peer.settimeout(0.2)
                try:
                    peer.recv(4096)
                except OSError:
                    pass
        except OSError:
            pass
    for _ in range(3):
        try:
            keep.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            pass


def _warm_servers(folder: Path) -> List[int]:
    """The supervisors of the warm local Sparks recorded under `folder`."""
    pids = []
    for record in folder.glob(f"*/{RECORD}"):
        try:
            pids.append(int(json.loads(record.read_text())["supervisor"]))
        except (OSError, ValueError, KeyError):
            pass
    return pids


@pytest.mark.parametrize("warm", ["0", "auto"], ids=["own-spark", "warm-spark"])
def test_a_run_listens_on_loopback_only_and_finishes_while_its_ports_are_prodded(tmp_path: Path, warm: str) -> None:
    """The run's own ports, and those of the warm local Spark it runs on (its Spark Connect server, UI and RPC)."""
    out = tmp_path / "out.txt"
    servers = tmp_path / "servers"
    (tmp_path / "prodded_flow.py").write_text(f"OUT = {str(out)!r}\n" + SLOW_FLOW)
    env = dict(os.environ, FLOWSPARK_WARM_SPARK=warm, **{WARM_SPARK_DIR.name: str(servers)})
    run = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", "prodded_flow:flow"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    kept: List[socket.socket] = []
    prodded: Set[int] = set()
    try:
        deadline = time.monotonic() + 90
        while run.poll() is None and time.monotonic() < deadline and len(prodded) < 6:
            pids = _tree(run.pid) + [pid for server in _warm_servers(servers) for pid in _tree(server)]
            for address, port in _listening(pids):
                assert _is_loopback(address), f"a run listens on {address}:{port}"
                if port not in prodded:
                    prodded.add(port)
                    _prod(port, kept)
            time.sleep(0.5)
        _, err = run.communicate(timeout=240)
    finally:
        for peer in kept:
            peer.close()
        if run.poll() is None:
            run.kill()
        for server in _warm_servers(servers):
            os.kill(server, signal.SIGTERM)
    assert run.returncode == 0, err
    assert len(prodded) >= 3  # the driver link, the Spark UI, Spark's RPC and block manager
    sums = {}
    for line in out.read_text().splitlines():
        key, window, total = line.split()
        sums[(key, int(window))] = int(total)
    expected = {}
    for n in range(1, 61):
        expected[(f"k{n % 3}", n // 10)] = expected.get((f"k{n % 3}", n // 10), 0) + n
    assert sums == expected


def test_recovery_files_are_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        directory = tmp_path / "recovery"
        private_dir(str(directory))
        write_private(str(directory / "ledger"), b"data")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(directory / "ledger").st_mode) == 0o600
    assert read_trusted(str(directory / "ledger")) == b"data"


def test_a_recovery_directory_or_file_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.raises(FlowsparkRuntimeError, match="can be written by other users"):
        private_dir(str(shared))
    planted = tmp_path / "ledger"
    planted.write_bytes(pickle.dumps(1))
    os.chmod(planted, 0o666)
    with pytest.raises(FlowsparkRuntimeError, match="chmod 600"):
        read_trusted(str(planted))


def test_a_run_keeps_its_recovery_directory_private(tmp_path: Path) -> None:
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.recovery import RecoveryConfig
    from flowspark.testing import TestingSink, TestingSource, run_main

    old = os.umask(0)
    try:
        flow = Dataflow("private")
        op.output("out", op.input("inp", flow, TestingSource([1, 2])), TestingSink([]))
        run_main(flow, recovery_config=RecoveryConfig(tmp_path / "rec"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "rec").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "rec" / "query").st_mode) == 0o700
    for name in ("flowspark-sinks.pkl", "flowspark-meta.json", "flowspark-run-id"):
        assert stat.S_IMODE(os.stat(tmp_path / "rec" / name).st_mode) == 0o600, name


@pytest.mark.parametrize("delay", [0.4, 1.0])
def test_ctrl_c_while_spark_starts_leaves_no_process_behind(tmp_path: Path, delay: float) -> None:
    """A run's own Spark (a warm server, started for later runs too, outlives the run on purpose)."""
    (tmp_path / "tiny_flow.py").write_text(
        "import flowspark.operators as op\nfrom flowspark.dataflow import Dataflow\n"
        "from flowspark.testing import TestingSource\nfrom flowspark.connectors.stdio import StdOutSink\n"
        "flow = Dataflow('tiny')\nop.output('out', op.input('inp', flow, TestingSource([1])), StdOutSink())\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-m", "flowspark.run", "tiny_flow:flow"],
        cwd=tmp_path,
        env=dict(os.environ, FLOWSPARK_WARM_SPARK="0"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(delay)
    started = set(_tree(run.pid)) - {run.pid}
    os.kill(run.pid, signal.SIGINT)
    run.wait(timeout=60)
    time.sleep(2)
    left = [pid for pid in started if os.path.exists(f"/proc/{pid}") and Path(f"/proc/{pid}/cmdline").read_bytes()]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []
