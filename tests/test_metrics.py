"""Step meters: per-batch counts in the fused pass, histograms, and their Prometheus text (no Spark)."""

from __future__ import annotations

import functools
import urllib.request
from typing import Any, Dict, List, Tuple

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.partitions import OnePartSource

import flowspark.operators as op
from flowspark._dataflow_api import ApiSettings, DataflowApi
from flowspark.dataflow import Dataflow
from flowspark.engine.plan.groups import Groups
from flowspark.engine.plan.plan import build_plan
from flowspark.engine.plan.route import Collector, Router
from flowspark.engine.reports.driver_link import DriverServer
from flowspark.engine.reports.failures import StepFailure
from flowspark.engine.reports.metrics import Count, Durations, FlowMetrics, Meter, QueryWatch, Reading, Timing
from flowspark.engine.sources.driver_inputs import DriverInputs, Polling
from flowspark.engine.sources.executor_source import ReadNote
from flowspark.inputs import StatefulSourcePartition
from flowspark.testing import TestingSink, TestingSource


def _pushed(batches: List[List[int]]) -> Dict[Tuple[Count, str], int]:
    """Push `batches` through a flow of every stateless core step; the meter's counts."""
    flow = Dataflow("m")
    nums = op.input("inp", flow, TestingSource[int]([]))
    parts = op.branch("odd", nums, lambda x: x % 2 == 1)
    small = op.filter("small", parts.trues, lambda x: x < 5)
    merged = op.merge("both", small, parts.falses)
    seen = op.inspect_debug("look", merged, lambda *_: None)
    spread = op.redistribute("spread", seen)
    op.output("out", spread, TestingSink([]))
    plan = build_plan(flow)
    readings: List[Reading] = []
    meter = Meter(readings.append)
    router = Router(plan, Groups.balanced(0, 1), meter)
    for batch in batches:
        router.push(plan.inputs[0].config.downs[0], batch, Collector("000.00000.000"))
    meter.flush()
    meter.flush()  # nothing new: no second reading
    assert len(readings) == 1
    assert readings[0].timings[Timing.MAPPER, "m.small.flat_map.flat_map_batch"].count == len(batches)
    return readings[0].counts


def test_every_stateless_step_counts_its_batches_items() -> None:
    counts = _pushed([[1, 2, 3, 4, 5, 6], [7, 8]])
    assert counts == {
        (Count.ITEMS_IN, "m.odd"): 8,
        (Count.ITEMS_OUT, "m.odd"): 8,
        (Count.ITEMS_IN, "m.small.flat_map.flat_map_batch"): 4,
        (Count.ITEMS_OUT, "m.small.flat_map.flat_map_batch"): 2,
        (Count.ITEMS_IN, "m.both"): 6,
        (Count.ITEMS_OUT, "m.both"): 6,
        (Count.ITEMS_IN, "m.look"): 6,
        (Count.ITEMS_OUT, "m.look"): 6,
        (Count.ITEMS_IN, "m.spread"): 6,
        (Count.ITEMS_OUT, "m.spread"): 6,
    }


def test_durations_fall_in_the_bucket_at_or_above_them() -> None:
    durations = Durations()
    for seconds in (0.0, 0.0005, 0.0006, 0.3, 99.0):
        durations.observe(seconds)
    assert durations.per_bucket[:3] == [1, 1, 1]
    assert durations.per_bucket[9] == 1  # 0.25 < 0.3 <= 0.5
    assert durations.per_bucket[-1] == 1  # over 10 s: +Inf only
    assert durations.count == 5 and durations.total == 0.0 + 0.0005 + 0.0006 + 0.3 + 99.0


def _families(metrics: FlowMetrics) -> Dict[str, Any]:
    api = DataflowApi(ApiSettings(port=0), "{}", metrics)
    try:
        with urllib.request.urlopen(api.url + "/metrics", timeout=5) as reply:
            return {f.name: f for f in text_string_to_metric_families(reply.read().decode())}
    finally:
        api.close()


def test_workers_readings_are_summed_per_step_and_worker() -> None:
    metrics = FlowMetrics()
    for worker, seconds in ((0, 0.002), (1, 0.02), (1, 0.3)):
        meter = Meter(functools.partial(metrics.add, worker))
        meter.passed("f.step", 10, 4)
        meter.time(Timing.ON_BATCH, "f.step", seconds)
        meter.flush()
    families = _families(metrics)
    items_in = {s.labels["worker_index"]: s.value for s in families["bytewax_item_inp_count"].samples}
    assert items_in == {"0": 10, "1": 20}
    samples = families["bytewax_stateful_batch_on_batch_duration_seconds"].samples
    worker_1 = {s.labels.get("le", s.name): s.value for s in samples if s.labels["worker_index"] == "1"}
    assert worker_1["0.005"] == 0 and worker_1["0.025"] == 1 and worker_1["0.5"] == 2 and worker_1["+Inf"] == 2
    assert worker_1["bytewax_stateful_batch_on_batch_duration_seconds_count"] == 2
    assert {s.labels["otel_scope_name"] for s in samples} == {"bytewax"}
    # Only timings some step recorded are shown; the counters always are.
    assert "bytewax_flat_map_batch_duration_seconds" not in families
    assert "bytewax_item_out_count" in families


