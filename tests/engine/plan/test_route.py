"""The fused pass's handling of outputs, driven directly (no Spark)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import flowspark.operators as op
from flowspark.connectors.files import DirSink, FileSink
from flowspark.dataflow import Dataflow
from flowspark.engine.plan import chunks
from flowspark.engine.plan.destinations import origin_worker, output_group, sink_part_group
from flowspark.engine.plan.encoded_lines import encoded
from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.plan import Plan, build_plan, for_workers
from flowspark.engine.plan.route import Collector, Router
from flowspark.engine.plan.task_sinks import TaskSinks
from flowspark.engine.reports.failures import StepFailure
from flowspark.outputs import DynamicSink, StatelessSinkPartition
from flowspark.testing import TestingSource


class _Listed(StatelessSinkPartition[Any]):
    def __init__(self, items: List[Any]) -> None:
        self._items = items

    def write_batch(self, items: List[Any]) -> None:
        self._items.extend(items)


class _PerWorker(DynamicSink[Any]):
    """A dynamic sink that may leave the driver: each worker's items in a list, in this process."""

    lives_in_driver = False

    def __init__(self) -> None:
        self.by_worker: Dict[int, List[Any]] = {}

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Listed:
        return _Listed(self.by_worker.setdefault(worker_index, []))


def _plan(tmp_path: Path, ordered: bool = False, workers: int = 1, dynamic: Optional[_PerWorker] = None) -> Plan:
    """Outputs to a one-file, a two-file and a dynamic sink: written in the driver if `ordered`, else in Spark's tasks."""
    flow = Dataflow("df")
    items = op.input("inp", flow, TestingSource[Tuple[str, str]]([]))
    op.output("one_file", items, FileSink(tmp_path / "out.txt"))
    op.output("two_files", items, DirSink(tmp_path, 2, assign_file=lambda key: int(key[1:])))
    op.output("dynamic", items, dynamic or _PerWorker())
    return build_plan(flow, ordered=ordered, workers=workers)


def _push(plan: Plan, batch: List[Any], origin: str = "000.00000.000") -> Collector:
    out = Collector(origin)
    with TaskSinks(plan) as sinks:
        Router(plan, Groups.balanced(len(plan.stateful), 2), sinks=sinks).push(
            plan.inputs[0].config.downs[0], batch, out
        )
    return out


def _rows(out: Collector) -> Dict[str, List[Any]]:
    """Each row's items; the lines a file sink's chunk holds, for chunks the pass encoded (`encoded_lines`)."""
    return {grp: _items(payload) for grp, _, _, payload in out.rows(itertools.count())}


def _items(payload: bytes) -> List[Any]:
    lines = encoded(payload)
    return chunks.loads(payload) if lines is None else ["encoded:" + line for line in lines.data.decode().splitlines()]


def test_a_single_partition_sink_in_the_driver_gets_bare_values_from_the_workers(tmp_path: Path) -> None:
    out = _push(for_workers(_plan(tmp_path, ordered=True)), [("k0", "x"), ("k1", "y")])
    assert _rows(out) == {
        output_group(0, "000.00000.000"): ["x", "y"],
        output_group(1, "000.00000.000"): [("k0", "x"), ("k1", "y")],
        output_group(2, "000.00000.000"): [("k0", "x"), ("k1", "y")],
    }


def test_partitioned_sinks_written_in_tasks_get_a_row_per_partition_and_a_dynamic_one_is_written_by_the_pass(
    tmp_path: Path,
) -> None:
    origin = "S0/3"
    dynamic = _PerWorker()
    out = _push(
        for_workers(_plan(tmp_path, workers=3, dynamic=dynamic)), [("k0", "x"), ("k1", "y"), ("k2", "z")], origin
    )
    assert _rows(out) == {
        sink_part_group(0, 0, origin): ["encoded:x", "encoded:y", "encoded:z"],
        sink_part_group(1, 0, origin): ["encoded:x", "encoded:z"],
        sink_part_group(1, 1, origin): ["encoded:y"],
    }
    assert origin_worker(origin, 3) == 0  # the driver's pick for this pass: bucket 3's worker, 3 % 3
    assert dynamic.by_worker == {0: [("k0", "x"), ("k1", "y"), ("k2", "z")]}


def test_a_failing_part_fn_in_the_workers_names_the_step(tmp_path: Path) -> None:
    with pytest.raises(StepFailure, match="error calling `part_fn` in step 'df.two_files' for key 'bad'") as info:
        _push(for_workers(_plan(tmp_path)), [("k0", "x"), ("bad", "y")])
    assert isinstance(info.value.cause, ValueError)


@pytest.mark.parametrize(("item", "problem"), [("bare", "2-tuple"), ((1, "x"), "`str` keys")])
def test_dropping_keys_checks_them_first(tmp_path: Path, item: Any, problem: str) -> None:
    workers = for_workers(_plan(tmp_path))
    with pytest.raises(StepFailure, match=f"step 'df.one_file' requires .*{problem}"):
        _push(workers, [("a", "x"), item])


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        ([("a", 1), "bare"], "2-tuple"),
        ([("a", 1), ("a", 2, 3)], "2-tuple"),
        ([("a", 1), (1, "x")], "`str` keys.*`int`"),
        ([("a", 1), (["a"], "x")], "`str` keys.*`list`"),
    ],
)
def test_a_stateful_step_checks_every_item_as_bytewax_does(items: List[Any], problem: str) -> None:
    flow = Dataflow("df")
    up = op.input("inp", flow, TestingSource[Any]([]))
    op.output("out", op.stateful_map("count", up, lambda s, v: (s, v)), DirSink(Path("."), 1))
    plan = build_plan(flow)
    with pytest.raises(StepFailure, match=f"step 'df.count.*' requires .*{problem}"):
        _push(for_workers(plan), items)
