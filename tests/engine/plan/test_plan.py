"""The planner: how each output's items reach its sink, decided before the runtime builds anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import pytest

import flowspark.operators as op
from flowspark.connectors.files import DirSink, FileSink
from flowspark.connectors.kafka import KafkaSink
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.encoded_lines import LineFormat
from flowspark.engine.plan.plan import SinkLayout, SinkPlace, SinkRouting, build_plan, for_workers, placed_for_machines
from flowspark.engine.sinks.sink_writer import SinkWriter
from flowspark.errors import FlowsparkRuntimeError
from flowspark.outputs import FixedPartitionedSink, MicroBatchSink, StatefulSinkPartition
from flowspark.testing import TestingSink, TestingSource


class _Batches(MicroBatchSink[Any]):
    def write_micro_batch(self, step_id: str, batch_id: int, run_id: str, items: List[Any]) -> None:
        pass


class _CountedParts(FixedPartitionedSink[Any, None]):
    """A one-partition sink that counts the calls of `list_parts`."""

    def __init__(self) -> None:
        self.listed = 0

    def list_parts(self) -> List[str]:
        self.listed += 1
        return ["only"]

    def build_part(self, step_id: str, for_part: str, resume_state: Optional[None]) -> StatefulSinkPartition[Any, None]:
        return _Discard()


class _Discard(StatefulSinkPartition[Any, None]):
    def write_batch(self, values: List[Any]) -> None:
        pass

    def snapshot(self) -> None:
        return None


class _NoParts(_CountedParts):
    lives_in_driver = False

    def list_parts(self) -> List[str]:
        return []


class _Unlistable(_CountedParts):
    def list_parts(self) -> List[str]:
        msg = "no such bucket"
        raise OSError(msg)


def test_each_sink_type_gets_its_layout(tmp_path: Path) -> None:
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource([("k", "v")]))
    op.output("file", items, FileSink(tmp_path / "out.txt"))
    op.output("dir", items, DirSink(tmp_path, 2))
    op.output("one_file_dir", items, DirSink(tmp_path, 1))
    op.output("list", items, TestingSink([]))
    op.output("batches", items, _Batches())
    op.output("kafka", items, KafkaSink(["localhost:9092"], "t"))
    plan = build_plan(flow)
    away = SinkPlace.EXECUTORS
    lines = LineFormat("\n", "UTF-8")  # the workers may encode the lines of a sink that writes lines
    assert plan.sinks == [
        SinkLayout(SinkRouting.ONE_PART, (str(tmp_path / "out.txt"),), away, lines),
        SinkLayout(SinkRouting.BY_KEY, ("part_0", "part_1"), away, lines),  # the tasks route each value
        SinkLayout(SinkRouting.ONE_PART, ("part_0",), away, lines),
        SinkLayout(SinkRouting.BY_PASS),
        SinkLayout(SinkRouting.MICRO_BATCH),
        SinkLayout(SinkRouting.BY_PASS, (), SinkPlace.MAKING_TASK),
    ]
    assert [layout.drop_keys for layout in plan.sinks] == [True, False, True, False, False, False]


def test_a_run_that_keeps_one_workers_order_writes_every_sink_in_the_driver(tmp_path: Path) -> None:
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource([("k", "v")]))
    op.output("file", items, FileSink(tmp_path / "out.txt"))
    op.output("kafka", items, KafkaSink(["localhost:9092"], "t"))
    assert [layout.place for layout in build_plan(flow, ordered=True).sinks] == [SinkPlace.DRIVER] * 2


def test_on_one_machine_a_sink_of_one_partition_is_written_in_the_driver(tmp_path: Path) -> None:
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource([("k", "v")]))
    op.output("file", items, FileSink(tmp_path / "out.txt"))
    op.output("dir", items, DirSink(tmp_path, 2))
    op.output("kafka", items, KafkaSink(["localhost:9092"], "t"))
    plan = build_plan(flow)
    away, here, making = SinkPlace.EXECUTORS, SinkPlace.DRIVER, SinkPlace.MAKING_TASK
    assert [layout.place for layout in placed_for_machines(plan, one_machine=True).sinks] == [here, away, making]
    assert [layout.place for layout in placed_for_machines(plan, one_machine=False).sinks] == [away, away, making]


def test_a_sink_without_partitions_is_written_in_the_driver() -> None:
    flow = Dataflow("df")
    op.output("out", op.input("inp", flow, TestingSource([("k", "v")])), _NoParts())
    assert build_plan(flow).sinks == [SinkLayout(SinkRouting.BY_KEY, ())]


def test_the_workers_get_the_layouts_and_only_the_sinks_written_in_sparks_tasks(tmp_path: Path) -> None:
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource([("k", "v")]))
    sink = FileSink(tmp_path / "out.txt")
    kafka = KafkaSink(["localhost:9092"], "t")
    op.output("file", items, sink)
    op.output("list", items, TestingSink([]))
    op.output("kafka", items, kafka)
    plan = build_plan(flow, workers=3)
    workers = for_workers(plan)
    assert workers.sinks == plan.sinks and workers.workers == 3
    assert [step.config.sink for step in workers.outputs] == [sink, None, kafka]
    assert [c.step.config.sink for c in workers.consumers[items.stream_id]] == [sink, None, kafka]


def test_the_writer_builds_the_partitions_the_plan_listed(tmp_path: Path) -> None:
    sink = _CountedParts()
    flow = Dataflow("df")
    op.output("out", op.input("inp", flow, TestingSource([("k", "v")])), sink)
    plan = build_plan(flow)
    writer = SinkWriter(plan, str(tmp_path))
    writer.close()
    assert sink.listed == 1


def test_a_sink_that_cannot_list_its_partitions_is_named() -> None:
    flow = Dataflow("df")
    op.output("out", op.input("inp", flow, TestingSource([("k", "v")])), _Unlistable())
    with pytest.raises(FlowsparkRuntimeError, match="error calling `list_parts` in step 'df.out'") as caught:
        build_plan(flow)
    assert isinstance(caught.value.__cause__, OSError)
