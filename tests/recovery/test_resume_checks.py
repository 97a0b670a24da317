"""Resuming with a changed flow stops with a message; inspecting a recovery directory."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, List, Tuple

import pytest

import flowspark.operators as op
import flowspark.operators.windowing as win
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.groups import Groups
from flowspark.engine.recovery.resume_check import META
from flowspark.engine.state.inspect_state import snapshot_of, summary
from flowspark.errors import FlowsparkRuntimeError
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _at(event: Tuple[int, int]) -> datetime:
    return T0 + timedelta(seconds=event[0])


def _windowed(items: List[Any], out: List[Any], length: int = 10, step: str = "sum") -> Dataflow:
    flow = Dataflow("resume")
    s = op.input("inp", flow, TestingSource(items))
    clock = win.EventClock(_at, wait_for_system_duration=timedelta(hours=1))
    sums = win.fold_window(
        step,
        s,
        clock,
        win.TumblingWindower(timedelta(seconds=length), T0),
        lambda: 0,
        lambda acc, e: acc + e[1],
        lambda a, b: a + b,
    )
    op.output("out", sums.down, TestingSink(out))
    return flow


ITEMS = [("a", (1, 5)), ("b", (2, 7)), ("a", (12, 1)), TestingSource.EOF(), ("a", (13, 2))]


@pytest.mark.quick
def test_changed_flows_are_refused_with_what_changed(tmp_path: Path) -> None:
    config = RecoveryConfig(tmp_path)
    out: List[Any] = []
    run_main(_windowed(ITEMS, out), recovery_config=config)
    assert sorted(out) == [("a", (0, 5)), ("a", (1, 1)), ("b", (0, 7))]

    with pytest.raises(FlowsparkRuntimeError, match=r"parameters of step 'resume\.sum\..*' changed"):
        run_main(_windowed(ITEMS, [], length=20), recovery_config=config)
    with pytest.raises(FlowsparkRuntimeError, match="stateful steps were .*resume.sum.* now .*resume.total"):
        run_main(_windowed(ITEMS, [], step="total"), recovery_config=config)
    other = Dataflow("resume")
    op.output("out", op.input("inp", other, TestingSource([1])), TestingSink([]))
    with pytest.raises(FlowsparkRuntimeError, match="different flow"):
        run_main(other, recovery_config=config)

    out.clear()
    run_main(_windowed(ITEMS, out), recovery_config=config)
    assert out == [("a", (1, 2))]  # as Bytewax: end of input closed window 1 for good
    out.clear()
    run_main(_windowed(ITEMS, out), recovery_config=config)
    assert out == []


@pytest.mark.quick
def test_inspect_lists_epochs_keys_and_snapshots(tmp_path: Path) -> None:
    def running(state: Any, v: int) -> Tuple[int, int]:
        total = (state or 0) + v
        return total, total

    flow = Dataflow("inspected")
    s = op.stateful_map("count", op.input("inp", flow, TestingSource([("x", 2), ("y", 3), ("x", 4)])), running)
    op.output("out", s, TestingSink([]))
    run_main(flow, recovery_config=RecoveryConfig(tmp_path))
    info = summary(str(tmp_path))
    assert info.flow_id == "inspected"
    assert info.last_epoch is not None and info.last_epoch >= 1  # epochs count from 1, as in Bytewax
    # A run stops once its last micro-batch is written, which can be before
    # Spark records that batch's commit: the sinks may be one epoch ahead.
    assert info.sinks_epoch is not None and 1 <= info.sinks_epoch <= info.last_epoch + 1
    assert list(info.keys_per_step.values()) == [2]
    assert snapshot_of(str(tmp_path), "inspected.count", "x") == 6
    with pytest.raises(KeyError, match="no state for key 'z'"):
        snapshot_of(str(tmp_path), "inspected.count", "z")


COUNTED = [("a", 1), ("b", 1), ("a", 1), TestingSource.EOF(), ("a", 1)]


def _counting(items: List[Any], out: List[Any]) -> Dataflow:
    flow = Dataflow("counts")
    s = op.input("inp", flow, TestingSource(items))
    op.output("out", op.stateful_map("count", s, lambda n, _: ((n or 0) + 1, (n or 0) + 1)), TestingSink(out))
    return flow


def test_new_directories_record_balanced_group_names_and_resume_with_them(tmp_path: Path) -> None:
    config = RecoveryConfig(tmp_path)
    out: List[Any] = []
    run_main(_counting(COUNTED, out), recovery_config=config)
    meta = json.loads(next(tmp_path.rglob(META)).read_text())
    assert meta["groups"] == Groups.balanced(1, meta["buckets"]).names
    out.clear()
    run_main(_counting(COUNTED, out), recovery_config=config)
    assert out == [("a", 3)]


def test_a_directory_of_an_earlier_state_layout_is_refused_with_what_to_do(tmp_path: Path) -> None:
    config = RecoveryConfig(tmp_path)
    run_main(_counting(COUNTED, []), recovery_config=config)
    meta_path = next(tmp_path.rglob(META))
    meta = json.loads(meta_path.read_text())
    del meta["state_layout"]  # as directories of earlier versions are
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(FlowsparkRuntimeError, match="earlier flowspark.*empty recovery directory"):
        run_main(_counting(COUNTED, []), recovery_config=config)


@pytest.mark.quick
def test_a_file_uri_recovery_directory_runs_resumes_and_inspects(tmp_path: Path) -> None:
    import subprocess
    import sys

    uri = (tmp_path / "my recovery").as_uri()
    out: List[Any] = []
    run_main(_counting(COUNTED, out), recovery_config=RecoveryConfig(uri))
    assert sorted(out) == [("a", 1), ("a", 2), ("b", 1)]
    assert (tmp_path / "my recovery" / "query").is_dir()
    out.clear()
    run_main(_counting(COUNTED, out), recovery_config=RecoveryConfig(uri))
    assert out == [("a", 3)]  # continues after the EOF, from the stored counts
    shown = subprocess.run(
        [sys.executable, "-m", "flowspark.recovery", uri, "--inspect"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert "flow: counts" in shown.stdout and "counts.count" in shown.stdout and ": 2 keys" in shown.stdout


def test_a_recovery_uri_of_an_unknown_file_system_is_refused_with_what_works() -> None:
    with pytest.raises(FlowsparkRuntimeError, match="can't keep its records on gs:// storage.*file://, s3://"):
        RecoveryConfig("gs://bucket/recovery")


def test_a_recovery_uri_on_s3_names_the_same_place_as_s3a() -> None:
    assert RecoveryConfig("s3a://bucket/my%20flow").location == "s3://bucket/my flow"