def _broken() -> Any:
    msg = "the query is stopping"
    raise RuntimeError(msg)


def test_gauges_come_from_the_query_progress_and_a_failing_source_leaves_them_out() -> None:
    metrics = FlowMetrics()
    assert metrics.gauges() == []
    progress = {
        "batchId": 7,
        "durationMs": {"triggerExecution": 250},
        "stateOperators": [{"numRowsTotal": 3}, {"numRowsTotal": 4}],
    }
    metrics.watch(QueryWatch(lambda: progress, lambda: 0.5, lambda: {("f.inp", "p1"): 12}))
    assert {(g.name, g.labels): g.value for g in metrics.gauges()} == {
        ("flowspark_micro_batch_id", ()): 7,
        ("flowspark_micro_batch_duration_seconds", ()): 0.25,
        ("flowspark_state_rows", ()): 7,
        ("flowspark_input_fraction_done", ()): 0.5,
        ("flowspark_input_lag_items", (("step_id", "f.inp"), ("partition", "p1"))): 12,
    }
    lag = _families(metrics)["flowspark_input_lag_items"].samples
    assert [(s.labels, s.value) for s in lag] == [({"step_id": "f.inp", "partition": "p1"}, 12)]
    metrics.watch(QueryWatch(_broken, _broken, dict))
    assert metrics.gauges() == []


class _Lagging(StatefulSourcePartition[int, int]):
    """Emits one batch of three, then nothing; `lag()` returns or raises `told`."""

    def __init__(self, told: Any) -> None:
        self._told = told
        self._sent = False

    def next_batch(self) -> List[int]:
        if self._sent:
            return []
        self._sent = True
        return [1, 2, 3]

    def snapshot(self) -> int:
        return 0

    def lag(self) -> int:
        if isinstance(self._told, Exception):
            raise self._told
        return int(self._told)


def _polled(told: Any) -> Tuple[DriverInputs, List[Reading]]:
    """A metered hub of a flow reading a `_Lagging(told)` partition, after one poll."""
    flow = Dataflow("m")
    op.output("out", op.input("inp", flow, OnePartSource(lambda _: _Lagging(told))), TestingSink([]))
    readings: List[Reading] = []
    server = DriverServer()
    hub = DriverInputs(build_plan(flow), server, Polling(100, 1.0), pieces=1, meter=Meter(readings.append))
    try:
        hub.latest_offset(hub.initial_offset())
    finally:
        server.close()
        hub.close()
    return hub, readings


def test_the_hub_counts_and_times_next_batch_and_notes_lags() -> None:
    hub, readings = _polled(7)
    assert hub.lags() == {("m.inp", "p0"): 7}
    assert readings[0].counts == {(Count.ITEMS_OUT, "m.inp"): 3}
    # Its one batch, then two empty ones: the second in a row says it caught up.
    assert readings[0].timings[Timing.NEXT_BATCH, "m.inp"].count == 3


def test_a_failing_lag_names_its_step_and_partition() -> None:
    with pytest.raises(StepFailure, match="error calling `lag` in step 'm.inp' for partition 'p0'"):
        _polled(ValueError("no lag today"))


class _RemoteLaggingSource(OnePartSource):
    """Read in the executors; hears, in the driver, the lags its tasks report."""

    lives_in_driver = False

    def __init__(self) -> None:
        super().__init__(lambda _: _Lagging(0))
        self.heard: List[Tuple[str, str, int]] = []

    def note_lag(self, step_id: str, for_part: str, lag: int) -> None:
        self.heard.append((step_id, for_part, lag))


def test_the_lag_an_executor_task_reports_reaches_the_hub_and_its_source() -> None:
    source = _RemoteLaggingSource()
    flow = Dataflow("m")
    op.output("out", op.input("inp", flow, source), TestingSink([]))
    server = DriverServer()
    hub = DriverInputs(build_plan(flow), server, Polling(100, 1.0), pieces=1)
    try:
        hub.expect_remote([("m.inp", "p0")])
        hub.note_read(ReadNote(("m.inp", "p0"), 3, None))
        assert (hub.lags(), source.heard, hub.items_read) == ({}, [], 3)
        hub.note_read(ReadNote(("m.inp", "p0"), 2, None, lag=9))
        assert (hub.lags(), source.heard, hub.items_read) == ({("m.inp", "p0"): 9}, [("m.inp", "p0", 9)], 5)
    finally:
        server.close()
        hub.close()
