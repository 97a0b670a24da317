"""`python -m flowspark.run`: finding the flow, exit codes and messages."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_module, usage_error

from flowspark.run import locate_flow

FLOWS = '''
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
    assert f'File "{flows_file}", line 15, in explode' in failed.stderr
    assert 'raise ValueError("bad item " + str(x))' in failed.stderr
    assert "flowspark/engine" not in failed.stderr and "pyspark" not in failed.stderr
    usage = _cli("my_flows:make(1)", "-b", "5", cwd=flows_file.parent)
    assert usage.returncode == 2 and "-b/--backup-interval needs" in usage.stderr


def test_a_bytewax_multi_process_launch_runs_the_flow_once_in_process_0(flows_file: Path) -> None:
    addresses = "host0:2101;host1:2101"
    other = _cli("my_flows:make(2, word='hi')", "-i", "1", "-a", addresses, cwd=flows_file.parent)
    assert other.returncode == 0 and other.stdout == ""
    assert "flowspark: process 1 of 2" in other.stderr and "process 0 runs the whole flow" in other.stderr
    first = _cli("my_flows:make(2, word='hi')", "-i", "0", "-a", addresses, "-w", "1", cwd=flows_file.parent)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["hi", "hi"]


def test_cluster_main_outside_process_0_returns_without_running() -> None:
    from flowspark.dataflow import Dataflow
    from flowspark.testing import TestingSink, TestingSource, cluster_main
    import flowspark.operators as op

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
    spread = run_module("flowspark.testing", "my_flows:workers()", "-p", "2", "-w", "2", "-s", "0", cwd=flows_file.parent, timeout=300)
    assert spread.returncode == 0, spread.stderr
    assert sorted(spread.stdout.splitlines()) == ["0/4", "1/4", "2/4", "3/4"]
    single = run_module("flowspark.testing", "my_flows:merged()", cwd=flows_file.parent, timeout=300)
    assert single.returncode == 0, single.stderr
    assert single.stdout.splitlines() == ["1", "2", "3", "4", "5", "6"]


def test_cli_main_runs_a_flow_from_a_program_as_bytewax_s_does() -> None:
    from flowspark.dataflow import Dataflow
    from flowspark.run import RecoveryConfig, cli_main
    from flowspark.testing import TestingSink, TestingSource
    import flowspark.operators as op

    out: list = []
    flow = Dataflow("from_a_program")
    op.output("out", op.map("double", op.input("inp", flow, TestingSource([1, 2, 3])), lambda x: 2 * x), TestingSink(out))
    cli_main(flow, process_id=1, addresses=["a:1", "b:1"])
    assert out == []
    cli_main(flow)
    assert out == [2, 4, 6]
    assert RecoveryConfig.__module__ == "flowspark.recovery"


def test_bytewax_kubernetes_chart_pods_run_the_flow_once(flows_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart names each pod `<statefulset>-<n>` and lists every pod's address in a file: only pod 0 runs the flow."""
    hosts = flows_file.parent / "hosts.txt"
    hosts.write_text("flow-0.flow:2101\nflow-1.flow:2101\n\n")
    monkeypatch.setenv("BYTEWAX_STATEFULSET_NAME", "flow")
    monkeypatch.setenv("BYTEWAX_HOSTFILE_PATH", str(hosts))
    monkeypatch.setenv("BYTEWAX_POD_NAME", "flow-1")
    other = _cli("my_flows:make(2, word='hi')", cwd=flows_file.parent)
    assert other.returncode == 0 and other.stdout == ""
    assert "process 1 of 2" in other.stderr
    monkeypatch.setenv("BYTEWAX_POD_NAME", "flow-0")
    first = _cli("my_flows:make(2, word='hi')", "-w", "1", cwd=flows_file.parent)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["hi", "hi"]


def test_a_pod_name_the_chart_did_not_make_is_refused_with_what_to_set(monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from flowspark.run import _parse_args

    monkeypatch.setenv("BYTEWAX_STATEFULSET_NAME", "flow")
    monkeypatch.setenv("BYTEWAX_POD_NAME", "other-pod")
    expected = "BYTEWAX_POD_NAME='other-pod' is not <BYTEWAX_STATEFULSET_NAME>-<number>"
    assert expected in usage_error(capsys, _parse_args, ["my_flows:make(1)"])
