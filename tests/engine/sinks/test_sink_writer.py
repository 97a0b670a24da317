"""The sink writer driven directly with Spark frames of output rows, as `foreachBatch` calls it (no query).

Sinks that live in the driver are written by the writer itself; the others by the micro-batch's job (`sink_tasks`).
"""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from support.partitions import LineSink

import flowspark.operators as op
from flowspark.dataflow import Dataflow, Stream
from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import (
    CONTROL_GROUP,
    origin_worker,
    output_group,
    sink_part_group,
    source_origin,
    tap_group,
)
from flowspark.engine.plan.order import Order
from flowspark.engine.plan.plan import Plan, build_plan
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.reports.metrics import Count, FlowMetrics, Meter, Timing
from flowspark.engine.sinks.sink_writer import LEDGER, OutputStash, SinkWriter, WriterHooks, WriterSetup, read_ledger
from flowspark.engine.sources.input_end import InputEnd
from flowspark.engine.spark.session import get_session
from flowspark.engine.spark.shipping import ship_by_value, user_packages
from flowspark.errors import FlowsparkRuntimeError
from flowspark.outputs import (
    DynamicSink,
    FixedPartitionedSink,
    MicroBatchSink,
    Sink,
    StatefulSinkPartition,
    StatelessSinkPartition,
)
from flowspark.testing import TestingSource

ORIGIN_A = source_origin(0, 0, 0)
ORIGIN_B = source_origin(0, 1, 0)
"""The passes (source pieces) that make the rows of these tests."""


class _CountingPart(StatefulSinkPartition[Any, int]):
    """Appends values to its sink's record; its snapshot is how many it holds (as a file's length)."""

    def __init__(self, sink: "_Parts", name: str, resume: Optional[int]) -> None:
        self._sink = sink
        self._name = name
        del sink.written.setdefault(name, [])[resume or 0 :]  # a rebuilt partition truncates, as `FileSink` does

    def write_batch(self, values: List[Any]) -> None:
        if self._name in self._sink.broken:
            msg = "disk full"
            raise OSError(msg)
        self._sink.written[self._name].extend(values)

    def snapshot(self) -> int:
        return len(self._sink.written[self._name])

    def close(self) -> None:
        self._sink.closed.append(self._name)


class _Parts(FixedPartitionedSink[Any, int]):
    """Partitions `p0`, `p1`, ...; key `kN` goes to partition N."""

    def __init__(self, count: int = 2) -> None:
        self.names = [f"p{i}" for i in range(count)]
        self.written: Dict[str, List[Any]] = {}
        self.built: List[Tuple[str, Optional[int]]] = []
        self.broken: List[str] = []
        self.closed: List[str] = []

    def list_parts(self) -> List[str]:
        return self.names

    def part_fn(self, item_key: str) -> int:
        return int(item_key[1:])

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[int]) -> _CountingPart:
        self.built.append((for_part, resume_state))
        return _CountingPart(self, for_part, resume_state)


class _WorkerList(StatelessSinkPartition[Any]):
    def __init__(self, written: List[Any]) -> None:
        self._written = written

    def write_batch(self, items: List[Any]) -> None:
        self._written.extend(items)


class _PerWorker(DynamicSink[Any]):
    """One list per worker partition; records how each was built."""

    def __init__(self) -> None:
        self.built: List[Tuple[str, int, int]] = []
        self.by_worker: Dict[int, List[Any]] = {}

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _WorkerList:
        self.built.append((step_id, worker_index, worker_count))
        return _WorkerList(self.by_worker.setdefault(worker_index, []))


class _Batches(MicroBatchSink[Any]):
    def __init__(self) -> None:
        self.calls: List[Tuple[str, int, str, List[Any]]] = []
        self.closed = False

    def write_micro_batch(self, step_id: str, batch_id: int, run_id: str, items: List[Any]) -> None:
        self.calls.append((step_id, batch_id, run_id, items))

    def close(self) -> None:
        self.closed = True


@pytest.fixture(scope="module")
def spark() -> SparkSession:
    return get_session()


