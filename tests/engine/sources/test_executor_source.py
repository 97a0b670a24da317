"""Executor-read source partitions: planned from their snapshots, read in Spark's workers, never in the driver."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from support.oracle import run_both

import flowspark.operators as op
from flowspark.connectors.files import DirSource
from flowspark.dataflow import Dataflow
from flowspark.engine.recovery.resume_check import META
from flowspark.engine.recovery.storage import parse_location
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.sources.executor_source import (
    ExecutorInputs,
    PartReader,
    PartSpec,
    PartTask,
    Position,
    next_position,
    tasks,
)
from flowspark.engine.sources.snapshot_store import PartRecord, SnapshotStore
from flowspark.errors import FlowsparkRuntimeError
from flowspark.inputs import FixedPartitionedSource, StatefulSourcePartition
from flowspark.recovery import RecoveryConfig
from flowspark.testing import TestingSink, TestingSource, run_main

NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


class _Logged(StatefulSourcePartition[str, int]):
    """Emits `"<part>-<i>:<pid>"` for i < `count`, one a batch; logs each call with the pid that made it."""

    def __init__(self, log: Path, name: str, count: int, resume: Optional[int], fail: bool) -> None:
        self._log, self._name, self._count, self._fail = log, name, count, fail
        self._next = resume or 0
        self._note("build_part")

    def _note(self, call: str) -> None:
        with open(self._log, "a") as f:
            f.write(f"{call} {os.getpid()}\n")

    def next_batch(self) -> List[str]:
        self._note("next_batch")
        if self._fail:
            msg = "no good"
            raise ValueError(msg)
        if self._next >= self._count:
            raise StopIteration()
        self._next += 1
        return [f"{self._name}-{self._next}:{os.getpid()}"]

    def snapshot(self) -> int:
        self._note("snapshot")
        return self._next

    def close(self) -> None:
        self._note("close")


class _LoggedSource(FixedPartitionedSource[str, int]):
    """Partitions `a` and `b` of three items each, read in the executors."""

    lives_in_driver = False

    def __init__(self, log: Path, fail: bool = False) -> None:
        self._log = log
        self._fail = fail

    def list_parts(self) -> List[str]:
        with open(self._log, "a") as f:
            f.write(f"list_parts {os.getpid()}\n")
        return ["a", "b"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _Logged:
        return _Logged(self._log, for_part, 3, resume_state, self._fail)


class _DriverLoggedSource(_LoggedSource):
    lives_in_driver = True


def _calls(log: Path) -> Dict[str, List[int]]:
    pids: Dict[str, List[int]] = {}
    for line in log.read_text().splitlines():
        call, pid = line.split()
        pids.setdefault(call, []).append(int(pid))
    return pids


def _run(source: FixedPartitionedSource[str, int], recovery: Optional[Path] = None) -> List[str]:
    out: List[str] = []
    flow = Dataflow("f")
    op.output("out", op.input("inp", flow, source), TestingSink(out))
    run_main(flow, recovery_config=None if recovery is None else RecoveryConfig(recovery))
    return out


@pytest.mark.quick
def test_partitions_are_built_polled_snapshotted_and_closed_in_spark_workers(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    out = _run(_LoggedSource(log))
    assert sorted(item.split(":")[0] for item in out) == ["a-1", "a-2", "a-3", "b-1", "b-2", "b-3"]
    calls = _calls(log)
    driver = os.getpid()
    assert calls["list_parts"] == [driver]  # listed once, where Bytewax lists them
    for call in ("build_part", "next_batch", "snapshot", "close"):
        assert calls[call] and driver not in calls[call], call
    assert len(calls["close"]) == len(calls["build_part"])
    assert driver not in {int(item.split(":")[1]) for item in out}


def test_a_driver_resident_source_is_still_read_in_the_driver(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    out = _run(_DriverLoggedSource(log))
    assert {int(item.split(":")[1]) for item in out} == {os.getpid()}
    assert set(_calls(log)["next_batch"]) == {os.getpid()}


@pytest.mark.quick
def test_a_run_resumes_from_the_executors_snapshots_after_its_end(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.txt").write_text("1\n2\n")
    (inputs / "b.txt").write_text("3\n")
    out: List[str] = []
    flow = Dataflow("resume")
    op.output("out", op.input("inp", flow, DirSource(inputs)), TestingSink(out))
    run_main(flow, recovery_config=RecoveryConfig(tmp_path / "rec"))
    assert sorted(out) == ["1", "2", "3"]
    with open(inputs / "a.txt", "a") as f:
        f.write("4\n")
    out.clear()
    run_main(flow, recovery_config=RecoveryConfig(tmp_path / "rec"))
    assert out == ["4"]


def test_a_flow_mixes_driver_resident_and_executor_read_inputs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\ny\n")
    out: List[str] = []
    flow = Dataflow("mixed")
    files = op.input("files", flow, DirSource(tmp_path, "*.txt"))
    listed = op.input("listed", flow, TestingSource(["1", "2", "3"]))
    op.output("out", op.merge("both", files, listed), TestingSink(out))
    run_main(flow)
    assert sorted(out) == ["1", "2", "3", "x", "y"]


def test_one_workers_order_of_a_directory_matches_bytewax(tmp_path: Path) -> None:
    for name, lines in (("a.txt", 5), ("b.txt", 2), ("c.txt", 4)):
        (tmp_path / name).write_text("".join(f"{name[0]}{i}\n" for i in range(lines)))

    def build(e: Any) -> Any:
        files = importlib.import_module(f"{e.name}.connectors.files")
        out: List[str] = []
        flow = e.Dataflow("ordered")
        lines = e.op.input("inp", flow, files.DirSource(tmp_path, "*.txt", batch_size=2))
        e.op.output("out", e.op.map("upper", lines, str.upper), e.TestingSink(out))
        return flow, {"out": out}

    bytewax_out, flowspark_out = run_both(build)
    assert flowspark_out == bytewax_out
    assert len(bytewax_out["out"]) == 11


class _DriverDirSource(DirSource):
    lives_in_driver = True


def test_a_directory_is_refused_once_an_input_moved_or_if_an_earlier_flowspark_wrote_it(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("x\n")

    def run(source: DirSource) -> None:
        flow = Dataflow("moved")
        op.output("out", op.input("inp", flow, source), TestingSink([]))
        run_main(flow, recovery_config=RecoveryConfig(tmp_path / "rec"))

    run(DirSource(tmp_path / "in"))
    with pytest.raises(FlowsparkRuntimeError, match="input 'moved.inp' is now read in the driver"):
        run(_DriverDirSource(tmp_path / "in"))
    meta_path = tmp_path / "rec" / META
    meta = json.loads(meta_path.read_text())
    del meta["source_layout"]  # as directories of earlier versions are
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(FlowsparkRuntimeError, match="earlier flowspark.*snapshots in Spark's offsets"):
        run(DirSource(tmp_path / "in"))


def test_an_error_in_next_batch_names_the_step_and_partition_and_reaches_the_driver(tmp_path: Path) -> None:
    with pytest.raises(
        FlowsparkRuntimeError, match="error calling `next_batch` in step 'f.inp' for partition '[ab]'"
    ) as info:
        _run(_LoggedSource(tmp_path / "calls.log", fail=True))
    assert isinstance(info.value.__cause__, ValueError)


# -- the planner and one task's reading, without Spark ---------------------


def _inputs(
    tmp_path: Path, source: FixedPartitionedSource[str, int], parts: int = 2, max_items: int = 100
) -> ExecutorInputs:
    specs = tuple(PartSpec(i, 0, "f.inp", name) for i, name in enumerate("ab"[:parts]))
    return ExecutorInputs(specs, {0: source}, parse_location(str(tmp_path / "store")), max_items, 5.0)


def _record(inputs: ExecutorInputs, part: int, batch: int, record: PartRecord) -> None:
    SnapshotStore(inputs.store).write_once(inputs.parts[part].folder, batch, record)


def test_the_planner_reads_until_every_partition_ended_then_ends(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _LoggedSource(tmp_path / "log"))
    first = next_position(Position(), inputs, None, NOW)
    assert first == Position(batch=1, round=0, since=1)
    assert [t.part for t in tasks(Position(), first, inputs)] == [0, 1]
    _record(inputs, 0, 1, PartRecord(3, 3, 3, eof=True))
    _record(inputs, 1, 1, PartRecord(2, 2, 2))
    second = next_position(first, inputs, None, NOW)
    assert second == Position(batch=2, round=3, since=1, idle=(0,))
    assert tasks(first, second, inputs) == [PartTask(1, 2, 3)]
    _record(inputs, 1, 2, PartRecord(3, 1, 1, eof=True))
    last = next_position(second, inputs, None, NOW)
    assert last == Position(batch=3, round=4, since=1, end="eof", idle=(0, 1))
    assert tasks(second, last, inputs) == []
    # A resumed run after the end reads every partition again.
    assert next_position(last, inputs, None, NOW) == Position(batch=4, round=4, since=4)


def test_the_planner_waits_for_sleeping_partitions_and_ends_on_an_abort(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _LoggedSource(tmp_path / "log"))
    first = Position(batch=1)
    _record(inputs, 0, 1, PartRecord(0, 0, 0, awake=NOW + timedelta(seconds=5)))
    _record(inputs, 1, 1, PartRecord(0, 0, 0, eof=True))
    assert next_position(first, inputs, None, NOW) is first
    assert next_position(first, inputs, None, NOW + timedelta(seconds=6)) == Position(batch=2, idle=(1,))
    _record(inputs, 0, 2, PartRecord(0, 1, 1, abort=True))
    assert next_position(Position(batch=2, idle=(1,)), inputs, None, NOW).end == "abort"


class _Newsworthy(_LoggedSource):
    """Tells the planner whether its caught-up partitions have news: `news` says, or it raises."""

    def __init__(self, log: Path, news: Any) -> None:
        super().__init__(log)
        self.news = news
        self.asked: List[Any] = []

    def has_news(self, for_part: str, resume_state: int) -> bool:
        self.asked.append((for_part, resume_state))
        if isinstance(self.news, Exception):
            raise self.news
        return bool(self.news)


def test_a_caught_up_partition_gets_a_task_only_when_its_source_has_news(tmp_path: Path) -> None:
    source = _Newsworthy(tmp_path / "log", news=False)
    inputs = _inputs(tmp_path, source)
    first = Position(batch=1)
    _record(inputs, 0, 1, PartRecord(4, 4, 1, caught_up=True))
    _record(inputs, 1, 1, PartRecord(0, 0, 0, caught_up=True))
    assert next_position(first, inputs, None, NOW) is first  # no news: no micro-batch
    assert source.asked == [("a", 4), ("b", 0)]
    source.news = True
    assert next_position(first, inputs, None, NOW) == Position(batch=2, round=1)
    source.news = OSError("broker down")  # the tasks meet the error and name it
    assert next_position(first, inputs, None, NOW) == Position(batch=2, round=1)
    # A source that can't tell has its caught-up partitions read every micro-batch.
    plain = _inputs(tmp_path, _LoggedSource(tmp_path / "log"))
    assert next_position(first, plain, None, NOW) == Position(batch=2, round=1)


class _Dry(StatefulSourcePartition[int, int]):
    """Emits `[1, 2]` once, then empty batches: it caught up, and waits for more."""

    def __init__(self) -> None:
        self._sent = False

    def next_batch(self) -> List[int]:
        sent, self._sent = self._sent, True
        return [] if sent else [1, 2]

    def snapshot(self) -> int:
        return 2 if self._sent else 0


class _DrySource(FixedPartitionedSource[int, int]):
    """One partition `a`, a `_Dry` one, read in the executors."""

    lives_in_driver = False

    def list_parts(self) -> List[str]:
        return ["a"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _Dry:
        return _Dry()


def test_a_reading_that_ran_out_of_items_is_recorded_as_caught_up(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _DrySource(), parts=1)
    with PartReader(inputs, inputs.parts[0], 1) as reader:
        assert [item for batch in reader.batches() for item in batch] == [1, 2]
        reader.finish()
    assert SnapshotStore(inputs.store).read(inputs.parts[0].folder, 1) == PartRecord(2, 2, 1, caught_up=True)


class _Waking(StatefulSourcePartition[int, int]):
    """Emits 1, 2, 3, one a batch; answers `next_awake` with its source's next wake-up, and fails if asked once too often."""

    def __init__(self, source: "_WakingSource", read: int) -> None:
        self._source = source
        self._read = read

    def next_batch(self) -> List[int]:
        if self._read == 3:
            raise StopIteration()
        self._read += 1
        return [self._read]

    def next_awake(self) -> Optional[datetime]:
        wait = self._source.wake_ups.pop(0)
        return None if wait is None else datetime.now(timezone.utc) + wait

    def snapshot(self) -> int:
        return self._read


