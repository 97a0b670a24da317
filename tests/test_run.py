"""`python -m flowspark.run`: finding the flow, exit codes and messages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional

import pytest
from support.failures import usage_error
from support.ports import free_port
from support.processes import run_module

from flowspark.run import locate_flow

FLOWS = '''
import os

import flowspark.operators as op
from flowspark.dataflow import Dataflow
from flowspark.testing import TestingSource
from flowspark.connectors.stdio import StdOutSink
from flowspark.inputs import DynamicSource, StatelessSourcePartition

def make(n, word="x"):
    flow = Dataflow("made")
    s = op.input("inp", flow, TestingSource([word] * n))
    op.output("out", s, StdOutSink())
    return flow

def explode(x):
    raise ValueError("bad item " + str(x))

broken = Dataflow("broken")
op.output("out", op.map("explode", op.input("inp", broken, TestingSource([1])), explode), StdOutSink())
not_a_flow = 3

class _Once(StatelessSourcePartition):
    def __init__(self, item):
        self._left = [item]

    def next_batch(self):
        if not self._left:
            raise StopIteration()
        batch, self._left = self._left, []
        return batch


class WorkerNames(DynamicSource):
    def build(self, step_id, worker_index, worker_count):
        return _Once(f"{worker_index}/{worker_count}")


def workers():
    flow = Dataflow("workers")
    op.output("out", op.input("inp", flow, WorkerNames()), StdOutSink())
    return flow

class _Gated(StatelessSourcePartition):
    """Emits "started", then nothing until a file named `go` exists in the working folder."""

    def __init__(self):
        self._started = False

    def next_batch(self):
        if not self._started:
            self._started = True
            return ["started"]
        if os.path.exists("go"):
            raise StopIteration()
        return []


class Gated(DynamicSource):
    def build(self, step_id, worker_index, worker_count):
        return _Gated()


def gated():
    flow = Dataflow("gated")
    op.output("out", op.input("inp", flow, Gated()), StdOutSink())
    return flow

def merged():
    flow = Dataflow("merged")
    odd = op.input("odd", flow, TestingSource([1, 3, 5]))
    even = op.input("even", flow, TestingSource([2, 4, 6]))
    op.output("out", op.merge("both", odd, even), StdOutSink())
    return flow
'''


@pytest.fixture()
def flows_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_flows.py"
    path.write_text(FLOWS)
    return path


def test_locate_by_path_factory_and_errors(flows_file: Path) -> None:
    flow = locate_flow(f"{flows_file}:make(2, word='y')")
    assert flow.flow_id == "made"
    with pytest.raises(AttributeError, match="Failed to find attribute 'nope'"):
        locate_flow(f"{flows_file}:nope")
    with pytest.raises(TypeError, match="valid flowspark dataflow"):
        locate_flow(f"{flows_file}:not_a_flow")
    with pytest.raises(ImportError, match="Could not import"):
        locate_flow("no_such_module_here:flow")


def _cli(*args: str, cwd: Path) -> "subprocess.CompletedProcess[str]":
    return run_module("flowspark.run", *args, cwd=cwd, timeout=300)


@pytest.mark.quick
def test_cli_runs_a_factory_and_reports_failures(flows_file: Path) -> None:
    ok = _cli("my_flows:make(3, word='hi')", "-w", "1", cwd=flows_file.parent)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines() == ["hi", "hi", "hi"]
    failed = _cli("my_flows:broken", cwd=flows_file.parent)
    assert failed.returncode != 0
    assert "broken.explode" in failed.stderr and "bad item 1" in failed.stderr
    assert "at org.apache.spark" not in failed.stderr
    # The user's own traceback: their file, line and code, and none of flowspark's frames.
    assert f'File "{flows_file}", line 17, in explode' in failed.stderr
    assert 'raise ValueError("bad item " + str(x))' in failed.stderr
    assert "flowspark/engine" not in failed.stderr and "pyspark" not in failed.stderr
    usage = _cli("my_flows:make(1)", "-b", "5", cwd=flows_file.parent)
    assert usage.returncode == 2 and "-b/--backup-interval needs" in usage.stderr


def _other_process(flows_file: Path, *args: str, env: Optional[Dict[str, str]] = None) -> "subprocess.Popen[str]":
    """`python -m flowspark.run` started for a process other than 0, its stderr in `other.err` beside the flows."""
    with open(flows_file.parent / "other.err", "w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "flowspark.run", *args],
            cwd=flows_file.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )


def _logged(flows_file: Path, words: str, proc: "subprocess.Popen[str]") -> None:
    """Wait until the other process's stderr holds `words`."""
    deadline = time.monotonic() + 120
    while words not in (flows_file.parent / "other.err").read_text():
        assert proc.poll() is None and time.monotonic() < deadline, (flows_file.parent / "other.err").read_text()
        time.sleep(0.05)