def _plan(*sinks: Sink[Any], seen: Optional[List[Tuple[str, Any, int]]] = None) -> Plan:
    """A flow writing to `sinks`, and with `seen` a tap that records what it inspects."""
    flow = Dataflow("w")
    stream: Stream[Any] = op.input("inp", flow, TestingSource([]))
    for i, sink in enumerate(sinks):
        op.output(f"out{i}", stream, sink)
    if seen is not None:
        op.inspect_debug("tap0", stream, lambda step_id, item, epoch, worker: seen.append((step_id, item, epoch)))
    return build_plan(flow)


def _frame(spark: SparkSession, rows: List[chunks.Row]) -> DataFrame:
    return spark.createDataFrame(pa.Table.from_batches([chunks.to_arrow(rows)]))


def _out(output: int, origin: str, items: List[Any], seq: int = 0) -> chunks.Row:
    return (output_group(output, origin), seq, chunks.DATA, chunks.dumps(items))


def _tap(tap: int, origin: str, items: List[Any], seq: int = 0) -> chunks.Row:
    return (tap_group(tap, origin), seq, chunks.DATA, chunks.dumps(items))


def _control(end: InputEnd) -> chunks.Row:
    return (CONTROL_GROUP, chunks.LAST_SEQ, chunks.CONTROL, chunks.dumps(end.value))


def _ordered(group: str, runs: List[Tuple[Order, List[Any]]], seq: int = 0) -> chunks.Row:
    """A chunk whose runs of items carry their orders, as ordered collectors make them."""
    items = [item for _, run in runs for item in run]
    ends: List[Tuple[Order, int]] = []
    for order, run in runs:
        ends.append((order, (ends[-1][1] if ends else 0) + len(run)))
    return (group, seq, chunks.DATA, chunks.ordered(ends, chunks.dumps(items)))


def test_a_batch_reaches_sinks_and_taps_and_the_end_marker_finishes_the_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    seen: List[Tuple[str, Any, int]] = []
    sink = _PerWorker()
    reports: List[Tuple[int, int]] = []
    writer = SinkWriter(
        _plan(sink, seen=seen),
        str(tmp_path),
        hooks=WriterHooks(on_batch=lambda batch, written: reports.append((batch, written))),
    )
    writer(_frame(spark, [_out(0, ORIGIN_A, [1, 2]), _tap(0, ORIGIN_A, ["x"])]), 0)
    assert sink.by_worker == {0: [1, 2]} and seen == [("w.tap0", "x", 1)]  # Bytewax counts epochs from 1
    assert not writer.finished.is_set() and writer.last_batch == 0
    writer(_frame(spark, [_out(0, ORIGIN_A, [3]), _control(InputEnd.EOF)]), 1)
    assert sink.by_worker == {0: [1, 2, 3]}
    assert writer.finished.is_set() and writer.ending is InputEnd.EOF
    assert reports == [(0, 2), (1, 1)]


def test_a_batch_written_before_is_skipped_whole_by_a_new_writer(spark: SparkSession, tmp_path: Path) -> None:
    first = _PerWorker()
    writer = SinkWriter(_plan(first), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [1])]), 0)
    writer(_frame(spark, [_out(0, ORIGIN_A, [2])]), 1)

    again = _PerWorker()
    resumed = SinkWriter(_plan(again), str(tmp_path))
    assert resumed.last_batch == 1
    resumed(_frame(spark, [_out(0, ORIGIN_A, [2]), _control(InputEnd.EOF)]), 1)  # Spark replays the last batch
    assert again.by_worker == {0: []} and not resumed.finished.is_set()
    resumed(_frame(spark, [_out(0, ORIGIN_A, [3])]), 2)
    assert again.by_worker == {0: [3]}


def test_the_ledger_is_private_to_the_user(spark: SparkSession, tmp_path: Path) -> None:
    writer = SinkWriter(_plan(_PerWorker()), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [1])]), 0)
    assert stat.S_IMODE(os.stat(tmp_path / LEDGER).st_mode) & 0o077 == 0