class _WakingSource(_DrySource):
    """One partition `a`, a `_Waking` one, read in the executors."""

    def __init__(self) -> None:
        self.wake_ups: List[Optional[timedelta]] = []
        """What its partitions answer `next_awake`, in turn: a delay from now, or `None`."""

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _Waking:  # type: ignore[override]
        return _Waking(self, resume_state or 0)


def _read(inputs: ExecutorInputs, batch: int) -> List[int]:
    with PartReader(inputs, inputs.parts[0], batch) as reader:
        items = [item for got in reader.batches() for item in got]
        reader.finish()
    return items


def test_a_partition_is_asked_when_to_wake_once_built_and_after_each_batch_and_its_answer_holds_for_the_run(
    tmp_path: Path,
) -> None:
    source = _WakingSource()
    inputs = dataclasses.replace(_inputs(tmp_path, source, parts=1), run="first")
    store = SnapshotStore(inputs.store)
    source.wake_ups = [None, timedelta(hours=1)]  # once built; after the first batch
    assert _read(inputs, 1) == [1]
    asleep = store.read(inputs.parts[0].folder, 1)
    assert asleep is not None and asleep.awake is not None and asleep.awake > datetime.now(timezone.utc)
    # The next task of the run builds it again but keeps the hour it asked for: nothing read, nothing asked.
    assert _read(inputs, 2) == []
    assert store.read(inputs.parts[0].folder, 2) == dataclasses.replace(asleep, items=0, batches=0)
    now = datetime.now(timezone.utc)
    assert next_position(Position(batch=2), inputs, None, now) == Position(batch=2)
    assert source.wake_ups == []

    # A resumed run asks again once built, as Bytewax asks a resumed partition: the hour is forgotten.
    resumed = dataclasses.replace(inputs, run="resumed")
    assert next_position(Position(batch=2), resumed, None, now) == Position(batch=3)
    source.wake_ups = [None, None, None]
    assert _read(resumed, 3) == [2, 3]
    assert source.wake_ups == []


