"""The planner: how each output's items reach its sink, decided before the runtime builds anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import pytest

import flowspark.operators as op
from flowspark.connectors.files import DirSink, FileSink
from flowspark.dataflow import Dataflow
from flowspark.engine.plan import SinkLayout, SinkRouting, build_plan, for_workers
from flowspark.engine.sink_writer import SinkWriter
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


class _Unlistable(_CountedParts):
    def list_parts(self) -> List[str]:
        raise OSError("no such bucket")


def test_each_sink_type_gets_its_layout(tmp_path: Path) -> None:
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource([("k", "v")]))
    op.output("file", items, FileSink(tmp_path / "out.txt"))
    op.output("dir", items, DirSink(tmp_path, 2))
    op.output("one_file_dir", items, DirSink(tmp_path, 1))
    op.output("list", items, TestingSink([]))
    op.output("batches", items, _Batches())
    plan = build_plan(flow)
    assert plan.sinks == [
        SinkLayout(SinkRouting.ONE_PART, (str(tmp_path / "out.txt"),)),
        SinkLayout(SinkRouting.BY_KEY, ("part_0", "part_1")),
        SinkLayout(SinkRouting.ONE_PART, ("part_0",)),
        SinkLayout(SinkRouting.BY_PASS),
        SinkLayout(SinkRouting.MICRO_BATCH),
    ]
    assert [layout.drop_keys for layout in plan.sinks] == [True, False, True, False, False]


def test_the_workers_get_the_layouts_without_the_sinks(tmp_path: Path) -> None:
    flow = Dataflow("df")
    op.output("file", op.input("inp", flow, TestingSource([("k", "v")])), FileSink(tmp_path / "out.txt"))
    plan = build_plan(flow)
    workers = for_workers(plan)
    assert workers.sinks == plan.sinks
    assert [step.config.sink for step in workers.outputs] == [None]


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