def test_partitioned_sinks_get_values_by_key_and_resume_from_the_ledger(spark: SparkSession, tmp_path: Path) -> None:
    sink = _Parts()
    writer = SinkWriter(_plan(sink), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [("k0", "a"), ("k1", "b"), ("k0", "c")])]), 0)
    assert sink.written == {"p0": ["a", "c"], "p1": ["b"]}
    assert sink.built == [("p0", None), ("p1", None)]

    again = _Parts()
    SinkWriter(_plan(again), str(tmp_path))
    assert again.built == [("p0", 2), ("p1", 1)]


def test_a_batch_cut_short_by_a_failing_write_is_rewritten_from_the_snapshots_before_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = _Parts()
    writer = SinkWriter(_plan(sink), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [("k0", 1), ("k1", 2)])]), 0)
    sink.broken.append("p1")
    with pytest.raises(FlowsparkRuntimeError, match="error calling `write_batch` in step 'w.out0'") as caught:
        writer(_frame(spark, [_out(0, ORIGIN_A, [("k0", 3), ("k1", 4)])]), 1)
    assert isinstance(caught.value.__cause__, OSError)
    assert writer.failure is caught.value and writer.last_batch == 0
    assert sink.written == {"p0": [1, 3], "p1": [2]}  # p0 got batch 1, p1 did not

    # The resumed run rebuilds every partition at batch 0's snapshots and writes batch 1 again: no duplicates.
    sink.broken.clear()
    resumed = SinkWriter(_plan(sink), str(tmp_path))
    resumed(_frame(spark, [_out(0, ORIGIN_A, [("k0", 3), ("k1", 4)])]), 1)
    assert sink.written == {"p0": [1, 3], "p1": [2, 4]}


def test_an_aborted_batch_keeps_the_snapshots_before_it(spark: SparkSession, tmp_path: Path) -> None:
    sink = _Parts()
    writer = SinkWriter(_plan(sink), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [("k0", 1)])]), 0)
    writer(_frame(spark, [_out(0, ORIGIN_A, [("k0", 2)]), _control(InputEnd.ABORT)]), 1)
    assert writer.ending is InputEnd.ABORT and writer.finished.is_set()

    again = _Parts()
    resumed = SinkWriter(_plan(again), str(tmp_path))
    assert resumed.last_batch == 1
    # The aborted epoch is written again by the resumed run; p1, which no item reached, was never built.
    assert again.built == [("p0", 1)]


def test_a_micro_batch_sink_gets_each_batch_once_with_its_id_and_the_run_id(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = _Batches()
    writer = SinkWriter(_plan(sink), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [1, 2]), _out(0, ORIGIN_B, [3])]), 0)
    writer(_frame(spark, [_control(InputEnd.EOF)]), 1)  # no items: no call
    writer.close()
    assert len(sink.calls) == 1 and sink.closed
    step_id, batch_id, run_id, items = sink.calls[0]
    assert (step_id, batch_id, sorted(items)) == ("w.out0", 0, [1, 2, 3])

    resumed_sink = _Batches()
    resumed = SinkWriter(_plan(resumed_sink), str(tmp_path))
    resumed(_frame(spark, [_out(0, ORIGIN_A, [4])]), 2)
    assert resumed_sink.calls == [("w.out0", 2, run_id, [4])]  # the run id outlives the writer