def test_the_planner_polls_the_hub_and_ends_only_once_both_ended(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _LoggedSource(tmp_path / "log"), parts=1)
    hub_offsets: List[Dict[str, Any]] = []

    def poll(start: Dict[str, Any]) -> Dict[str, Any]:
        hub_offsets.append(start)
        return {"n": start["n"] + 1, "end": "eof"}

    first = next_position(Position(hub={"n": 0, "end": ""}), inputs, poll, NOW)
    assert (first.end, first.hub, first.hub_done) == ("", {"n": 1, "end": "eof"}, True)
    _record(inputs, 0, 1, PartRecord(1, 1, 1, eof=True))
    assert next_position(first, inputs, poll, NOW).end == "eof"
    assert [offset["n"] for offset in hub_offsets] == [0, 1]


def test_after_an_end_the_hubs_old_end_does_not_end_the_next_run(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _LoggedSource(tmp_path / "log"), parts=0)
    ended = Position(batch=3, end="eof", hub={"n": 2, "end": "eof"}, hub_done=True)
    assert next_position(ended, inputs, lambda start: start, NOW) is ended  # nothing new from the hub yet
    moved = next_position(ended, inputs, lambda start: {"n": 3, "end": ""}, NOW)
    assert (moved.end, moved.hub_done, moved.since) == ("", False, 4)


