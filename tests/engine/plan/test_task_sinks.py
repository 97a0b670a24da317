"""Dynamic sinks written in the task that made their items: where they are built, every item once, errors, metrics."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List, Set, Tuple

import pytest
from support.partitions import where_am_i

import flowspark.operators as op
from flowspark.connectors.files import DirSource
from flowspark.dataflow import Dataflow, Stream
from flowspark.engine.plan.destinations import origin_worker, source_origin
from flowspark.engine.plan.groups import DEFAULT_BUCKETS, bucket_of
from flowspark.engine.plan.plan import SinkPlace, build_plan
from flowspark.engine.plan.task_sinks import TaskSinks
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.reports.metrics import Count, Meter, Reading, Timing
from flowspark.errors import FlowsparkRuntimeError
from flowspark.outputs import DynamicSink, StatelessSinkPartition
from flowspark.testing import TestingSource, cluster_main

ITEMS = [(f"k{n % 2}", f"v{n}") for n in range(40)]


class _Recording(StatelessSinkPartition[Any]):
    def __init__(self, path: Path, broken: bool) -> None:
        self._path = path
        self._broken = broken

    def write_batch(self, items: List[Any]) -> None:
        if self._broken:
            raise OSError("disk full")  # noqa: EM101 - a test finds this line in the traceback
        with open(self._path, "a") as f:
            f.write("".join(f"{item}\n" for item in items))


class WorkerFiles(DynamicSink[Any]):
    """Appends each worker's items to `worker<index>`; each build appends `index count pid in_task` to `built.txt`."""

    lives_in_driver = False

    def __init__(self, directory: Path, broken: bool = False) -> None:
        self.directory = directory.absolute()
        self.broken = broken

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Recording:
        pid, in_task, _ = where_am_i().split()
        with open(self.directory / "built.txt", "a") as f:
            f.write(f"{worker_index} {worker_count} {pid} {in_task}\n")
        return _Recording(self.directory / f"worker{worker_index}", self.broken)

    def builds(self) -> List[Tuple[int, int, int, str]]:
        rows = [line.split() for line in (self.directory / "built.txt").read_text().splitlines()]
        return [(int(index), int(count), int(pid), in_task) for index, count, pid, in_task in rows]

    def written(self) -> List[str]:
        return sorted(line for path in self.directory.glob("worker*") for line in path.read_text().splitlines())


def _run(sink: Any, shape: str = "stateless", items: List[Tuple[str, str]] = ITEMS) -> None:
    """Write `items` to `sink` in a run of two workers, straight from the source or after a stateful step."""
    flow = Dataflow("x")
    stream: Stream[Any] = op.input("inp", flow, TestingSource(items, batch_size=5))
    if shape == "stateful":
        stream = op.stateful_map("same", stream, lambda state, value: (state, value))
    op.output("out", stream, sink)
    cluster_main(flow, [], 0, worker_count_per_proc=2)


def test_the_planner_places_a_dynamic_sink_that_may_leave_the_driver_in_the_task_that_makes_its_items(
    tmp_path: Path,
) -> None:
    flow = Dataflow("x")
    op.output("out", op.input("inp", flow, TestingSource(ITEMS)), WorkerFiles(tmp_path))
    assert [layout.place for layout in build_plan(flow, workers=2).sinks] == [SinkPlace.MAKING_TASK]
    assert [layout.place for layout in build_plan(flow, ordered=True).sinks] == [SinkPlace.DRIVER]


@pytest.mark.parametrize("shape", ["stateless", "stateful"])
def test_a_dynamic_sink_is_written_in_the_tasks_that_made_its_items_every_item_once(tmp_path: Path, shape: str) -> None:
    sink = WorkerFiles(tmp_path)
    _run(sink, shape)
    builds = sink.builds()
    # The pass's origin picks the worker index: the source's two pieces take the workers in turn, a bucket
    # its own worker (here both keys' buckets may have the same one).
    assert builds and {(count, in_task) for _, count, _, in_task in builds} == {(2, "True")}
    assert all(pid != os.getpid() for _, _, pid, _ in builds)
    assert {index for index, *_ in builds} == (
        {0, 1} if shape == "stateless" else {bucket_of(key, DEFAULT_BUCKETS) % 2 for key, _ in ITEMS}
    )
    assert sink.written() == sorted(str(item) for item in ITEMS)