def test_a_bytewax_multi_process_launch_runs_the_flow_once_and_the_others_end_with_process_0(flows_file: Path) -> None:
    addresses = f"127.0.0.1:{free_port()};127.0.0.1:{free_port()}"
    other = _other_process(flows_file, "my_flows:broken", "-i", "1", "-a", addresses)
    try:
        failed = _cli("my_flows:broken", "-i", "0", "-a", addresses, cwd=flows_file.parent)
        assert failed.returncode == 1
        assert other.wait(timeout=60) == 1
    finally:
        other.kill()
    said = (flows_file.parent / "other.err").read_text()
    assert "flowspark: process 1 of 2" in said and "process 0 runs the whole flow" in said
    assert "process 1: process 0 ended its run with status 1" in said
    assert other.stdout is not None and other.stdout.read() == ""


def test_bytewax_kubernetes_chart_pods_stay_while_pod_0_runs_the_flow_and_wait_for_it_to_come_back(
    flows_file: Path,
) -> None:
    """The chart names each pod `<statefulset>-<n>` and lists every pod's address in a file: only pod 0 runs the flow.

    The other pods stay up while it runs (a StatefulSet restarts a pod
    that exits), through a restart of pod 0, and end with its status.
    """
    hosts = flows_file.parent / "hosts.txt"
    hosts.write_text(f"127.0.0.1:{free_port()}\n127.0.0.1:{free_port()}\n\n")
    env = dict(os.environ, BYTEWAX_STATEFULSET_NAME="flow", BYTEWAX_HOSTFILE_PATH=str(hosts))
    other = _other_process(flows_file, "my_flows:gated()", env=dict(env, BYTEWAX_POD_NAME="flow-1"))
    pod_0 = dict(env, BYTEWAX_POD_NAME="flow-0")
    try:
        first = subprocess.Popen(
            [sys.executable, "-m", "flowspark.run", "my_flows:gated()"],
            cwd=flows_file.parent,
            env=pod_0,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        _logged(flows_file, "is running the flow", other)
        assert first.stdout is not None and first.stdout.readline() == "started\n"
        os.killpg(first.pid, signal.SIGKILL)  # pod 0 lost: its pod restarts
        first.wait()
        _logged(flows_file, "went away without a status", other)
        (flows_file.parent / "go").touch()
        again = subprocess.run(
            [sys.executable, "-m", "flowspark.run", "my_flows:gated()", "-w", "1"],
            cwd=flows_file.parent,
            env=pod_0,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines() == ["started", "started"]  # a worker per pod
        assert other.wait(timeout=60) == 0
    finally:
        other.kill()
    assert "process 1 of 2" in (flows_file.parent / "other.err").read_text()


def test_cluster_main_outside_process_0_returns_without_running() -> None:
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, cluster_main

    out: list = []
    flow = Dataflow("multi")
    op.output("out", op.input("inp", flow, TestingSource([1, 2])), TestingSink(out))
    cluster_main(flow, ["a:1", "b:1"], 1)
    assert out == []
    cluster_main(flow, ["a:1", "b:1"], 0)
    assert out == [1, 2]


@pytest.mark.quick
def test_one_worker_gives_bytewax_round_order(flows_file: Path) -> None:
    run = _cli("my_flows:merged()", "-w", "1", cwd=flows_file.parent)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["1", "2", "3", "4", "5", "6"]


def test_bytewax_testing_launcher_runs_once_with_every_process_workers(flows_file: Path) -> None:
    """`python -m bytewax.testing -p 2 -w 2` starts two processes of two workers; here one run has the four."""
    spread = run_module(
        "flowspark.testing", "my_flows:workers()", "-p", "2", "-w", "2", "-s", "0", cwd=flows_file.parent, timeout=300
    )
    assert spread.returncode == 0, spread.stderr
    assert sorted(spread.stdout.splitlines()) == ["0/4", "1/4", "2/4", "3/4"]
    single = run_module("flowspark.testing", "my_flows:merged()", cwd=flows_file.parent, timeout=300)
    assert single.returncode == 0, single.stderr
    assert single.stdout.splitlines() == ["1", "2", "3", "4", "5", "6"]


def test_cli_main_runs_a_flow_from_a_program_as_bytewax_s_does() -> None:
    import flowspark.operators as op
    from flowspark.dataflow import Dataflow
    from flowspark.run import RecoveryConfig, cli_main
    from flowspark.testing import TestingSink, TestingSource

    out: list = []
    flow = Dataflow("from_a_program")
    op.output(
        "out", op.map("double", op.input("inp", flow, TestingSource([1, 2, 3])), lambda x: 2 * x), TestingSink(out)
    )
    cli_main(flow, process_id=1, addresses=["a:1", "b:1"])
    assert out == []
    cli_main(flow)
    assert out == [2, 4, 6]
    assert RecoveryConfig.__module__ == "flowspark.recovery"


def test_a_pod_name_the_chart_did_not_make_is_refused_with_what_to_set(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flowspark.run import _parse_args

    monkeypatch.setenv("BYTEWAX_STATEFULSET_NAME", "flow")
    monkeypatch.setenv("BYTEWAX_POD_NAME", "other-pod")
    expected = "BYTEWAX_POD_NAME='other-pod' is not <BYTEWAX_STATEFULSET_NAME>-<number>"
    assert expected in usage_error(capsys, _parse_args, ["my_flows:make(1)"])