def test_a_replay_stops_where_the_first_reading_did(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _LoggedSource(tmp_path / "log"), max_items=2)
    spec = inputs.parts[0]
    with PartReader(inputs, spec, 1) as reader:
        first = [item.split(":")[0] for batch in reader.batches() for item in batch]
        reader.finish()
    assert first == ["a-1", "a-2"]
    assert SnapshotStore(inputs.store).read(spec.folder, 1) == PartRecord(2, 2, 2)
    replayed = _inputs(tmp_path, _LoggedSource(tmp_path / "log"), max_items=100)
    with PartReader(replayed, spec, 1) as reader:
        again = [item.split(":")[0] for batch in reader.batches() for item in batch]
        reader.finish()
    assert again == first
    with PartReader(replayed, spec, 2) as reader:
        rest = [item.split(":")[0] for batch in reader.batches() for item in batch]
        note = reader.finish()
    assert (rest, note.fraction) == (["a-3"], 1.0)
    assert SnapshotStore(inputs.store).read(spec.folder, 2) == PartRecord(3, 1, 1, eof=True)


class _Late(StatefulSourcePartition[int, int]):
    """Emits 1, 2, 3, one a batch, from its source's `ready_at` (a `time.monotonic()` time) on; empty batches before."""

    def __init__(self, source: "_LateSource", read: int) -> None:
        self._source = source
        self._read = read

    def next_batch(self) -> List[int]:
        if time.monotonic() < self._source.ready_at:
            return []
        if self._read == 3:
            raise StopIteration()
        self._read += 1
        return [self._read]

    def snapshot(self) -> int:
        return self._read