def test_a_partitioned_source_read_in_tasks_writes_a_dynamic_sink_in_the_same_tasks(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    for n in range(3):
        (inputs / f"f{n}.txt").write_text("".join(f"{n}-{line}\n" for line in range(50)))
    out = tmp_path / "out"
    out.mkdir()
    sink = WorkerFiles(out)
    flow = Dataflow("x")
    op.output("out", op.input("inp", flow, DirSource(inputs)), sink)
    cluster_main(flow, [], 0, worker_count_per_proc=2)
    assert sink.written() == sorted(f"{n}-{line}" for n in range(3) for line in range(50))
    assert all(pid != os.getpid() and in_task == "True" for _, _, pid, in_task in sink.builds())
    assert {index for index, *_ in sink.builds()} == {0, 1}  # the partitions take the workers in turn


@pytest.mark.parametrize("shape", ["stateless", "stateful"])
def test_a_failing_write_in_the_making_task_names_the_step_and_shows_the_users_line(tmp_path: Path, shape: str) -> None:
    with pytest.raises(FlowsparkRuntimeError, match="error calling `write_batch` in step 'x.out'") as info:
        _run(WorkerFiles(tmp_path, broken=True), shape)
    cause = info.value.__cause__
    assert isinstance(cause, OSError) and str(cause) == "disk full"
    notes = "\n".join(getattr(cause, "__notes__", []))
    assert 'raise OSError("disk full")' in notes and Path(__file__).name in notes


class _Listed(StatelessSinkPartition[Any]):
    def __init__(self, log: List[Tuple[str, Any]], worker: int, fail_on: str) -> None:
        self._log = log
        self._worker = worker
        self._fail_on = fail_on

    def write_batch(self, items: List[Any]) -> None:
        if self._fail_on == "write_batch":
            msg = "no writes"
            raise ValueError(msg)
        self._log.append((f"write {self._worker}", list(items)))

    def close(self) -> None:
        self._log.append(("close", self._worker))
        if self._fail_on == "close":
            msg = "no close"
            raise ValueError(msg)


class _Logged(DynamicSink[Any]):
    """Logs builds, writes and closes in this process; fails at `fail_on`."""

    lives_in_driver = False

    def __init__(self, fail_on: str = "") -> None:
        self.log: List[Tuple[str, Any]] = []
        self.fail_on = fail_on

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Listed:
        if self.fail_on == "build":
            msg = "no build"
            raise ValueError(msg)
        self.log.append(("build", (step_id, worker_index, worker_count)))
        return _Listed(self.log, worker_index, self.fail_on)


def _sinks(sink: _Logged, meter: Any = None) -> TaskSinks:
    flow = Dataflow("p")
    op.output("out", op.input("inp", flow, TestingSource([1])), sink)
    return TaskSinks(build_plan(flow, workers=3), meter)


def test_each_origin_writes_to_its_workers_partition_built_once_per_task_and_closed_at_its_end() -> None:
    sink = _Logged()
    origins = ["000.00000.000", "000.00002.000"]
    workers = [origin_worker(origin, 3) for origin in origins]
    assert workers[0] != workers[1]
    with _sinks(sink) as sinks:
        sinks.write(0, origins[0], [1, 2])
        sinks.write(0, origins[1], [3])
        sinks.write(0, origins[0], [4])
        assert sink.log == []  # a few thousand items are gathered before a write
    builds = [entry for kind, entry in sink.log if kind == "build"]
    assert sorted(builds) == sorted(("p.out", worker, 3) for worker in workers)
    assert (f"write {workers[0]}", [1, 2, 4]) in sink.log and (f"write {workers[1]}", [3]) in sink.log
    assert sorted(worker for kind, worker in sink.log if kind == "close") == sorted(workers)


def test_writes_are_counted_and_timed_per_output_step() -> None:
    readings: List[Reading] = []
    meter = Meter(readings.append)
    with _sinks(_Logged(), meter) as sinks:
        sinks.write(0, source_origin(0, 0, 0), [1, 2, 3])
        sinks.write(0, source_origin(0, 0, 0), [4])
    meter.flush()
    (reading,) = readings
    assert reading.counts == {(Count.ITEMS_IN, "p.out"): 4}
    assert reading.timings[Timing.WRITE_BATCH, "p.out"].count == 1


@pytest.mark.parametrize("what", ["build", "write_batch", "close"])
def test_a_failing_partition_call_names_the_step(what: str) -> None:
    sink = _Logged(fail_on=what)
    with pytest.raises(StepFailure, match=f"error calling `{what}` in step 'p.out'") as info:
        with _sinks(sink) as sinks:
            sinks.write(0, source_origin(0, 1, 0), [1])
    assert isinstance(info.value.cause, ValueError)
    closed: Set[Any] = {worker for kind, worker in sink.log if kind == "close"}
    assert closed == (set() if what == "build" else {1})


def test_a_failing_task_closes_the_partitions_it_built() -> None:
    sink = _Logged()
    with pytest.raises(RuntimeError, match="the pass failed"):
        with _sinks(sink) as sinks:
            sinks.write(0, source_origin(0, 2, 0), list(range(5000)))  # more than a piece: written at once
            msg = "the pass failed"
            raise RuntimeError(msg)
    assert [kind for kind, _ in sink.log] == ["build", "write 2", "close"]