def test_a_dynamic_sink_gets_one_partition_per_worker_and_each_origin_one_worker(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = _PerWorker()
    writer = SinkWriter(_plan(sink), str(tmp_path), setup=WriterSetup(workers=3))
    assert sink.built == [("w.out0", 0, 3), ("w.out0", 1, 3), ("w.out0", 2, 3)]
    origins = ["000.00000.000", "000.00001.000", "000.00002.000", "000.00003.000"]
    writer(_frame(spark, [_out(0, origin, [(origin, n) for n in range(3)]) for origin in origins]), 0)
    for origin in origins:
        assert sink.by_worker[origin_worker(origin, 3)].count((origin, 1)) == 1
    assert sorted(sink.by_worker) == [0, 1, 2]
    assert sorted(item for items in sink.by_worker.values() for item in items) == sorted(
        (o, n) for o in origins for n in range(3)
    )


def test_an_ordered_run_writes_and_inspects_in_one_workers_order(spark: SparkSession, tmp_path: Path) -> None:
    seen: List[Tuple[str, Any, int]] = []
    sink = _PerWorker()
    plan = _plan(sink, seen=seen)
    plan.ordered = True
    writer = SinkWriter(plan, str(tmp_path), setup=WriterSetup(epoch_per_round=True))
    rows = [
        _ordered(output_group(0, ORIGIN_B), [((1, 0, 0, ""), ["b1"])]),
        _ordered(output_group(0, ORIGIN_A), [((0, 0, 0, ""), ["a0"]), ((2, 0, 0, ""), ["a2"])]),
        _ordered(tap_group(0, ORIGIN_A), [((0, 0, 0, ""), ["t0"]), ((3, 0, 0, ""), ["t3"])]),
    ]
    writer(_frame(spark, rows), 0)
    assert sink.by_worker == {0: ["a0", "b1", "a2"]}
    assert seen == [("w.tap0", "t0", 1), ("w.tap0", "t3", 4)]  # each source round its own epoch


def test_stashed_chunks_are_taken_by_ticket_and_leftovers_dropped_after_the_batch(
    spark: SparkSession, server: DriverServer, tmp_path: Path
) -> None:
    stash = OutputStash(server)
    sink = _PerWorker()
    writer = SinkWriter(_plan(sink), str(tmp_path), stash)
    ticket = server.link.call("stash", chunks.dumps([1, 2]))
    dropped = stash.put(chunks.dumps([99]))  # from a task attempt Spark dropped
    writer(_frame(spark, [(output_group(0, ORIGIN_A), 0, chunks.DATA, ticket)]), 0)
    assert sink.by_worker == {0: [1, 2]}
    assert dropped not in stash.detach()  # the batch took the leftover with its own chunks


class _RemotePerWorker(_PerWorker):
    lives_in_driver = False


def test_the_driver_builds_nothing_for_a_dynamic_sink_written_in_the_tasks_that_make_its_items(
    spark: SparkSession, tmp_path: Path
) -> None:
    seen: List[Tuple[str, Any, int]] = []
    sink = _RemotePerWorker()
    plan = _plan(sink, seen=seen)
    assert plan.sinks[0].in_making_task
    writer = SinkWriter(plan, str(tmp_path), setup=WriterSetup(parallelism=2))
    writer(_frame(spark, [_tap(0, ORIGIN_A, [1]), _control(InputEnd.EOF)]), 0)
    writer.close()
    assert (sink.built, seen, writer.finished.is_set()) == ([], [("w.tap0", 1, 1)], True)


def test_partitions_are_built_when_items_reach_them_and_closed_at_the_end(spark: SparkSession, tmp_path: Path) -> None:
    sink = _Parts()
    writer = SinkWriter(_plan(sink), str(tmp_path))
    writer(_frame(spark, [_out(0, ORIGIN_A, [("k1", 1)])]), 0)
    assert [name for name, _ in sink.built] == ["p1"]  # as in Bytewax: p0 got nothing
    writer(_frame(spark, [_out(0, ORIGIN_A, [("k0", 2)])]), 1)
    writer.close()
    assert sink.closed == ["p1", "p0"]


def test_a_failing_build_names_the_step(tmp_path: Path) -> None:
    class _Unbuildable(_PerWorker):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> _WorkerList:
            msg = "no access"
            raise PermissionError(msg)

    with pytest.raises(FlowsparkRuntimeError, match="error calling `build` in step 'w.out0'"):
        SinkWriter(_plan(_Unbuildable()), str(tmp_path))


def test_a_failing_inspector_names_the_step(spark: SparkSession, tmp_path: Path) -> None:
    def broken(step_id: str, item: Any, epoch: int, worker: int) -> None:
        msg = "division by zero"
        raise ZeroDivisionError(msg)

    flow = Dataflow("w")
    op.inspect_debug("peek", op.input("inp", flow, TestingSource([])), broken)
    writer = SinkWriter(build_plan(flow), str(tmp_path))
    with pytest.raises(FlowsparkRuntimeError, match="error calling `inspector` in step 'w.peek'"):
        writer(_frame(spark, [_tap(0, ORIGIN_A, [1])]), 0)


def test_a_bare_value_for_a_partitioned_sink_names_the_step(spark: SparkSession, tmp_path: Path) -> None:
    writer = SinkWriter(_plan(_Parts()), str(tmp_path))
    with pytest.raises(StepFailure, match="step 'w.out0' requires `\\(key, value\\)` 2-tuple"):
        writer(_frame(spark, [_out(0, ORIGIN_A, [5])]), 0)


def test_a_damaged_ledger_is_named_not_retried(tmp_path: Path) -> None:
    ledger = tmp_path / LEDGER
    ledger.write_bytes(b"not a pickle")
    ledger.chmod(0o600)
    with pytest.raises(FlowsparkRuntimeError, match="the sinks' ledger .* is damaged"):
        SinkWriter(_plan(_PerWorker()), str(tmp_path))


@pytest.fixture
def shipped() -> None:
    """This module's (and `support`'s) classes travel by value to Spark's workers, as a run ships the user's modules."""
    ship_by_value(user_packages())


def _part(part: int, origin: str, values: List[Any], seq: int = 0) -> chunks.Row:
    return (sink_part_group(0, part, origin), seq, chunks.DATA, chunks.dumps(values))


def _away_writer(
    sink: Sink[Any],
    checkpoint: Path,
    server: DriverServer,
    seen: Optional[List[Tuple[str, Any, int]]] = None,
    meter: Optional[Meter] = None,
) -> SinkWriter:
    plan = _plan(sink, seen=seen)
    assert plan.sinks[0].in_executors
    return SinkWriter(
        plan, str(checkpoint), link=server.link, setup=WriterSetup(parallelism=2), hooks=WriterHooks(meter=meter)
    )


@pytest.mark.quick
def test_an_executor_sink_is_written_in_tasks_while_taps_and_the_end_come_to_the_driver(
    spark: SparkSession, server: DriverServer, tmp_path: Path, shipped: None
) -> None:
    seen: List[Tuple[str, Any, int]] = []
    sink = LineSink(tmp_path)
    writer = _away_writer(sink, tmp_path, server, seen)
    rows = [
        _part(0, ORIGIN_B, ["b0"]),
        _part(0, ORIGIN_A, ["a0", "a1"], seq=1),
        _part(0, ORIGIN_A, ["a2"], seq=0),
        _part(1, ORIGIN_A, ["x"]),
        _tap(0, ORIGIN_A, ["t"]),
        _control(InputEnd.EOF),
    ]
    writer(_frame(spark, rows), 0)
    assert sink.lines("p0") == ["a2", "a0", "a1", "b0"]  # as the driver orders rows: by group name, then sequence
    assert sink.lines("p1") == ["x"]
    assert seen == [("w.tap0", "t", 1)] and writer.finished.is_set()
    assert all(in_task for _, _, in_task, _ in sink.builds())
    assert read_ledger(str(tmp_path / LEDGER)) == (0, {"w.out0": {"p0": 12, "p1": 2}})


def test_an_executor_sink_batch_the_ledger_has_runs_its_job_but_writes_nothing(
    spark: SparkSession, server: DriverServer, tmp_path: Path, shipped: None
) -> None:
    sink = LineSink(tmp_path)
    _away_writer(sink, tmp_path, server)(_frame(spark, [_part(0, ORIGIN_A, ["v"])]), 0)
    builds = len(sink.builds())
    resumed = _away_writer(sink, tmp_path, server)
    resumed(_frame(spark, [_part(0, ORIGIN_A, ["v"])]), 0)  # Spark replays the batch
    assert len(sink.builds()) == builds and sink.lines("p0") == ["v"]
    resumed(_frame(spark, [_part(1, ORIGIN_A, ["w"])]), 1)
    assert sink.lines("p0") == ["v"] and sink.lines("p1") == ["w"]
    # The resumed run's first written batch built every partition again from its snapshot.
    assert sorted(name for name, *_ in sink.builds()[builds:]) == ["p0", "p1"]


def test_an_executor_sink_batch_cut_short_is_rewritten_from_the_snapshots_before_it(
    spark: SparkSession, server: DriverServer, tmp_path: Path, shipped: None
) -> None:
    sink = LineSink(tmp_path, broken=["p1"])
    writer = _away_writer(sink, tmp_path, server)
    writer(_frame(spark, [_part(0, ORIGIN_A, ["a"])]), 0)
    with pytest.raises(Exception, match="error calling `write_batch` in step 'w.out0' for partition 'p1'"):
        writer(_frame(spark, [_part(0, ORIGIN_A, ["b"]), _part(1, ORIGIN_A, ["c"])]), 1)
    assert writer.failure is not None and writer.last_batch == 0

    fixed = LineSink(tmp_path)
    resumed = _away_writer(fixed, tmp_path, server)
    resumed(_frame(spark, [_part(0, ORIGIN_A, ["b"]), _part(1, ORIGIN_A, ["c"])]), 1)
    assert fixed.lines("p0") == ["a", "b"] and fixed.lines("p1") == ["c"]


def test_an_executor_sinks_tasks_count_and_time_their_writes(
    spark: SparkSession, server: DriverServer, tmp_path: Path, shipped: None
) -> None:
    metrics = FlowMetrics()
    server.register("metrics", metrics.add)
    writer = _away_writer(LineSink(tmp_path), tmp_path, server, meter=metrics.driver_meter())
    writer(_frame(spark, [_part(0, ORIGIN_A, ["a", "b"]), _part(1, ORIGIN_A, ["c"])]), 0)
    counts = {
        worker: n
        for (count, step_id, worker), n in metrics.counts().items()
        if (count, step_id) == (Count.ITEMS_IN, "w.out0")
    }
    assert counts == {0: 2, 1: 1}  # each partition's task reports as its own worker
    timings = metrics.timings()
    assert (
        sum(
            d.count
            for (timing, step_id, _), d in timings.items()
            if (timing, step_id) == (Timing.WRITE_BATCH, "w.out0")
        )
        == 2
    )


def test_a_resumed_executor_sink_cuts_back_partitions_its_replay_brings_nothing_for(
    spark: SparkSession, server: DriverServer, tmp_path: Path, shipped: None
) -> None:
    sink = LineSink(tmp_path, broken=["p1"])
    writer = _away_writer(sink, tmp_path, server)
    writer(_frame(spark, [_part(0, ORIGIN_A, ["a"])]), 0)
    with pytest.raises(Exception, match="disk full"):
        writer(_frame(spark, [_part(0, ORIGIN_A, ["b"]), _part(1, ORIGIN_A, ["c"])]), 1)
    assert sink.lines("p0") == ["a", "b"]  # written before p1 failed

    fixed = LineSink(tmp_path)
    _away_writer(fixed, tmp_path, server)(_frame(spark, [_part(1, ORIGIN_A, ["c"])]), 1)  # a replay that differs
    assert fixed.lines("p0") == ["a"] and fixed.lines("p1") == ["c"]


def test_an_aborted_batch_of_an_executor_sink_is_cut_back_by_the_resumed_run(
    spark: SparkSession, server: DriverServer, tmp_path: Path, shipped: None
) -> None:
    sink = LineSink(tmp_path)
    writer = _away_writer(sink, tmp_path, server)
    writer(_frame(spark, [_part(0, ORIGIN_A, ["1"])]), 0)
    writer(_frame(spark, [_part(0, ORIGIN_A, ["2"]), _control(InputEnd.ABORT)]), 1)
    assert writer.ending is InputEnd.ABORT and sink.lines("p0") == ["1", "2"]
    assert read_ledger(str(tmp_path / LEDGER)) == (1, {"w.out0": {"p0": 2}})  # p1 got nothing and was never built

    resumed = _away_writer(sink, tmp_path, server)
    resumed(_frame(spark, [_part(0, ORIGIN_A, ["2"])]), 2)  # the resumed run reads the aborted epoch again
    assert sink.lines("p0") == ["1", "2"]


class _SlowRecordingList(StatelessSinkPartition[Any]):
    """Appends each batch once `gate` opens (after a pause), noting the thread that wrote it; fails on `"boom"`."""

    def __init__(self, items: List[Any], threads: List[str], gate: threading.Event) -> None:
        self._items = items
        self._threads = threads
        self._gate = gate

    def write_batch(self, items: List[Any]) -> None:
        time.sleep(0.2)
        assert self._gate.wait(10)
        if "boom" in items:
            msg = "boom"
            raise ValueError(msg)
        self._threads.append(threading.current_thread().name)
        self._items.extend(items)


class _Slow(DynamicSink[Any]):
    def __init__(self) -> None:
        self.items: List[Any] = []
        self.threads: List[str] = []
        self.gate = threading.Event()
        """Open unless a test closes it to hold the writes back."""
        self.gate.set()

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _SlowRecordingList:
        return _SlowRecordingList(self.items, self.threads, self.gate)


def test_writing_behind_returns_before_the_write_and_keeps_the_batches_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = _Slow()
    sink.gate.clear()
    writer = SinkWriter(_plan(sink), str(tmp_path), setup=WriterSetup(write_behind=True))
    writer(_frame(spark, [_out(0, ORIGIN_A, [1, 2])]), 0)
    assert sink.items == []  # the call returned while its write is held back
    sink.gate.set()
    writer(_frame(spark, [_out(0, ORIGIN_A, [3]), _control(InputEnd.EOF)]), 1)
    assert writer.finished.wait(10)
    writer.close()
    assert sink.items == [1, 2, 3]
    assert threading.current_thread().name not in sink.threads
    assert (writer.last_batch, writer.failure) == (1, None)


def test_a_write_behind_that_fails_is_the_runs_failure_and_stops_later_batches(
    spark: SparkSession, tmp_path: Path
) -> None:
    sink = _Slow()
    writer = SinkWriter(_plan(sink), str(tmp_path), setup=WriterSetup(write_behind=True))
    writer(_frame(spark, [_out(0, ORIGIN_A, ["boom"])]), 0)  # fails in the background
    with pytest.raises(FlowsparkRuntimeError, match="write_batch.*'w.out0'") as raised:
        writer(_frame(spark, [_out(0, ORIGIN_A, [1])]), 1)
    writer.close()
    assert writer.failure is raised.value
    assert isinstance(raised.value.__cause__, ValueError)
    assert (sink.items, writer.last_batch, writer.finished.is_set()) == ([], -1, False)


def test_a_hold_waits_for_the_batch_being_written_and_refuses_the_next(spark: SparkSession, tmp_path: Path) -> None:
    """How a stop on SIGTERM ends at a micro-batch boundary: the batch being written is written, the next one is not."""
    from flowspark.engine.util.shutdown import StopAtBoundary

    sink = _PerWorker()
    writer = SinkWriter(_plan(sink), str(tmp_path))
    writer.begin(0)  # Spark has started micro-batch 0
    held = threading.Thread(target=writer.hold, args=(lambda: True,))
    held.start()
    held.join(0.3)
    assert held.is_alive()  # it waits for the batch being written ...
    writer.take(0, _frame(spark, [_out(0, ORIGIN_A, [1, 2])]).toArrow(), [])
    held.join(10)
    assert not held.is_alive() and writer.last_batch == 0 and sink.by_worker == {0: [1, 2]}
    with pytest.raises(StopAtBoundary, match="micro-batch 1 is not written: the run is stopping"):
        writer(_frame(spark, [_out(0, ORIGIN_A, [3])]), 1)  # ... and refuses the next
    assert writer.failure is None and writer.last_batch == 0 and sink.by_worker == {0: [1, 2]}


def test_a_hold_does_not_wait_for_a_query_that_ended(spark: SparkSession, tmp_path: Path) -> None:
    writer = SinkWriter(_plan(_PerWorker()), str(tmp_path))
    writer.begin(0)  # a batch whose job will never come back: its query failed
    started = time.monotonic()
    writer.hold(lambda: False)
    assert time.monotonic() - started < 1