class _LateSource(_DrySource):
    """One partition `a`, a `_Late` one, read in the executors."""

    def __init__(self) -> None:
        self.ready_at = 0.0

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _Late:  # type: ignore[override]
        return _Late(self, resume_state or 0)


def test_a_replay_waits_for_items_its_source_cant_give_yet_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As when a lost executor's reading is replayed while its Kafka broker is down: the next micro-batch resumes
    after the items the first reading gave, so the replay gives them all, however long they take."""
    source = _LateSource()
    inputs = dataclasses.replace(_inputs(tmp_path, source, parts=1, max_items=2), max_seconds=0.05)
    assert _read(inputs, 1) == [1, 2]
    source.ready_at = time.monotonic() + 0.3  # well past `max_seconds`
    assert _read(inputs, 1) == [1, 2]
    assert "flowspark: replaying micro-batch 1 of partition 'a' of step 'f.inp', which gives 0 of the 2 items" in (
        capsys.readouterr().err
    )
    assert _read(inputs, 2) == [3]


def test_a_reading_beaten_to_the_record_by_another_attempt_says_so(tmp_path: Path) -> None:
    spec = _inputs(tmp_path, _LoggedSource(tmp_path / "log")).parts[0]
    slow = PartReader(_inputs(tmp_path, _LoggedSource(tmp_path / "log"), max_items=3), spec, 1)
    with PartReader(_inputs(tmp_path, _LoggedSource(tmp_path / "log"), max_items=1), spec, 1) as fast:
        assert sum(map(len, fast.batches())) == 1
        fast.finish()
    with slow:
        assert sum(map(len, slow.batches())) == 3
        slow.finish()
    assert (fast.recorded, slow.recorded) == (True, False)
    assert SnapshotStore(str(tmp_path / "store")).read(spec.folder, 1) == PartRecord(1, 1, 1)


def test_a_reading_error_names_the_step_and_partition(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _LoggedSource(tmp_path / "log", fail=True))
    with pytest.raises(StepFailure, match="error calling `next_batch` in step 'f.inp' for partition 'b'"):
        with PartReader(inputs, inputs.parts[1], 1) as reader:
            list(reader.batches())
    assert _calls(tmp_path / "log")["close"]  # closed all the same


def test_a_building_error_names_the_partition_and_step(tmp_path: Path) -> None:
    (tmp_path / "gone.txt").write_text("x\n")
    source = DirSource(tmp_path, get_fs_id=lambda _dir: "fs")
    inputs = ExecutorInputs(
        (PartSpec(0, 0, "f.inp", "fs::gone.txt"),), {0: source}, parse_location(str(tmp_path / "store")), 10, 5.0
    )
    (tmp_path / "gone.txt").unlink()
    with pytest.raises(StepFailure, match="error building partition 'fs::gone.txt' of step 'f.inp'") as info:
        PartReader(inputs, inputs.parts[0], 1)
    assert isinstance(info.value.cause, FileNotFoundError)
